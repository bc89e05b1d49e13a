package parse

import (
	"archive/zip"
	"bytes"
	"compress/zlib"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// pdfFile writes a minimal valid PDF: one page per entry, each line drawn
// in Helvetica. encrypt adds a Standard security handler whose keys match
// no password, which readers must refuse.
func pdfFile(pages [][]string, encrypt bool) []byte {
	var objs []string
	kids := make([]string, len(pages))
	for i := range pages {
		kids[i] = fmt.Sprintf("%d 0 R", 4+2*i)
	}
	objs = append(objs, "<< /Type /Catalog /Pages 2 0 R >>",
		fmt.Sprintf("<< /Type /Pages /Kids [%s] /Count %d >>", strings.Join(kids, " "), len(pages)),
		"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>")
	for i, lines := range pages {
		objs = append(objs, fmt.Sprintf("<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 3 0 R >> >> /Contents %d 0 R >>", 5+2*i))
		var s strings.Builder
		s.WriteString("BT /F1 12 Tf 72 720 Td 14 TL")
		for _, l := range lines {
			fmt.Fprintf(&s, " (%s) Tj T*", l)
		}
		s.WriteString(" ET")
		objs = append(objs, fmt.Sprintf("<< /Length %d >>\nstream\n%s\nendstream", s.Len(), s.String()))
	}
	trailer := ""
	if encrypt {
		objs = append(objs, fmt.Sprintf("<< /Filter /Standard /V 1 /R 2 /O <%s> /U <%s> /P -4 >>",
			strings.Repeat("11", 32), strings.Repeat("22", 32)))
		trailer = fmt.Sprintf(" /Encrypt %d 0 R /ID [<%s> <%s>]", len(objs), strings.Repeat("33", 16), strings.Repeat("33", 16))
	}
	return pdfObjects(objs, trailer)
}

// pdfObjects lays objects 1..n out as a PDF with its cross-reference table;
// trailer adds entries to the trailer dictionary (object 1 is the catalog).
func pdfObjects(objs []string, trailer string) []byte {
	var b bytes.Buffer
	b.WriteString("%PDF-1.4\n")
	offs := make([]int, len(objs))
	for i, o := range objs {
		offs[i] = b.Len()
		fmt.Fprintf(&b, "%d 0 obj\n%s\nendobj\n", i+1, o)
	}
	xref := b.Len()
	fmt.Fprintf(&b, "xref\n0 %d\n0000000000 65535 f \n", len(objs)+1)
	for _, o := range offs {
		fmt.Fprintf(&b, "%010d 00000 n \n", o)
	}
	fmt.Fprintf(&b, "trailer\n<< /Size %d /Root 1 0 R%s >>\nstartxref\n%d\n%%%%EOF\n", len(objs)+1, trailer, xref)
	return b.Bytes()
}

// pdfMemoryBomb writes a PDF of about 20 KB whose one page, once its
// compressed content stream is inflated (8 MB), draws n separate words:
// pdftotext keeps every word of a page, and peaked at 80 MB for n = 400,000.
func pdfMemoryBomb(n int) []byte {
	content := "BT /F1 2 Tf 0 0 Td " + strings.Repeat("(w) Tj 0.001 0.001 Td ", n) + " ET"
	var z bytes.Buffer
	zw := zlib.NewWriter(&z)
	zw.Write([]byte(content))
	zw.Close()
	objs := []string{"<< /Type /Catalog /Pages 2 0 R >>", "<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
		"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 4 0 R >> >> /Contents 5 0 R >>",
		"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
		fmt.Sprintf("<< /Length %d /Filter /FlateDecode >>\nstream\n%s\nendstream", z.Len(), z.String())}
	return pdfObjects(objs, "")
}

// para is a DOCX paragraph: style "" is body text.
type para struct{ style, text string }

// docxFile writes a minimal valid DOCX. The heading styles have German ids,
// as Word writes them, so the levels must come from styles.xml.
func docxFile(t *testing.T, paras []para, extra string) []byte {
	t.Helper()
	var body strings.Builder
	for _, p := range paras {
		body.WriteString("<w:p>")
		switch {
		case p.style == "list":
			body.WriteString(`<w:pPr><w:numPr><w:ilvl w:val="0"/><w:numId w:val="1"/></w:numPr></w:pPr>`)
		case p.style != "":
			fmt.Fprintf(&body, `<w:pPr><w:pStyle w:val="%s"/></w:pPr>`, p.style)
		}
		// split the text over two runs, as Word does
		half := len(p.text) / 2
		for half > 0 && half < len(p.text) && p.text[half-1] != ' ' {
			half--
		}
		fmt.Fprintf(&body, `<w:r><w:t xml:space="preserve">%s</w:t></w:r><w:r><w:rPr><w:b/></w:rPr><w:t>%s</w:t></w:r></w:p>`,
			p.text[:half], p.text[half:])
	}
	body.WriteString(extra)
	return zipFile(t, map[string]string{
		"[Content_Types].xml": `<?xml version="1.0" encoding="UTF-8"?><Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types"><Default Extension="xml" ContentType="application/xml"/><Override PartName="/word/document.xml" ContentType="application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml"/></Types>`,
		"_rels/.rels":         `<?xml version="1.0" encoding="UTF-8"?><Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships"><Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/officeDocument" Target="word/document.xml"/></Relationships>`,
		"word/document.xml":   `<?xml version="1.0" encoding="UTF-8"?><w:document xmlns:w="` + wNS + `"><w:body>` + body.String() + `<w:sectPr/></w:body></w:document>`,
		"word/styles.xml": `<?xml version="1.0" encoding="UTF-8"?><w:styles xmlns:w="` + wNS + `">` +
			`<w:style w:type="paragraph" w:styleId="Titel"><w:name w:val="Title"/></w:style>` +
			`<w:style w:type="paragraph" w:styleId="berschrift1"><w:name w:val="heading 1"/></w:style>` +
			`<w:style w:type="paragraph" w:styleId="berschrift2"><w:name w:val="heading 2"/></w:style>` +
			`<w:style w:type="paragraph" w:styleId="Gliederung"><w:name w:val="Outline"/><w:pPr><w:outlineLvl w:val="2"/></w:pPr></w:style>` +
			`</w:styles>`,
	})
}

func zipFile(t *testing.T, files map[string]string) []byte {
	t.Helper()
	var b bytes.Buffer
	zw := zip.NewWriter(&b)
	for _, name := range []string{"[Content_Types].xml", "_rels/.rels", "word/document.xml", "word/styles.xml"} {
		if content, ok := files[name]; ok {
			w, err := zw.Create(name)
			if err != nil {
				t.Fatal(err)
			}
			w.Write([]byte(content))
		}
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// bombDOCX writes a DOCX whose document.xml holds one text run of n bytes
// (n about 258*k) that deflate to about n/1000 bytes: a hand-made dynamic
// Huffman block of one literal and k maximal back-references, each 2 bits.
// The zip states the true size, as a careful bomb maker would.
func bombDOCX(t *testing.T, path string, copies int64) {
	t.Helper()
	prefix := `<?xml version="1.0" encoding="UTF-8"?><w:document xmlns:w="` + wNS + `"><w:body><w:p><w:r><w:t>`
	suffix := `</w:t></w:r></w:p></w:body></w:document>`
	var bw bitWriter
	bw.stored([]byte(prefix), false)
	// Dynamic block: literal/length codes 'a'=2 bits, end=2, length 258 (285)=1; distance 1 = 1 bit.
	bw.bits(0, 1)  // not final
	bw.bits(2, 2)  // dynamic Huffman
	bw.bits(29, 5) // HLIT: 286 codes
	bw.bits(0, 5)  // HDIST: 1 code
	bw.bits(14, 4) // HCLEN: 18 code length codes
	order := []int{16, 17, 18, 0, 8, 7, 9, 6, 10, 5, 11, 4, 12, 3, 13, 2, 14, 1}
	clen := map[int]int{18: 1, 1: 2, 2: 2} // code length codes: 18 = "0", 1 = "10", 2 = "11"
	for _, sym := range order {
		bw.bits(uint64(clen[sym]), 3)
	}
	zeros := func(n int) { // symbol 18: repeat zero 11..138 times
		for n > 0 {
			k := min(n, 138)
			bw.code(0, 1)
			bw.bits(uint64(k-11), 7)
			n -= k
		}
	}
	zeros(97)
	bw.code(3, 2) // 'a': length 2
	zeros(158)
	bw.code(3, 2) // 256: length 2
	zeros(28)
	bw.code(2, 2) // 285: length 1
	bw.code(2, 2) // distance code 0: length 1
	bw.code(2, 2) // 'a' (canonical code 10)
	for i := int64(0); i < copies; i++ {
		bw.code(0, 1) // length 258
		bw.code(0, 1) // distance 1
	}
	bw.code(3, 2) // end of block (11)
	bw.stored([]byte(suffix), true)

	size := uint64(len(prefix)+1+len(suffix)) + uint64(copies)*258
	var b bytes.Buffer
	zw := zip.NewWriter(&b)
	w, err := zw.CreateRaw(&zip.FileHeader{Name: "word/document.xml", Method: zip.Deflate,
		CompressedSize64: uint64(len(bw.out)), UncompressedSize64: size})
	if err != nil {
		t.Fatal(err)
	}
	w.Write(bw.out)
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// bitWriter packs deflate bits, least significant first.
type bitWriter struct {
	out  []byte
	acc  uint64
	nacc uint
}

func (w *bitWriter) bits(v uint64, n uint) {
	w.acc |= v << w.nacc
	w.nacc += n
	for w.nacc >= 8 {
		w.out = append(w.out, byte(w.acc))
		w.acc >>= 8
		w.nacc -= 8
	}
}

// code writes a Huffman code, most significant bit first.
func (w *bitWriter) code(c uint64, n uint) {
	for i := int(n) - 1; i >= 0; i-- {
		w.bits(c>>uint(i)&1, 1)
	}
}

func (w *bitWriter) align() {
	if w.nacc > 0 {
		w.bits(0, 8-w.nacc)
	}
}

func (w *bitWriter) stored(data []byte, final bool) {
	f := uint64(0)
	if final {
		f = 1
	}
	w.bits(f, 1)
	w.bits(0, 2)
	w.align()
	n := len(data)
	w.out = append(w.out, byte(n), byte(n>>8), ^byte(n), ^byte(n>>8))
	w.out = append(w.out, data...)
}

func write(t *testing.T, dir, name string, data []byte) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

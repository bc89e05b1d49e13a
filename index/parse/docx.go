package parse

import (
	"archive/zip"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"path"
	"strconv"
	"strings"
)

// DOCX is read with archive/zip and a streaming encoding/xml decoder over
// word/document.xml. Every part is read through a cap on its decompressed
// size (the size the zip declares is not trusted), and the text kept is
// capped too, so a zip bomb ends in ErrTooLarge. Headings come from the
// paragraph style: styles.xml maps style ids (localised, e.g. "berschrift1")
// to "heading N" names or outline levels.

const (
	wNS       = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"
	wStrictNS = "http://purl.oclc.org/ooxml/wordprocessingml/main" // ISO 29500 Strict
	mcNS      = "http://schemas.openxmlformats.org/markup-compatibility/2006"
)

func isW(n xml.Name) bool { return n.Space == wNS || n.Space == wStrictNS }

func parseDOCX(name string, maxBytes int64) (*Doc, error) {
	zr, err := zip.OpenReader(name)
	if err != nil {
		return nil, fmt.Errorf("%w: not a DOCX (zip) file: %v", ErrCorrupt, err)
	}
	defer zr.Close()
	files := map[string]*zip.File{}
	for _, f := range zr.File {
		files[f.Name] = f
	}
	for _, f := range zr.File {
		if f.Flags&0x1 != 0 {
			return nil, fmt.Errorf("%w: zip entries are encrypted", ErrEncrypted)
		}
	}
	if files["EncryptedPackage"] != nil {
		return nil, fmt.Errorf("%w: password-protected Office file", ErrEncrypted)
	}
	main := mainPart(files, maxBytes)
	f := files[main]
	if f == nil {
		return nil, fmt.Errorf("%w: no %s in the archive (not a Word document?)", ErrCorrupt, main)
	}
	styles := map[string]int{}
	titleStyles := map[string]bool{}
	if s := files[path.Join(path.Dir(main), "styles.xml")]; s != nil {
		if err := readStyles(s, maxBytes, styles, titleStyles); err != nil {
			return nil, err
		}
	}
	d := &docxReader{styles: styles, titleStyles: titleStyles, max: maxBytes}
	if err := d.read(f); err != nil {
		return nil, err
	}
	d.flush()
	doc := &Doc{Parser: kindDOCX, Title: d.title, Sections: d.sections}
	if c := files["docProps/core.xml"]; c != nil && doc.Title == "" {
		doc.Title = coreTitle(c, maxBytes)
	}
	if doc.Title == "" {
		doc.Title = baseTitle(name)
	}
	return doc, nil
}

// openEntry returns a reader of a zip entry that fails with ErrTooLarge past max
// decompressed bytes, whatever the entry claims.
func openEntry(f *zip.File, max int64) (io.ReadCloser, error) {
	if max >= 0 && f.UncompressedSize64 > uint64(max) {
		return nil, fmt.Errorf("%w: %s declares %d bytes decompressed (limit %d)", ErrTooLarge, f.Name, f.UncompressedSize64, max)
	}
	rc, err := f.Open()
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrCorrupt, f.Name, err)
	}
	return struct {
		io.Reader
		io.Closer
	}{&cappedReader{r: rc, n: max, what: f.Name}, rc}, nil
}

// mainPart finds the document part through _rels/.rels, as Word does;
// nearly always word/document.xml.
func mainPart(files map[string]*zip.File, max int64) string {
	const def = "word/document.xml"
	f := files["_rels/.rels"]
	if f == nil {
		return def
	}
	rc, err := openEntry(f, min(max, 1<<20))
	if err != nil {
		return def
	}
	defer rc.Close()
	var rels struct {
		Rel []struct {
			Type   string `xml:"Type,attr"`
			Target string `xml:"Target,attr"`
		} `xml:"Relationship"`
	}
	if xml.NewDecoder(rc).Decode(&rels) != nil {
		return def
	}
	for _, r := range rels.Rel {
		if strings.HasSuffix(r.Type, "/officeDocument") {
			return strings.TrimPrefix(path.Clean("/"+r.Target), "/")
		}
	}
	return def
}

func readStyles(f *zip.File, max int64, levels map[string]int, title map[string]bool) error {
	rc, err := openEntry(f, max)
	if err != nil {
		return err
	}
	defer rc.Close()
	dec := xml.NewDecoder(rc)
	var id string
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return xmlErr(f.Name, err)
		}
		se, ok := tok.(xml.StartElement)
		if !ok || !isW(se.Name) {
			continue
		}
		switch se.Name.Local {
		case "style":
			id = attr(se, "styleId")
		case "name":
			n := strings.ToLower(attr(se, "val"))
			if lv, ok := strings.CutPrefix(n, "heading "); ok {
				if l, err := strconv.Atoi(lv); err == nil && l >= 1 && l <= 9 {
					levels[id] = l
				}
			}
			if n == "title" {
				title[id] = true
			}
		case "outlineLvl":
			if l, err := strconv.Atoi(attr(se, "val")); err == nil && l >= 0 && l < 9 && levels[id] == 0 {
				levels[id] = l + 1
			}
		}
	}
}

func coreTitle(f *zip.File, max int64) string {
	rc, err := openEntry(f, min(max, 1<<20))
	if err != nil {
		return ""
	}
	defer rc.Close()
	var core struct {
		Title string `xml:"title"`
	}
	if xml.NewDecoder(rc).Decode(&core) != nil {
		return ""
	}
	return strings.TrimSpace(core.Title)
}

type docxReader struct {
	styles      map[string]int
	titleStyles map[string]bool
	max         int64 // cap on text kept
	kept        int64

	title    string
	sections []Section
	stack    []heading
	body     strings.Builder // paragraphs of the current section
	sep      string          // goes before the next block in body

	para     strings.Builder // text of the current paragraph
	level    int             // heading level of the current paragraph, 0 for body text
	isTitle  bool
	list     bool
	inText   bool // inside <w:t>
	pDepth   int  // paragraph nesting (text boxes)
	fallback int  // inside mc:Fallback
	tbl      int  // table nesting depth
	cell     strings.Builder
	cells    []string // of the current row
}

func (d *docxReader) read(f *zip.File) error {
	rc, err := openEntry(f, d.max)
	if err != nil {
		return err
	}
	defer rc.Close()
	dec := xml.NewDecoder(rc)
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return xmlErr(f.Name, err)
		}
		switch t := tok.(type) {
		case xml.StartElement:
			if t.Name.Space == mcNS && t.Name.Local == "Fallback" {
				d.fallback++
			}
			if !isW(t.Name) {
				continue
			}
			switch t.Name.Local {
			case "p":
				// A text box's paragraphs sit inside a run of the outer one:
				// their text joins the outer paragraph.
				if d.pDepth++; d.pDepth == 1 {
					d.para.Reset()
					d.level, d.isTitle, d.list = 0, false, false
				}
			case "pStyle":
				if d.pDepth > 1 {
					continue
				}
				id := attr(t, "val")
				d.level = d.styles[id]
				if d.level == 0 {
					d.level = builtinHeading(id)
				}
				d.isTitle = d.titleStyles[id] || id == "Title"
			case "outlineLvl":
				if l, err := strconv.Atoi(attr(t, "val")); err == nil && l >= 0 && l < 9 {
					d.level = l + 1
				}
			case "numPr":
				d.list = true
			case "t":
				d.inText = true
			case "tab":
				d.para.WriteByte('\t')
			case "br", "cr":
				d.para.WriteByte('\n')
			case "noBreakHyphen":
				d.para.WriteByte('-')
			case "tbl":
				d.tbl++
			}
		case xml.EndElement:
			if t.Name.Space == mcNS && t.Name.Local == "Fallback" {
				d.fallback--
			}
			if !isW(t.Name) {
				continue
			}
			switch t.Name.Local {
			case "t":
				d.inText = false
			case "p":
				if d.pDepth--; d.pDepth > 0 {
					if t := d.para.String(); t != "" && !strings.HasSuffix(t, " ") {
						d.para.WriteByte(' ')
					}
					continue
				}
				d.pDepth = 0
				if err := d.endPara(); err != nil {
					return err
				}
			case "tc":
				if d.tbl == 1 {
					d.cells = append(d.cells, strings.TrimSpace(d.cell.String()))
					d.cell.Reset()
				}
			case "tr":
				if d.tbl == 1 {
					d.addBody(strings.TrimSpace(strings.Join(d.cells, " | ")), "\n")
					d.cells = d.cells[:0]
				}
			case "tbl":
				d.tbl--
				if d.tbl == 0 {
					d.sep = "\n\n"
				}
			}
		case xml.CharData:
			// mc:Fallback repeats the mc:Choice content for old readers.
			if d.inText && d.fallback == 0 {
				d.para.Write(t)
				if d.max >= 0 && int64(d.para.Len())+d.kept > d.max {
					return fmt.Errorf("%w: document text over %d bytes", ErrTooLarge, d.max)
				}
			}
		}
	}
}

func (d *docxReader) endPara() error {
	text := strings.TrimSpace(d.para.String())
	d.para.Reset()
	d.kept += int64(len(text))
	if d.tbl > 0 { // a cell's paragraphs, and nested tables, join into the cell
		if text != "" {
			if d.cell.Len() > 0 {
				d.cell.WriteByte(' ')
			}
			d.cell.WriteString(text)
		}
		return nil
	}
	if text == "" {
		return nil
	}
	if d.isTitle && d.title == "" {
		d.title = text
	}
	if d.level > 0 {
		d.flush()
		for len(d.stack) > 0 && d.stack[len(d.stack)-1].level >= d.level {
			d.stack = d.stack[:len(d.stack)-1]
		}
		d.stack = append(d.stack, heading{d.level, strings.Join(strings.Fields(text), " ")})
		if d.level == 1 && d.title == "" {
			d.title = text
		}
	}
	if d.list {
		text = "- " + text
	}
	d.addBody(text, "\n\n")
	return nil
}

// addBody appends a block; sep will separate it from the next one.
func (d *docxReader) addBody(text, sep string) {
	if text == "" {
		return
	}
	if d.body.Len() > 0 {
		d.body.WriteString(d.sep)
	}
	d.body.WriteString(text)
	d.sep = sep
}

// flush ends the current section.
func (d *docxReader) flush() {
	if text := strings.TrimSpace(d.body.String()); text != "" {
		names := make([]string, len(d.stack))
		for i, h := range d.stack {
			names[i] = h.text
		}
		d.sections = append(d.sections, Section{Text: text, Heading: strings.Join(names, " > ")})
	}
	d.body.Reset()
}

// builtinHeading reads the level from Word's English style ids when the
// document has no styles part.
func builtinHeading(id string) int {
	if lv, ok := strings.CutPrefix(id, "Heading"); ok {
		if l, err := strconv.Atoi(lv); err == nil && l >= 1 && l <= 9 {
			return l
		}
	}
	return 0
}

func attr(se xml.StartElement, local string) string {
	for _, a := range se.Attr {
		if a.Name.Local == local {
			return a.Value
		}
	}
	return ""
}

func xmlErr(part string, err error) error {
	if errors.Is(err, ErrTooLarge) {
		return err
	}
	return fmt.Errorf("%w: %s: %v", ErrCorrupt, part, err)
}

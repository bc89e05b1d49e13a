package parse

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// TestMain lets the test binary act as a parse worker, the way the lore
// binary does with its hidden parse-worker command, plus two broken
// workers that only tests need: one that never answers (a parser stuck in a
// loop, which no real input is known to cause) and one that crashes.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 {
		switch os.Args[1] {
		case "parse-worker":
			if err := ServeWorker(os.Stdin, os.Stdout); err != nil {
				fmt.Fprintln(os.Stderr, err)
				os.Exit(1)
			}
			os.Exit(0)
		case "hang-worker":
			fmt.Println(`{"ready":true}`)
			time.Sleep(time.Hour)
			os.Exit(0)
		case "crash-worker":
			fmt.Println(`{"ready":true}`)
			var b [1]byte
			os.Stdin.Read(b[:])
			fmt.Fprintln(os.Stderr, "panic: simulated crash\n\ngoroutine 1 [running]:\nmain.main()")
			os.Exit(2)
		}
	}
	os.Exit(m.Run())
}

func workerCmd(t testing.TB, mode string) []string {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return []string{self, mode}
}

func newParser(t testing.TB, opt Options) *Parser {
	if opt.WorkerCmd == nil {
		opt.WorkerCmd = workerCmd(t, "parse-worker")
	}
	p := New(opt)
	t.Cleanup(func() { p.Close() })
	return p
}

type wantSec struct {
	heading            string
	page, first, last  int
	contains, excludes []string
}

func TestParseFormats(t *testing.T) {
	dir := t.TempDir()
	md := `---
title: "Field Notes"
tags: [a]
---
Intro before any heading.

# Setup
Install it.

` + "```sh\n# not a heading\n```" + `

## Linux
apt-get install lore

Details
-------
Setext heading above.

---

After a thematic break.
# Usage
Run it.
`
	article := strings.Repeat("The article explains how local indexing keeps every note on the laptop. ", 12)
	htmlPage := `<!doctype html><html><head><title>Indexing Notes | Example Site</title></head><body>
<header><div class="logo">Example Site</div></header>
<nav><a href="/">Home</a> <a href="/about">About Us</a> <a href="/contact">Contact Page</a></nav>
<main><article><h1>Indexing Notes</h1><p>` + article + `</p>
<h2>Details</h2><p>` + article + `</p><ul><li>first item</li><li>second item</li></ul>
<table><tr><th>Key</th><th>Value</th></tr><tr><td>alpha</td><td>1</td></tr></table></article></main>
<aside>Related: unrelated sidebar story</aside>
<footer>Copyright 2026 Example Corp</footer></body></html>`
	docx := docxFile(t, []para{
		{"Titel", "Quarterly Report"},
		{"", "Opening remarks before headings."},
		{"berschrift1", "Results"},
		{"", "Revenue grew in every region."},
		{"list", "North up 4%"},
		{"berschrift2", "Costs"},
		{"", "Costs fell slightly."},
		{"Gliederung", "Travel"},
		{"", "Travel was flat."},
		{"berschrift1", "Outlook"},
		{"", "Cautious."},
	}, `<w:tbl><w:tr><w:tc><w:p><w:r><w:t>Region</w:t></w:r></w:p></w:tc><w:tc><w:p><w:r><w:t>Growth</w:t></w:r></w:p></w:tc></w:tr>`+
		`<w:tr><w:tc><w:p><w:r><w:t>North</w:t></w:r></w:p></w:tc><w:tc><w:p><w:r><w:t>4%</w:t></w:r></w:p></w:tc></w:tr></w:tbl>`)

	tests := []struct {
		name, file string
		data       []byte
		parser     string
		title      string
		enc, lang  string
		secs       []wantSec
	}{
		{name: "text", file: "a.txt", data: []byte("\nhello\r\nworld\n\n"), parser: "text", title: "a",
			secs: []wantSec{{first: 2, last: 3, contains: []string{"hello\nworld"}}}},
		{name: "latin-1", file: "l.txt", data: []byte("caf\xe9 cr\xe8me \x93quoted\x94"), parser: "text", title: "l", enc: "windows-1252",
			secs: []wantSec{{first: 1, last: 1, contains: []string{"café crème “quoted”"}}}},
		{name: "utf-16", file: "u.txt", data: []byte("\xff\xfeh\x00i\x00\n\x00\xe9\x00"), parser: "text", title: "u", enc: "utf-16le",
			secs: []wantSec{{first: 1, last: 2, contains: []string{"hi\né"}}}},
		{name: "markdown", file: "notes.md", data: []byte(md), parser: "markdown", title: "Field Notes", secs: []wantSec{
			{heading: "", first: 1, last: 5, contains: []string{"title:", "Intro before"}},
			{heading: "Setup", first: 7, last: 12, contains: []string{"# Setup", "# not a heading"}},
			{heading: "Setup > Linux", first: 14, last: 15, contains: []string{"apt-get"}},
			{heading: "Setup > Details", first: 17, last: 23, contains: []string{"Setext", "---\n\nAfter a thematic"}},
			{heading: "Usage", first: 24, last: 25, contains: []string{"Run it."}},
		}},
		{name: "code", file: "main.go", data: []byte("package main\n\nfunc main() {}\n"), parser: "code", title: "main.go", lang: "Go",
			secs: []wantSec{{first: 1, last: 3, contains: []string{"func main"}}}},
		{name: "makefile", file: "Makefile", data: []byte("all:\n\tgo build\n"), parser: "code", title: "Makefile", lang: "Makefile",
			secs: []wantSec{{first: 1, last: 2}}},
		{name: "html", file: "page.html", data: []byte(htmlPage), parser: "html", title: "Indexing Notes | Example Site", secs: []wantSec{
			// readability drops the h1 that repeats the page title
			{heading: "", contains: []string{"local indexing"}, excludes: []string{"Contact Page", "Copyright", "sidebar", "Example Site"}},
			{heading: "Details", contains: []string{"- first item\n- second item", "Key | Value\nalpha | 1"}, excludes: []string{"Copyright"}},
		}},
		{name: "html latin-1", file: "old.htm", data: []byte(`<html><head><meta charset="windows-1252"><title>Caf` + "\xe9" + `</title></head><body><p>cr` + "\xe8" + `me br` + "\xfb" + `l` + "\xe9" + `e</p></body></html>`),
			parser: "html", title: "Café", enc: "windows-1252", secs: []wantSec{{contains: []string{"crème brûlée"}}}},
		{name: "pdf", file: "r.pdf", data: pdfFile([][]string{{"First page line one", "line two"}, {"Second page text"}}, false), parser: "pdf", title: "r", secs: []wantSec{
			{page: 1, first: 1, last: 2, contains: []string{"First page line one\nline two"}},
			{page: 2, first: 1, last: 1, contains: []string{"Second page text"}},
		}},
		{name: "docx", file: "report.docx", data: docx, parser: "docx", title: "Quarterly Report", secs: []wantSec{
			{heading: "", contains: []string{"Quarterly Report\n\nOpening remarks before headings."}},
			{heading: "Results", contains: []string{"Results\n\nRevenue grew in every region.\n\n- North up 4%"}},
			{heading: "Results > Costs", contains: []string{"Costs fell slightly."}},
			{heading: "Results > Costs > Travel", contains: []string{"Travel was flat."}},
			{heading: "Outlook", contains: []string{"Cautious.\n\nRegion | Growth\nNorth | 4%"}},
		}},
	}
	for _, mode := range []string{"worker", "in-process"} {
		p := New(Options{}) // no worker: DOCX and HTML in-process
		if mode == "worker" {
			p = newParser(t, Options{})
		}
		for _, tt := range tests {
			t.Run(mode+"/"+tt.name, func(t *testing.T) {
				path := write(t, dir, tt.file, tt.data)
				doc, err := p.Parse(context.Background(), path)
				if err != nil {
					t.Fatal(err)
				}
				if doc.Parser != tt.parser || doc.Title != tt.title || doc.Encoding != tt.enc || doc.Lang != tt.lang {
					t.Errorf("parser %q title %q encoding %q lang %q, want %q %q %q %q",
						doc.Parser, doc.Title, doc.Encoding, doc.Lang, tt.parser, tt.title, tt.enc, tt.lang)
				}
				if len(doc.Sections) != len(tt.secs) {
					for _, s := range doc.Sections {
						t.Logf("section %q p%d %d-%d: %q", s.Heading, s.Page, s.LineStart, s.LineEnd, s.Text)
					}
					t.Fatalf("%d sections, want %d", len(doc.Sections), len(tt.secs))
				}
				src := strings.Split(strings.ReplaceAll(string(tt.data), "\r", ""), "\n")
				for i, w := range tt.secs {
					s := doc.Sections[i]
					if s.Heading != w.heading || s.Page != w.page || s.LineStart != w.first || s.LineEnd != w.last {
						t.Errorf("section %d: %q p%d lines %d-%d, want %q p%d %d-%d",
							i, s.Heading, s.Page, s.LineStart, s.LineEnd, w.heading, w.page, w.first, w.last)
					}
					for _, c := range w.contains {
						if !strings.Contains(s.Text, c) {
							t.Errorf("section %d lacks %q: %q", i, c, s.Text)
						}
					}
					for _, c := range w.excludes {
						if strings.Contains(s.Text, c) {
							t.Errorf("section %d has %q: %q", i, c, s.Text)
						}
					}
					// Text-like formats: the lines are the file's own lines.
					if s.LineStart > 0 && tt.enc == "" && s.Page == 0 {
						if got := strings.Join(src[s.LineStart-1:s.LineEnd], "\n"); got != s.Text {
							t.Errorf("section %d text differs from lines %d-%d of the file:\n%q\n%q", i, s.LineStart, s.LineEnd, s.Text, got)
						}
					}
				}
			})
		}
		p.Close()
	}
}

func TestParseErrors(t *testing.T) {
	dir := t.TempDir()
	good := pdfFile([][]string{{"Readable text"}}, false)
	hang := write(t, dir, "fake-pdftotext", []byte("#!/bin/sh\nexec sleep 600\n"))
	os.Chmod(hang, 0o755)
	chatty := write(t, dir, "chatty-pdftotext", []byte("#!/bin/sh\ncat >/dev/null\nyes line | head -c 100000\n"))
	os.Chmod(chatty, 0o755)
	bomb := filepath.Join(dir, "bomb.docx")
	bombDOCX(t, bomb, 4<<30/258) // about 4 GiB of text in a 4 MB file
	fi, _ := os.Stat(bomb)
	if fi.Size() > 5<<20 {
		t.Fatalf("bomb is %d bytes; the test wants a small one", fi.Size())
	}
	docx := docxFile(t, []para{{"", "Fine."}}, "")
	tests := []struct {
		name string
		path string
		opt  Options
		want error
		msg  string
	}{
		{name: "truncated pdf", path: write(t, dir, "trunc.pdf", good[:len(good)/3]), want: ErrCorrupt, msg: "pdftotext"},
		{name: "encrypted pdf", path: write(t, dir, "enc.pdf", pdfFile([][]string{{"secret"}}, true)), want: ErrEncrypted, msg: "password"},
		{name: "garbage pdf", path: write(t, dir, "junk.pdf", []byte("%PDF-1.4\nnot really\n")), want: ErrCorrupt},
		{name: "pdf without text", path: write(t, dir, "scan.pdf", pdfFile([][]string{{}}, false)), want: ErrNoText, msg: "OCR"},
		{name: "pdftotext missing", path: write(t, dir, "ok.pdf", good), opt: Options{PDFToText: filepath.Join(dir, "no-such-tool")}, want: ErrNoPDFTool},
		{name: "pdftotext hangs", path: write(t, dir, "ok2.pdf", good), opt: Options{PDFToText: hang, Timeout: time.Second}, want: ErrTimeout},
		{name: "pdf output over cap", path: write(t, dir, "ok3.pdf", good), opt: Options{PDFToText: chatty, MaxBytes: 10000}, want: ErrTooLarge, msg: "output over 10000 bytes"},
		{name: "pdf over cap", path: write(t, dir, "ok4.pdf", good), opt: Options{MaxBytes: 100}, want: ErrTooLarge, msg: "file over 100 bytes"},
		{name: "docx not a zip", path: write(t, dir, "plain.docx", []byte("just some words")), want: ErrCorrupt, msg: "zip"},
		{name: "zip without document", path: write(t, dir, "other.docx", zipFile(t, map[string]string{"[Content_Types].xml": "<Types/>"})), want: ErrCorrupt, msg: "word/document.xml"},
		{name: "truncated docx", path: write(t, dir, "cut.docx", docx[:len(docx)/2]), want: ErrCorrupt},
		{name: "broken xml", path: write(t, dir, "bad.docx", zipFile(t, map[string]string{"word/document.xml": `<w:document xmlns:w="` + wNS + `"><w:body><w:p>`})), want: ErrCorrupt, msg: "EOF"},
		{name: "docx zip bomb", path: bomb, want: ErrTooLarge, msg: "word/document.xml"},
		{name: "docx over a small cap", path: write(t, dir, "big.docx", docxFile(t, []para{{"", strings.Repeat("word ", 500)}}, "")), opt: Options{MaxBytes: 1000}, want: ErrTooLarge},
		{name: "NUL in text", path: write(t, dir, "bin.txt", []byte("abc\x00def")), want: ErrUnsupported},
		{name: "unknown 8-bit encoding", path: write(t, dir, "sjis.txt", []byte("\x82\xb1\x82\xea\x82\xcd\x93\xfa\x96\x7b\x8c\xea\x82\xc5\x82\xb7")), want: ErrEncoding},
		{name: "text over cap", path: write(t, dir, "long.txt", []byte(strings.Repeat("a", 100))), opt: Options{MaxBytes: 99}, want: ErrTooLarge},
		{name: "long text over cap", path: write(t, dir, "longer.txt", []byte(strings.Repeat("b", 20000))), opt: Options{MaxBytes: 10000}, want: ErrTooLarge, msg: "10000"},
		{name: "folder", path: dir, want: ErrUnsupported},
		{name: "missing file", path: filepath.Join(dir, "nope.md"), want: fs.ErrNotExist},
	}
	okPath := write(t, dir, "fine.docx", docx)
	tinyPath := write(t, dir, "tiny.txt", []byte("ok"))
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := newParser(t, tt.opt)
			start := time.Now()
			doc, err := p.Parse(context.Background(), tt.path)
			if !errors.Is(err, tt.want) || doc != nil {
				t.Fatalf("Parse = %v, %v; want error %v", doc, err, tt.want)
			}
			if !strings.Contains(err.Error(), tt.path) || !strings.Contains(err.Error(), tt.msg) {
				t.Errorf("error %q should name the file and say %q", err, tt.msg)
			}
			// Each fails at once or by its timeout (a second, for the tool that hangs
			// for ten minutes); a minute only catches a wait for the tool itself.
			if d := time.Since(start); d > time.Minute {
				t.Errorf("took %v", d)
			}
			// The failure stays with that document.
			next := okPath
			if tt.opt.MaxBytes > 0 {
				next = tinyPath // what fits the small cap
			}
			if _, err := p.Parse(context.Background(), next); err != nil {
				t.Errorf("next document: %v", err)
			}
		})
	}
}

// TestPDFMemoryLimit gives pdftotext a small PDF that needs far more memory
// than its file size: under a tight limit it must fail as too large, alone.
func TestPDFMemoryLimit(t *testing.T) {
	if _, err := exec.LookPath("pdftotext"); err != nil {
		t.Skip("pdftotext not installed")
	}
	if runtime.GOOS != "linux" {
		t.Skip("the limit is RLIMIT_AS, set only on Linux")
	}
	dir := t.TempDir()
	bomb := write(t, dir, "bomb.pdf", pdfMemoryBomb(400000))
	p := newParser(t, Options{MemoryLimit: 32 << 20})
	_, err := p.Parse(context.Background(), bomb)
	if !errors.Is(err, ErrTooLarge) || !errors.Is(err, ErrCrashed) || !strings.Contains(err.Error(), "32 MiB") {
		t.Fatalf("Parse = %v, want ErrTooLarge and ErrCrashed naming the limit", err)
	}
	ok := write(t, dir, "ok.pdf", pdfFile([][]string{{"Small enough"}}, false))
	if doc, err := p.Parse(context.Background(), ok); err != nil || !strings.Contains(doc.Sections[0].Text, "Small enough") {
		t.Errorf("a normal PDF under the same limit: %v, %v", doc, err)
	}
	if testing.Short() {
		return
	}
	doc, err := newParser(t, Options{}).Parse(context.Background(), bomb)
	if err != nil || !strings.Contains(doc.Sections[0].Text, "w") {
		t.Errorf("the bomb under the default limit: %v", err)
	}
}

// TestPDFLimitBeforeInput checks the order of things with a stand-in for
// pdftotext that reports its address-space limit when the first byte of
// the document reaches it: the limit must be in place by then, and the
// document must come on stdin (given its path, pdftotext could read it at
// once, before any limit).
func TestPDFLimitBeforeInput(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the limit is RLIMIT_AS, set only on Linux")
	}
	dir := t.TempDir()
	fake := write(t, dir, "fake-pdftotext", []byte(`#!/bin/sh
# called as: -layout -enc UTF-8 INPUT -
[ "$4" = - ] || { echo "given the document by name: $4"; exit 0; }
head -c 1 >/dev/null
echo "limit $(ulimit -v) KiB"
`))
	os.Chmod(fake, 0o755)
	const limit = 64 << 20
	p := newParser(t, Options{PDFToText: fake, MemoryLimit: limit})
	doc, err := p.Parse(context.Background(), write(t, dir, "a.pdf", pdfFile([][]string{{"x"}}, false)))
	if err != nil {
		t.Fatal(err)
	}
	text := doc.Sections[0].Text
	var kib int64
	if _, err := fmt.Sscanf(text, "limit %d KiB", &kib); err != nil {
		t.Fatalf("stand-in said %q", text)
	}
	// The limit is what the program had mapped at start (a shell: a few MiB) plus MemoryLimit.
	if kib<<10 < limit || kib<<10 > limit+64<<20 {
		t.Errorf("limit %d KiB when the document arrived, want %d KiB and a little", kib, limit>>10)
	}
}

func TestParseCanceled(t *testing.T) {
	p := newParser(t, Options{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	path := write(t, t.TempDir(), "a.docx", docxFile(t, []para{{"", "x"}}, ""))
	if _, err := p.Parse(ctx, path); !errors.Is(err, context.Canceled) {
		t.Errorf("Parse = %v, want Canceled", err)
	}
}

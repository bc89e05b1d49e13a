package parse

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
)

func TestMarkdownHeadings(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want []string // "heading@first-last" per section
	}{
		{"atx with closing hashes", "# Title #\ntext\n## Sub ##\nmore\n", []string{"Title@1-2", "Title > Sub@3-4"}},
		{"setext", "Title\n=====\ntext\n\nSub\n---\nmore\n", []string{"Title@1-3", "Title > Sub@5-7"}},
		{"hashtag is not a heading", "#tag and text\n# Real\nx\n", []string{"@1-1", "Real@2-3"}},
		{"fences hide headings", "# A\n~~~\n# no\n~~~\n```go\n## no\n```\nafter\n", []string{"A@1-8"}},
		{"indented code is not a heading", "# A\n\n    # code\n", []string{"A@1-3"}},
		{"list then rule is no heading", "# A\n- item\n---\ntext\n", []string{"A@1-4"}},
		{"fence close then rule is no heading", "# A\n```\ncode\n```\n---\n", []string{"A@1-5"}},
		{"levels pop", "# A\n## B\n### C\n## D\n# E\n", []string{"A@1-1", "A > B@2-2", "A > B > C@3-3", "A > D@4-4", "E@5-5"}},
		{"links and emphasis dropped", "# See [the **docs**](http://x) `now`\n", []string{"See the docs now@1-1"}},
		{"attributes dropped", "## Intro {#intro .big}\n", []string{"Intro@1-1"}},
		{"crlf", "# A\r\nline\r\n", []string{"A@1-2"}},
		{"empty", "\n\n", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			doc, err := parseMarkdown(context.Background(), tt.in, "x.md")
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, s := range doc.Sections {
				got = append(got, s.Heading+"@"+itoa(s.LineStart)+"-"+itoa(s.LineEnd))
			}
			if strings.Join(got, "|") != strings.Join(tt.want, "|") {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func itoa(i int) string { return strconv.Itoa(i) }

func TestDecodeText(t *testing.T) {
	tests := []struct {
		name, in, want, enc string
		err                 error
	}{
		{"utf-8", "héllo", "héllo", "", nil},
		{"utf-8 bom", "\xef\xbb\xbfhi", "hi", "", nil},
		{"utf-16be", "\xfe\xff\x00h\x00i", "hi", "utf-16be", nil},
		{"windows-1252", "na\xefve \x80 5", "naïve € 5", "windows-1252", nil},
		{"undefined 1252 byte", "abc\x81def", "", "", ErrEncoding},
		{"dense high bytes", "\xc4\xe3\xba\xc3\xca\xc0\xbd\xe7", "", "", ErrEncoding},
		{"nul", "a\x00b", "", "", ErrUnsupported},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, enc, err := decodeText([]byte(tt.in))
			if !errors.Is(err, tt.err) || got != tt.want || enc != tt.enc {
				t.Errorf("decodeText = %q, %q, %v; want %q, %q, %v", got, enc, err, tt.want, tt.enc, tt.err)
			}
		})
	}
}

func TestKindOf(t *testing.T) {
	tests := []struct{ path, head, want string }{
		{"a.md", "# x", kindMarkdown},
		{"a.txt", "plain", kindText},
		{"notes", "plain", kindText},
		{"page", "<!DOCTYPE html><html>", kindHTML},
		{"a.htm", "x", kindHTML},
		{"misnamed.txt", "%PDF-1.7", kindPDF},
		{"report.bin", "PK\x03\x04", kindDOCX},
		{"x.py", "print()", kindCode},
		{"Dockerfile", "FROM x", kindCode},
		{"data.csv", "a,b", kindText},
	}
	for _, tt := range tests {
		if got := kindOf(tt.path, []byte(tt.head)); got != tt.want {
			t.Errorf("kindOf(%q, %q) = %q, want %q", tt.path, tt.head, got, tt.want)
		}
	}
}

func TestDOCXTextBox(t *testing.T) {
	box := `<w:p><w:r><w:t xml:space="preserve">Before box </w:t></w:r><w:r><mc:AlternateContent xmlns:mc="` + mcNS + `">` +
		`<mc:Choice Requires="wps"><w:drawing><w:txbxContent><w:p><w:pPr><w:pStyle w:val="berschrift1"/></w:pPr><w:r><w:t>Boxed text</w:t></w:r></w:p></w:txbxContent></w:drawing></mc:Choice>` +
		`<mc:Fallback><w:pict><w:txbxContent><w:p><w:r><w:t>Boxed text</w:t></w:r></w:p></w:txbxContent></w:pict></mc:Fallback>` +
		`</mc:AlternateContent></w:r><w:r><w:t>after box.</w:t></w:r></w:p>` +
		`<w:p><w:r><w:delText>deleted</w:delText><w:instrText>PAGE</w:instrText><w:t>Kept</w:t><w:tab/><w:t>tabbed</w:t></w:r></w:p>`
	path := write(t, t.TempDir(), "box.docx", docxFile(t, nil, box))
	doc, err := parseDOCX(path, DefaultMaxBytes)
	if err != nil {
		t.Fatal(err)
	}
	if len(doc.Sections) != 1 {
		t.Fatalf("sections %+v, want one (a heading style inside a text box is not a heading)", doc.Sections)
	}
	if want := "Before box Boxed text after box.\n\nKept\ttabbed"; doc.Sections[0].Text != want {
		t.Errorf("text %q, want %q", doc.Sections[0].Text, want)
	}
}

func TestManPageHeading(t *testing.T) {
	const page = "KILLALL(1)                 User Commands                KILLALL(1)\n\nNAME\n" +
		"       killall - kill processes\n       by name\n\nSYNOPSIS\n       killall [-e] name ...\n"
	long := "X(8)  System  X(8)\n\nNAME\n       x - " + strings.Repeat("é", 150) + "\n\nDESCRIPTION\n  text\n"
	tests := []struct {
		name, in, path, want string
	}{
		{"rendered page", page, "killall.1.txt", "killall - kill processes by name"},
		{"leading blank lines", "\n\n" + page, "killall.1.txt", "killall - kill processes by name"},
		{"section letters", "OPENSSL-REQ(1SSL)   OpenSSL   OPENSSL-REQ(1SSL)\n\nNAME\n       openssl-req - PKCS#10 certificate request\n\nSYNOPSIS\n",
			"req.txt", "openssl-req - PKCS#10 certificate request"},
		{"NAME as the last section", "A(1)  x  A(1)\n\nNAME\n       a - b\n", "a.txt", "a - b"},
		{"long name cut on a character", long, "x.txt", strings.ToValidUTF8(("x - " + strings.Repeat("é", 150))[:maxManName], "")},
		{"different names at the ends", "LS(1)  User Commands  CP(1)\n\nNAME\n  ls - list\n", "ls.txt", ""},
		{"no NAME section", "LS(1)  User Commands  LS(1)\n\nDESCRIPTION\n  ls - list\n", "ls.txt", ""},
		{"plain notes", "RESTORING THE BIKE\n\nNAME\n  not a man page\n", "bike.txt", ""},
		{"empty", "", "e.txt", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			doc := parseText(tt.in, tt.path)
			got := ""
			if len(doc.Sections) > 0 {
				got = doc.Sections[0].Heading
			}
			if got != tt.want {
				t.Errorf("heading %q, want %q", got, tt.want)
			}
			if len(doc.Sections) > 1 {
				t.Errorf("%d sections, want one", len(doc.Sections))
			}
			if len(got) > maxManName {
				t.Errorf("heading of %d bytes", len(got))
			}
		})
	}
	// Code is never read as a manual page.
	if doc := parseCode(page, "killall.1.py"); len(doc.Sections) != 1 || doc.Sections[0].Heading != "" {
		t.Errorf("code: %+v", doc.Sections)
	}
}

package parse

import (
	"bytes"
	"fmt"
	"net/url"
	"path/filepath"
	"strings"
	"unicode/utf8"

	readability "codeberg.org/readeck/go-readability/v2"
	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"
	"golang.org/x/net/html/charset"
)

// HTML keeps the page's main text: go-readability picks the article, and
// when it finds too little, the body minus navigation, header, footer,
// asides, forms and scripts is used instead. Either way the chosen tree is
// turned into sections at its h1–h6 headings.

// readabilityMaxElems bounds readability's scoring, which is superlinear;
// bigger pages get the plain extraction.
const readabilityMaxElems = 100_000

func parseHTML(b []byte, path string) (*Doc, error) {
	enc, name, certain := charset.DetermineEncoding(b, "text/html")
	if !certain && utf8.Valid(b) {
		name = "utf-8" // undeclared: the HTML default is windows-1252, but valid UTF-8 is far likelier
	}
	if name != "utf-8" {
		out, err := enc.NewDecoder().Bytes(b)
		if err != nil {
			return nil, fmt.Errorf("%w: %s: %v", ErrEncoding, name, err)
		}
		b = out
	} else {
		b = bytes.TrimPrefix(b, []byte{0xEF, 0xBB, 0xBF})
	}
	doc := &Doc{Parser: kindHTML}
	if name != "utf-8" {
		doc.Encoding = name
	}
	root, err := html.Parse(bytes.NewReader(b))
	if err != nil {
		// html.Parse refuses nesting over 512 elements: keep the text anyway.
		doc.Title = baseTitle(path)
		if text := tokenText(b); text != "" {
			doc.Sections = []Section{{Text: text}}
		}
		return doc, nil
	}
	plain := render(root, true)
	rp := readability.NewParser()
	rp.MaxElemsToParse = readabilityMaxElems
	u := &url.URL{Scheme: "file", Path: filepath.ToSlash(path)}
	if art, err := rp.ParseDocument(root, u); err == nil && art.Node != nil {
		doc.Title = strings.TrimSpace(art.Title())
		// Readability can drop most of a page that is not an article (a list,
		// a reference page): keep its result only when it kept enough.
		if main := render(art.Node, false); size(main) >= 500 || size(main)*2 >= size(plain) {
			doc.Sections = main
		}
	}
	if doc.Sections == nil {
		doc.Sections = plain
	}
	if doc.Title == "" {
		doc.Title = pageTitle(root)
	}
	if doc.Title == "" {
		doc.Title = baseTitle(path)
	}
	return doc, nil
}

// tokenText is the text of a page that cannot be parsed into a tree.
func tokenText(b []byte) string {
	z := html.NewTokenizer(bytes.NewReader(b))
	var out strings.Builder
	skip := 0
	for {
		switch z.Next() {
		case html.ErrorToken:
			return strings.TrimSpace(out.String())
		case html.StartTagToken:
			if t, _ := z.TagName(); string(t) == "script" || string(t) == "style" {
				skip++
			}
		case html.EndTagToken:
			if t, _ := z.TagName(); (string(t) == "script" || string(t) == "style") && skip > 0 {
				skip--
			}
		case html.TextToken:
			if skip == 0 {
				if f := collapse(string(z.Text())); f != "" {
					out.WriteString(f + "\n")
				}
			}
		}
	}
}

func size(ss []Section) int {
	n := 0
	for _, s := range ss {
		n += len(s.Text)
	}
	return n
}

func pageTitle(n *html.Node) string {
	var title, h1 string
	var walk func(*html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.ElementNode {
			switch {
			case n.DataAtom == atom.Title && title == "":
				title = collapse(textOf(n))
			case n.DataAtom == atom.H1 && h1 == "":
				h1 = collapse(textOf(n))
			}
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(n)
	if title != "" {
		return title
	}
	return h1
}

func textOf(n *html.Node) string {
	var b strings.Builder
	var walk func(*html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.TextNode {
			b.WriteString(n.Data)
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(n)
	return b.String()
}

func collapse(s string) string { return strings.Join(strings.Fields(s), " ") }

// renderer turns a DOM tree into sections split at headings.
type renderer struct {
	skipChrome bool // drop nav, header, footer, aside, forms: for whole pages
	sections   []Section
	stack      []heading
	b          strings.Builder
	brk        int  // pending break: 1 newline, 2 blank line
	space      bool // pending space
	pre        int  // inside <pre>
	inArticle  int
}

func render(n *html.Node, skipChrome bool) []Section {
	r := &renderer{skipChrome: skipChrome}
	r.node(n)
	r.flush()
	return r.sections
}

var blocks = map[atom.Atom]bool{
	atom.P: true, atom.Div: true, atom.Section: true, atom.Article: true, atom.Main: true,
	atom.Blockquote: true, atom.Pre: true, atom.Table: true, atom.Ul: true, atom.Ol: true,
	atom.Dl: true, atom.Figure: true, atom.Figcaption: true, atom.Header: true, atom.Footer: true,
	atom.Hr: true, atom.Address: true, atom.Details: true, atom.Summary: true, atom.Body: true,
}

func (r *renderer) node(n *html.Node) {
	switch n.Type {
	case html.TextNode:
		r.text(n.Data)
		return
	case html.ElementNode:
	case html.DocumentNode:
		r.children(n)
		return
	default:
		return
	}
	switch n.DataAtom {
	case atom.Script, atom.Style, atom.Noscript, atom.Template, atom.Svg, atom.Iframe,
		atom.Head, atom.Button, atom.Select, atom.Input, atom.Textarea, atom.Object, atom.Canvas:
		return
	case atom.Nav, atom.Aside, atom.Form:
		if r.skipChrome {
			return
		}
	case atom.Header, atom.Footer:
		if r.skipChrome && r.inArticle == 0 {
			return
		}
	}
	if r.skipChrome && (hasAttr(n, "hidden") || attrOf(n, "aria-hidden") == "true" ||
		attrOf(n, "role") == "navigation" || attrOf(n, "role") == "banner" || attrOf(n, "role") == "contentinfo") {
		return
	}
	switch n.DataAtom {
	case atom.H1, atom.H2, atom.H3, atom.H4, atom.H5, atom.H6:
		level := int(n.Data[1] - '0')
		text := collapse(textOf(n))
		if text == "" {
			return
		}
		r.flush()
		for len(r.stack) > 0 && r.stack[len(r.stack)-1].level >= level {
			r.stack = r.stack[:len(r.stack)-1]
		}
		r.stack = append(r.stack, heading{level, text})
		r.b.WriteString(text)
		r.brk = 2
		return
	case atom.Br:
		r.breakAt(1)
		return
	case atom.Li, atom.Dt, atom.Dd:
		r.breakAt(1)
		if n.DataAtom == atom.Li {
			r.emitPending()
			r.b.WriteString("- ")
		}
		r.children(n)
		r.breakAt(1)
		return
	case atom.Tr:
		r.breakAt(1)
		first := true
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			if c.Type == html.ElementNode && (c.DataAtom == atom.Td || c.DataAtom == atom.Th) {
				if !first {
					r.text(" | ")
				}
				first = false
				r.children(c)
			}
		}
		r.breakAt(1)
		return
	case atom.Pre:
		r.breakAt(2)
		r.pre++
		r.children(n)
		r.pre--
		r.breakAt(2)
		return
	case atom.Article, atom.Main:
		r.inArticle++
		defer func() { r.inArticle-- }()
	}
	if blocks[n.DataAtom] {
		r.breakAt(2)
		r.children(n)
		r.breakAt(2)
		return
	}
	r.children(n)
}

func (r *renderer) children(n *html.Node) {
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		r.node(c)
	}
}

func (r *renderer) breakAt(level int) {
	if r.b.Len() > 0 && level > r.brk {
		r.brk = level
	}
}

func (r *renderer) text(s string) {
	if r.pre > 0 {
		if s != "" {
			r.emitPending()
			r.b.WriteString(s)
		}
		return
	}
	for i, f := range strings.Fields(s) {
		if i > 0 || startsSpace(s) {
			r.space = true
		}
		r.emitPending()
		r.b.WriteString(f)
		r.space = false
	}
	if endsSpace(s) && r.b.Len() > 0 {
		r.space = true
	}
}

func (r *renderer) emitPending() {
	switch {
	case r.b.Len() == 0:
	case r.brk == 2:
		r.b.WriteString("\n\n")
	case r.brk == 1:
		r.b.WriteString("\n")
	case r.space:
		r.b.WriteByte(' ')
	}
	r.brk, r.space = 0, false
}

func startsSpace(s string) bool { return s != "" && strings.TrimLeft(s, " \t\r\n\f") != s }
func endsSpace(s string) bool   { return s != "" && strings.TrimRight(s, " \t\r\n\f") != s }

func (r *renderer) flush() {
	if text := strings.TrimSpace(r.b.String()); text != "" {
		names := make([]string, len(r.stack))
		for i, h := range r.stack {
			names[i] = h.text
		}
		r.sections = append(r.sections, Section{Text: text, Heading: strings.Join(names, " > ")})
	}
	r.b.Reset()
	r.brk, r.space = 0, false
}

func hasAttr(n *html.Node, key string) bool {
	for _, a := range n.Attr {
		if a.Key == key {
			return true
		}
	}
	return false
}

func attrOf(n *html.Node, key string) string {
	for _, a := range n.Attr {
		if a.Key == key {
			return a.Val
		}
	}
	return ""
}

package parse

import (
	"context"
	"regexp"
	"strings"
)

// Markdown is split on headings by a line-based scanner rather than a full
// CommonMark parser: sections keep the file's exact text and line numbers
// (an AST gives byte segments that must be mapped back, and drops the
// source's syntax), the scan is linear with no recursion, and headings are
// the only structure the chunker needs. It knows ATX and setext headings,
// fenced code (where '#' lines are not headings) and YAML front matter.

var (
	atxRe    = regexp.MustCompile(`^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$`)
	fenceRe  = regexp.MustCompile("^ {0,3}(`{3,}|~{3,})")
	setextRe = regexp.MustCompile(`^ {0,3}(=+|-+)[ \t]*$`)
	// Lines that cannot be the text of a setext heading: blank, list, quote, table, ATX.
	notSetextRe = regexp.MustCompile(`^ {0,3}([-*+>|]|\d+[.)]|#|$)`)
	linkRe      = regexp.MustCompile(`!?\[([^\]]*)\]\([^)]*\)`)
	attrsRe     = regexp.MustCompile(`\s*\{[#.][^}]*\}\s*$`) // "## Intro {#intro}"
	titleRe     = regexp.MustCompile(`^title:\s*(.+?)\s*$`)
)

type heading struct {
	level int
	text  string
}

func parseMarkdown(ctx context.Context, text, path string) (*Doc, error) {
	doc := &Doc{Parser: kindMarkdown}
	ls := lines(text)
	var stack []heading
	start := 0 // first line of the current section
	path0 := ""
	i := 0
	if len(ls) > 0 && strings.TrimSpace(ls[0]) == "---" { // front matter: stays in the first section
		for j := 1; j < len(ls); j++ {
			if t := strings.TrimSpace(ls[j]); t == "---" || t == "..." {
				i = j + 1
				break
			}
			if m := titleRe.FindStringSubmatch(ls[j]); m != nil && doc.Title == "" {
				doc.Title = strings.Trim(m[1], `"'`)
			}
		}
	}
	var fence string
	fenceEnd := -1 // line that closed the last fence: not heading text
	cut := func(at int, h heading) {
		if s, ok := section(ls, start, at, path0); ok {
			doc.Sections = append(doc.Sections, s)
		}
		for len(stack) > 0 && stack[len(stack)-1].level >= h.level {
			stack = stack[:len(stack)-1]
		}
		stack = append(stack, h)
		names := make([]string, len(stack))
		for k, s := range stack {
			names[k] = s.text
		}
		path0, start = strings.Join(names, " > "), at
		if h.level == 1 && doc.Title == "" {
			doc.Title = h.text
		}
	}
	for ; i < len(ls); i++ {
		if i%4096 == 0 && ctx.Err() != nil {
			return nil, ctx.Err()
		}
		l := ls[i]
		if fence != "" {
			if t := strings.TrimSpace(l); strings.HasPrefix(t, fence) && strings.Trim(t, fence[:1]) == "" {
				fence, fenceEnd = "", i
			}
			continue
		}
		if m := fenceRe.FindStringSubmatch(l); m != nil {
			fence = m[1]
			continue
		}
		if m := atxRe.FindStringSubmatch(l); m != nil {
			cut(i, heading{len(m[1]), cleanHeading(m[2])})
			continue
		}
		if i > start && setextRe.MatchString(l) {
			prev := ls[i-1]
			if i-1 == fenceEnd || notSetextRe.MatchString(prev) {
				continue // a thematic break, or a line under a list, quote, table or fence
			}
			level := 1
			if strings.Contains(l, "-") {
				level = 2
			}
			cut(i-1, heading{level, cleanHeading(prev)})
		}
	}
	if s, ok := section(ls, start, len(ls), path0); ok {
		doc.Sections = append(doc.Sections, s)
	}
	if doc.Title == "" {
		doc.Title = baseTitle(path)
	}
	return doc, nil
}

// cleanHeading drops inline markup from a heading: links keep their text.
func cleanHeading(s string) string {
	s = attrsRe.ReplaceAllString(s, "")
	s = linkRe.ReplaceAllString(s, "$1")
	s = strings.NewReplacer("**", "", "__", "", "`", "").Replace(s)
	s = strings.Trim(strings.TrimSpace(s), "*_")
	if s == "" {
		return "(untitled)"
	}
	return s
}

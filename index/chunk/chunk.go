// Package chunk splits parsed documents into passages sized for an
// embedding model, keeping each passage's location.
//
// A chunk never spans two sections, so text under different headings or on
// different pages is never mixed (the one exception: a section that is only
// a short heading is carried into its first subsection, whose heading path
// names it anyway). Within a section, whole paragraphs are packed up to the
// target; a paragraph too long for one chunk is split at sentences, then at
// lines (tables, code), then at words, then inside a word. Each chunk after
// the first in a section starts with the last Overlap tokens of the one
// before, from a sentence start where one is close enough. Every chunk's text
// is a contiguous slice of its section's text, so its lines are exact.
package chunk

import (
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"

	"lore/index/parse"
)

// Defaults for zero Options fields.
const (
	DefaultTarget  = 256
	DefaultOverlap = 32
)

// Options configures Split.
type Options struct {
	// Target is the most tokens in a chunk: 0 means DefaultTarget.
	Target int
	// Overlap is how many tokens of the previous chunk a chunk repeats:
	// 0 means DefaultOverlap, <0 none; at most Target/2.
	Overlap int
	// Count counts tokens; nil means Approx. Pass the embedding model's
	// tokenizer for exact sizes.
	Count func(string) int
}

// Chunk is one passage of a document.
type Chunk struct {
	Ordinal   int // 0-based position in the document
	Text      string
	Heading   string // heading path, as in parse.Section
	Tokens    int    // Count(Text)
	Page      int
	LineStart int // 1-based inclusive source lines; 0 when the section has none
	LineEnd   int
}

// Approx estimates tokens as words*4/3, where a long word counts as one word
// per 8 characters and each CJK character as a word, so that unspaced text
// and long identifiers or URLs are not undercounted.
func Approx(s string) int {
	words, run := 0, 0
	end := func() {
		if run > 0 {
			words += (run + 7) / 8
			run = 0
		}
	}
	for _, r := range s {
		switch {
		case unicode.IsSpace(r):
			end()
		case isCJK(r):
			end()
			words++
		default:
			run++
		}
	}
	end()
	return (words*4 + 1) / 3 // rounded to nearest
}

func isCJK(r rune) bool {
	return r >= 0x2E80 && (unicode.Is(unicode.Han, r) || unicode.Is(unicode.Hiragana, r) ||
		unicode.Is(unicode.Katakana, r) || unicode.Is(unicode.Hangul, r))
}

// Split cuts doc into chunks. The result depends only on doc and opt.
func Split(doc *parse.Doc, opt Options) []Chunk {
	if opt.Target <= 0 {
		opt.Target = DefaultTarget
	}
	switch {
	case opt.Overlap == 0:
		opt.Overlap = DefaultOverlap
	case opt.Overlap < 0:
		opt.Overlap = 0
	}
	opt.Overlap = min(opt.Overlap, opt.Target/2)
	if opt.Count == nil {
		opt.Count = Approx
	}
	var out []Chunk
	for _, s := range mergeHeadings(doc.Sections, opt.Count) {
		sp := &splitter{opt: opt, sec: s, text: s.Text}
		for _, c := range sp.split() {
			c.Ordinal = len(out)
			out = append(out, c)
		}
	}
	return out
}

// mergeHeadings carries a section that is no more than a short heading into
// the next section when that one is its subsection on the same page: a
// chunk of just "# Guide" helps no search.
func mergeHeadings(secs []parse.Section, count func(string) int) []parse.Section {
	out := make([]parse.Section, 0, len(secs))
	for i := 0; i < len(secs); i++ {
		s := secs[i]
		for i+1 < len(secs) {
			next := secs[i+1]
			if s.Heading == "" || !strings.HasPrefix(next.Heading, s.Heading+" > ") || next.Page != s.Page ||
				strings.Count(strings.TrimSpace(s.Text), "\n") > 1 || count(s.Text) > 16 {
				break
			}
			sep := "\n\n"
			if s.LineEnd > 0 && next.LineStart > s.LineEnd {
				sep = strings.Repeat("\n", next.LineStart-s.LineEnd) // keeps line arithmetic exact
			}
			next.Text = s.Text + sep + next.Text
			if s.LineStart > 0 && next.LineStart > 0 {
				next.LineStart = s.LineStart
			}
			s = next
			i++
		}
		out = append(out, s)
	}
	return out
}

// unit is a piece of a section's text that is never cut further: a
// paragraph, or a sentence, line, word or word part of a long paragraph.
type unit struct {
	start, end int // byte offsets in the section text, trimmed of spaces
	tokens     int
}

type splitter struct {
	opt   Options
	sec   parse.Section
	text  string
	nl    []int // offsets of '\n' in text
	units []unit
}

func (s *splitter) count(start, end int) int { return s.opt.Count(s.text[start:end]) }

func (s *splitter) split() []Chunk {
	for i := 0; i < len(s.text); i++ {
		if s.text[i] == '\n' {
			s.nl = append(s.nl, i)
		}
	}
	for _, p := range paragraphs(s.text) {
		s.cut(p[0], p[1], levelPara)
	}
	var out []Chunk
	target := s.opt.Target
	ovStart, ovTokens := -1, 0
	for i := 0; i < len(s.units); {
		start, sum := s.units[i].start, 0
		if ovStart >= 0 && ovTokens+s.units[i].tokens <= target {
			start, sum = ovStart, ovTokens
		}
		j := i
		for j < len(s.units) && (j == i || sum+s.units[j].tokens <= target) {
			sum += s.units[j].tokens
			j++
		}
		// Token counts need not add up exactly (a real tokenizer, rounding):
		// check the chunk as a whole and give back units while it is over.
		n := s.count(start, s.units[j-1].end)
		for n > target && j-1 > i {
			j--
			n = s.count(start, s.units[j-1].end)
		}
		if n > target && start != s.units[i].start {
			start = s.units[i].start
			n = s.count(start, s.units[j-1].end)
		}
		end := s.units[j-1].end
		out = append(out, s.chunk(start, end, n))
		i = j
		ovStart = -1
		if i < len(s.units) && s.opt.Overlap > 0 {
			ovStart, ovTokens = s.tail(start, end)
		}
	}
	return out
}

func (s *splitter) chunk(start, end, tokens int) Chunk {
	c := Chunk{Text: s.text[start:end], Heading: s.sec.Heading, Tokens: tokens, Page: s.sec.Page}
	if s.sec.LineStart > 0 {
		c.LineStart = s.sec.LineStart + s.linesBefore(start)
		c.LineEnd = s.sec.LineStart + s.linesBefore(end-1)
	}
	return c
}

func (s *splitter) linesBefore(off int) int { return sort.SearchInts(s.nl, off) }

// tail picks where the next chunk's overlap starts within [start, end): the
// longest run of whole words from the end that fits in Overlap tokens,
// moved up to a sentence start when one lies in its later two thirds. It
// returns -1 when nothing fits.
func (s *splitter) tail(start, end int) (int, int) {
	var starts []int // word starts after start, ascending
	for i := start + 1; i < end; i++ {
		if !isSpaceByte(s.text[i]) && isSpaceByte(s.text[i-1]) {
			starts = append(starts, i)
		}
	}
	// Token counts grow as the tail grows: find the longest that fits.
	fits := func(k int) bool { return s.count(starts[k], end) <= s.opt.Overlap }
	k := sort.Search(len(starts), fits)
	if k == len(starts) {
		// Even the last word is too long (unspaced CJK text, a long token):
		// take whole characters instead.
		from := start
		if len(starts) > 0 {
			from = starts[len(starts)-1]
		}
		starts = starts[:0]
		for i := from + 1; i < end; i++ {
			if utf8.RuneStart(s.text[i]) {
				starts = append(starts, i)
			}
		}
		if k = sort.Search(len(starts), fits); k == len(starts) {
			return -1, 0
		}
	}
	from := starts[k]
	for _, w := range starts[k:] {
		if (end-w)*3 < (end-from)*2 {
			break
		}
		if sentenceStart(s.text, w) {
			from = w
			break
		}
	}
	return from, s.count(from, end)
}

func isSpaceByte(b byte) bool {
	return b == ' ' || b == '\t' || b == '\n' || b == '\r' || b == '\f' || b == '\v'
}

// sentenceStart reports whether the word at i follows a sentence end or a
// paragraph break.
func sentenceStart(text string, i int) bool {
	j := i
	for j > 0 && isSpaceByte(text[j-1]) {
		j--
	}
	if strings.Contains(text[j:i], "\n\n") || j == 0 {
		return true
	}
	for j > 0 {
		r, n := utf8.DecodeLastRuneInString(text[:j])
		if !strings.ContainsRune(closers, r) {
			return strings.ContainsRune(enders, r)
		}
		j -= n
	}
	return false
}

const (
	enders  = ".!?…。！？"
	closers = "\"')]}»”’"
)

// Levels at which a too-long piece is cut, coarsest first.
const (
	levelPara = iota
	levelSentence
	levelLine
	levelWord
	levelRune
)

// cut adds [start, end) as one unit if it fits in a chunk, or cut at the
// next finer level.
func (s *splitter) cut(start, end, level int) {
	n := s.count(start, end)
	if n <= s.opt.Target {
		s.units = append(s.units, unit{start, end, n})
		return
	}
	var parts [][2]int
	switch level {
	case levelPara:
		parts = sentences(s.text, start, end)
	case levelSentence:
		parts = splitAt(s.text, start, end, func(b byte) bool { return b == '\n' })
	case levelLine:
		parts = splitAt(s.text, start, end, isSpaceByte)
	default:
		s.cutRunes(start, end)
		return
	}
	if len(parts) == 1 { // no boundary of this kind inside
		s.cut(start, end, level+1)
		return
	}
	for _, p := range parts {
		s.cut(p[0], p[1], level+1)
	}
}

// cutRunes cuts a single overlong word into the longest prefixes that fit
// in a chunk beside the overlap.
func (s *splitter) cutRunes(start, end int) {
	budget := s.opt.Target - s.opt.Overlap
	for start < end {
		var bounds []int // rune ends after start
		for i := start; i < end; {
			_, n := utf8.DecodeRuneInString(s.text[i:end])
			i += n
			bounds = append(bounds, i)
		}
		k := sort.Search(len(bounds), func(k int) bool { return s.count(start, bounds[k]) > budget })
		if k == 0 {
			k = 1 // one rune over the target: emit it alone rather than loop
		}
		e := bounds[k-1]
		s.units = append(s.units, unit{start, e, s.count(start, e)})
		start = e
	}
}

// paragraphs returns the trimmed spans of text between blank lines.
func paragraphs(text string) [][2]int {
	var out [][2]int
	start := 0
	for start < len(text) {
		// find a blank line: "\n" followed by optional spaces and another "\n"
		end, next := len(text), len(text)
		for i := start; i < len(text); i++ {
			if text[i] != '\n' {
				continue
			}
			j := i + 1
			for j < len(text) && (text[j] == ' ' || text[j] == '\t' || text[j] == '\r') {
				j++
			}
			if j < len(text) && text[j] == '\n' {
				end, next = i, j+1
				break
			}
		}
		if p, ok := trim(text, start, end); ok {
			out = append(out, p)
		}
		start = next
	}
	return out
}

// sentences cuts [start, end) after sentence-ending punctuation (and any
// closing quotes or brackets) that is followed by a space.
func sentences(text string, start, end int) [][2]int {
	var out [][2]int
	from := start
	for i := start; i < end; {
		r, n := utf8.DecodeRuneInString(text[i:end])
		i += n
		if !strings.ContainsRune(enders, r) {
			continue
		}
		for i < end {
			c, m := utf8.DecodeRuneInString(text[i:end])
			if !strings.ContainsRune(closers, c) && !strings.ContainsRune(enders, c) {
				break
			}
			i += m
		}
		if i < end && (isSpaceByte(text[i]) || r >= 0x3000) { // CJK enders need no space
			if p, ok := trim(text, from, i); ok {
				out = append(out, p)
			}
			from = i
		}
	}
	if p, ok := trim(text, from, end); ok {
		out = append(out, p)
	}
	return out
}

// splitAt cuts [start, end) at every byte for which sep is true.
func splitAt(text string, start, end int, sep func(byte) bool) [][2]int {
	var out [][2]int
	from := start
	for i := start; i <= end; i++ {
		if i == end || sep(text[i]) {
			if p, ok := trim(text, from, i); ok {
				out = append(out, p)
			}
			from = i + 1
		}
	}
	return out
}

func trim(text string, start, end int) ([2]int, bool) {
	for start < end && isSpaceRune(text, start) {
		_, n := utf8.DecodeRuneInString(text[start:end])
		start += n
	}
	for end > start {
		r, n := utf8.DecodeLastRuneInString(text[start:end])
		if !unicode.IsSpace(r) {
			break
		}
		end -= n
	}
	return [2]int{start, end}, start < end
}

func isSpaceRune(text string, i int) bool {
	r, _ := utf8.DecodeRuneInString(text[i:])
	return unicode.IsSpace(r)
}

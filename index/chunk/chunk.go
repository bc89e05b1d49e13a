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
//
// Splitting is linear in the input, up to a log factor, whatever its shape:
// a 20 MB line of minified code, a megabyte-long word or unspaced text cost
// about what prose of the same size does.
package chunk

import (
	"context"
	"iter"
	"slices"
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
	for i := 0; i < len(s); {
		// ASCII is most text, and the only thing in minified code or data:
		// no decoding, no Unicode tables.
		if c := s[i]; c < utf8.RuneSelf {
			i++
			if !asciiSpace[c] {
				run++
			} else if run > 0 {
				words += (run + 7) / 8
				run = 0
			}
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		i += n
		switch {
		case unicode.IsSpace(r):
			if run > 0 {
				words += (run + 7) / 8
				run = 0
			}
		case isCJK(r):
			if run > 0 {
				words += (run + 7) / 8
				run = 0
			}
			words++
		default:
			run++
		}
	}
	if run > 0 {
		words += (run + 7) / 8
	}
	return (words*4 + 1) / 3 // rounded to nearest
}

// asciiSpace holds the ASCII characters unicode.IsSpace reports.
var asciiSpace = [utf8.RuneSelf]bool{'\t': true, '\n': true, '\v': true, '\f': true, '\r': true, ' ': true}

func isCJK(r rune) bool {
	return r >= 0x2E80 && (unicode.Is(unicode.Han, r) || unicode.Is(unicode.Hiragana, r) ||
		unicode.Is(unicode.Katakana, r) || unicode.Is(unicode.Hangul, r))
}

// Split cuts doc into chunks. The result depends only on doc and opt.
func Split(doc *parse.Doc, opt Options) []Chunk {
	out, _ := SplitContext(context.Background(), doc, opt)
	return out
}

// SplitContext is Split that gives up when ctx is done, returning ctx's
// cause: a caller can bound the time one document may take.
func SplitContext(ctx context.Context, doc *parse.Doc, opt Options) ([]Chunk, error) {
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
		sp := &splitter{ctx: ctx, opt: opt, sec: s, text: s.Text}
		chunks := sp.split()
		if sp.err != nil {
			return nil, sp.err
		}
		for _, c := range chunks {
			c.Ordinal = len(out)
			out = append(out, c)
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, context.Cause(ctx)
	}
	return out, nil
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

// splitter packs one section's units into chunks as the units are cut, so
// that what it holds at any time is one chunk's worth of units rather than
// every unit of the section: a 20 MB file of one-word lines is ten million
// units.
type splitter struct {
	ctx  context.Context
	err  error // ctx's cause once it is done: every loop then ends early
	opt  Options
	sec  parse.Section
	text string
	out  []Chunk

	// The chunk being packed: its units, the offset it starts at (its first
	// unit's or the overlap's) and the tokens summed so far.
	pending []unit
	start   int
	sum     int
	// Where the next chunk's overlap starts and its tokens; -1: none.
	ovStart, ovTokens int
	// Newlines counted so far for chunk starts and ends, which only move
	// forward.
	startLines, endLines lineCursor
}

func (s *splitter) count(start, end int) int { return s.opt.Count(s.text[start:end]) }

// stopped reports whether the context is done. An atomic load: cheap next to
// the token count every caller does per iteration.
func (s *splitter) stopped() bool {
	if s.err == nil && s.ctx.Err() != nil {
		s.err = context.Cause(s.ctx)
	}
	return s.err != nil
}

func (s *splitter) split() []Chunk {
	s.ovStart = -1
	for start, end := range paragraphs(s.text, s.stopped) {
		if s.stopped() {
			return nil
		}
		s.cut(start, end, levelPara)
	}
	for len(s.pending) > 0 && !s.stopped() {
		s.emit(false)
	}
	return s.out
}

// push adds the next unit to the chunk being packed: whole units are packed
// up to the target, and a unit that does not fit closes the chunk first.
func (s *splitter) push(u unit) {
	if s.stopped() {
		return
	}
	switch {
	case len(s.pending) == 0:
		s.start, s.sum = u.start, 0
		if s.ovStart >= 0 && s.ovTokens+u.tokens <= s.opt.Target {
			s.start, s.sum = s.ovStart, s.ovTokens
		}
	case s.sum+u.tokens > s.opt.Target:
		s.emit(true)
		s.push(u)
		return
	}
	s.sum += u.tokens
	s.pending = append(s.pending, u)
}

// emit makes a chunk of the pending units, or of as many of them as fit;
// the rest are packed again after it. more says whether units follow.
func (s *splitter) emit(more bool) {
	p, start, target := s.pending, s.start, s.opt.Target
	// Token counts need not add up exactly (a real tokenizer, rounding):
	// check the chunk as a whole and give back units while it is over.
	// Counts grow with the text, so the most units that fit are found by
	// bisection: many tiny units (one word per line) would otherwise be
	// given back one count of the whole chunk at a time.
	j := len(p)
	n := s.count(start, p[j-1].end)
	if n > target && j > 1 {
		over := func(m int) bool { return s.count(start, p[m-1].end) > target }
		// The smallest m in (1, j] that is over; m-1 is the most that fit.
		j = 1 + sort.Search(j-2, func(k int) bool { return over(2 + k) })
		n = s.count(start, p[j-1].end)
		for n > target && j > 1 { // a count that does not grow with the text
			j--
			n = s.count(start, p[j-1].end)
		}
	}
	if n > target && start != p[0].start {
		start = p[0].start
		n = s.count(start, p[j-1].end)
	}
	end := p[j-1].end
	s.out = append(s.out, s.chunk(start, end, n))
	rest := slices.Clone(p[j:])
	s.pending = s.pending[:0]
	s.ovStart = -1
	if (more || len(rest) > 0) && s.opt.Overlap > 0 {
		s.ovStart, s.ovTokens = s.tail(start, end)
	}
	for _, u := range rest {
		s.push(u)
	}
}

func (s *splitter) chunk(start, end, tokens int) Chunk {
	c := Chunk{Text: s.text[start:end], Heading: s.sec.Heading, Tokens: tokens, Page: s.sec.Page}
	if s.sec.LineStart > 0 {
		c.LineStart = s.sec.LineStart + s.startLines.at(s.text, start)
		c.LineEnd = s.sec.LineStart + s.endLines.at(s.text, end-1)
	}
	return c
}

// lineCursor counts the newlines before an offset that only moves forward.
type lineCursor struct{ off, lines int }

func (c *lineCursor) at(text string, off int) int {
	if off < c.off {
		*c = lineCursor{}
	}
	c.lines += strings.Count(text[c.off:off], "\n")
	c.off = off
	return c.lines
}

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
	// Only a few closers can follow a sentence end: a long run of them
	// (deeply nested brackets) is not walked back over for every candidate.
	for k := 0; j > 0 && k < maxClosers; k++ {
		r, n := utf8.DecodeLastRuneInString(text[:j])
		if !strings.ContainsRune(closers, r) {
			return strings.ContainsRune(enders, r)
		}
		j -= n
	}
	return false
}

const maxClosers = 16

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
	if s.stopped() {
		return
	}
	n := s.count(start, end)
	if n <= s.opt.Target {
		s.push(unit{start, end, n})
		return
	}
	s.cutOver(start, end, level)
}

// cutOver cuts [start, end), known to be over the target, at level.
func (s *splitter) cutOver(start, end, level int) {
	var parts iter.Seq2[int, int]
	switch level {
	case levelPara:
		parts = sentences(s.text, start, end, s.stopped)
	case levelSentence:
		parts = splitAt(s.text, start, end, func(b byte) bool { return b == '\n' }, s.stopped)
	case levelLine:
		parts = splitAt(s.text, start, end, isSpaceByte, s.stopped)
	default:
		s.cutRunes(start, end, s.push)
		return
	}
	// Parts are cut as they are found; the first waits until a second shows
	// that there is a boundary of this kind inside at all.
	var first [2]int
	k := 0
	for a, b := range parts {
		if s.stopped() {
			return
		}
		switch k++; k {
		case 1:
			first = [2]int{a, b}
			continue
		case 2:
			s.cut(first[0], first[1], level+1)
		}
		s.cut(a, b, level+1)
	}
	if k == 1 { // no boundary of this kind inside
		s.cutOver(start, end, level+1)
	}
}

// cutRunes cuts a single overlong word into the longest prefixes that fit
// in a chunk beside the overlap.
//
// Each prefix is found by an exponential search around the length of the
// one before (pieces of one word tend to be alike), then bisection: that
// costs a few counts of about the prefix found, so a word of any length is
// cut in linear time. Bisecting all that is left of the word, as a plain
// search would, made a 20 MB line quadratic.
func (s *splitter) cutRunes(start, end int, emit func(unit)) {
	budget := s.opt.Target - s.opt.Overlap
	var bounds []int // rune ends after start, as far as the search reached
	guess := 64      // runes in the previous piece
	for start < end {
		if s.stopped() {
			return
		}
		bounds = bounds[:0]
		pos := start
		extend := func(n int) {
			for len(bounds) < n && pos < end {
				_, w := utf8.DecodeRuneInString(s.text[pos:end])
				pos += w
				bounds = append(bounds, pos)
			}
		}
		over := func(k int) bool { return s.count(start, bounds[k]) > budget }
		// Find lo <= hi with bounds[:lo] known to fit and bounds[hi] known to
		// be over, or hi == len(bounds) when the rest of the word fits.
		extend(guess + 1)
		lo, hi := 0, min(guess, len(bounds)-1)
		if over(hi) {
			for step := 1; ; step *= 2 { // down from the guess
				if hi-step < 0 {
					break
				}
				if !over(hi - step) {
					lo = hi - step + 1
					break
				}
				hi -= step
			}
		} else {
			lo = hi + 1
			for step := max(guess, 64); ; step *= 2 { // up from the guess
				if lo == len(bounds) && pos == end {
					hi = lo
					break
				}
				extend(lo + step)
				if last := len(bounds) - 1; over(last) {
					hi = last
					break
				}
				lo = len(bounds)
			}
		}
		k := lo + sort.Search(hi-lo, func(i int) bool { return over(lo + i) })
		if k == 0 {
			k = 1 // one rune over the target: emit it alone rather than loop
		}
		guess = k
		e := bounds[k-1]
		emit(unit{start, e, s.count(start, e)})
		start = e
	}
}

// scanStride is how many bytes the scans below go between looks at stop, so
// that a cancelled split of a huge text ends in milliseconds, not after a
// full pass over it.
const scanStride = 64 << 10

// paragraphs yields the trimmed spans of text between blank lines, until
// stop says to end.
func paragraphs(text string, stop func() bool) iter.Seq2[int, int] {
	return func(yield func(int, int) bool) {
		start := 0
		for start < len(text) {
			// find a blank line: "\n" followed by optional spaces and another "\n"
			end, next := len(text), len(text)
			for i := start; i < len(text); i++ {
				if i%scanStride == 0 && stop() {
					return
				}
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
			if p, ok := trim(text, start, end); ok && !yield(p[0], p[1]) {
				return
			}
			start = next
		}
	}
}

// sentences cuts [start, end) after sentence-ending punctuation (and any
// closing quotes or brackets) that is followed by a space.
func sentences(text string, start, end int, stop func() bool) iter.Seq2[int, int] {
	return func(yield func(int, int) bool) {
		from, look := start, start+scanStride
		for i := start; i < end; {
			if i >= look {
				if stop() {
					return
				}
				look = i + scanStride
			}
			c := text[i]
			if c < utf8.RuneSelf && c != '.' && c != '!' && c != '?' { // most text: no ender
				i++
				continue
			}
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
				if p, ok := trim(text, from, i); ok && !yield(p[0], p[1]) {
					return
				}
				from = i
			}
		}
		if p, ok := trim(text, from, end); ok {
			yield(p[0], p[1])
		}
	}
}

// splitAt cuts [start, end) at every byte for which sep is true.
func splitAt(text string, start, end int, sep func(byte) bool, stop func() bool) iter.Seq2[int, int] {
	return func(yield func(int, int) bool) {
		from := start
		for i := start; i <= end; i++ {
			if (i-start)%scanStride == 0 && stop() {
				return
			}
			if i == end || sep(text[i]) {
				if p, ok := trim(text, from, i); ok && !yield(p[0], p[1]) {
					return
				}
				from = i + 1
			}
		}
	}
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

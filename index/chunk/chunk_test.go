package chunk

import (
	"fmt"
	"math/rand"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"lore/index/parse"
)

// prose makes n sentences of varied length, deterministically.
func prose(rng *rand.Rand, n int) string {
	words := strings.Fields("the index keeps every passage with its page heading and lines so answers can cite " +
		"where they came from while the model reads only what fits in its context window budget")
	var b strings.Builder
	for i := 0; i < n; i++ {
		k := 4 + rng.Intn(20)
		for j := 0; j < k; j++ {
			if j > 0 {
				b.WriteByte(' ')
			}
			w := words[rng.Intn(len(words))]
			if j == 0 {
				w = strings.ToUpper(w[:1]) + w[1:]
			}
			fmt.Fprintf(&b, "%s%d", w, i) // numbered words make every position findable
		}
		b.WriteString(". ")
	}
	return strings.TrimSpace(b.String())
}

// noise is n random runes from [first, first+span): text that does not repeat.
func noise(rng *rand.Rand, first rune, span, n int) string {
	var b strings.Builder
	for i := 0; i < n; i++ {
		b.WriteRune(first + rune(rng.Intn(span)))
	}
	return b.String()
}

// cjk is n unspaced sentences of random Han characters.
func cjk(rng *rand.Rand, n int) string {
	var b strings.Builder
	for i := 0; i < n; i++ {
		b.WriteString(noise(rng, 0x4E00, 20000, 5+rng.Intn(15)) + "。")
	}
	return b.String()
}

func testDocs() map[string]*parse.Doc {
	rng := rand.New(rand.NewSource(1))
	table := ""
	for i := 0; i < 80; i++ {
		table += fmt.Sprintf("| row%d | value%d | more%d |\n", i, i*7, i*3)
	}
	return map[string]*parse.Doc{
		"short paragraphs": {Sections: []parse.Section{{Text: "One.\n\nTwo words.\n\nThree more words.", LineStart: 1, LineEnd: 5}}},
		"long prose": {Sections: []parse.Section{
			{Heading: "A", Text: prose(rng, 120), LineStart: 1, LineEnd: 1},
			{Heading: "A > B", Text: prose(rng, 3) + "\n\n" + prose(rng, 40) + "\n\n" + prose(rng, 2), LineStart: 3, LineEnd: 7},
		}},
		"table and code lines": {Sections: []parse.Section{{Heading: "Data", Text: strings.TrimSpace(table), LineStart: 10, LineEnd: 89}}},
		"overlong word":        {Sections: []parse.Section{{Text: "before " + noise(rng, 'a', 26, 6000) + " after", LineStart: 1, LineEnd: 1}}},
		"cjk without spaces":   {Sections: []parse.Section{{Text: cjk(rng, 120)}}},
		"pages": {Sections: []parse.Section{
			{Text: prose(rng, 30), Page: 1, LineStart: 1, LineEnd: 1},
			{Text: prose(rng, 30), Page: 2, LineStart: 1, LineEnd: 1},
		}},
		"empty": {Sections: []parse.Section{{Text: "  \n\n "}}},
	}
}

func counters() map[string]func(string) int {
	return map[string]func(string) int{
		"approx": nil,
		// a stand-in for a subword tokenizer: about one token per 4 bytes
		"bytes/4": func(s string) int { return (len(s) + 3) / 4 },
	}
}

func TestSplitInvariants(t *testing.T) {
	for dname, doc := range testDocs() {
		for cname, count := range counters() {
			for _, opt := range []Options{{}, {Target: 64, Overlap: 16}, {Target: 40, Overlap: -1}} {
				opt.Count = count
				t.Run(fmt.Sprintf("%s/%s/%d-%d", dname, cname, opt.Target, opt.Overlap), func(t *testing.T) {
					checkInvariants(t, doc, opt)
				})
			}
		}
	}
}

func checkInvariants(t *testing.T, doc *parse.Doc, opt Options) {
	count := opt.Count
	if count == nil {
		count = Approx
	}
	target := opt.Target
	if target == 0 {
		target = DefaultTarget
	}
	chunks := Split(doc, opt)
	if again := Split(doc, opt); !reflect.DeepEqual(chunks, again) {
		t.Fatal("two splits of the same document differ")
	}
	covered := make([][]bool, len(doc.Sections))
	for i, s := range doc.Sections {
		covered[i] = make([]bool, len(s.Text))
	}
	si, from := 0, 0 // section of the previous chunk and its start there
	for k, c := range chunks {
		if c.Ordinal != k {
			t.Errorf("chunk %d has ordinal %d", k, c.Ordinal)
		}
		if c.Tokens != count(c.Text) || c.Tokens > target || c.Tokens == 0 {
			t.Errorf("chunk %d: %d tokens (count %d), target %d", k, c.Tokens, count(c.Text), target)
		}
		if c.Text != strings.TrimSpace(c.Text) {
			t.Errorf("chunk %d not trimmed: %q", k, c.Text)
		}
		// Each chunk is a slice of one section, after the previous chunk's start.
		off := strings.Index(doc.Sections[si].Text[from:], c.Text)
		if off < 0 {
			si, from = si+1, 0
			for si < len(doc.Sections) {
				if off = strings.Index(doc.Sections[si].Text, c.Text); off >= 0 {
					break
				}
				si++
			}
			if si == len(doc.Sections) {
				t.Fatalf("chunk %d is not a slice of any later section: %q", k, c.Text)
			}
		}
		from += off
		s := doc.Sections[si]
		if c.Heading != s.Heading || c.Page != s.Page {
			t.Errorf("chunk %d: heading %q page %d, section has %q %d", k, c.Heading, c.Page, s.Heading, s.Page)
		}
		if s.LineStart > 0 {
			ws := s.LineStart + strings.Count(s.Text[:from], "\n")
			we := ws + strings.Count(c.Text, "\n")
			if c.LineStart != ws || c.LineEnd != we {
				t.Errorf("chunk %d: lines %d-%d, want %d-%d", k, c.LineStart, c.LineEnd, ws, we)
			}
		}
		for i := from; i < from+len(c.Text); i++ {
			covered[si][i] = true
		}
		// Overlap: a chunk that does not start its section repeats the end of
		// the previous one, within the budget.
		if opt.Overlap >= 0 && k > 0 && chunks[k-1].Heading == c.Heading && chunks[k-1].Page == c.Page && from > 0 {
			prev := chunks[k-1].Text
			ov := overlapLen(prev, c.Text)
			ovMax := opt.Overlap
			if ovMax == 0 {
				ovMax = DefaultOverlap
			}
			if ov == 0 {
				t.Errorf("chunk %d repeats nothing of chunk %d", k, k-1)
			} else if n := count(c.Text[:ov]); n > ovMax {
				t.Errorf("chunk %d overlap is %d tokens, max %d", k, n, ovMax)
			}
		}
	}
	// No text lost: every non-space byte of every section is in some chunk.
	for i, s := range doc.Sections {
		for j, ch := range []byte(s.Text) {
			if !covered[i][j] && !isSpaceByte(ch) && !strings.ContainsRune(" \u3000", rune(ch)) {
				lo, hi := max(0, j-20), min(len(s.Text), j+20)
				t.Fatalf("section %d byte %d not in any chunk: ...%q...", i, j, s.Text[lo:hi])
			}
		}
	}
}

// overlapLen is the length of the longest suffix of a that starts b.
func overlapLen(a, b string) int {
	for n := min(len(a), len(b)); n > 0; n-- {
		if strings.HasSuffix(a, b[:n]) && utf8.ValidString(b[:n]) {
			return n
		}
	}
	return 0
}

func TestSplitShapes(t *testing.T) {
	rng := rand.New(rand.NewSource(2))
	p1, p2, p3 := prose(rng, 5), prose(rng, 6), prose(rng, 4)
	tests := []struct {
		name string
		doc  *parse.Doc
		opt  Options
		want []Chunk // Tokens not compared
	}{
		{
			name: "small paragraphs pack into one chunk",
			doc:  &parse.Doc{Sections: []parse.Section{{Text: "A b.\n\nC d.", LineStart: 4, LineEnd: 6}}},
			want: []Chunk{{Text: "A b.\n\nC d.", LineStart: 4, LineEnd: 6}},
		},
		{
			name: "sections are never merged",
			doc: &parse.Doc{Sections: []parse.Section{
				{Heading: "X", Text: "# X\n\nalpha words here", LineStart: 1, LineEnd: 3},
				{Heading: "Y", Text: "# Y\n\nbeta", LineStart: 4, LineEnd: 6},
			}},
			want: []Chunk{
				{Ordinal: 0, Heading: "X", Text: "# X\n\nalpha words here", LineStart: 1, LineEnd: 3},
				{Ordinal: 1, Heading: "Y", Text: "# Y\n\nbeta", LineStart: 4, LineEnd: 6},
			},
		},
		{
			name: "a bare heading joins its first subsection",
			doc: &parse.Doc{Sections: []parse.Section{
				{Heading: "Guide", Text: "# Guide", LineStart: 1, LineEnd: 1},
				{Heading: "Guide > Install", Text: "## Install\n\nRun it.", LineStart: 3, LineEnd: 5},
				{Heading: "Other", Text: "# Other", LineStart: 7, LineEnd: 7},
			}},
			want: []Chunk{
				{Ordinal: 0, Heading: "Guide > Install", Text: "# Guide\n\n## Install\n\nRun it.", LineStart: 1, LineEnd: 5},
				{Ordinal: 1, Heading: "Other", Text: "# Other", LineStart: 7, LineEnd: 7},
			},
		},
		{
			name: "paragraph boundaries are preferred",
			doc:  &parse.Doc{Sections: []parse.Section{{Text: p1 + "\n\n" + p2 + "\n\n" + p3}}},
			opt:  Options{Target: Approx(p1+" "+p2) + 2, Overlap: -1},
			want: []Chunk{{Ordinal: 0, Text: p1 + "\n\n" + p2}, {Ordinal: 1, Text: p3}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Split(tt.doc, tt.opt)
			for i := range got {
				got[i].Tokens = 0
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got  %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

// TestSplitSentenceOverlap checks that a long paragraph is cut between
// sentences and that the overlap starts at a sentence when one is near.
func TestSplitSentenceOverlap(t *testing.T) {
	var sents []string
	for i := 0; i < 40; i++ {
		sents = append(sents, fmt.Sprintf("Sentence %d has exactly seven words here.", i))
	}
	doc := &parse.Doc{Sections: []parse.Section{{Text: strings.Join(sents, " ")}}}
	chunks := Split(doc, Options{Target: 40, Overlap: 12})
	if len(chunks) < 5 {
		t.Fatalf("%d chunks, want several", len(chunks))
	}
	for i, c := range chunks {
		if !strings.HasPrefix(c.Text, "Sentence ") || !strings.HasSuffix(c.Text, "here.") {
			t.Errorf("chunk %d is not whole sentences: %q", i, c.Text)
		}
	}
}

func TestApprox(t *testing.T) {
	tests := []struct {
		in   string
		want int
	}{
		{"", 0},
		{"one", 1},
		{"three short words", 4},
		{"one two three four five six", 8},
		{strings.Repeat("x", 80), 13}, // 10 word-equivalents
		{"日本語", 4},                    // 3 words
	}
	for _, tt := range tests {
		if got := Approx(tt.in); got != tt.want {
			t.Errorf("Approx(%q) = %d, want %d", tt.in, got, tt.want)
		}
	}
}

package chunk

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	"lore/index/parse"
)

// shape is a pathological document: what minified code, data exports and
// logs look like to the splitter.
type shape struct {
	name string
	make func(size int) string
}

func shapes() []shape {
	return []shape{
		{"one line of prose", func(n int) string {
			// A log or an export on one line: sentences, spaces, no newline.
			return repeatTo(prose(rand.New(rand.NewSource(3)), 400)+" ", n)
		}},
		{"minified", func(n int) string {
			// JSON or JS with no whitespace at all.
			return repeatTo(`{"id":12345,"name":"widget","tags":["a","b"],"ok":true},`, n)
		}},
		{"no whitespace", func(n int) string {
			return noise(rand.New(rand.NewSource(4)), 'a', 26, n)
		}},
		{"1 MB words", func(n int) string {
			rng := rand.New(rand.NewSource(5))
			var b strings.Builder
			for b.Len() < n {
				b.WriteString(noise(rng, 'a', 26, min(1<<20, n-b.Len())))
				b.WriteByte(' ')
			}
			return b.String()
		}},
		{"deep nesting", func(n int) string {
			// Brackets nested n/2 deep: no word boundary anywhere.
			return strings.Repeat("[", n/2) + strings.Repeat("]", n/2)
		}},
		{"deep list", func(n int) string {
			// A Markdown list indented ever deeper, one paragraph of long lines.
			var b strings.Builder
			for i := 0; b.Len() < n; i++ {
				fmt.Fprintf(&b, "%s- item %d\n", strings.Repeat("  ", i%2000), i)
			}
			return b.String()
		}},
		{"short lines", func(n int) string {
			return repeatTo("x\n", n)
		}},
		{"unspaced cjk", func(n int) string {
			return repeatTo(cjk(rand.New(rand.NewSource(6)), 200), n)
		}},
	}
}

func repeatTo(s string, n int) string {
	return strings.Repeat(s, n/len(s)+1)[:n]
}

func shapeDoc(text string) *parse.Doc {
	return &parse.Doc{Sections: []parse.Section{{Text: text, LineStart: 1, LineEnd: 1 + strings.Count(text, "\n")}}}
}

// TestSplitPathological splits each shape at 8 MB. Splitting is linear in
// the input (20-50 MB/s on one core here), so each takes well under a
// second; the bound only turns a quadratic regression (the old splitter took
// 17 s on 1 MB without whitespace, so about 18 minutes on 8 MB) into a
// failure rather than a hung test run. Speeds are BenchmarkSplitPathological's.
func TestSplitPathological(t *testing.T) {
	size := 8 << 20
	if testing.Short() {
		size = 1 << 20
	}
	for _, sh := range shapes() {
		t.Run(sh.name, func(t *testing.T) {
			doc := shapeDoc(sh.make(size))
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			start := time.Now()
			chunks, err := SplitContext(ctx, doc, Options{})
			if err != nil {
				t.Fatalf("not done after %v: %v", time.Since(start), err)
			}
			t.Logf("%d chunks in %v", len(chunks), time.Since(start))
			if len(chunks) == 0 {
				t.Fatal("no chunks")
			}
			for i, c := range chunks {
				if c.Tokens > DefaultTarget {
					t.Fatalf("chunk %d: %d tokens, over the target", i, c.Tokens)
				}
			}
		})
	}
}

// TestSplitCanceled cancels a split from inside its token counter, after a
// few hundred counts: every loop must notice and stop within a few more.
func TestSplitCanceled(t *testing.T) {
	for _, sh := range shapes() {
		t.Run(sh.name, func(t *testing.T) {
			doc := shapeDoc(sh.make(4 << 20))
			ctx, cancel := context.WithCancelCause(context.Background())
			stop := errors.New("over budget")
			calls := 0
			count := func(s string) int {
				if calls++; calls == 300 {
					cancel(stop)
				}
				return Approx(s)
			}
			chunks, err := SplitContext(ctx, doc, Options{Count: count})
			if !errors.Is(err, stop) || chunks != nil {
				t.Fatalf("SplitContext = %d chunks, %v; want none and the cause", len(chunks), err)
			}
			if calls > 310 {
				t.Errorf("%d counts after the cancel, want a few", calls-300)
			}
		})
	}
}

// TestCutRunesMatchesPlainSearch checks the exponential search against the
// plain bisection it replaced, on random words and budgets: the pieces of a
// long word must not change.
func TestCutRunesMatchesPlainSearch(t *testing.T) {
	rng := rand.New(rand.NewSource(8))
	alphabets := []struct {
		first rune
		span  int
	}{{'a', 26}, {0x4E00, 20000}, {0xE9, 3}, {'!', 90}}
	for _, cname := range []string{"approx", "bytes/4"} {
		count := counters()[cname]
		if count == nil {
			count = Approx
		}
		for i := 0; i < 200; i++ {
			var b strings.Builder
			for b.Len() < 1+rng.Intn(20000) {
				a := alphabets[rng.Intn(len(alphabets))]
				b.WriteString(noise(rng, a.first, a.span, 1+rng.Intn(500)))
			}
			text := b.String()
			opt := Options{Target: 8 + rng.Intn(400), Count: count}
			opt.Overlap = rng.Intn(opt.Target / 2)
			s := &splitter{ctx: context.Background(), opt: opt, text: text}
			var got []unit
			s.cutRunes(0, len(text), func(u unit) { got = append(got, u) })
			want := plainCutRunes(text, opt)
			if !slices.Equal(got, want) {
				t.Fatalf("%s: %d bytes, target %d overlap %d: %d pieces, want %d", cname, len(text), opt.Target, opt.Overlap, len(got), len(want))
			}
		}
	}
}

// plainCutRunes is cutRunes as it was: bisect all that is left each time.
func plainCutRunes(text string, opt Options) []unit {
	var out []unit
	budget := opt.Target - opt.Overlap
	for start := 0; start < len(text); {
		var bounds []int
		for i := start; i < len(text); {
			_, n := utf8.DecodeRuneInString(text[i:])
			i += n
			bounds = append(bounds, i)
		}
		k := sort.Search(len(bounds), func(k int) bool { return opt.Count(text[start:bounds[k]]) > budget })
		k = max(k, 1)
		out = append(out, unit{start, bounds[k-1], opt.Count(text[start:bounds[k-1]])})
		start = bounds[k-1]
	}
	return out
}

// TestApproxFastPath checks Approx's byte loop against the rune loop it
// replaced, on text mixing ASCII, Latin-1 and Unicode spaces, CJK and
// invalid UTF-8.
func TestApproxFastPath(t *testing.T) {
	plain := func(s string) int {
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
		return (words*4 + 1) / 3
	}
	pieces := []string{"a", "word", " ", "\t", "\n", "\v", "\f", "\r", "\x1c", "\u0085", "\u00a0", "\u3000", "\u2003",
		"日本", "語", "é", "\xff", "\xe6\x97", "x1234567", ".", "\x00"}
	rng := rand.New(rand.NewSource(9))
	for i := 0; i < 5000; i++ {
		var b strings.Builder
		for n := rng.Intn(40); n > 0; n-- {
			b.WriteString(pieces[rng.Intn(len(pieces))])
		}
		if got, want := Approx(b.String()), plain(b.String()); got != want {
			t.Fatalf("Approx(%q) = %d, rune loop says %d", b.String(), got, want)
		}
	}
}

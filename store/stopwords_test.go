package store

import (
	"context"
	"math"
	"slices"
	"testing"
)

func TestSplitQuery(t *testing.T) {
	for _, tc := range []struct {
		text         string
		words, stops []string
	}{
		{"What happens if the person on duty doesn't answer?", []string{"happens", "person", "duty", "answer"},
			[]string{"what", "if", "the", "on", "doesn", "t"}},
		{"who is it", []string{"who", "is", "it"}, nil}, // only stopwords: they are searched
		{"duty duty the the", []string{"duty"}, []string{"the"}},
		{"", nil, nil},
	} {
		words, stops := splitQuery(tc.text)
		if !slices.Equal(words, tc.words) || !slices.Equal(stops, tc.stops) {
			t.Errorf("splitQuery(%q) = %q, %q; want %q, %q", tc.text, words, stops, tc.words, tc.stops)
		}
	}
}

func TestContentWords(t *testing.T) {
	for _, tc := range []struct {
		text string
		want []string
	}{
		{"The river market opens at dawn.", []string{"river", "market", "opens", "dawn"}},
		{"Boats, boats — and BOATS!", []string{"boats", "boats", "boats"}}, // repeats kept, case folded
		{"who is it", nil}, // unlike QueryWords, stopwords alone are not kept
		{"It doesn't open on day-2 [1].", []string{"open", "day", "2", "1"}},
		{"", nil},
	} {
		if got := ContentWords(tc.text); !slices.Equal(got, tc.want) {
			t.Errorf("ContentWords(%q) = %q, want %q", tc.text, got, tc.want)
		}
	}
}

func TestGetVarint(t *testing.T) {
	for _, tc := range []struct {
		b    []byte
		v    uint64
		read int
	}{
		{[]byte{0x05}, 5, 1},
		{[]byte{0x7f, 0xff}, 127, 1},
		{[]byte{0x81, 0x00}, 128, 2},
		{[]byte{0x87, 0x68}, 1000, 2},
		{[]byte{0x81}, 0, 0}, // cut short
		{nil, 0, 0},
		{[]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, math.MaxUint64, 9},
	} {
		if v, n := getVarint(tc.b); v != tc.v || n != tc.read {
			t.Errorf("getVarint(% x) = %d, %d; want %d, %d", tc.b, v, n, tc.v, tc.read)
		}
	}
}

// TestStopwordWeight checks RankBM25's scores against FTS5's own bm25: each chunk found
// scores its bm25 for the question's other words plus stopWeight times the bm25 of an
// FTS5 query of the stopwords alone, and the order follows those scores.
func TestStopwordWeight(t *testing.T) {
	ctx := context.Background()
	fx := newFixture(t)
	fx.put(t, "oncall.md",
		"If the primary doesn't answer a page within 15 minutes, it goes to the secondary.",
		"The rota is on the wiki: each shift is one week, and the person on duty keeps the pager.")
	fx.put(t, "alerts.md", "Duty alerts: a page for every failed backup.", "Pager noise: flaky disk alerts on the cache.")
	fx.put(t, "misc.md", "What is the answer? It is on the wiki, if anywhere.", "Nothing about duty here, or is there?")
	if _, err := fx.db.w.ExecContext(ctx, `UPDATE chunks SET heading = 'On call > What to do' WHERE ordinal = 0`); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		"What happens if the person on duty doesn't answer an alert?",
		"is the pager on the wiki",
		"duty",            // no stopwords
		"what is it",      // only stopwords: searched as words
		"the the duty of", // a stopword found in no chunk ("of")
	} {
		t.Run(q, func(t *testing.T) {
			words, stops := splitQuery(q)
			got, err := fx.db.RankBM25(ctx, fx.ws.ID, q, 10)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) == 0 {
				t.Fatal("nothing found")
			}
			for i, r := range got {
				want := ftsScore(t, fx, matchExpr(words), r.ChunkID)
				if len(stops) > 0 {
					want += stopWeight * ftsScore(t, fx, matchExpr(stops), r.ChunkID)
				}
				if math.Abs(r.Score-want) > 1e-9*max(1, math.Abs(want)) {
					t.Errorf("chunk %d: score %.12f, want %.12f", r.ChunkID, r.Score, want)
				}
				if i > 0 && (got[i-1].Score < r.Score || got[i-1].Score == r.Score && got[i-1].ChunkID > r.ChunkID) {
					t.Errorf("not ordered at %d: %+v before %+v", i, got[i-1], r)
				}
			}
		})
	}
}

// ftsScore is -bm25 of chunk id under an FTS5 MATCH expression, 0 when it does not match.
func ftsScore(t *testing.T, fx fixture, expr string, id int64) float64 {
	t.Helper()
	var s float64
	err := fx.db.r.QueryRow(`SELECT -bm25(chunks_fts) FROM chunks_fts WHERE chunks_fts MATCH ? AND rowid = ?`, expr, id).Scan(&s)
	if err != nil && err.Error() != "sql: no rows in result set" {
		t.Fatal(err)
	}
	return s
}

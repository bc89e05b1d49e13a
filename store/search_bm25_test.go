package store

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
)

// The search looks words up as the index stores them; the tokenizer it asks must split
// and stem exactly as chunks_fts does.
func TestIndexTokensMatchIndex(t *testing.T) {
	ctx := context.Background()
	fx := newFixture(t)
	var ddl string
	if err := fx.db.r.QueryRowContext(ctx, `SELECT sql FROM sqlite_master WHERE name = 'chunks_fts'`).Scan(&ddl); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(ddl, "'"+ftsTokenize+"'") {
		t.Fatalf("chunks_fts is %s; want tokenize = '%s'", ddl, ftsTokenize)
	}
	text := "Running caresses ponies relational generalizations café NAÏVE Straße 日本語 x²y HTTPServer o'clock v1.2.3 ǅemal"
	fx.put(t, "t.txt", text)
	words := QueryWords(text)
	toks, err := fx.db.terms.tokens(ctx, words)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for i, w := range words {
		if len(toks[i]) == 0 {
			t.Errorf("%q: no tokens", w)
		}
		got = append(got, toks[i]...)
	}
	rows, err := fx.db.r.QueryContext(ctx, `SELECT term FROM chunks_fts_vocab`)
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for rows.Next() {
		var s string
		rows.Scan(&s)
		want = append(want, s)
	}
	rows.Close()
	slices.Sort(got)
	got = slices.Compact(got)
	if !slices.Equal(got, want) {
		t.Errorf("query words tokenized to %q\nindex holds %q", got, want)
	}
	// Cached answers are the same.
	again, err := fx.db.terms.tokens(ctx, words)
	if err != nil || fmt.Sprint(again) != fmt.Sprint(toks) {
		t.Errorf("cached tokens %q, %v; first %q", again, err, toks)
	}
}

// Term statistics are cached until the FTS index changes; every kind of change must be
// seen, including one made through another handle on the same file.
func TestTermStatsFollowIndex(t *testing.T) {
	ctx := context.Background()
	fx := newFixture(t)
	words := []string{"apples", "pears", "kiwis"}
	toks, err := fx.db.terms.tokens(ctx, words)
	if err != nil {
		t.Fatal(err)
	}
	var terms []string
	for _, tk := range toks {
		terms = append(terms, tk[0])
	}
	check := func(step string) {
		t.Helper()
		n, df, err := fx.db.termStats(ctx, terms)
		if err != nil {
			t.Fatal(err)
		}
		var wantN int64
		fx.db.r.QueryRowContext(ctx, `SELECT count(*) FROM chunks`).Scan(&wantN)
		if n != wantN {
			t.Errorf("%s: %d chunks, want %d", step, n, wantN)
		}
		for i, term := range terms {
			var want int64
			fx.db.r.QueryRowContext(ctx, `SELECT count(*) FROM chunks_fts WHERE chunks_fts MATCH ?`, `"`+words[i]+`"`).Scan(&want)
			if df[term] != want {
				t.Errorf("%s: %q in %d chunks, want %d", step, term, df[term], want)
			}
		}
	}
	check("empty")
	fx.put(t, "a.txt", "apples and pears", "apples")
	check("insert")
	check("cached")
	b := fx.put(t, "b.txt", "kiwis")
	check("another document")
	fx.put(t, "a.txt", "pears")
	check("replace")
	fx.put(t, "b.txt", "kiwis")
	check("replace with the same text")
	if err := fx.db.DeleteDocument(ctx, b); err != nil {
		t.Fatal(err)
	}
	check("delete")
	other, err := Open(ctx, fx.db.Path())
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	ows, _ := other.EnsureWorkspace(ctx, "other")
	of, _ := other.AddFolder(ctx, ows.ID, "/o")
	if err := other.ReplaceDocument(ctx, Document{WorkspaceID: ows.ID, FolderID: of.ID, Path: "/o/c.txt", Rel: "c.txt"},
		[]Chunk{{Ordinal: 0, Text: "kiwis apples"}, {Ordinal: 1, Text: "kiwis"}}); err != nil {
		t.Fatal(err)
	}
	check("write through another handle")
	if err := other.DeleteWorkspace(ctx, ows.ID); err != nil {
		t.Fatal(err)
	}
	check("workspace deleted")
}

// Searches running alongside each other and alongside writes share the tokenizer and the
// statistics cache (run with -race).
func TestSearchConcurrent(t *testing.T) {
	ctx := context.Background()
	fx := newFixture(t)
	var texts []string
	for i := range 3000 {
		texts = append(texts, fmt.Sprintf("common words here %d and rare%d", i%7, i%97))
	}
	fx.put(t, "a.txt", texts...)
	errs := make(chan error, 8)
	for g := range 8 {
		go func() {
			var err error
			for i := range 40 {
				q := fmt.Sprintf("common words rare%d %d word%d", (g*40+i)%97, i%7, g)
				var hits []Hit
				if hits, err = fx.db.SearchBM25(ctx, fx.ws.ID, q, 10); err != nil {
					break
				}
				if len(hits) == 0 {
					err = fmt.Errorf("%q: no hits", q)
					break
				}
			}
			errs <- err
		}()
	}
	for i := range 5 {
		fx.put(t, fmt.Sprintf("b%d.txt", i), "common rare1 rare2 more words", "other text")
	}
	for range 8 {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
}

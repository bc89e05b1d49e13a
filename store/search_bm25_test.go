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
	words := queryWords(text)
	toks, err := indexTokens.tokens(ctx, words)
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
	again, err := indexTokens.tokens(ctx, words)
	if err != nil || fmt.Sprint(again) != fmt.Sprint(toks) {
		t.Errorf("cached tokens %q, %v; first %q", again, err, toks)
	}
	t.Logf("%q -> %q", words, toks)
}

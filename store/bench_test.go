package store

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

// BenchmarkSearchBM25 searches 20,000 chunks of 60 words drawn from a Zipf-like
// vocabulary, so common words match most chunks, as in real text.
func BenchmarkSearchBM25(b *testing.B) {
	ctx := context.Background()
	db, err := Open(ctx, b.TempDir()+"/bench.db")
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	ws, _ := db.EnsureWorkspace(ctx, "b")
	f, _ := db.AddFolder(ctx, ws.ID, "/b")
	common := strings.Fields("the of and to in is that it for was on with as by this are what how")
	rng := rand.New(rand.NewPCG(1, 2))
	zipf := rand.NewZipf(rng, 1.1, 1, 5000)
	word := func() string {
		if rng.IntN(3) == 0 {
			return common[rng.IntN(len(common))]
		}
		return fmt.Sprintf("w%d", zipf.Uint64())
	}
	for d := range 1000 {
		cs := make([]Chunk, 20)
		for i := range cs {
			ws := make([]string, 60)
			for j := range ws {
				ws[j] = word()
			}
			cs[i] = Chunk{Ordinal: i, Text: strings.Join(ws, " ")}
		}
		doc := Document{WorkspaceID: ws.ID, FolderID: f.ID, Path: fmt.Sprintf("/b/%d.txt", d), Rel: "x"}
		if err := db.ReplaceDocument(ctx, doc, cs); err != nil {
			b.Fatal(err)
		}
	}
	for _, q := range []string{
		"what is the w7 of w300 and how does it work",
		"w4000 w4500",
	} {
		b.Run(q, func(b *testing.B) {
			for b.Loop() {
				if _, err := db.SearchBM25(ctx, ws.ID, q, 20); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	// The same question with its common words left in, as a raw OR query.
	raw := `"what" OR "is" OR "the" OR "w7" OR "of" OR "w300" OR "and" OR "how" OR "does" OR "it" OR "work"`
	b.Run("unfiltered", func(b *testing.B) {
		for b.Loop() {
			rows, err := db.r.QueryContext(ctx, `SELECT rowid FROM chunks_fts WHERE chunks_fts MATCH ? ORDER BY bm25(chunks_fts) LIMIT 20`, raw)
			if err != nil {
				b.Fatal(err)
			}
			for rows.Next() {
			}
			rows.Close()
		}
	})
}

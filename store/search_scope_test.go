package store_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"

	"lore/store"
)

// scopeCorpus fills a workspace with chunks of filler words, into which adds are mixed:
// chunk i gets the words adds(i) returns. Chunks go in documents of 100.
func scopeCorpus(t *testing.T, db *store.DB, name string, chunks int, seed uint64, adds func(i int) []string) int64 {
	t.Helper()
	ctx := context.Background()
	ws, err := db.EnsureWorkspace(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	root := "/" + name
	f, err := db.AddFolder(ctx, ws.ID, root)
	if err != nil {
		t.Fatal(err)
	}
	filler := strings.Fields("lorem ipsum dolor sit amet consectetur adipiscing elit sed eiusmod tempor incididunt labore dolore magna aliqua enim minim veniam quis nostrud exercitation ullamco laboris nisi aliquip commodo consequat")
	r := rand.New(rand.NewPCG(seed, 7))
	for d := 0; d*100 < chunks; d++ {
		var cs []store.Chunk
		for i := d * 100; i < min(chunks, (d+1)*100); i++ {
			words := adds(i)
			for range 5 + r.IntN(40) {
				words = append(words, filler[r.IntN(len(filler))])
			}
			r.Shuffle(len(words), func(a, b int) { words[a], words[b] = words[b], words[a] })
			cs = append(cs, store.Chunk{Ordinal: len(cs), Text: strings.Join(words, " ")})
		}
		rel := fmt.Sprintf("d%d.txt", d)
		if err := db.ReplaceDocument(ctx, store.Document{WorkspaceID: ws.ID, FolderID: f.ID, Path: root + "/" + rel, Rel: rel}, cs); err != nil {
			t.Fatal(err)
		}
	}
	return ws.ID
}

// A workspace's search keeps to it, and ranks as the straightforward query does, when
// another workspace sharing the FTS index has many more and better matches: the ranking
// inside FTS5 must look deeper, or rank only the workspace's matches.
func TestSearchScopeWhenOthersDominate(t *testing.T) {
	ctx := context.Background()
	for _, others := range []int{0, 8, 150, 3000} {
		t.Run(fmt.Sprint(others), func(t *testing.T) {
			db, err := store.Open(ctx, filepath.Join(t.TempDir(), "lore.db"))
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			// Few matches here, each once in a longer chunk; the other workspace's
			// chunks hold the word three times in shorter ones, so they all rank first.
			mine := scopeCorpus(t, db, "mine", 300, 1, func(i int) []string {
				if i%10 == 0 {
					return []string{"zeta", "lorem", "ipsum", "dolor", "sit", "amet"}
				}
				return nil
			})
			scopeCorpus(t, db, "others", others, 2, func(int) []string { return []string{"zeta", "zeta", "zeta"} })
			want, err := db.SearchBM25Reference(ctx, mine, "zeta", 50)
			if err != nil {
				t.Fatal(err)
			}
			if len(want) != 30 {
				t.Fatalf("reference found %d chunks, want 30", len(want))
			}
			for _, limit := range []int{1, 5, 30, 50} {
				got, err := db.SearchBM25(ctx, mine, "zeta", limit)
				if err != nil {
					t.Fatal(err)
				}
				if want := min(limit, 30); len(got) != want {
					t.Errorf("limit %d: %d hits, want %d", limit, len(got), want)
				}
				for _, h := range got {
					if !strings.HasPrefix(h.Path, "/mine/") {
						t.Errorf("limit %d: hit from another workspace: %s", limit, h.Path)
					}
				}
				if d := sameTop(want, got, limit, scorer(db, mine, "zeta")); d != "" {
					t.Errorf("limit %d: %s", limit, d)
				}
			}
		})
	}
}

// When a common word is scored only in chunks that hold a rarer word, chunks that hold
// only the common word must still come back when there are too few of the others, as
// they do from the straightforward query: here the rare word is common enough across
// the index to plan that, but not in this workspace.
func TestSearchCommonWordOnlyChunksStay(t *testing.T) {
	ctx := context.Background()
	db, err := store.Open(ctx, filepath.Join(t.TempDir(), "lore.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	// omega is in 38% of all chunks, sigma in 7%, but only 3 of this workspace's.
	mine := scopeCorpus(t, db, "mine", 500, 1, func(i int) []string {
		switch {
		case i < 3:
			return []string{"sigma"}
		case i%10 < 3:
			return []string{"omega"}
		}
		return nil
	})
	others := scopeCorpus(t, db, "others", 2500, 2, func(i int) []string {
		var w []string
		if i%5 < 2 {
			w = append(w, "omega")
		}
		if i%12 == 0 {
			w = append(w, "sigma")
		}
		return w
	})
	_, rare, common, _ := db.Plan(ctx, []string{"sigma", "omega"}, 10)
	if fmt.Sprint(rare, common) != "[sigma] [omega]" {
		t.Fatalf("plan: rare %q, common %q; want sigma scored in full and omega only with it", rare, common)
	}
	for _, ws := range []int64{mine, others} {
		want, err := db.SearchBM25Reference(ctx, ws, "sigma omega", 50)
		if err != nil {
			t.Fatal(err)
		}
		for _, limit := range []int{3, 10, 50} {
			got, err := db.SearchBM25(ctx, ws, "sigma omega", limit)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != limit {
				t.Errorf("workspace %d, limit %d: %d hits", ws, limit, len(got))
			}
			if d := sameTop(want, got, limit, scorer(db, ws, "sigma omega")); d != "" {
				t.Errorf("workspace %d, limit %d: %s", ws, limit, d)
			}
		}
	}
}

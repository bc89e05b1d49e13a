package sample

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"

	"lore/index/ingest"
	"lore/index/parse"
	"lore/store"
)

type query struct {
	Query    string   `json:"query"`
	Relevant []string `json:"relevant"`
}

func readQueries(t *testing.T) []query {
	t.Helper()
	var qs []query
	sc := bufio.NewScanner(bytes.NewReader(Queries()))
	for n := 1; sc.Scan(); n++ {
		dec := json.NewDecoder(bytes.NewReader(sc.Bytes()))
		dec.DisallowUnknownFields()
		var q query
		if err := dec.Decode(&q); err != nil {
			t.Fatalf("queries.jsonl line %d: %v", n, err)
		}
		if strings.TrimSpace(q.Query) == "" || len(q.Relevant) == 0 {
			t.Fatalf("queries.jsonl line %d: needs a query and at least one relevant path", n)
		}
		qs = append(qs, q)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return qs
}

// corpusFiles writes the corpus to a temporary folder and returns it with the
// slash-separated relative paths of its files.
func corpusFiles(t *testing.T) (string, map[string]bool) {
	t.Helper()
	dir := t.TempDir()
	if err := WriteCorpus(dir); err != nil {
		t.Fatal(err)
	}
	rels := map[string]bool{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		rels[filepath.ToSlash(rel)] = true
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return dir, rels
}

func TestCorpus(t *testing.T) {
	dir, rels := corpusFiles(t)
	if len(rels) < 25 {
		t.Fatalf("corpus has %d files, want at least 25", len(rels))
	}
	var total int64
	exts := map[string]int{}
	for rel := range rels {
		b, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(rel)))
		if err != nil {
			t.Fatal(err)
		}
		total += int64(len(b))
		exts[path.Ext(rel)]++
		if w := len(strings.Fields(string(b))); w < 150 || w > 900 {
			t.Errorf("%s: %d words, want 150-900", rel, w)
		}
		want, err := files.ReadFile("corpus/" + rel)
		if err != nil || !bytes.Equal(b, want) {
			t.Errorf("%s: written content differs from the embedded file (%v)", rel, err)
		}
	}
	if total > 200<<10 {
		t.Errorf("corpus is %d bytes, want under 200 KiB", total)
	}
	for _, ext := range []string{".md", ".txt", ".html", ".go"} {
		if exts[ext] == 0 {
			t.Errorf("no %s file in the corpus", ext)
		}
	}

	// Writing again over the same folder succeeds and leaves files alone.
	p := filepath.Join(dir, "handbook", "holidays.md")
	before, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := WriteCorpus(dir); err != nil {
		t.Fatal(err)
	}
	after, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	if !after.ModTime().Equal(before.ModTime()) {
		t.Error("WriteCorpus rewrote an unchanged file")
	}
}

func TestQueries(t *testing.T) {
	_, rels := corpusFiles(t)
	qs := readQueries(t)
	if len(qs) < 40 {
		t.Fatalf("%d queries, want at least 40", len(qs))
	}
	seen := map[string]bool{}
	cited := map[string]bool{}
	multi := 0
	for _, q := range qs {
		key := strings.ToLower(strings.Join(strings.Fields(q.Query), " "))
		if seen[key] {
			t.Errorf("duplicate query %q", q.Query)
		}
		seen[key] = true
		if len(q.Relevant) > 1 {
			multi++
		}
		dup := map[string]bool{}
		for _, r := range q.Relevant {
			if r != path.Clean(r) || strings.Contains(r, `\`) || path.IsAbs(r) || strings.HasPrefix(r, "../") {
				t.Errorf("query %q: relevant path %q is not a clean relative slash path", q.Query, r)
			}
			if !rels[r] {
				t.Errorf("query %q: relevant path %q is not in the corpus", q.Query, r)
			}
			if dup[r] {
				t.Errorf("query %q: %q listed twice", q.Query, r)
			}
			dup[r] = true
			cited[r] = true
		}
	}
	if multi < 3 {
		t.Errorf("%d queries with several relevant documents, want at least 3", multi)
	}
	t.Logf("%d queries over %d documents; %d documents cited; %d queries with several relevant documents",
		len(qs), len(rels), len(cited), multi)
}

// TestBM25Recall indexes the corpus with the real parser, chunker and store,
// BM25 only, and measures document-level retrieval quality over the labelled
// queries (a document's rank is that of its best chunk). Measured when the
// floor was set, 171 chunks at default options: recall@5 0.833, recall@20
// 0.957, MRR 0.779 over 69 queries. Many queries are deliberate paraphrases
// that BM25 is expected to miss (run with -v to list them); the floor catches
// regressions in parsing, chunking or the BM25 query, and is not a target to
// tune the questions towards.
func TestBM25Recall(t *testing.T) {
	ctx := context.Background()
	dir, rels := corpusFiles(t)
	db, err := store.Open(ctx, filepath.Join(t.TempDir(), "lore.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	p := parse.New(parse.Options{})
	defer p.Close()
	ix := &ingest.Indexer{DB: db, Parser: p}
	sum, err := ix.Run(ctx, "default", []string{dir}, ingest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(sum.Errors) > 0 || sum.Indexed != len(rels) {
		t.Fatalf("indexed %d of %d files, errors %v", sum.Indexed, len(rels), sum.Errors)
	}
	ws, err := db.EnsureWorkspace(ctx, "default")
	if err != nil {
		t.Fatal(err)
	}

	qs := readQueries(t)
	var r5, r20, mrr float64
	for _, q := range qs {
		// Enough chunks to rank every document that matches at all.
		hits, err := db.SearchBM25(ctx, ws.ID, q.Query, 1000)
		if err != nil {
			t.Fatal(err)
		}
		var docs []string
		seen := map[string]bool{}
		for _, h := range hits {
			d := filepath.ToSlash(h.Rel)
			if !seen[d] {
				seen[d] = true
				docs = append(docs, d)
			}
		}
		rel := map[string]bool{}
		for _, r := range q.Relevant {
			rel[r] = true
		}
		recall := func(k int) float64 {
			n := 0
			for _, d := range docs[:min(k, len(docs))] {
				if rel[d] {
					n++
				}
			}
			return float64(n) / float64(len(rel))
		}
		r5 += recall(5)
		r20 += recall(20)
		rank := 0
		for i, d := range docs {
			if rel[d] {
				rank = i + 1
				mrr += 1 / float64(rank)
				break
			}
		}
		if testing.Verbose() && recall(5) < 1 {
			t.Logf("missed at 5 (first relevant at rank %d): %q", rank, q.Query)
		}
	}
	n := float64(len(qs))
	r5, r20, mrr = r5/n, r20/n, mrr/n
	t.Logf("BM25, %d chunks, %d queries: recall@5 %.3f, recall@20 %.3f, MRR %.3f", sum.Chunks, len(qs), r5, r20, mrr)
	if r5 < 0.7 {
		t.Errorf("BM25 recall@5 = %.3f, want at least 0.7", r5)
	}
}

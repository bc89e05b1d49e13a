package retrieve

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"lore/store"
)

// BenchmarkRetrieval measures search on a synthetic corpus: BM25 alone (the
// store call), the vector index alone, and the whole hybrid search with the
// query embedding cached. LORE_BENCH_CHUNKS sets the corpus size (default
// 10,000); LORE_BENCH_VECTORS=0 leaves out embeddings (BM25 only, faster to
// set up at 100k). Per-query percentiles are reported as metrics.
//
//	go test ./index/retrieve -run '^$' -bench Retrieval -benchtime 300x
func BenchmarkRetrieval(b *testing.B) {
	n := 10000
	if s := os.Getenv("LORE_BENCH_CHUNKS"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil {
			b.Fatal(err)
		}
		n = v
	}
	var emb Embedder = HashEmbedder{Dim: 384}
	if os.Getenv("LORE_BENCH_VECTORS") == "0" {
		emb = nil
	}
	ctx := context.Background()
	dir := b.TempDir()
	db, err := store.Open(ctx, filepath.Join(dir, "bench.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	start := time.Now()
	ws, err := BenchCorpus(ctx, db, CorpusConfig{Chunks: n, Seed: 1, Embedder: emb})
	if err != nil {
		b.Fatal(err)
	}
	b.Logf("corpus: %d chunks in %s", n, time.Since(start).Round(time.Millisecond))
	r := New(db, filepath.Join(dir, "vectors"), emb)
	defer r.Close()
	queries := BenchQueries(300, 2)
	rep, err := Bench(ctx, r, ws, queries, Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Logf("Bench: %s", rep)

	run := func(name string, fn func(q string) error) {
		b.Run(name, func(b *testing.B) {
			var lat []time.Duration
			i := 0
			for b.Loop() {
				q := queries[i%len(queries)]
				i++
				s := time.Now()
				if err := fn(q); err != nil {
					b.Fatal(err)
				}
				lat = append(lat, time.Since(s))
			}
			l := summarise(lat)
			b.ReportMetric(float64(l.P50)/1e6, "p50-ms")
			b.ReportMetric(float64(l.P95)/1e6, "p95-ms")
		})
	}
	run("bm25", func(q string) error {
		_, err := db.SearchBM25(ctx, ws, q, defaultCandidates)
		return err
	})
	if emb == nil {
		return
	}
	v := r.state(ws, emb.ID()).view()
	run("vector", func(q string) error {
		qv, _, err := r.embedQuery(ctx, normalize(q))
		v.idx.Search(qv, defaultCandidates)
		return err
	})
	run("hybrid", func(q string) error {
		_, err := r.Search(ctx, ws, q, Options{NoCache: true})
		return err
	})
}

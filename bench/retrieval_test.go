package bench

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"lore/index/retrieve"
	"lore/store"
)

// BenchmarkRetrieval measures search on a synthetic corpus: BM25 alone (the
// store call), the vector index alone, and the whole hybrid search with the
// query embedding cached. LORE_BENCH_CHUNKS sets the corpus size (default
// 10,000); LORE_BENCH_VECTORS=0 leaves out embeddings (BM25 only, faster to
// set up at 100k). Per-query percentiles are reported as metrics.
//
//	go test ./bench -run '^$' -bench Retrieval -benchtime 300x
func BenchmarkRetrieval(b *testing.B) {
	var emb retrieve.Embedder = HashEmbedder{Dim: 384}
	if os.Getenv("LORE_BENCH_VECTORS") == "0" {
		emb = nil
	}
	ctx := context.Background()
	db, ws, r := benchRetriever(b, 10000, emb)
	queries := Queries(300, 2)
	rep, err := Retrieval(ctx, r, ws, queries, retrieve.Options{})
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
		_, err := db.SearchBM25(ctx, ws, q, 50)
		return err
	})
	if emb == nil {
		return
	}
	run("hybrid", func(q string) error {
		_, err := r.Search(ctx, ws, q, retrieve.Options{NoCache: true})
		return err
	})
}

// BenchmarkRefreshAfterEdit measures bringing a built vector index up to
// date after a small edit (a few chunks re-embedded), as the watcher does on
// every save. LORE_BENCH_CHUNKS
// sets the corpus size (default 30,000).
//
//	go test ./bench -run '^$' -bench RefreshAfterEdit -benchtime 20x
func BenchmarkRefreshAfterEdit(b *testing.B) {
	emb := HashEmbedder{Dim: 384}
	ctx := context.Background()
	db, ws, r := benchRetriever(b, 30000, emb)
	if err := r.Refresh(ctx, ws); err != nil {
		b.Fatal(err)
	}
	ids, err := db.VectorIDs(ctx, ws, emb.ID())
	if err != nil {
		b.Fatal(err)
	}
	i := 0
	for b.Loop() {
		b.StopTimer()
		var edit []store.Embedding
		for range 8 {
			vec, err := emb.Embed(ctx, []string{"edited " + strconv.Itoa(i)})
			if err != nil {
				b.Fatal(err)
			}
			edit = append(edit, store.Embedding{ChunkID: ids[(i*7919)%len(ids)], Vec: vec[0]})
			i++
		}
		if err := db.PutEmbeddings(ctx, emb.ID(), edit); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		if err := r.Refresh(ctx, ws); err != nil {
			b.Fatal(err)
		}
	}
}

// benchRetriever builds a BenchCorpus of LORE_BENCH_CHUNKS chunks (default n)
// embedded by emb, in a folder removed after the benchmark.
func benchRetriever(b *testing.B, n int, emb retrieve.Embedder) (*store.DB, int64, *retrieve.Retriever) {
	b.Helper()
	if s := os.Getenv("LORE_BENCH_CHUNKS"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil {
			b.Fatal(err)
		}
		n = v
	}
	ctx := context.Background()
	dir := b.TempDir()
	db, err := store.Open(ctx, filepath.Join(dir, "bench.db"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { db.Close() })
	start := time.Now()
	ws, err := Corpus(ctx, db, CorpusConfig{Chunks: n, Seed: 1, Embedder: emb})
	if err != nil {
		b.Fatal(err)
	}
	b.Logf("corpus: %d chunks in %s", n, time.Since(start).Round(time.Millisecond))
	r := retrieve.New(db, filepath.Join(dir, "vectors"), emb)
	b.Cleanup(func() { r.Close() })
	return db, ws, r
}

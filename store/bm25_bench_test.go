package store_test

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"lore/index/retrieve"
	"lore/store"
)

// benchDB opens a BenchCorpus of n chunks (seed 1) in workspace "bench", built once and
// kept under LORE_BM25_BENCH_DIR (default: the OS temp dir) for the next run.
func benchDB(t testing.TB, n int) (*store.DB, int64) {
	t.Helper()
	ctx := context.Background()
	dir := os.Getenv("LORE_BM25_BENCH_DIR")
	if dir == "" {
		dir = filepath.Join(os.TempDir(), "lore-bm25-bench")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, fmt.Sprintf("corpus-%d-seed1.db", n))
	if _, err := os.Stat(path); err != nil {
		tmp := path + ".building"
		for _, p := range []string{tmp, tmp + "-wal", tmp + "-shm"} {
			os.Remove(p)
		}
		db, err := store.Open(ctx, tmp)
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		if _, err := retrieve.BenchCorpus(ctx, db, retrieve.CorpusConfig{Chunks: n, Seed: 1}); err != nil {
			t.Fatal(err)
		}
		db.Close()
		if err := os.Rename(tmp, path); err != nil {
			t.Fatal(err)
		}
		t.Logf("built %s in %s", path, time.Since(start).Round(time.Second))
	}
	db, err := store.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	ws, err := db.EnsureWorkspace(ctx, "bench")
	if err != nil {
		t.Fatal(err)
	}
	return db, ws.ID
}

// TestBM25Latency compares SearchBM25 with the straightforward query it replaced
// (SearchBM25Reference), on BenchCorpus corpora, 50 hits a query as the retriever asks:
//
//	LORE_BM25_BENCH=10000,100000 go test ./store/ -run TestBM25Latency -v -timeout 60m
//
// Each query runs once per variant to warm caches, then both are timed, alternating.
// CPU is the calling thread's user+system time (SQLite runs on it).
func TestBM25Latency(t *testing.T) {
	sizes := os.Getenv("LORE_BM25_BENCH")
	if sizes == "" {
		t.Skip("set LORE_BM25_BENCH=10000,100000 to run")
	}
	nq := 200
	if s := os.Getenv("LORE_BM25_QUERIES"); s != "" {
		nq, _ = strconv.Atoi(s)
	}
	ctx := context.Background()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	for _, s := range strings.Split(sizes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil {
			t.Fatal(err)
		}
		db, ws := benchDB(t, n)
		queries := retrieve.BenchQueries(nq, 2)
		type variant struct {
			name string
			fn   func(context.Context, int64, string, int) ([]store.Hit, error)
			wall []time.Duration
			cpu  time.Duration
		}
		vs := []*variant{{name: "before", fn: db.SearchBM25Reference}, {name: "after", fn: db.SearchBM25}}
		for _, v := range vs {
			for _, q := range queries {
				if _, err := v.fn(ctx, ws, q, 50); err != nil {
					t.Fatal(err)
				}
			}
		}
		agree := 0
		for i, q := range queries {
			var res [2][]store.Hit
			for j := range vs {
				v := vs[(i+j)%2]
				c0, w0 := threadCPU(), time.Now()
				hits, err := v.fn(ctx, ws, q, 50)
				v.wall = append(v.wall, time.Since(w0))
				v.cpu += threadCPU() - c0
				if err != nil {
					t.Fatal(err)
				}
				res[(i+j)%2] = hits
			}
			deep, err := db.SearchBM25Reference(ctx, ws, q, 1000) // to check ties at the cut
			if err != nil {
				t.Fatal(err)
			}
			if d := sameTop(deep, res[1], 10); d == "" {
				agree++
			} else if testing.Verbose() && i < 10 {
				t.Logf("%q: %s", q, d)
			}
		}
		for _, v := range vs {
			t.Logf("%7d chunks, %s: %s  cpu/query %.2fms", n, v.name, latency(v.wall), float64(v.cpu)/float64(len(queries))/1e6)
		}
		t.Logf("%7d chunks: top-10 the same (ties aside) for %d of %d queries", n, agree, len(queries))
	}
}

func threadCPU() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(1 /* RUSAGE_THREAD */, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func latency(ds []time.Duration) string {
	s := slices.Clone(ds)
	slices.Sort(s)
	var sum time.Duration
	for _, d := range s {
		sum += d
	}
	at := func(p float64) float64 { return float64(s[min(len(s)-1, int(p*float64(len(s))))]) / 1e6 }
	return fmt.Sprintf("p50 %7.2fms  p95 %7.2fms  p99 %7.2fms  mean %7.2fms", at(.5), at(.95), at(.99), float64(sum)/float64(len(s))/1e6)
}

// sameTop says how got's first k hits differ from want's, or "" when they agree: the same
// scores in the same order, give or take what FTS5's IDF floor for words in half the
// chunks (1e-6 each) can move, and each of got's chunks found in want with its score
// (chunks with equal scores come in either order, so want should reach well beyond k).
// Hits in want with about that floor as score stand for chunks that matched only such
// words; got may leave them out.
func sameTop(want, got []store.Hit, k int) string {
	const eps = 1e-4
	for i := range min(k, max(len(want), len(got))) {
		switch {
		case i >= len(want):
			return fmt.Sprintf("extra hit %d: %+v", i, got[i])
		case i >= len(got):
			if want[i].Score > eps {
				return fmt.Sprintf("missing hit %d: chunk %d, score %g", i, want[i].ChunkID, want[i].Score)
			}
		case math.Abs(want[i].Score-got[i].Score) > eps:
			return fmt.Sprintf("hit %d: chunk %d score %g, want chunk %d score %g", i, got[i].ChunkID, got[i].Score, want[i].ChunkID, want[i].Score)
		case slices.ContainsFunc(got[:i], func(h store.Hit) bool { return h.ChunkID == got[i].ChunkID }):
			return fmt.Sprintf("hit %d: chunk %d twice", i, got[i].ChunkID)
		case want[i].ChunkID != got[i].ChunkID:
			if !slices.ContainsFunc(want, func(h store.Hit) bool {
				return h.ChunkID == got[i].ChunkID && math.Abs(h.Score-got[i].Score) <= eps
			}) {
				return fmt.Sprintf("hit %d: chunk %d, want chunk %d (score %g)", i, got[i].ChunkID, want[i].ChunkID, want[i].Score)
			}
		}
	}
	return ""
}

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

	"lore/bench"
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
		if _, err := bench.Corpus(ctx, db, bench.CorpusConfig{Chunks: n, Seed: 1}); err != nil {
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

// SearchBM25 must rank as the straightforward query does, on a corpus whose common words
// are in most chunks, as in real text: the same hits in the same order with the same
// scores, except chunks that hold nothing but words found in half the chunks or more.
func TestSearchBM25MatchesReference(t *testing.T) {
	ctx := context.Background()
	db, err := store.Open(ctx, filepath.Join(t.TempDir(), "lore.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ws, err := bench.Corpus(ctx, db, bench.CorpusConfig{Chunks: 3000, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	// Another workspace shares the FTS index (and its statistics).
	if _, err := bench.Corpus(ctx, db, bench.CorpusConfig{Workspace: "other", Chunks: 1000, Seed: 4}); err != nil {
		t.Fatal(err)
	}
	queries := append(bench.Queries(60, 5),
		"kalo",                 // in every chunk, alone
		"kalo lolo milo",       // only common words
		"kalo zzzunknownword",  // a common word and one found nowhere
		"the of and",           // only stopwords
		"what is kalo? lomi!",  // a common word and one in under half the chunks
		`"kalo" OR lomi* NEAR`, // FTS syntax stays text
	)
	var dropped, split int
	for _, q := range queries {
		words, _, common, _ := db.Plan(ctx, store.QueryWords(q), 10)
		if len(words) < len(store.QueryWords(q)) {
			dropped++
		}
		if len(common) > 0 {
			split++
		}
		want, err := db.SearchBM25Reference(ctx, ws, q, 50)
		if err != nil {
			t.Fatal(err)
		}
		for _, limit := range []int{1, 10, 50} {
			got, err := db.SearchBM25(ctx, ws, q, limit)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) > limit {
				t.Errorf("%q, limit %d: %d hits", q, limit, len(got))
			}
			if d := sameTop(want, got, limit, scorer(db, ws, q)); d != "" {
				t.Errorf("%q, limit %d: %s", q, limit, d)
			}
		}
	}
	// Both shortcuts were taken, or this test tests less than it says.
	if dropped < 10 || split < 5 {
		t.Errorf("of %d queries, %d left words out and %d split common words; want at least 10 and 5", len(queries), dropped, split)
	}
}

// BenchmarkBM25Latency compares SearchBM25 with the straightforward query it replaced
// (SearchBM25Reference), on bench.Corpus corpora, 50 hits a query as the retriever asks,
// and prints the figures (a benchmark, not a test: speed goals are not asserted):
//
//	LORE_BM25_BENCH=10000,100000 go test ./store/ -run '^$' -bench BM25Latency -benchtime 1x -v -timeout 60m
//
// Each query runs once per variant to warm caches, then each variant is timed over all
// queries, twice, alternating.
// CPU is the calling thread's user+system time (SQLite runs on it).
func BenchmarkBM25Latency(t *testing.B) {
	sizes := os.Getenv("LORE_BM25_BENCH")
	if sizes == "" {
		sizes = "10000"
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
		queries := bench.Queries(nq, 2)
		type variant struct {
			name string
			fn   func(context.Context, int64, string, int) ([]store.Hit, error)
			wall []time.Duration
			cpu  time.Duration
		}
		vs := []*variant{{name: "before", fn: db.SearchBM25Reference}, {name: "after", fn: db.SearchBM25}}
		if os.Getenv("LORE_BM25_ABLATION") != "" {
			// Parts of "after": ranking inside FTS5 first (a); also leaving out words in
			// half the chunks (a+b); "after" also scores other common words only where
			// a rarer word is.
			rankFirst := func(ctx context.Context, ws int64, words []string) ([]store.Hit, error) {
				rs, err := store.RankFirst(db, ctx, ws, 50, store.MatchExpr(words))
				if err != nil {
					return nil, err
				}
				var ids []int64
				for _, r := range rs {
					ids = append(ids, r.ChunkID)
				}
				return db.ChunkTexts(ctx, ids)
			}
			vs = append(vs, &variant{name: "(a)", fn: func(ctx context.Context, ws int64, q string, _ int) ([]store.Hit, error) {
				return rankFirst(ctx, ws, store.QueryWords(q))
			}}, &variant{name: "(a)+(b)", fn: func(ctx context.Context, ws int64, q string, _ int) ([]store.Hit, error) {
				words, _, _, _ := db.Plan(ctx, store.QueryWords(q), 50)
				return rankFirst(ctx, ws, words)
			}})
		}
		for _, v := range vs {
			for _, q := range queries {
				if _, err := v.fn(ctx, ws, q, 50); err != nil {
					t.Fatal(err)
				}
			}
		}
		// Blocks of queries per variant, alternating, so that neither runs on pages
		// the other just evicted from SQLite's cache more than once per block.
		res := make([][][]store.Hit, len(vs))
		for round := range 2 {
			for j, v := range vs {
				for _, q := range queries {
					c0, w0 := threadCPU(), time.Now()
					hits, err := v.fn(ctx, ws, q, 50)
					v.wall = append(v.wall, time.Since(w0))
					v.cpu += threadCPU() - c0
					if err != nil {
						t.Fatal(err)
					}
					if round == 0 {
						res[j] = append(res[j], hits)
					}
				}
			}
		}
		agree := 0
		for i, q := range queries {
			want, err := db.SearchBM25Reference(ctx, ws, q, 50)
			if err != nil {
				t.Fatal(err)
			}
			if d := sameTop(want, res[1][i], 50, scorer(db, ws, q)); d == "" {
				agree++
			} else {
				t.Errorf("%q: %s", q, d)
			}
		}
		for _, v := range vs {
			t.Logf("%7d chunks, %-7s %s  cpu/query %.2fms", n, v.name, latency(v.wall), float64(v.cpu)/float64(len(v.wall))/1e6)
		}
		t.Logf("%7d chunks: after's 50 hits the same as before's (ties aside) for %d of %d queries", n, agree, len(queries))
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
// chunks (1e-6 each) can move, each chunk once, and each with its own score as score
// (the straightforward query's) reports it. Chunks with equal scores may come in any
// order, so got's chunks need not be want's. Hits in want with about that floor as score
// stand for chunks that matched only such words; got may leave them out.
func sameTop(want, got []store.Hit, k int, score func(chunkID int64) (float64, bool, error)) string {
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
			s, ok, err := score(got[i].ChunkID)
			if err != nil {
				return err.Error()
			}
			if !ok || math.Abs(s-got[i].Score) > eps {
				return fmt.Sprintf("hit %d: chunk %d with score %g; its own is %g (found: %v)", i, got[i].ChunkID, got[i].Score, s, ok)
			}
		}
	}
	return ""
}

// scorer reports chunks' scores under the straightforward query for sameTop.
func scorer(db *store.DB, ws int64, q string) func(int64) (float64, bool, error) {
	return func(id int64) (float64, bool, error) { return db.ReferenceScore(context.Background(), ws, q, id) }
}

package bench

import (
	"lore/index/vector"

	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"
)

// Clustered returns n unit vectors shaped like text embeddings rather than
// uniform noise: Gaussian blobs around random centres (about one per 100
// vectors, at most 150), then normalised. The same seed gives the same
// VectorConfig describes one retrieval benchmark.
type VectorConfig struct {
	N       int            // corpus size
	Dim     int            // vector length; 0 means 384
	Queries int            // number of queries; 0 means 300
	K       int            // results per query; 0 means 10
	Seed    uint64         // corpus and query seed
	Options vector.Options // HNSW parameters; zero fields mean the defaults
	Sweep   []int          // further efSearch values to measure on the same graph
	SaveDir string         // if set, also time SaveFile and LoadFile of the HNSW there
}

// Latency summarises per-query search times.
type Latency struct {
	P50, P95, P99, Mean time.Duration
}

func (l Latency) String() string {
	return fmt.Sprintf("p50 %s  p95 %s  p99 %s  mean %s", fmtMs(l.P50), fmtMs(l.P95), fmtMs(l.P99), fmtMs(l.Mean))
}

func fmtMs(d time.Duration) string { return fmt.Sprintf("%.3fms", float64(d)/1e6) }

// VectorResult holds what Bench measured.
type VectorResult struct {
	N, Dim, Queries, K int
	Options            vector.Options // HNSW parameters used
	Build              time.Duration  // HNSW build (AddBatch) wall time
	HNSW, Exact        Latency
	Recall             float64 // mean recall@K of HNSW against Exact
	Sweep              []SweepPoint
	Save, Load         time.Duration // SaveFile and LoadFile (checksum verified), if SaveDir was set
	FileBytes          int64
}

// SweepPoint is HNSW search measured at one efSearch.
type SweepPoint struct {
	EfSearch int
	HNSW     Latency
	Recall   float64
}

func (r VectorResult) String() string {
	return fmt.Sprintf("n=%d dim=%d queries=%d M=%d efC=%d efS=%d workers=%d\n"+
		"  build  %s (%.0f vectors/s)\n  hnsw   %s  recall@%d %.4f\n  exact  %s",
		r.N, r.Dim, r.Queries, r.Options.M, r.Options.EfConstruction, r.Options.EfSearch, r.Options.Workers,
		r.Build.Round(time.Millisecond), float64(r.N)/r.Build.Seconds(),
		r.HNSW, r.K, r.Recall, r.Exact) + r.files() + r.sweep()
}

func (r VectorResult) files() string {
	if r.FileBytes == 0 {
		return ""
	}
	return fmt.Sprintf("\n  file   %.1f MB, save %s, load %s", float64(r.FileBytes)/1e6,
		r.Save.Round(time.Millisecond), r.Load.Round(time.Millisecond))
}

func (r VectorResult) sweep() string {
	var b strings.Builder
	for _, p := range r.Sweep {
		fmt.Fprintf(&b, "\n  efS=%-4d %s  recall@%d %.4f", p.EfSearch, p.HNSW, r.K, p.Recall)
	}
	return b.String()
}

// Vectors builds a clustered corpus of cfg.N vectors into an HNSW and an
// Exact index and measures the HNSW build time, the search latency of both
// and the recall of HNSW against exact search, over queries drawn from the
// same distribution as the corpus. Queries run one at a time.
func Vectors(ctx context.Context, cfg VectorConfig) (VectorResult, error) {
	if cfg.Dim == 0 {
		cfg.Dim = 384
	}
	if cfg.Queries <= 0 {
		cfg.Queries = 300
	}
	if cfg.K <= 0 {
		cfg.K = 10
	}
	if cfg.N <= 0 {
		return VectorResult{}, fmt.Errorf("vector: bench corpus size %d", cfg.N)
	}
	vecs, queries := vector.BenchData(cfg.N, cfg.Dim, cfg.Queries, cfg.Seed)
	ids := make([]int64, len(vecs))
	for i := range ids {
		ids[i] = int64(i)
	}

	ex, err := vector.NewExact(cfg.Dim)
	if err != nil {
		return VectorResult{}, err
	}
	for i, v := range vecs {
		if err := ex.Add(ids[i], v); err != nil {
			return VectorResult{}, err
		}
	}
	h, err := vector.NewHNSW(cfg.Dim, cfg.Options)
	if err != nil {
		return VectorResult{}, err
	}
	t0 := time.Now()
	if err := h.AddBatch(ctx, ids, vecs); err != nil {
		return VectorResult{}, err
	}
	res := VectorResult{N: cfg.N, Dim: cfg.Dim, Queries: cfg.Queries, K: cfg.K,
		Options: h.Options(), Build: time.Since(t0)}

	truth := make([][]vector.Result, len(queries))
	var exT []time.Duration
	for i, q := range queries {
		if err := ctx.Err(); err != nil {
			return res, err
		}
		t := time.Now()
		truth[i] = ex.Search(q, cfg.K)
		exT = append(exT, time.Since(t))
	}
	res.HNSW, res.Recall, err = measure(ctx, h, queries, truth, cfg.K)
	if err != nil {
		return res, err
	}
	for _, ef := range cfg.Sweep {
		h.SetEfSearch(ef)
		p := SweepPoint{EfSearch: ef}
		if p.HNSW, p.Recall, err = measure(ctx, h, queries, truth, cfg.K); err != nil {
			return res, err
		}
		res.Sweep = append(res.Sweep, p)
	}
	res.Exact = summarise(exT)
	if cfg.SaveDir != "" {
		if err := benchFile(&res, h, cfg.SaveDir, queries[0]); err != nil {
			return res, err
		}
	}
	return res, nil
}

func measure(ctx context.Context, h *vector.HNSW, queries [][]float32, truth [][]vector.Result, k int) (Latency, float64, error) {
	var ts []time.Duration
	var recall float64
	for i, q := range queries {
		if err := ctx.Err(); err != nil {
			return Latency{}, 0, err
		}
		t := time.Now()
		got := h.Search(q, k)
		ts = append(ts, time.Since(t))
		recall += vector.Recall(got, truth[i])
	}
	return summarise(ts), recall / float64(len(queries)), nil
}

// benchFile times a save and a verified load of h in dir.
func benchFile(res *VectorResult, h *vector.HNSW, dir string, q []float32) error {
	f, err := os.CreateTemp(dir, "vecbench-*.idx")
	if err != nil {
		return err
	}
	path := f.Name()
	f.Close()
	defer os.Remove(path)
	t := time.Now()
	sum, err := vector.SaveFile(path, h)
	if err != nil {
		return err
	}
	res.Save = time.Since(t)
	t = time.Now()
	x, err := vector.LoadFile(path, sum, h.Dim())
	if err != nil {
		return err
	}
	res.Load = time.Since(t)
	if fi, err := os.Stat(path); err == nil {
		res.FileBytes = fi.Size()
	}
	if !slices.Equal(x.Search(q, 10), h.Search(q, 10)) {
		return errors.New("vector: bench: loaded index answers differently")
	}
	return nil
}

func summarise(ts []time.Duration) Latency {
	if len(ts) == 0 {
		return Latency{}
	}
	s := slices.Clone(ts)
	slices.Sort(s)
	var sum time.Duration
	for _, t := range s {
		sum += t
	}
	at := func(p float64) time.Duration { return s[min(len(s)-1, int(p*float64(len(s))))] }
	return Latency{P50: at(0.50), P95: at(0.95), P99: at(0.99), Mean: sum / time.Duration(len(s))}
}

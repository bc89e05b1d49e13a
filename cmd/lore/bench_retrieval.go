package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"lore/app"
	"lore/bench"
	"lore/engine"
	"lore/engine/synth"
	"lore/index/ingest"
	"lore/index/parse"
	"lore/index/retrieve"
	"lore/index/vector"
	"lore/store"
)

// clustered embeds text as real embedding models do in shape: vectors
// gather around topic centres. A text's topic is its rarest-looking
// content word's cluster, so a question about a word lands near the chunks
// that use it; the rest is noise seeded by the text. It stands in for an
// embedding model at corpus sizes no CPU model can embed in a benchmark.
type clustered struct {
	dim     int
	centres [][]float32
}

func newClustered(dim, k int) clustered {
	r := rand.New(rand.NewPCG(7, 11))
	c := clustered{dim: dim}
	for range k {
		c.centres = append(c.centres, unit(gauss(r, dim, 1)))
	}
	return c
}

func (c clustered) ID() string { return fmt.Sprintf("bench-clustered-%d", c.dim) }

func (c clustered) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	out := make([][]float32, len(texts))
	for i, t := range texts {
		topic := topicWord(t)
		r := rand.New(rand.NewPCG(hash(t), 3))
		centre := c.centres[hash(topic)%uint64(len(c.centres))]
		v := gauss(r, c.dim, 0.35)
		for j := range v {
			v[j] += centre[j]
		}
		out[i] = unit(v)
	}
	return out, nil
}

// topicWord is the longest word (the synthetic vocabulary's rarer words
// are longer), ties to the first.
func topicWord(s string) string {
	best := ""
	for _, w := range strings.Fields(strings.ToLower(s)) {
		w = strings.Trim(w, ".,?")
		if len(w) > len(best) {
			best = w
		}
	}
	return best
}

func hash(s string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(s))
	return h.Sum64()
}

func gauss(r *rand.Rand, dim int, scale float64) []float32 {
	v := make([]float32, dim)
	for i := range v {
		v[i] = float32(r.NormFloat64() * scale)
	}
	return v
}

func unit(v []float32) []float32 {
	vector.Normalize(v)
	return v
}

type pcts struct {
	Embed  float64 `json:"embed"`
	Vector float64 `json:"vector"`
	BM25   float64 `json:"bm25"`
	Hybrid float64 `json:"hybrid"`
}

type retrievalBench struct {
	Chunks            int     `json:"chunks"`
	Queries           int     `json:"queries"`
	P50               pcts    `json:"p50_ms"`
	P95               pcts    `json:"p95_ms"`
	P99               pcts    `json:"p99_ms"`
	HNSWRecallAt10    float64 `json:"hnsw_recall_at_10"`
	HNSWBuildS        float64 `json:"hnsw_build_s"`    // building the recall check's graph
	IndexRefreshS     float64 `json:"index_refresh_s"` // the retriever's index: exact below the crossover
	CorpusS           float64 `json:"corpus_s"`
	IndexChunksPerS   float64 `json:"index_chunks_per_s"` // walk + parse + chunk + store
	EmbedChunksPerS   float64 `json:"embed_chunks_per_s"` // through the synthetic embedding model
	EmbedModel        string  `json:"embed_model"`
	HybridP95Target   float64 `json:"hybrid_p95_target_ms"`
	HybridP95TargetOK bool    `json:"hybrid_p95_target_met"`
}

func benchRetrieval(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("bench retrieval", flag.ContinueOnError)
	chunks := fs.Int("chunks", 10000, "corpus size in chunks")
	nq := fs.Int("queries", 300, "queries to time")
	embedModel := fs.String("embed-model", "", "embedding model for the query-embedding step (default: a synthetic tiny one)")
	asJSON := fs.Bool("json", false, "print one JSON object")
	sweep := fs.Bool("sweep", false, "only the HNSW trade-off curve: efSearch → recall@10 and latency at each --sweep-sizes")
	sizes := fs.String("sweep-sizes", "100000,1000000", "corpus `sizes` of the --sweep, in vectors")
	efs := fs.String("sweep-ef", "16,32,64,96,128,200,400", "efSearch `values` of the --sweep")
	data := fs.String("data", "", "with --sweep: the data `folder` the curve is saved in, for Settings to show (default $LORE_DATA, else the per-user data folder)")
	if _, err := parseArgs(fs, args); err != nil {
		return err
	}
	if *sweep {
		return sweepHNSW(ctx, *sizes, *efs, *data, *asJSON)
	}
	say := func(format string, a ...any) {
		if !*asJSON {
			fmt.Fprintf(os.Stderr, format+"\n", a...)
		}
	}
	dir, err := os.MkdirTemp("", "lore-bench-retrieval")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	db, err := store.Open(ctx, filepath.Join(dir, "lore.db"))
	if err != nil {
		return err
	}
	defer db.Close()
	res := retrievalBench{Chunks: *chunks, Queries: *nq, HybridP95Target: 10}

	// The corpus, with clustered vectors.
	emb := newClustered(384, 200)
	start := time.Now()
	ws, err := bench.Corpus(ctx, db, bench.CorpusConfig{Chunks: *chunks, Seed: 1, Embedder: emb,
		Progress: func(phase string, done, total int) {
			if !*asJSON {
				fmt.Fprintf(os.Stderr, "\r\033[Kcorpus %-6s %s %d/%d", phase, bar(done, total, 24), done, total)
			}
		}})
	say("")
	if err != nil {
		return err
	}
	res.CorpusS = round1(time.Since(start).Seconds())

	// Search steps, one query at a time, result cache off.
	r := retrieve.New(db, filepath.Join(dir, "vectors"), emb)
	rep, err := bench.Retrieval(ctx, r, ws, bench.Queries(*nq, 2), retrieve.Options{})
	if err != nil {
		return err
	}
	res.IndexRefreshS = round3(rep.Refresh.Seconds())
	msOf := func(d time.Duration) float64 { return round3(float64(d) / 1e6) }
	res.P50 = pcts{Vector: msOf(rep.Vector.P50), BM25: msOf(rep.BM25.P50), Hybrid: msOf(rep.Hybrid.P50)}
	res.P95 = pcts{Vector: msOf(rep.Vector.P95), BM25: msOf(rep.BM25.P95), Hybrid: msOf(rep.Hybrid.P95)}
	res.P99 = pcts{Vector: msOf(rep.Vector.P99), BM25: msOf(rep.BM25.P99), Hybrid: msOf(rep.Hybrid.P99)}
	res.HybridP95TargetOK = res.P95.Hybrid <= res.HybridP95Target
	say("search: %s", rep)

	// HNSW recall@10 against exact search on clustered vectors of this size.
	vb, err := bench.Vectors(ctx, bench.VectorConfig{N: *chunks, Dim: 384, Queries: 200, Seed: 3})
	if err != nil {
		return err
	}
	res.HNSWRecallAt10, res.HNSWBuildS = round3(vb.Recall), round3(vb.Build.Seconds())
	say("hnsw recall@10 %.3f (build %s)", vb.Recall, vb.Build.Round(time.Millisecond))

	// The query embedding, through a real model.
	model := *embedModel
	if model == "" {
		model = filepath.Join(dir, "embed.gguf")
		if err := synth.Write(model, synth.Options{Shape: "tiny", Embedding: true, Seed: 2}); err != nil {
			return err
		}
	}
	m, err := engine.Open(engine.Options{Path: model})
	if err != nil {
		return err
	}
	defer m.Close()
	res.EmbedModel = filepath.Base(model)
	if err := m.Start(ctx); err != nil {
		return err
	}
	var embeds []float64
	for _, q := range bench.Queries(min(*nq, 100), 4) {
		t := time.Now()
		if _, err := m.Embed(ctx, []string{q}); err != nil {
			return err
		}
		embeds = append(embeds, float64(time.Since(t))/1e6)
	}
	slices.Sort(embeds)
	at := func(p float64) float64 { return round3(embeds[min(len(embeds)-1, int(p*float64(len(embeds))))]) }
	res.P50.Embed, res.P95.Embed, res.P99.Embed = at(0.5), at(0.95), at(0.99)

	// Indexing throughput: parse+chunk+store of files on disk, then embedding.
	files := filepath.Join(dir, "files")
	texts, err := writeBenchFiles(files, 400)
	if err != nil {
		return err
	}
	ix := &ingest.Indexer{DB: db, Parser: parse.New(parse.Options{})}
	sum, err := ix.Run(ctx, "files", []string{files}, ingest.Options{})
	if err != nil {
		return err
	}
	res.IndexChunksPerS = round1(float64(sum.Chunks) / sum.Seconds)
	t := time.Now()
	if _, err := m.Embed(ctx, texts[:64]); err != nil {
		return err
	}
	res.EmbedChunksPerS = round1(64 / time.Since(t).Seconds())
	say("indexing: %.0f chunks/s parse+chunk+store, %.0f chunks/s embedding (%s)", res.IndexChunksPerS, res.EmbedChunksPerS, res.EmbedModel)
	if *asJSON {
		return json.NewEncoder(os.Stdout).Encode(res)
	}
	fmt.Printf("%d chunks, %d queries\n%-8s %9s %9s %9s\n", res.Chunks, res.Queries, "step", "p50 ms", "p95 ms", "p99 ms")
	for _, s := range []struct {
		name          string
		p50, p95, p99 float64
	}{{"embed", res.P50.Embed, res.P95.Embed, res.P99.Embed}, {"vector", res.P50.Vector, res.P95.Vector, res.P99.Vector},
		{"bm25", res.P50.BM25, res.P95.BM25, res.P99.BM25}, {"hybrid", res.P50.Hybrid, res.P95.Hybrid, res.P99.Hybrid}} {
		fmt.Printf("%-8s %9.3f %9.3f %9.3f\n", s.name, s.p50, s.p95, s.p99)
	}
	fmt.Printf("hybrid excludes the query embedding; target P95 ≤ %.0f ms: %v\nHNSW recall@10 %.3f\n", res.HybridP95Target, res.HybridP95TargetOK, res.HNSWRecallAt10)
	return nil
}

// sweepHNSW prints recall@10 and latency against efSearch, one graph per
// corpus size of clustered 384-d vectors (the default graph: M 16,
// efConstruction 100), so a user can pick the knee for their TTFT budget,
// and saves it in the data folder, where Settings shows it.
func sweepHNSW(ctx context.Context, sizes, efs, data string, asJSON bool) error {
	ns, err := intList(sizes)
	if err != nil {
		return fmt.Errorf("bench retrieval: --sweep-sizes: %w", err)
	}
	ef, err := intList(efs)
	if err != nil {
		return fmt.Errorf("bench retrieval: --sweep-ef: %w", err)
	}
	var out []app.SweepSize
	for _, n := range ns {
		if !asJSON {
			fmt.Fprintf(os.Stderr, "building an HNSW of %d vectors…\n", n)
		}
		r, err := bench.Vectors(ctx, bench.VectorConfig{N: n, Dim: 384, Queries: 200, Seed: 3, Sweep: ef})
		if err != nil {
			return err
		}
		ms := func(d time.Duration) float64 { return round3(float64(d) / 1e6) }
		s := app.SweepSize{N: n, Dim: r.Dim, BuildS: round1(r.Build.Seconds()), ExactP95Ms: ms(r.Exact.P95)}
		for _, p := range r.Sweep {
			s.Points = append(s.Points, app.SweepPoint{EfSearch: p.EfSearch, Recall10: round3(p.Recall), P50Ms: ms(p.HNSW.P50), P95Ms: ms(p.HNSW.P95)})
		}
		out = append(out, s)
		if !asJSON {
			fmt.Printf("%d vectors (%d-d, built in %.1f s; exact search p95 %.2f ms)\n%10s %11s %8s %8s\n", n, s.Dim, s.BuildS, s.ExactP95Ms,
				"efSearch", "recall@10", "p50 ms", "p95 ms")
			for _, p := range s.Points {
				fmt.Printf("%10d %11.3f %8.3f %8.3f\n", p.EfSearch, p.Recall10, p.P50Ms, p.P95Ms)
			}
		}
	}
	a, err := app.New(ctx, app.Config{DataDir: data})
	if err != nil {
		return err
	}
	defer a.Close()
	if err := a.SaveSweep(ctx, app.HNSWSweep{MeasuredAt: time.Now().UTC(), CPU: app.DescribeCPU().Features, Sizes: out}); err != nil {
		return err
	}
	if asJSON {
		return json.NewEncoder(os.Stdout).Encode(map[string]any{"hnsw_sweep": out})
	}
	fmt.Fprintln(os.Stderr, "saved: Settings shows the curve beside ef_search")
	return nil
}

// writeBenchFiles writes n Markdown notes of a few paragraphs each and
// returns some chunk-sized texts for the embedding measurement.
func writeBenchFiles(dir string, n int) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	r := rand.New(rand.NewPCG(5, 5))
	var texts []string
	for i := range n {
		var b strings.Builder
		fmt.Fprintf(&b, "# Note %d\n\n", i)
		for p := range 6 {
			fmt.Fprintf(&b, "## Part %d\n\n", p)
			var para []string
			for range 120 {
				para = append(para, benchWords[r.IntN(len(benchWords))])
			}
			text := strings.Join(para, " ") + ".\n\n"
			b.WriteString(text)
			if len(texts) < 64 {
				texts = append(texts, text)
			}
		}
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("note-%04d.md", i)), []byte(b.String()), 0o644); err != nil {
			return nil, err
		}
	}
	return texts, nil
}

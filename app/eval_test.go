package app_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"lore/app"
	"lore/index/sample"
)

// TestEvalRetrieval scores the sample library against its labelled
// questions, Lore's BM25 beside the plain FTS5 baseline, and refuses a
// label that names no document of the workspace.
func TestEvalRetrieval(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	if err := sample.WriteCorpus(dir); err != nil {
		t.Fatal(err)
	}
	a, err := app.New(ctx, app.Config{DataDir: t.TempDir(), WorkerCmd: []string{os.Args[0], "parse-worker"}})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if _, err := a.Index(ctx, "default", []string{dir}, nil); err != nil {
		t.Fatal(err)
	}
	qs, err := app.ReadEvalQueries(bytes.NewReader(sample.Queries()))
	if err != nil {
		t.Fatal(err)
	}
	rep, err := a.EvalRetrieval(ctx, "default", qs, app.EvalOptions{Baseline: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("bm25 %+v\nbaseline %+v", rep.BM25, rep.Baseline)
	if rep.Queries != len(qs) || len(rep.Ranks) != len(qs) || rep.Baseline == nil {
		t.Fatalf("report: %d queries, %d ranks, baseline %v", rep.Queries, len(rep.Ranks), rep.Baseline)
	}
	for name, q := range map[string]app.Quality{"bm25": rep.BM25, "baseline": *rep.Baseline} {
		if !(0 < q.Recall1 && q.Recall1 <= q.Recall5 && q.Recall5 <= q.Recall20 && q.Recall20 <= 1) || q.MRR <= 0.3 || q.NDCG10 <= 0.3 || q.MRR > 1 {
			t.Errorf("%s: %+v", name, q)
		}
	}
	if rep.Vector != (app.Quality{}) {
		t.Errorf("no embedding model, yet vector quality %+v", rep.Vector)
	}
	found := 0
	for _, r := range rep.Ranks {
		if r.BM25 > 0 {
			found++
		}
	}
	if mrr := rep.BM25.MRR * float64(len(qs)); mrr > float64(found) {
		t.Errorf("MRR %.3f over %d queries with only %d found", rep.BM25.MRR, len(qs), found)
	}

	bad := []app.EvalQuery{{Query: "holidays", Relevant: []string{filepath.Join("handbook", "holiday.md")}}}
	if _, err := a.EvalRetrieval(ctx, "default", bad, app.EvalOptions{}); err == nil || !strings.Contains(err.Error(), "not a document") {
		t.Errorf("a label naming no document: %v", err)
	}
}

// TestStatsCacheRates: the window's cache hit rates count the answers'
// own cache outcomes; a repeated question hits the retrieval cache.
func TestStatsCacheRates(t *testing.T) {
	a := newApp(t, opts{chat: true, embed: true})
	var traces []*app.Trace
	for _, q := range []string{"when does the river market open", "when does the river market open", "the city orchestra summer concert"} {
		traces = append(traces, ask(t, a, q, 0).trace)
	}
	st, err := a.Stats(context.Background(), "all")
	if err != nil {
		t.Fatal(err)
	}
	hits, embeds, embedHits := 0, 0, 0
	for _, tr := range traces {
		if tr.RetrievalCacheHit {
			hits++
		} else if tr.EmbedLookup {
			embeds++
			if tr.EmbedCacheHit {
				embedHits++
			}
		}
	}
	c := st.Caches
	if !traces[1].RetrievalCacheHit || !traces[0].EmbedLookup || c.Retrieval.Lookups != 3 || c.Retrieval.Hits != hits || c.Embedding.Lookups != embeds || c.Embedding.Hits != embedHits {
		t.Errorf("caches %+v; traces: %d retrieval hits, %d embedding lookups (%d hits); repeat hit %v", c, hits, embeds, embedHits, traces[1].RetrievalCacheHit)
	}
}

// TestEvalRerank: with a rerank model, each rerank K gives a quality and the
// reranker's latency; a reranked list holds the same documents as the hybrid
// one past K; without a rerank model, asking for it is an error.
func TestEvalRerank(t *testing.T) {
	ctx := context.Background()
	qs := []app.EvalQuery{
		{Query: "when does the river market open", Relevant: []string{"river.md"}},
		{Query: "a report about solar energy", Relevant: []string{"energy.md"}},
		{Query: "what grows in the garden behind the library", Relevant: []string{"garden.txt"}},
	}
	a := newApp(t, opts{rerank: true})
	for _, tc := range []struct{ k int }{{1}, {2}, {5}, {50}} {
		rep, err := a.EvalRetrieval(ctx, "default", qs, app.EvalOptions{RerankK: tc.k})
		if err != nil {
			t.Fatal(err)
		}
		if rep.Rerank == nil || rep.RerankK != tc.k || rep.RerankP50Ms <= 0 || rep.RerankP95Ms < rep.RerankP50Ms {
			t.Fatalf("K %d: rerank %v, K %d, p50 %v p95 %v", tc.k, rep.Rerank, rep.RerankK, rep.RerankP50Ms, rep.RerankP95Ms)
		}
		if q := *rep.Rerank; q.Recall20 != rep.Hybrid.Recall20 || q.MRR <= 0 || q.MRR > 1 {
			t.Errorf("K %d: rerank %+v, hybrid %+v", tc.k, q, rep.Hybrid)
		}
		for _, r := range rep.Ranks {
			if (r.Rerank == 0) != (r.Hybrid == 0) {
				t.Errorf("K %d: %q found by hybrid at %d, reranked at %d", tc.k, r.Query, r.Hybrid, r.Rerank)
			}
		}
	}
	plain := newApp(t, opts{})
	if _, err := plain.EvalRetrieval(ctx, "default", qs, app.EvalOptions{RerankK: 5}); err == nil || !strings.Contains(err.Error(), "rerank model") {
		t.Errorf("rerank K without a rerank model: %v", err)
	}
}

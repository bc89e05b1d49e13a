package main

import (
	"context"
	"flag"
	"fmt"
	"os"

	"lore/app"
)

func evalCmd(ctx context.Context, args []string) error {
	if len(args) > 0 && args[0] == "answers" {
		return evalAnswers(ctx, args[1:])
	}
	if len(args) == 0 || args[0] != "retrieval" {
		return fmt.Errorf("eval: which one? retrieval or answers")
	}
	fs := flag.NewFlagSet("eval retrieval", flag.ContinueOnError)
	var f appFlags
	f.register(fs)
	queries := fs.String("queries", "", "labelled queries, JSON lines of {\"query\", \"relevant\": [paths]}")
	cands := fs.String("candidates", "100", "candidate `K` each retriever passes to fusion; a comma-separated list sweeps it")
	rerankK := fs.String("rerank-k", "", "also rerank each question's first `K` passages with --rerank-model (or the saved rerank model); a comma-separated list sweeps it: quality and rerank latency per K")
	baseline := fs.String("baseline", "", "also rank with a `baseline`: fts5 (plain SQLite FTS5 over the same files, 1,200-character chunks)")
	if _, err := parseArgs(fs, args[1:]); err != nil {
		return err
	}
	if *baseline != "" && *baseline != "fts5" {
		return fmt.Errorf("eval retrieval: --baseline %q: the one baseline is fts5", *baseline)
	}
	ks, err := intList(*cands)
	if err != nil {
		return fmt.Errorf("eval retrieval: --candidates: %w", err)
	}
	var rks []int
	if *rerankK != "" {
		if rks, err = intList(*rerankK); err != nil {
			return fmt.Errorf("eval retrieval: --rerank-k: %w", err)
		}
		if len(ks) > 1 && len(rks) > 0 {
			return fmt.Errorf("eval retrieval: sweep --candidates or --rerank-k, not both")
		}
	}
	file, err := os.Open(*queries)
	if err != nil {
		return fmt.Errorf("eval retrieval: --queries: %w", err)
	}
	qs, err := app.ReadEvalQueries(file)
	file.Close()
	if err != nil {
		return fmt.Errorf("eval retrieval: %s: %w", *queries, err)
	}
	a, err := f.open(ctx, nil)
	if err != nil {
		return err
	}
	defer a.Close()
	var reps []app.EvalReport
	if len(rks) > 0 {
		for _, rk := range rks {
			rep, err := a.EvalRetrieval(ctx, f.workspace, qs, app.EvalOptions{Baseline: *baseline == "fts5", Candidates: ks[0], RerankK: rk})
			if err != nil {
				return err
			}
			reps = append(reps, rep)
		}
		if f.json {
			return printJSON(map[string]any{"rerank_sweep": reps})
		}
		fmt.Printf("%d queries, %d candidates; rerank K → quality and rerank latency (hybrid without rerank: MRR %.3f, recall@5 %.3f)\n%5s %9s %9s %9s %9s %8s %8s\n",
			len(qs), reps[0].Candidates, reps[0].Hybrid.MRR, reps[0].Hybrid.Recall5, "K", "recall@1", "recall@5", "MRR", "nDCG@10", "p50 ms", "p95 ms")
		for _, r := range reps {
			fmt.Printf("%5d %9.3f %9.3f %9.3f %9.3f %8.1f %8.1f\n", r.RerankK, r.Rerank.Recall1, r.Rerank.Recall5, r.Rerank.MRR, r.Rerank.NDCG10, r.RerankP50Ms, r.RerankP95Ms)
		}
		return nil
	}
	for _, k := range ks {
		rep, err := a.EvalRetrieval(ctx, f.workspace, qs, app.EvalOptions{Baseline: *baseline == "fts5", Candidates: k})
		if err != nil {
			return err
		}
		reps = append(reps, rep)
	}
	if len(reps) > 1 {
		if f.json {
			return printJSON(map[string]any{"sweep": reps})
		}
		fmt.Printf("%d queries; candidate K into fusion → quality and hybrid search latency\n%5s %9s %9s %10s %10s %8s %8s\n",
			len(qs), "K", "bm25 MRR", "bm25 r@5", "hybrid MRR", "hybrid r@5", "p50 ms", "p95 ms")
		for _, r := range reps {
			fmt.Printf("%5d %9.3f %9.3f %10.3f %10.3f %8.2f %8.2f\n", r.Candidates, r.BM25.MRR, r.BM25.Recall5, r.Hybrid.MRR, r.Hybrid.Recall5, r.SearchP50Ms, r.SearchP95Ms)
		}
		return nil
	}
	rep := reps[0]
	if f.json {
		return printJSON(rep)
	}
	fmt.Printf("%d queries, %d candidates, search p50 %.2f ms p95 %.2f ms\n%-14s %9s %9s %9s %7s %8s\n", rep.Queries, rep.Candidates,
		rep.SearchP50Ms, rep.SearchP95Ms, "", "recall@1", "recall@5", "recall@20", "MRR", "nDCG@10")
	rows := []struct {
		name string
		q    app.Quality
	}{{"bm25", rep.BM25}, {"vector", rep.Vector}, {"hybrid", rep.Hybrid}}
	if rep.Baseline != nil {
		rows = append(rows, struct {
			name string
			q    app.Quality
		}{"baseline fts5", *rep.Baseline})
	}
	for _, r := range rows {
		fmt.Printf("%-14s %9.3f %9.3f %9.3f %7.3f %8.3f\n", r.name, r.q.Recall1, r.q.Recall5, r.q.Recall20, r.q.MRR, r.q.NDCG10)
	}
	return nil
}

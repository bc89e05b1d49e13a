package main

import (
	"context"
	"flag"
	"fmt"
	"os"

	"lore/app"
)

func evalCmd(ctx context.Context, args []string) error {
	if len(args) == 0 || args[0] != "retrieval" {
		return fmt.Errorf("eval: which one? retrieval")
	}
	fs := flag.NewFlagSet("eval retrieval", flag.ContinueOnError)
	var f appFlags
	f.register(fs)
	queries := fs.String("queries", "", "labelled queries, JSON lines of {\"query\", \"relevant\": [paths]}")
	if _, err := parseArgs(fs, args[1:]); err != nil {
		return err
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
	rep, err := a.EvalRetrieval(ctx, f.workspace, qs)
	if err != nil {
		return err
	}
	if f.json {
		return printJSON(rep)
	}
	fmt.Printf("%d queries\n%-8s %9s %9s %7s\n", rep.Queries, "", "recall@5", "recall@20", "MRR")
	for _, r := range []struct {
		name string
		q    app.Quality
	}{{"bm25", rep.BM25}, {"vector", rep.Vector}, {"hybrid", rep.Hybrid}} {
		fmt.Printf("%-8s %9.3f %9.3f %7.3f\n", r.name, r.q.Recall5, r.q.Recall20, r.q.MRR)
	}
	return nil
}

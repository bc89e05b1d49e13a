package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"lore/engine/synth"
)

func synthModel(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("synth-model", flag.ContinueOnError)
	shape := fs.String("shape", "tiny", "model shape: "+strings.Join(synth.Shapes(), ", "))
	embedding := fs.Bool("embedding", false, "write a mean-pooled embedding model")
	reranker := fs.Bool("reranker", false, "write a rank-pooled (cross-encoder) model")
	seed := fs.Int64("seed", 1, "weights seed")
	vocab := fs.Int("vocab", 0, "tokens in the vocabulary (default: the shape's); a tiny model with the 0.5b's 32000 can draft for it")
	out := fs.String("out", "", "output `file`")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *out == "" {
		return fmt.Errorf("synth-model: --out is required")
	}
	start := time.Now()
	if err := synth.Write(*out, synth.Options{Shape: *shape, Embedding: *embedding, Reranker: *reranker, Seed: *seed, Vocab: *vocab}); err != nil {
		return err
	}
	st, err := os.Stat(*out)
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "wrote %s: %s model, %.1f MB in %.1fs\n", *out, *shape, float64(st.Size())/1e6, time.Since(start).Seconds())
	return nil
}

package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"lore/app"
	"lore/bench"
)

// demo is Lore's main job on defaults: it indexes the sample library and
// streams an answer with its timing breakdown, with the real models of
// `lore models fetch` (SmolLM2 answering, MiniLM embedding) when they are
// there, else with synthetic ones (random weights: the words are noise,
// the timings are real).
func demo(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	dir := fs.String("dir", filepath.Join(os.TempDir(), "lore-demo"), "demo data `folder` (models, library, database)")
	shape := fs.String("shape", "0.5b", "chat model shape: tiny, 0.5b, 1b or 1.5b")
	question := fs.String("question", "How many days of holiday do employees get, and how do I book them?", "the question to ask")
	synthetic := fs.Bool("synthetic", false, "use synthetic models even when the real ones are fetched")
	if _, err := parseArgs(fs, args); err != nil {
		return err
	}
	chat, embed, lib, err := bench.Demo(*dir, *shape, os.Stderr)
	if err != nil {
		return err
	}
	maxTokens := 48 // enough to see noise stream
	if c, e, ok, why := bench.Real(); ok && !*synthetic {
		chat, embed, maxTokens = c, e, 160
		fmt.Fprintf(os.Stderr, "real models: %s answers, %s embeds\n", filepath.Base(chat), filepath.Base(embed))
	} else if !*synthetic {
		fmt.Fprintf(os.Stderr, "synthetic models (random weights: the answer's words are noise, the timings real): %s\n", why)
	}
	a, err := app.New(ctx, app.Config{DataDir: filepath.Join(*dir, "data"), ChatModel: chat, EmbedModel: embed, Warm: true})
	if err != nil {
		return err
	}
	defer a.Close()
	s := a.Settings()
	s.MaxTokens = maxTokens
	if err := a.SaveSettings(ctx, s); err != nil {
		return err
	}
	start := time.Now()
	sum, err := a.Index(ctx, "demo", []string{lib}, func(p app.Progress) {
		done, total := p.FilesDone, p.FilesTotal
		if p.Phase == app.PhaseEmbed {
			done, total = p.Chunks, p.ChunksTotal
		}
		fmt.Fprintf(os.Stderr, "\r\033[Kindexing %-6s %s %d/%d", p.Phase, bar(done, total, 24), done, total)
	})
	fmt.Fprintln(os.Stderr)
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "indexed %d files into %d chunks in %.1fs\n", sum.Files, sum.Chunks, time.Since(start).Seconds())
	start = time.Now()
	if err := a.WaitWarm(ctx); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "chat model loaded and system prefix warmed in %.1fs\n\nQ: %s\nA: ", time.Since(start).Seconds(), *question)
	tr, sources, err := streamAnswer(ctx, a, app.AskRequest{Question: *question, Workspace: "demo"}, os.Stdout)
	if err != nil {
		return err
	}
	printSources(sources)
	printTrace(tr)
	fmt.Printf("\nData in %s. Try: bin/lore serve --data %s --model %s --embed-model %s\n",
		*dir, filepath.Join(*dir, "data"), chat, embed)
	return nil
}

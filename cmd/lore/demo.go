package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"lore/engine"
	"lore/engine/synth"
)

func demo(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	dir := fs.String("dir", filepath.Join(os.TempDir(), "lore-demo"), "where the synthetic model goes")
	shape := fs.String("shape", "0.5b", "synthetic model shape")
	if err := fs.Parse(args); err != nil {
		return err
	}
	path := filepath.Join(*dir, "synth-"+*shape+".gguf")
	if _, err := os.Stat(path); err != nil {
		os.MkdirAll(*dir, 0o755)
		fmt.Fprintf(os.Stderr, "synthesising a %s model (random weights: the words are noise, the timings are real)…\n", *shape)
		if err := synth.Write(path, synth.Options{Shape: *shape, Seed: 1}); err != nil {
			return err
		}
	}
	m, err := engine.Open(engine.Options{Path: path})
	if err != nil {
		return err
	}
	defer m.Close()
	system := "You are Lore. Answer from the user's documents and cite them."
	prefix, err := m.Template().Prefix(system)
	if err != nil {
		return err
	}
	ws, err := m.Warm(ctx, prefix)
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "warmed the %d-token system prefix in %.0f ms\n\n", ws.PromptTokens, ws.PrefillMs)
	st, err := m.Generate(ctx, engine.GenerateRequest{MaxTokens: 48, Messages: []engine.Message{
		{Role: "system", Content: system}, {Role: "user", Content: "What does the library say about river energy?"}}},
		func(p string) error { fmt.Print(p); return nil })
	fmt.Println()
	if err != nil {
		return err
	}
	fmt.Printf("\nprompt %d tokens (%d cached, %d evaluated) · tokenize %.1f ms · prefill %.1f ms · first token %.1f ms · TTFT %.1f ms · decode %.1f tok/s\n",
		st.PromptTokens, st.CachedTokens, st.EvalTokens, st.TokenizeMs, st.PrefillMs, st.FirstDecodeMs, st.ClientTTFT, st.DecodeTokS)
	return nil
}

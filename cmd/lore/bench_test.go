package main

import (
	"os"
	"path/filepath"
	"testing"
)

// TestBenchEngineOllama: bench engine's guard runs a real `ollama serve`
// on loopback with the same file, reads the same texts, and reports its
// speed and Lore's over it; --seqs 1 measures a single-sequence context.
func TestBenchEngineOllama(t *testing.T) {
	bin := os.Getenv("LORE_OLLAMA")
	if bin == "" {
		t.Skip("LORE_OLLAMA is not set: `make test` builds Ollama from the module proxy and sets it")
	}
	chat := filepath.Join(t.TempDir(), "chat.gguf")
	if code, _, stderr := cli(t, "synth-model", "--shape", "tiny", "--out", chat); code != 0 {
		t.Fatalf("synth-model: %d %s", code, stderr)
	}
	code, out, stderr := cli(t, "bench", "engine", "--model", chat, "--lengths", "64", "--runs", "1", "--seqs", "1",
		"--ollama", bin, "--json")
	if code != 0 {
		t.Fatalf("bench engine --ollama: exit %d\n%s", code, stderr)
	}
	v := object(t, out, "seqs", "prefill_tok_s", "ollama_prefill_tok_s", "ollama_ratio")
	if v["seqs"] != 1.0 {
		t.Errorf("seqs %v, want 1", v["seqs"])
	}
	theirs, _ := v["ollama_prefill_tok_s"].(map[string]any)
	ratio, _ := v["ollama_ratio"].(map[string]any)
	if s, _ := theirs["64"].(float64); s <= 0 {
		t.Errorf("Ollama's prefill speed at 64 tokens: %v", v["ollama_prefill_tok_s"])
	}
	if r, _ := ratio["64"].(float64); r <= 0 {
		t.Errorf("Lore over Ollama at 64 tokens: %v", v["ollama_ratio"])
	}
}

package engine_test

import (
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"lore/engine"
	"lore/engine/llamarunner"
	"lore/engine/synth"
)

// The test binary doubles as the runner: children inherit
// LORE_TEST_RUNNER=1 and serve as lore-runner-<variant> would.
// TestVariants runs the real runner programs.
func TestMain(m *testing.M) {
	if os.Getenv("LORE_TEST_RUNNER") == "1" {
		llamarunner.Main()
	}
	os.Setenv("LORE_TEST_RUNNER", "1")
	os.Exit(m.Run())
}

var (
	modelsOnce sync.Once
	modelsDir  string
	modelsErr  error
)

// models writes the tiny synthetic chat and embedding models once per run.
func models(t *testing.T) (chat, embed string) {
	t.Helper()
	modelsOnce.Do(func() {
		modelsDir, modelsErr = os.MkdirTemp("", "lore-engine-test")
		if modelsErr != nil {
			return
		}
		if modelsErr = synth.Write(filepath.Join(modelsDir, "chat.gguf"), synth.Options{Shape: "tiny", Seed: 1}); modelsErr != nil {
			return
		}
		modelsErr = synth.Write(filepath.Join(modelsDir, "embed.gguf"), synth.Options{Shape: "tiny", Embedding: true, Seed: 2})
	})
	if modelsErr != nil {
		t.Fatal(modelsErr)
	}
	return filepath.Join(modelsDir, "chat.gguf"), filepath.Join(modelsDir, "embed.gguf")
}

func open(t *testing.T, path string) *engine.Model {
	t.Helper()
	m, err := engine.Open(engine.Options{Path: path, NumCtx: 1024, Threads: 2, Runner: os.Args[0]})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

func generate(t *testing.T, m *engine.Model, prompt string, n int) (string, []string, engine.Stats) {
	t.Helper()
	var pieces []string
	st, err := m.Generate(context.Background(), engine.GenerateRequest{Prompt: prompt, MaxTokens: n},
		func(p string) error { pieces = append(pieces, p); return nil })
	if err != nil {
		t.Fatal(err)
	}
	return strings.Join(pieces, ""), pieces, st
}

const question = "the river market opened before the library and the garden was small"

func TestGenerateDeterministicAndCached(t *testing.T) {
	chat, _ := models(t)
	m := open(t, chat)
	a, pieces, st := generate(t, m, question, 12)
	if a == "" || st.DecodeTokens == 0 {
		t.Fatalf("no output: %q %+v", a, st)
	}
	if len(pieces) < 2 {
		t.Errorf("streamed %d pieces, want one per token", len(pieces))
	}
	// Synthetic chat models never predict end-of-generation (engine/synth).
	if st.DecodeTokens != 12 || st.StopReason != "length" {
		t.Errorf("decoded %d of 12 tokens, stop reason %q: want the full length", st.DecodeTokens, st.StopReason)
	}
	if st.PromptTokens == 0 || st.EvalTokens+st.CachedTokens != st.PromptTokens {
		t.Errorf("token counts do not add up: %+v", st)
	}
	if st.PrefillMs <= 0 || st.TTFTMs <= 0 || st.ClientTTFT < st.TTFTMs {
		t.Errorf("timings: %+v", st)
	}

	// Same prompt again: greedy output identical, the prompt served from cache.
	b, _, st2 := generate(t, m, question, 12)
	if a != b {
		t.Fatalf("greedy output changed: %q vs %q", a, b)
	}
	if st2.CachedTokens != st2.PromptTokens-1 || st2.EvalTokens != 1 {
		t.Errorf("repeat prompt: cached %d eval %d of %d", st2.CachedTokens, st2.EvalTokens, st2.PromptTokens)
	}

	// A prompt sharing a prefix evaluates only the new suffix, and its output
	// matches a cold run in a fresh runner.
	longer := question + " and the students wrote a report about energy"
	warm, _, st3 := generate(t, m, longer, 12)
	if st3.CachedTokens < st.PromptTokens-1 || st3.EvalTokens != st3.PromptTokens-st3.CachedTokens {
		t.Errorf("shared prefix: cached %d eval %d of %d (first prompt %d)", st3.CachedTokens, st3.EvalTokens, st3.PromptTokens, st.PromptTokens)
	}
	cold := open(t, chat)
	coldOut, _, st4 := generate(t, cold, longer, 12)
	if st4.CachedTokens != 0 {
		t.Errorf("fresh runner reports %d cached tokens", st4.CachedTokens)
	}
	if coldOut != warm {
		t.Errorf("cached run %q differs from cold run %q", warm, coldOut)
	}
}

func TestWarmPrefix(t *testing.T) {
	chat, _ := models(t)
	m := open(t, chat)
	prefix, err := m.Template().Prefix("You answer from the library.")
	if err != nil {
		t.Fatal(err)
	}
	ws, err := m.Warm(context.Background(), prefix)
	if err != nil {
		t.Fatal(err)
	}
	_, _, st := generate(t, m, prefix+"hello there", 4)
	if st.CachedTokens < ws.PromptTokens-1 {
		t.Errorf("warm prefix of %d tokens, but only %d cached", ws.PromptTokens, st.CachedTokens)
	}
}

func TestCancel(t *testing.T) {
	chat, _ := models(t)
	m := open(t, chat)
	ctx, cancel := context.WithCancel(context.Background())
	n := 0
	st, err := m.Generate(ctx, engine.GenerateRequest{Prompt: question, MaxTokens: 500},
		func(string) error {
			n++
			if n == 3 {
				cancel()
			}
			return nil
		})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	if n != 3 {
		t.Errorf("%d pieces delivered after cancel at 3", n)
	}
	if st.DecodeTokens > 6 {
		t.Errorf("runner decoded %d tokens after cancel at 3", st.DecodeTokens)
	}
	// The runner serves the next request.
	if out, _, _ := generate(t, m, question, 3); out == "" {
		t.Error("no output after a cancelled request")
	}
}

func TestRunnerKilled(t *testing.T) {
	chat, _ := models(t)
	m := open(t, chat)
	generate(t, m, question, 2) // start the runner
	pid := m.RunnerPID()
	if pid == 0 {
		t.Fatal("no runner process")
	}
	killed := false
	_, err := m.Generate(context.Background(), engine.GenerateRequest{Prompt: question + " again", MaxTokens: 500},
		func(string) error {
			if !killed {
				killed = true
				syscall.Kill(pid, syscall.SIGKILL)
			}
			return nil
		})
	if !errors.Is(err, engine.ErrRunnerDied) {
		t.Fatalf("err = %v, want ErrRunnerDied", err)
	}
	if !strings.Contains(err.Error(), "killed") {
		t.Errorf("error does not say how the runner ended: %v", err)
	}
	if out, _, _ := generate(t, m, question, 3); out == "" {
		t.Error("no output from the restarted runner")
	}
}

func TestInvalidFiles(t *testing.T) {
	dir := t.TempDir()
	chat, _ := models(t)
	good, _ := os.ReadFile(chat)
	files := map[string][]byte{
		"empty.gguf":     nil,
		"text.gguf":      []byte("hello, I am not a model\n"),
		"truncated.gguf": good[:len(good)/3],
		"header.gguf":    good[:24],
	}
	for name, data := range files {
		p := filepath.Join(dir, name)
		os.WriteFile(p, data, 0o644)
		if _, err := engine.Open(engine.Options{Path: p}); err == nil {
			t.Errorf("%s: opened without error", name)
		}
	}
	if _, err := engine.Open(engine.Options{Path: filepath.Join(dir, "missing.gguf")}); err == nil {
		t.Error("missing file: opened without error")
	}
}

// TestOpenDefaults: chat models read prompts in 256-token calls (faster on
// CPU, docs/performance.md); an embedding model keeps 512, since each text
// must fit one call.
func TestOpenDefaults(t *testing.T) {
	chat, emb := models(t)
	for _, tc := range []struct {
		path                string
		batch, seqs, numCtx int
	}{
		{chat, 256, engine.SeqScratch + 1, 0},
		{emb, 512, 1, 512},
	} {
		m, err := engine.Open(engine.Options{Path: tc.path})
		if err != nil {
			t.Fatal(err)
		}
		in := m.Info()
		if in.Batch != tc.batch || in.Seqs != tc.seqs || (tc.numCtx > 0 && in.NumCtx != tc.numCtx) {
			t.Errorf("%s: batch %d, seqs %d, num_ctx %d; want batch %d, seqs %d, num_ctx %d",
				filepath.Base(tc.path), in.Batch, in.Seqs, in.NumCtx, tc.batch, tc.seqs, tc.numCtx)
		}
		m.Close()
	}
}

func TestEmbed(t *testing.T) {
	_, emb := models(t)
	m := open(t, emb)
	texts := []string{"the river market", "a report about energy", "the river market", "small garden"}
	vecs, err := m.Embed(context.Background(), texts)
	if err != nil {
		t.Fatal(err)
	}
	if len(vecs) != len(texts) {
		t.Fatalf("%d vectors for %d texts", len(vecs), len(texts))
	}
	for i, v := range vecs {
		var n float64
		for _, x := range v {
			n += float64(x) * float64(x)
		}
		if math.Abs(math.Sqrt(n)-1) > 1e-3 {
			t.Errorf("vector %d has norm %v", i, math.Sqrt(n))
		}
	}
	if !near(vecs[0], vecs[2]) {
		t.Error("identical text gave different vectors")
	}
	if near(vecs[0], vecs[1]) {
		t.Error("different texts gave identical vectors")
	}
	// Batched and single calls agree.
	one, err := m.Embed(context.Background(), texts[1:2])
	if err != nil {
		t.Fatal(err)
	}
	if !near(one[0], vecs[1]) {
		t.Fatalf("batched and single embeddings differ: %v vs %v", vecs[1][:4], one[0][:4])
	}
	chat, _ := models(t)
	if _, err := open(t, chat).Embed(context.Background(), texts); err == nil {
		t.Error("a chat model without pooling embedded without error")
	}
}

// TestQueueReportsWait: requests queued behind another report the time they
// waited. The first holds the queue (its first piece waits for the test)
// until both others are queued, so they wait whatever the machine's speed.
func TestQueueReportsWait(t *testing.T) {
	chat, _ := models(t)
	m := open(t, chat)
	generate(t, m, question, 1)
	var wg sync.WaitGroup
	stats := make([]engine.Stats, 3)
	run := func(i int, piece func(string) error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st, err := m.Generate(context.Background(), engine.GenerateRequest{Prompt: question, MaxTokens: 8}, piece)
			if err != nil {
				t.Error(err)
			}
			stats[i] = st
		}()
	}
	holding, release := make(chan struct{}), make(chan struct{})
	var first sync.Once
	run(0, func(string) error {
		first.Do(func() { close(holding); <-release })
		return nil
	})
	select {
	case <-holding:
	case <-time.After(time.Minute):
		t.Fatal("the first request never streamed a piece")
	}
	run(1, func(string) error { return nil })
	run(2, func(string) error { return nil })
	eventually(t, "two requests queued behind the first", func() bool { return m.QueueStats().Waiting == 2 })
	close(release)
	wg.Wait()
	t.Logf("queue waits: %.3f, %.3f, %.3f ms", stats[0].QueueMs, stats[1].QueueMs, stats[2].QueueMs)
	if stats[1].QueueMs <= 0 || stats[2].QueueMs <= 0 {
		t.Errorf("requests queued behind another report no wait: %+v", stats)
	}
	if s := m.QueueStats(); s.Busy || s.Waiting != 0 || s.MeanWait <= 0 {
		t.Errorf("queue after: %+v", s)
	}
}

// eventually polls cond every millisecond until it holds, and fails the
// test naming what it waited for if it does not within a minute. It waits
// for an event; it measures nothing (a loaded machine only polls longer).
func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("still waiting after a minute: %s", what)
		}
	}
}

// near reports whether two vectors match to within float rounding.
func near(a, b []float32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Abs(float64(a[i]-b[i])) > 1e-5 {
			return false
		}
	}
	return true
}

func TestRerank(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "rerank.gguf")
	if err := synth.Write(path, synth.Options{Shape: "tiny", Reranker: true, Seed: 3}); err != nil {
		t.Fatal(err)
	}
	m := open(t, path)
	docs := []string{"the river market", "a report about energy", "the river market"}
	scores, err := m.Rerank(context.Background(), "where is the market", docs)
	if err != nil {
		t.Fatal(err)
	}
	if len(scores) != len(docs) {
		t.Fatalf("%d scores for %d docs", len(scores), len(docs))
	}
	if scores[0] != scores[2] {
		t.Errorf("identical pairs scored differently: %v", scores)
	}
	// The synthetic reranker is Qwen3-Reranker-shaped (last-token pooling,
	// a yes/no head with softmax): scores are probabilities that depend on
	// the pair, so other documents, or another query, score otherwise.
	for _, s := range scores {
		if !(s > 0 && s < 1) {
			t.Errorf("score %v: want P(yes) in (0, 1)", s)
		}
	}
	if scores[0] == scores[1] {
		t.Errorf("different documents scored the same: %v", scores)
	}
	other, err := m.Rerank(context.Background(), "a question about energy reports", docs)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("scores %v, with another query %v", scores, other)
	if other[0] == scores[0] && other[1] == scores[1] {
		t.Errorf("another query gave the same scores: %v", other)
	}
	chat, _ := models(t)
	if _, err := open(t, chat).Rerank(context.Background(), "q", docs); !errors.Is(err, engine.ErrNotReranker) {
		t.Errorf("chat model rerank: err = %v, want ErrNotReranker", err)
	}
}

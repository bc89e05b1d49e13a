package engine_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"lore/engine"
	"lore/engine/kv"
)

// stitchPrompt lays out a RAG prompt as the app does: a prefix ending in
// "[1]", each passage as its own part, "[n]" markers between them, and the
// question last. It returns the parts and the prefix passages are cached
// after.
func stitchPrompt(t *testing.T, m *engine.Model, bodies []string, q string) ([]engine.Part, string) {
	t.Helper()
	const mark = "\x00mark\x00"
	s, err := m.Template().Render([]engine.Message{
		{Role: "system", Content: "You answer from the library."},
		{Role: "user", Content: "Sources:\n\n" + mark}})
	if err != nil {
		t.Fatal(err)
	}
	before, after, ok := strings.Cut(s, mark)
	if !ok {
		t.Fatal("template dropped the mark")
	}
	prefix := before + "[1]"
	parts := []engine.Part{{Text: prefix}}
	for i, b := range bodies {
		if i > 0 {
			parts = append(parts, engine.Part{Text: fmt.Sprintf("[%d]", i+1)})
		}
		parts = append(parts, engine.Part{Text: b, Passage: true})
	}
	return append(parts, engine.Part{Text: "Question: " + q + after}), prefix
}

func prefixTokens(t *testing.T, m *engine.Model, prefix string) []int {
	t.Helper()
	toks, err := m.Tokenize(context.Background(), prefix, true)
	if err != nil {
		t.Fatal(err)
	}
	return toks
}

func bodies(n int) []string {
	var out []string
	for i := range n {
		out = append(out, fmt.Sprintf(" notes/doc%d.md\n%s\n", i+1, passages(6+i)))
	}
	return out
}

func TestStitchedPassages(t *testing.T) {
	chat, _ := models(t)
	ctx := context.Background()
	store, err := kv.Open(kv.Options{})
	if err != nil {
		t.Fatal(err)
	}
	m := openWith(t, engine.Options{Path: chat, KV: store})
	parts, prefix := stitchPrompt(t, m, bodies(3), question)
	ask := func(s *engine.Stitch, parts []engine.Part) (string, engine.Stats) {
		t.Helper()
		var b strings.Builder
		st, err := m.Generate(ctx, engine.GenerateRequest{Parts: parts, Stitch: s, MaxTokens: 16},
			func(p string) error { b.WriteString(p); return nil })
		if err != nil {
			t.Fatal(err)
		}
		m.ClearSeq(ctx, engine.SeqAnswer) // every question starts cold
		return b.String(), st
	}
	cold, cst := ask(nil, parts)
	if cold == "" || cst.StitchedPassages != 0 {
		t.Fatalf("cold: %q %+v", cold, cst)
	}
	for _, p := range parts {
		if !p.Passage {
			continue
		}
		st, err := m.CachePassage(ctx, prefix, p.Text)
		if err != nil {
			t.Fatal(err)
		}
		if st.Restored || st.StateBytes == 0 || st.EvalTokens == 0 {
			t.Fatalf("cache passage: %+v", st)
		}
		if st, err := m.CachePassage(ctx, prefix, p.Text); err != nil || !st.Restored {
			t.Fatalf("cache passage again: %+v %v", st, err)
		}
	}
	if n, _ := m.SeqTokens(ctx); n[engine.SeqScratch] != 0 {
		t.Fatalf("the scratch sequence still holds %d tokens", n[engine.SeqScratch])
	}

	// Repairing every token is evaluating every token: the cold answer.
	if got, st := ask(&engine.Stitch{Prefix: prefix, Repair: engine.RepairAll}, parts); got != cold || st.StitchedPassages != 0 {
		t.Errorf("repair all: %q, want %q (%+v)", got, cold, st)
	}
	whole := 0 // the passages' tokens, all stitched at k = 0
	for _, k := range []int{0, 4} {
		got, st := ask(&engine.Stitch{Prefix: prefix, Repair: k}, parts)
		if k == 0 {
			whole = st.StitchedTokens
		}
		if got == "" || st.StitchedPassages != 3 || st.StitchedTokens != whole-3*k || st.RepairedTokens != 3*k ||
			st.EvalTokens != st.PromptTokens-st.CachedTokens-st.StitchedTokens || st.EvalTokens > st.PromptTokens/4 ||
			st.StitchSkipped != "" {
			t.Errorf("k=%d: %q %+v", k, got, st)
		}
	}

	// The last prompt shared the first passage's opening: those cells are
	// kept, and only the rest of it is placed.
	generate(t, m, parts[0].Text+parts[1].Text[:len(parts[1].Text)/2], 1)
	if got, st := ask(&engine.Stitch{Prefix: prefix, Repair: 4}, parts); got == "" || st.StitchedPassages != 3 ||
		st.CachedTokens < 40 || st.RepairedTokens != 8 || st.StitchedTokens != whole-8-(st.CachedTokens-len(prefixTokens(t, m, prefix))) {
		t.Errorf("cached into the first passage: %q %+v", got, st)
	}

	// An edited passage has no saved KV: it is evaluated, the others stitched.
	edited := append([]engine.Part(nil), parts...)
	for i := range edited {
		if edited[i].Passage {
			edited[i].Text = strings.Replace(edited[i].Text, "Passage 2", "Passage two", 1)
			break
		}
	}
	if _, st := ask(&engine.Stitch{Prefix: prefix}, edited); st.StitchedPassages != 2 || st.UncachedPassages != 1 {
		t.Errorf("edited passage: %+v", st)
	}

	// A prompt that ends in a stitched passage still evaluates its last
	// token, for the logits to sample from.
	if got, st := ask(&engine.Stitch{Prefix: prefix}, parts[:len(parts)-1]); got == "" || st.StitchedPassages != 3 {
		t.Errorf("ending in a passage: %q %+v", got, st)
	}

	// Stitched cells serve the same prompt stitched the same way again; a
	// prompt asked exactly (or repaired differently) evaluates again from
	// the first stitched cell (a repaired opening is exact), and answers as
	// the cold run did.
	var text strings.Builder
	for _, p := range parts {
		text.WriteString(p.Text)
	}
	again := func(s *engine.Stitch) engine.Stats {
		t.Helper()
		st, err := m.Generate(ctx, engine.GenerateRequest{Parts: parts, Stitch: s, MaxTokens: 1}, func(string) error { return nil })
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	again(&engine.Stitch{Prefix: prefix})
	if st := again(&engine.Stitch{Prefix: prefix}); st.EvalTokens != 1 || st.StitchedTokens != 0 {
		t.Errorf("the stitched prompt again: %+v", st)
	}
	if st := again(&engine.Stitch{Prefix: prefix, Repair: 4}); st.CachedTokens != len(prefixTokens(t, m, prefix)) || st.StitchedPassages != 3 {
		t.Errorf("the stitched prompt repaired differently: %+v", st)
	}
	got, _, st := generate(t, m, text.String(), 16)
	if st.CachedTokens != len(prefixTokens(t, m, prefix))+4 || st.StitchedTokens != 0 || got != cold {
		t.Errorf("the stitched prompt asked exactly: %q, want %q (%+v)", got, cold, st)
	}
}

// TestCachePassagePreempted: saving a passage reads it in whole batches,
// yet a question arriving mid-way stops the batch in flight (llama.cpp's
// abort callback) instead of waiting for it; the preempted save leaves
// nothing behind and a later one succeeds. The passage fits one batch, so
// what the preempted save evaluated tells the two apart: with the abort,
// nothing; without it, the whole passage (and its state saved). How long
// the question waited is only logged: speed is for lore bench.
func TestCachePassagePreempted(t *testing.T) {
	path := bigModel(t)
	ctx := context.Background()
	store, err := kv.Open(kv.Options{})
	if err != nil {
		t.Fatal(err)
	}
	const batch = 512
	m := openWith(t, engine.Options{Path: path, NumCtx: 2048, Batch: batch, KV: store})
	_, prefix := stitchPrompt(t, m, nil, question)
	if err := m.Start(ctx); err != nil {
		t.Fatal(err)
	}
	full, err := m.CachePassage(ctx, prefix, " notes/other.md\n"+passages(20)) // for the time a whole save takes
	if err != nil {
		t.Fatal(err)
	}
	if full.EvalTokens < batch/2 || full.EvalTokens > batch-16 {
		t.Fatalf("a save of %d tokens: want one batch of %d, most of it", full.EvalTokens, batch)
	}

	// The question comes an eighth of a whole save's time after the save
	// took the model: then the runner is reading the passage (should it
	// have finished already, the machine being shared, again with another
	// passage, sooner). Wherever it lands before the end, the outcome is
	// the same: preempted, nothing evaluated, nothing stored.
	var long string
	var saved engine.Stats
	var q engine.Stats
	for i, frac := range []float64{8, 32, 128} {
		long = fmt.Sprintf(" notes/long%d.md\n%s", i, passages(20))
		done := make(chan error, 1)
		go func() {
			var err error
			saved, err = m.CachePassage(ctx, prefix, long)
			done <- err
		}()
		eventually(t, "the save took the model", func() bool { return m.QueueStats().Busy })
		time.Sleep(time.Duration(full.PrefillMs/frac) * time.Millisecond)
		_, _, q = generate(t, m, "a question about something else entirely", 2)
		if err = <-done; err == nil {
			t.Logf("try %d: the save finished before the question came", i)
			continue
		}
		break
	}
	if !errors.Is(err, engine.ErrPreempted) {
		t.Fatalf("save: %v, want ErrPreempted", err)
	}
	t.Logf("question waited %.1f ms; a whole save reads for %.0f ms; the preempted one read for %.0f ms of its %d tokens",
		q.QueueMs, full.PrefillMs, saved.PrefillMs, saved.PromptTokens)
	if saved.EvalTokens != 0 || saved.StateBytes != 0 {
		t.Errorf("the preempted save evaluated %d tokens and saved %d bytes: the batch in flight was not aborted", saved.EvalTokens, saved.StateBytes)
	}
	if n, _ := m.SeqTokens(ctx); n[engine.SeqScratch] != 0 {
		t.Errorf("the scratch sequence holds %d tokens after a preempted save", n[engine.SeqScratch])
	}
	if st, err := m.CachePassage(ctx, prefix, long); err != nil || st.Restored {
		t.Fatalf("save again: %+v %v", st, err)
	}
}

package engine_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"lore/engine"
	"lore/engine/synth"
)

// TestSpeculativeSameOutput: prompt-lookup drafts verified in the batch of
// the next token change nothing in greedy output, however many are
// accepted, and the cache holds exactly the tokens kept (the next prompt
// that extends the answer reuses all of it).
func TestSpeculativeSameOutput(t *testing.T) {
	chat, _ := models(t)
	m := openWith(t, engine.Options{Path: chat, SpecFloor: -1}) // never off: every k is measured
	ctx := context.Background()
	// Repeated text, so that the last tokens often occurred before.
	prompt := strings.Repeat(passages(3)+" ", 4) + question
	gen := func(spec int) (string, engine.Stats) {
		t.Helper()
		m.ClearSeq(ctx, engine.SeqAnswer)
		var b strings.Builder
		st, err := m.Generate(ctx, engine.GenerateRequest{Prompt: prompt, MaxTokens: 64, Speculate: spec},
			func(p string) error { b.WriteString(p); return nil })
		if err != nil {
			t.Fatal(err)
		}
		return b.String(), st
	}
	plain, pst := gen(0)
	if pst.Drafted != 0 || plain == "" {
		t.Fatalf("plain: %q %+v", plain, pst)
	}
	_, _, again := generate(t, m, prompt+plain, 1) // how much of prompt and answer the cache serves
	want := again.CachedTokens
	for _, k := range []int{1, 4, 8} {
		got, st := gen(k)
		t.Logf("k=%d: %d of %d drafted accepted, %d tokens at %.0f tok/s (plain %.0f)", k, st.Accepted, st.Drafted, st.DecodeTokens, st.DecodeTokS, pst.DecodeTokS)
		if got != plain || st.DecodeTokens != pst.DecodeTokens || st.StopReason != pst.StopReason {
			t.Errorf("k=%d: %q (%d tokens, %s), want %q (%d, %s)", k, got, st.DecodeTokens, st.StopReason, plain, pst.DecodeTokens, pst.StopReason)
		}
		if st.Drafted == 0 || st.Accepted > st.Drafted {
			t.Errorf("k=%d: %d drafted, %d accepted", k, st.Drafted, st.Accepted)
		}
		// The answer's tokens are in the cache as if decoded one by one.
		gen(k)
		if _, _, next := generate(t, m, prompt+got, 1); next.CachedTokens != want {
			t.Errorf("k=%d: the prompt and answer again: %d of %d tokens cached, plain decoding leaves %d", k, next.CachedTokens, next.PromptTokens, want)
		}
	}

	// At the default floor, this random-weight model's low acceptance turns
	// speculation off, which the stats say; the output stays the same.
	d := openWith(t, engine.Options{Path: chat})
	var notes []string
	for range 4 {
		var b strings.Builder
		st, err := d.Generate(ctx, engine.GenerateRequest{Prompt: prompt, MaxTokens: 64, Speculate: 8},
			func(p string) error { b.WriteString(p); return nil })
		if err != nil {
			t.Fatal(err)
		}
		d.ClearSeq(ctx, engine.SeqAnswer)
		notes = append(notes, st.SpecNote)
		if b.String() != plain {
			t.Errorf("default floor: %q, want %q", b.String(), plain)
		}
	}
	t.Logf("notes: %q", notes)
	if !strings.HasPrefix(notes[0], "switched off") || !strings.HasPrefix(notes[1], "off:") {
		t.Errorf("notes %q: want speculation switched off after the first answer's window", notes)
	}
}

// TestDraftModel: a draft model's picks, verified on the model, leave the
// greedy output unchanged. The model as its own draft is accepted almost
// always; an unrelated model of the same vocabulary almost never, which
// switches speculation off; another vocabulary is refused at Open.
func TestDraftModel(t *testing.T) {
	chat, _ := models(t)
	dir := t.TempDir()
	other, foreign, padded := filepath.Join(dir, "other.gguf"), filepath.Join(dir, "foreign.gguf"), filepath.Join(dir, "padded.gguf")
	if err := synth.Write(other, synth.Options{Shape: "tiny", Seed: 7}); err != nil {
		t.Fatal(err)
	}
	if err := synth.Write(foreign, synth.Options{Shape: "tiny", Seed: 1, Vocab: 5000}); err != nil {
		t.Fatal(err)
	}
	// The same list and 64 tokens more, as models of one family pad theirs.
	if err := synth.Write(padded, synth.Options{Shape: "tiny", Seed: 1, Vocab: 4096 + 64}); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	prompt := passages(3) + " " + question
	gen := func(m *engine.Model, k int) (string, engine.Stats) {
		t.Helper()
		var b strings.Builder
		st, err := m.Generate(ctx, engine.GenerateRequest{Prompt: prompt, MaxTokens: 64, Speculate: k},
			func(p string) error { b.WriteString(p); return nil })
		if err != nil {
			t.Fatal(err)
		}
		m.ClearSeq(ctx, engine.SeqAnswer)
		return b.String(), st
	}
	plain, pst := gen(openWith(t, engine.Options{Path: chat}), 0)
	if plain == "" || pst.DecodeTokens < 8 {
		t.Fatalf("plain: %q, %d tokens", plain, pst.DecodeTokens)
	}

	self := openWith(t, engine.Options{Path: chat, Draft: chat})
	for _, k := range []int{1, 4} {
		got, st := gen(self, k)
		rate := float64(st.Accepted) / float64(max(st.Drafted, 1))
		t.Logf("itself as draft, k=%d: %d of %d accepted; %s", k, st.Accepted, st.Drafted, st.SpecNote)
		if got != plain {
			t.Errorf("k=%d: %q, want %q", k, got, plain)
		}
		if st.SpecMode != "draft model" || st.Drafted == 0 || rate < 0.9 {
			t.Errorf("k=%d: mode %q, %d of %d accepted; want the draft model, ~100%%", k, st.SpecMode, st.Accepted, st.Drafted)
		}
	}

	unrelated := openWith(t, engine.Options{Path: chat, Draft: other})
	var notes []string
	for range 3 {
		got, st := gen(unrelated, 4)
		notes = append(notes, st.SpecNote)
		if got != plain {
			t.Errorf("unrelated draft: %q, want %q", got, plain)
		}
		if st.Accepted*4 > st.Drafted {
			t.Errorf("unrelated draft: %d of %d accepted", st.Accepted, st.Drafted)
		}
	}
	t.Logf("unrelated draft: %q", notes)
	if !strings.HasPrefix(notes[0], "switched off") || !strings.HasPrefix(notes[1], "off:") {
		t.Errorf("unrelated draft, notes %q: want speculation switched off", notes)
	}

	// A draft with a padded vocabulary drafts; its tokens past the model's never reach the model.
	got, st := gen(openWith(t, engine.Options{Path: chat, Draft: padded}), 4)
	t.Logf("padded vocabulary: %d of %d accepted; %s", st.Accepted, st.Drafted, st.SpecNote)
	if got != plain || st.SpecMode != "draft model" || st.Drafted == 0 {
		t.Errorf("padded vocabulary: %q (%s, %d drafted), want %q by the draft model", got, st.SpecMode, st.Drafted, plain)
	}

	_, err := engine.Open(engine.Options{Path: chat, Draft: foreign, Runner: os.Args[0]})
	if !errors.Is(err, engine.ErrVocabMismatch) || !strings.Contains(err.Error(), "5000 tokens") {
		t.Errorf("another vocabulary: %v, want ErrVocabMismatch saying the sizes", err)
	}
}

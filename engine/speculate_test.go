package engine_test

import (
	"context"
	"strings"
	"testing"

	"lore/engine"
)

// TestSpeculativeSameOutput: prompt-lookup drafts verified in the batch of
// the next token change nothing in greedy output, however many are
// accepted, and the cache holds exactly the tokens kept (the next prompt
// that extends the answer reuses all of it).
func TestSpeculativeSameOutput(t *testing.T) {
	chat, _ := models(t)
	m := openWith(t, engine.Options{Path: chat, SpecFloor: 1e-9}) // never off: every k is measured
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

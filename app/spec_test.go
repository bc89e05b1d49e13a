package app_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"lore/app"
	"lore/engine/synth"
)

// TestSpeculation: speculative decoding is off by default; on, the answer
// is the one plain decoding gives and the trace says how the drafts went:
// the chat model as its own draft keeps them all, prompt lookup on random
// weights keeps few and switches itself off below the floor. A draft model
// with another vocabulary is refused with a clear error.
func TestSpeculation(t *testing.T) {
	ctx := context.Background()
	dir, data := setup(t), t.TempDir()
	a := newApp(t, opts{chat: true, data: data})
	set := func(f func(*app.Settings)) error {
		s := a.Settings()
		f(&s)
		return a.SaveSettings(ctx, s)
	}
	if err := set(func(s *app.Settings) { s.MaxTokens = 48 }); err != nil {
		t.Fatal(err)
	}
	const q = "when does the river market open"
	plain := ask(t, a, q, 0)
	if tr := plain.trace; tr.SpecNote != "" || tr.Drafted != 0 {
		t.Fatalf("speculation is on by default: %q, %d drafted", tr.SpecNote, tr.Drafted)
	}

	chat := filepath.Join(dir, "chat.gguf")
	if err := set(func(s *app.Settings) { s.Speculate, s.DraftModel = 4, chat }); err != nil {
		t.Fatal(err)
	}
	var tr *app.Trace
	for range 3 { // enough drafted tokens for the route's acceptance
		r := ask(t, a, q, 0)
		tr = r.trace
		t.Logf("%s: %q, %d of %d", tr.Route, tr.SpecNote, tr.Accepted, tr.Drafted)
		if r.answer.String() != plain.answer.String() {
			t.Errorf("itself as draft: %q, want %q", r.answer.String(), plain.answer.String())
		}
	}
	t.Logf("itself as draft: %s; %d of %d kept", tr.SpecNote, tr.Accepted, tr.Drafted)
	if tr.SpecMode != "draft model" || !strings.HasPrefix(tr.SpecNote, "on") || tr.Drafted == 0 || tr.Accepted*10 < tr.Drafted*9 ||
		tr.DraftAcceptRate == nil || *tr.DraftAcceptRate < 0.9 {
		t.Errorf("itself as draft: mode %q note %q, %d of %d kept, rate %v; want the draft model on, ~100%%",
			tr.SpecMode, tr.SpecNote, tr.Accepted, tr.Drafted, tr.DraftAcceptRate)
	}

	if err := set(func(s *app.Settings) { s.DraftModel = "" }); err != nil {
		t.Fatal(err)
	}
	var notes []string
	for range 4 {
		r := ask(t, a, q, 0)
		notes = append(notes, r.trace.SpecNote)
		if r.answer.String() != plain.answer.String() {
			t.Errorf("prompt lookup: %q, want %q", r.answer.String(), plain.answer.String())
		}
		if r.trace.SpecMode != "" && r.trace.SpecMode != "prompt lookup" {
			t.Errorf("prompt lookup: mode %q", r.trace.SpecMode)
		}
	}
	t.Logf("prompt lookup on random weights: %q", notes)
	if !strings.Contains(strings.Join(notes, "|"), "switched off") || !strings.HasPrefix(notes[len(notes)-1], "off:") {
		t.Errorf("prompt lookup on random weights: notes %q, want it switched off below the floor", notes)
	}

	foreign := filepath.Join(data, "models", "foreign.gguf")
	os.MkdirAll(filepath.Dir(foreign), 0o755)
	if err := synth.Write(foreign, synth.Options{Shape: "tiny", Seed: 5, Vocab: 5000}); err != nil {
		t.Fatal(err)
	}
	err := set(func(s *app.Settings) { s.DraftModel = foreign })
	if !errors.Is(err, app.ErrInvalid) || !strings.Contains(err.Error(), "vocabulary") {
		t.Errorf("a draft with another vocabulary: %v, want ErrInvalid naming the vocabulary", err)
	}
	if s := a.Settings(); s.DraftModel != "" {
		t.Errorf("the refused draft was saved: %q", s.DraftModel)
	}
}

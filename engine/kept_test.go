package engine_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"lore/engine"
)

// keepGenerate is generate with a name to keep the answer sequence under
// and one to restore first.
func keepGenerate(t *testing.T, m *engine.Model, prompt, keepAs, restore string) (string, engine.Stats) {
	t.Helper()
	var b strings.Builder
	st, err := m.Generate(context.Background(), engine.GenerateRequest{Prompt: prompt, MaxTokens: 12, KeepAs: keepAs, Restore: restore},
		func(p string) error { b.WriteString(p); return nil })
	if err != nil {
		t.Fatal(err)
	}
	return b.String(), st
}

// TestKeptStates: a prompt asked again after others have used the answer
// sequence restores its kept state, reads only what the state lacks and
// answers as it did; a name the runner no longer keeps, or a state that
// holds less than the sequences, is skipped with the reason, and the
// answer is the same.
func TestKeptStates(t *testing.T) {
	chat, _ := models(t)
	m := openWith(t, engine.Options{Path: chat, KeepBytes: 64 << 20})
	_, first := ragPrompt(t, m, 10, question)
	_, other := ragPrompt(t, m, 10, "a different question about the garden")
	want, st := keepGenerate(t, m, first, "first", "")
	if !slices.Contains(st.Kept, "first") {
		t.Fatalf("kept %v after keeping %q", st.Kept, "first")
	}
	// Another chat: the answer sequence now holds a prompt that shares only
	// the system turn's opening with the first one.
	if _, st := keepGenerate(t, m, other, "other", ""); !slices.Equal(st.Kept, []string{"other", "first"}) {
		t.Fatalf("kept %v, want [other first]", st.Kept)
	}

	got, st := keepGenerate(t, m, first, "", "first")
	if !st.Restored || st.RestoreSkipped != "" || st.CachedTokens != st.PromptTokens-1 || st.EvalTokens != 1 {
		t.Errorf("asked again: restored %v (%q), %d of %d tokens cached, %d evaluated", st.Restored, st.RestoreSkipped,
			st.CachedTokens, st.PromptTokens, st.EvalTokens)
	}
	if got != want {
		t.Errorf("asked again from the kept state %q, the first time %q", got, want)
	}

	// The answer sequence holds the first prompt now: restoring it again
	// would gain nothing.
	if _, st := keepGenerate(t, m, first, "", "first"); st.Restored || !strings.Contains(st.RestoreSkipped, "a sequence holds as much") {
		t.Errorf("restore over a sequence that holds the prompt: restored %v, %q", st.Restored, st.RestoreSkipped)
	}
	if _, st := keepGenerate(t, m, other, "", "gone"); st.Restored || !strings.Contains(st.RestoreSkipped, "no longer kept") {
		t.Errorf("restore of a name never kept: restored %v, %q", st.Restored, st.RestoreSkipped)
	}
}

// TestKeptStatesBudget: the runner keeps states within its budget, the
// least recently used out first, and a model opened without one keeps
// none and says so.
func TestKeptStatesBudget(t *testing.T) {
	chat, _ := models(t)
	probe := openWith(t, engine.Options{Path: chat})
	_, prompt := ragPrompt(t, probe, 10, question)
	if _, err := probe.Prefill(context.Background(), prompt); err != nil {
		t.Fatal(err)
	}
	s, _, err := probe.SaveState(context.Background(), engine.SeqAnswer)
	if err != nil {
		t.Fatal(err)
	}
	// Room for two of these states (and the answers' few tokens), not three.
	m := openWith(t, engine.Options{Path: chat, KeepBytes: int64(len(s.Data)) * 5 / 2})
	var st engine.Stats
	for i, q := range []string{"one question", "two questions", "three questions"} {
		_, p := ragPrompt(t, m, 10, q)
		_, st = keepGenerate(t, m, p, []string{"a", "b", "c"}[i], "")
	}
	if !slices.Equal(st.Kept, []string{"c", "b"}) {
		t.Errorf("kept %v, want [c b]", st.Kept)
	}

	none := openWith(t, engine.Options{Path: chat})
	if _, st := keepGenerate(t, none, prompt, "x", ""); len(st.Kept) != 0 {
		t.Errorf("a model with no budget kept %v", st.Kept)
	}
	if _, st := keepGenerate(t, none, prompt, "", "x"); st.Restored || !strings.Contains(st.RestoreSkipped, "keeps no states") {
		t.Errorf("restore on a model with no budget: restored %v, %q", st.Restored, st.RestoreSkipped)
	}
}

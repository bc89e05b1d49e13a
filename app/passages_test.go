package app_test

import (
	"context"
	"strings"
	"testing"

	"lore/app"
	"lore/engine"
)

// TestPassageKVStitched: with the setting on, the passages of a draft are
// saved in the background, and a question holding them stitches them
// instead of reading them; with it off nothing is stitched.
func TestPassageKVStitched(t *testing.T) {
	ctx := context.Background()
	a := newApp(t, opts{chat: true, embed: true})
	s := a.Settings()
	s.TopK = 2 // of four documents, so that questions differ in their passages
	if err := a.SaveSettings(ctx, s); err != nil {
		t.Fatal(err)
	}
	if tr := ask(t, a, "the city orchestra summer concert", 0).trace; tr.Stitch != "" || tr.StitchedPassages != 0 {
		t.Fatalf("setting off: stitch %q, %d passages", tr.Stitch, tr.StitchedPassages)
	}
	s.PassageKV = true
	if err := a.SaveSettings(ctx, s); err != nil {
		t.Fatal(err)
	}
	// The passages come from a draft of the question, not from asking it:
	// a question asked before would leave its whole prompt in a state the
	// runner keeps, restored exactly instead (TestAskedAgainRestoresKeptState).
	const q = "when does the river market open"
	if res, err := a.Prefetch(ctx, app.PrefetchRequest{Draft: q, ClientID: "test"}); err != nil || res.Passages == 0 {
		t.Fatalf("draft: %+v, %v", res, err)
	}
	if err := a.WaitPassages(ctx); err != nil {
		t.Fatal(err)
	}
	if st := a.PassageKV(); st.Saved == 0 || st.Failed != 0 {
		t.Fatalf("passage KV queue: %+v", st)
	}
	r := ask(t, a, q, 0)
	tr := r.trace
	if tr.Stitch != "on" || !strings.Contains(tr.StitchNote, "not measured") || tr.StitchedPassages == 0 || tr.StitchedTokens == 0 ||
		tr.UncachedPassages != 0 || tr.Restored != 0 || r.answer.Len() == 0 {
		t.Fatalf("stitch %q (%s): %d passages stitched (%d tokens), %d without KV, %d restored, answer %q", tr.Stitch, tr.StitchNote,
			tr.StitchedPassages, tr.StitchedTokens, tr.UncachedPassages, tr.Restored, r.answer.String())
	}
	if tr.EvalTokens+tr.StitchedTokens+tr.CachedTokens != tr.PromptTokens || tr.Stages[app.StageStitch] <= 0 {
		t.Errorf("token accounting: %d evaluated + %d stitched + %d cached != %d; stitch %.2f ms",
			tr.EvalTokens, tr.StitchedTokens, tr.CachedTokens, tr.PromptTokens, tr.Stages[app.StageStitch])
	}
	// A question whose passages are not saved yet reads them, and says why
	// it may not stitch on this model.
	if tr := ask(t, a, "the city orchestra summer concert", 0).trace; tr.Stitch != "on" || tr.UncachedPassages == 0 ||
		!strings.Contains(tr.StitchNote, "not measured") {
		t.Fatalf("passages not saved yet: stitch %q (%s), %d passages without saved KV", tr.Stitch, tr.StitchNote, tr.UncachedPassages)
	}
	t.Logf("stitched: %d read, %d stitched (%d repaired), %d cached", tr.EvalTokens, tr.StitchedTokens, tr.RepairedTokens, tr.CachedTokens)
}

// TestFidelityGate: recomputing every passage token is exact; a repair
// setting whose measured fidelity is below the floor is refused, and the
// trace says why.
func TestFidelityGate(t *testing.T) {
	ctx := context.Background()
	a := newApp(t, opts{chat: true, embed: true})
	f, err := a.MeasureFidelity(ctx, app.FidelityRequest{
		Questions: []string{"when does the river market open", "what grows in the small garden", "solar energy report by the students"},
		Repairs:   []int{0, engine.RepairAll}, Tokens: 12})
	if err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + f.String())
	all, zero := f.Rows[1], f.Rows[0]
	if f.Prompts != 3 || all.Agreement != 1 || all.KL > 1e-6 || all.StitchedTokens != 0 || zero.StitchedTokens == 0 {
		t.Fatalf("recompute all must be exact and k=0 must stitch: %+v", f)
	}
	if !all.Passes() || zero.KL <= 0 || len(zero.Label) == 0 {
		t.Errorf("recompute all must pass, k=0 must differ: %+v", f.Rows)
	}
	s := a.Settings()
	s.PassageKV, s.PassageRepair = true, 0
	if err := a.SaveSettings(ctx, s); err != nil {
		t.Fatal(err)
	}
	// Whatever this tiny model measured, the gate follows the stored rows.
	for _, firstTop1 := range []float64{1, 0.5} {
		g := f
		g.Rows = []app.FidelityRow{zero}
		g.Rows[0].FirstTop1, g.Rows[0].KL = firstTop1, 0.01
		if err := a.PutFidelity(ctx, g); err != nil {
			t.Fatal(err)
		}
		want := map[bool]string{true: "on", false: "refused"}[g.Rows[0].Passes()]
		tr := ask(t, a, "when does the river market open", 0).trace
		if tr.Stitch != want || (want == "refused" && (!strings.Contains(tr.StitchNote, "below the floor") || tr.StitchedPassages != 0)) {
			t.Errorf("k=0 with first-token agreement %.0f%%: stitch %q, note %q, %d stitched, want %s",
				100*firstTop1, tr.Stitch, tr.StitchNote, tr.StitchedPassages, want)
		}
	}
}

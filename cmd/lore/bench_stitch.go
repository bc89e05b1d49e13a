package main

import (
	"context"
	"fmt"

	"lore/app"
)

// stitchReport is `lore bench ttft`'s stitched scenario: cold API questions
// whose passages all have saved KV (Settings.PassageKV), and with
// --fidelity the table comparing stitched prompts with full reading.
type stitchReport struct {
	StitchedP50     float64 `json:"stitched_p50_ms"`
	StitchedP95     float64 `json:"stitched_p95_ms"`
	StitchRepair    int     `json:"stitch_repair"`
	StitchedShare   float64 `json:"stitched_token_share"` // median share of the prompt placed, not read
	StitchedEvalP50 float64 `json:"stitched_eval_tokens_p50"`
	StitchedAll     float64 `json:"stitched_all_cached_rate"` // questions with no passage lacking KV
	// Typed with passage KV on (other questions than the stitched ones):
	// Enter → first token, and how often the whole draft prompt was adopted.
	TypedStitchedP50 float64       `json:"typed_stitched_p50_ms"`
	TypedStitchedP95 float64       `json:"typed_stitched_p95_ms"`
	TypedStitchedHit float64       `json:"typed_stitched_prefetch_hit_rate"`
	PassageKVBytes   int64         `json:"passage_kv_bytes"` // what the store holds, warm prefix included
	PassageKVEntries int           `json:"passage_kv_entries"`
	Fidelity         *app.Fidelity `json:"fidelity,omitempty"`
}

// benchStitched primes the passage KV with one pass over the questions,
// then asks them again: each question's passages are placed from saved KV
// (the answer sequence holds the question before it, as in use). The
// fidelity table, when asked for, is measured afterwards, since it records
// the floor that would then refuse stitching on this model.
func benchStitched(ctx context.Context, a *app.App, qs []string, repair int, fidelity bool,
	ask func(q string) (*app.Trace, error), typed func() ([]float64, int, error), logf func(string, ...any)) (*stitchReport, error) {
	s := a.Settings()
	old := s
	s.PassageKV, s.PassageRepair = true, repair
	if err := a.SaveSettings(ctx, s); err != nil {
		return nil, err
	}
	defer a.SaveSettings(context.WithoutCancel(ctx), old)
	logf("saving passage KV for %d questions…", len(qs))
	for _, q := range qs {
		if _, err := ask(q); err != nil {
			return nil, err
		}
	}
	if err := a.WaitPassages(ctx); err != nil {
		return nil, err
	}
	rep := &stitchReport{StitchRepair: repair}
	var ttft, share, eval []float64
	all := 0
	for i, q := range qs {
		tr, err := ask(q)
		if err != nil {
			return nil, err
		}
		ttft = append(ttft, tr.Stages[app.StageTTFT])
		share = append(share, float64(tr.StitchedTokens)/float64(max(tr.PromptTokens, 1)))
		eval = append(eval, float64(tr.EvalTokens))
		if tr.UncachedPassages == 0 && tr.Stitch == "on" {
			all++
		}
		logf("stitched %2d/%d: ttft %6.0f ms (retrieval %.0f, prefill %.0f of which stitch %.1f), %d prompt tokens: %d stitched (%d passages, %d repaired), %d cached, %d read %s",
			i+1, len(qs), tr.Stages[app.StageTTFT], tr.Stages[app.StageRetrieval], tr.Stages[app.StagePrefill], tr.Stages[app.StageStitch],
			tr.PromptTokens, tr.StitchedTokens, tr.StitchedPassages, tr.RepairedTokens, tr.CachedTokens, tr.EvalTokens, tr.StitchNote)
	}
	rep.StitchedP50, rep.StitchedP95 = pctOf(sorted(ttft), 0.5), pctOf(sorted(ttft), 0.95)
	rep.StitchedShare, rep.StitchedEvalP50 = round2(pctOf(sorted(share), 0.5)), pctOf(sorted(eval), 0.5)
	rep.StitchedAll = round2(float64(all) / float64(max(len(qs), 1)))
	if ttft, hits, err := typed(); err != nil {
		return nil, err
	} else if len(ttft) > 0 {
		rep.TypedStitchedP50, rep.TypedStitchedP95 = pctOf(sorted(ttft), 0.5), pctOf(sorted(ttft), 0.95)
		rep.TypedStitchedHit = round2(float64(hits) / float64(len(ttft)))
	}
	st := a.PassageKV()
	rep.PassageKVBytes, rep.PassageKVEntries = st.Store.RAMBytes, st.Store.RAMEntries
	if fidelity {
		logf("measuring fidelity…")
		f, err := a.MeasureFidelity(ctx, app.FidelityRequest{Questions: qs})
		if err != nil {
			return nil, err
		}
		rep.Fidelity = &f
	}
	return rep, nil
}

func (r *stitchReport) print() {
	fmt.Printf("  stitched   p50 %6.0f ms  p95 %6.0f ms  (passage KV with k=%d repair: %.0f%% of the prompt placed, %d tokens read, median; all passages saved in %.0f%% of questions)\n",
		r.StitchedP50, r.StitchedP95, r.StitchRepair, 100*r.StitchedShare, int(r.StitchedEvalP50), 100*r.StitchedAll)
	fmt.Printf("  typed+stitch p50 %4.0f ms  p95 %6.0f ms  (other questions, typed with passage KV on; whole-draft prefetch adopted in %.0f%%)\n",
		r.TypedStitchedP50, r.TypedStitchedP95, 100*r.TypedStitchedHit)
	fmt.Printf("             KV store: %d entries, %.1f MiB\n", r.PassageKVEntries, float64(r.PassageKVBytes)/(1<<20))
	if r.Fidelity != nil {
		fmt.Print(r.Fidelity.String())
	}
}

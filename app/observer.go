package app

import (
	"context"
	"fmt"
	"math"
	"strings"
	"time"

	"go.opentelemetry.io/otel/trace"

	"lore/engine"
	"lore/index/retrieve"
)

// observer tells a front door how a question's stages go (events) and
// writes its trace. A quiet one (drafts, measurements) sends nothing and
// keeps a trace no one stores.
type observer struct {
	t       *Trace
	rec     *recorder
	emit    Sink   // nil: quiet
	cancel  func() // stops the question when its sink fails
	reasons []string
	sendErr error
}

func newObserver(ctx context.Context, tracer trace.Tracer, t *Trace, emit Sink, cancel func()) *observer {
	return &observer{t: t, rec: newRecorder(ctx, tracer, t), emit: emit, cancel: cancel}
}

// quietObserver observes a draft's or a measurement's stages.
func quietObserver(ctx context.Context, tracer trace.Tracer) *observer {
	return newObserver(ctx, tracer, &Trace{Received: time.Now()}, nil, nil)
}

// send emits an event; a sink that fails cancels the answer.
func (o *observer) send(ev Event) error {
	if o.sendErr != nil || o.emit == nil {
		return o.sendErr
	}
	if err := o.emit(ev); err != nil {
		o.sendErr = fmt.Errorf("client gone: %w", err)
		o.cancel()
		return o.sendErr
	}
	return nil
}

// stage reports a stage (a Stage* name) starting or ending.
func (o *observer) stage(name, state string, detail map[string]any) error {
	ev := StageEvent{Name: trimMs(name), State: state, Detail: detail}
	if state == stageDone {
		ev.Ms = o.t.Stages[name]
	}
	return o.send(ev)
}

// degrade records that the question fell back to level, and why.
func (o *observer) degrade(level Fallback, reason string) {
	o.t.FallbackLevel = max(o.t.FallbackLevel, level)
	o.reasons = append(o.reasons, reason)
	o.t.FallbackReason = strings.Join(o.reasons, "; ")
}

// found records what retrieval found.
func (o *observer) found(res retrieve.Result) {
	t := o.t
	t.EmbedCacheHit, t.EmbedLookup, t.RetrievalCacheHit, t.RetrievalMode = res.EmbedCacheHit, res.EmbedLookup, res.CacheHit, res.Mode
	if res.Mode == retrieve.ModeBM25 {
		o.degrade(FallbackBM25, "BM25 only: "+res.Degraded)
	}
}

// laidOut records the plan q answers with.
func (o *observer) laidOut(q *question, pl plan) {
	t := o.t
	t.ContextBudget, t.ContextBudgetFrom = q.budget, q.budgetFrom
	t.ContextChunks = len(pl.passages)
	p := pl.prompt
	t.StalePassages, t.LatePassages, t.Cut = p.stale, p.late, p.cut
	t.TurnPassages = nil
	for _, q := range p.turn {
		t.TurnPassages = append(t.TurnPassages, q.ChunkID)
	}
	if pl.gen == nil {
		o.degrade(FallbackExtractive, "no generation model: extractive answer")
	}
}

// generated records what the engine did: its numbers as stages laid out
// from the moment the prompt was handed over, and what stitching did.
func (o *observer) generated(genStart time.Time, st engine.Stats) {
	t, rec := o.t, o.rec
	t.PromptTokens, t.CachedTokens, t.EvalTokens = st.PromptTokens, st.CachedTokens, st.EvalTokens
	t.DecodeTokens, t.DecodeTokS, t.StopReason = st.DecodeTokens, round(st.DecodeTokS), st.StopReason
	if st.SpecNote != "" {
		t.SpecMode, t.Drafted, t.Accepted, t.SpecNote = st.SpecMode, st.Drafted, st.Accepted, st.SpecNote
		if st.SpecAcceptRate >= 0 {
			r := math.Round(st.SpecAcceptRate*1000) / 1000
			t.DraftAcceptRate = &r
		}
	}
	off := rec.since(genStart)
	rtt := st.RunnerRTTMs / 2
	rec.set(StageQueue, st.QueueMs, off)
	off += st.QueueMs + rtt
	rec.set(StageTokenize, st.TokenizeMs, off)
	off += st.TokenizeMs
	if st.RestoreMs > 0 {
		rec.set(StageRestore, st.RestoreMs, off)
		off += st.RestoreMs
	}
	rec.set(StagePrefill, st.PrefillMs, off)
	rec.set(StageFirstDecode, st.FirstDecodeMs, off+st.PrefillMs)
	if st.StitchMs > 0 {
		rec.set(StageStitch, st.StitchMs, off)
	}
	rec.set(StageRunnerRTT, st.RunnerRTTMs, rec.since(genStart)+st.QueueMs)
	llm := st.ClientTTFT
	if llm == 0 {
		llm = st.TokenizeMs + st.RestoreMs + st.PrefillMs + st.FirstDecodeMs
	}
	rec.set(StageLLMTTFT, llm, rec.since(genStart)+st.QueueMs)
	t.StitchedPassages, t.StitchedTokens, t.RepairedTokens = st.StitchedPassages, st.StitchedTokens, st.RepairedTokens
	t.UncachedPassages = st.UncachedPassages
	if st.StitchSkipped != "" {
		t.StitchNote = strings.TrimPrefix(t.StitchNote+"; ", "; ") + st.StitchSkipped
	}
}

// restored records what became of the kept state the question named.
func (o *observer) restored(st engine.Stats) {
	if st.Restored {
		o.t.Restored = st.CachedTokens
	}
	o.t.RestoreNote = st.RestoreSkipped
}

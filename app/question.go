package app

import (
	"context"
	"crypto/sha256"
	"fmt"
	"strconv"
	"strings"
	"time"

	"lore/engine"
	"lore/index/retrieve"
	"lore/store"
)

// The question pipeline's stages, shared by questions, drafts (Prefetch)
// and fidelity measurements: find (retrieval, then rerank) gives the
// candidates; layOut fits them into a chat model's prompt (a plan); only a
// question goes on to answer with it (ask). Each stage reads a question and
// returns its result; what happened is told to an observer.

// question is a question or a draft of one, in its chat: what every stage
// reads.
type question struct {
	text    string
	ws      store.Workspace
	history []turn // the chat's earlier turns
	m       *models
	s       Settings
	// budget is the passages' token budget, fixed when the question is
	// made: both layouts of a routed question share it.
	budget     int
	budgetFrom string
}

// newQuestion is text asked in ws of the models m, with the settings and
// the passage budget of now.
func (a *App) newQuestion(text string, ws store.Workspace, m *models) *question {
	q := &question{text: text, ws: ws, m: m, s: a.Settings()}
	q.budget, q.budgetFrom = a.contextBudget(q.s)
	return q
}

// history reads chat's earlier turns (none for chat 0).
func (a *App) history(ctx context.Context, chat int64) ([]turn, error) {
	if chat == 0 {
		return nil, nil
	}
	msgs, err := a.db.Messages(ctx, chat)
	if err != nil {
		return nil, fmt.Errorf("chat %d: %w", chat, err)
	}
	out := make([]turn, len(msgs))
	for i, m := range msgs {
		out[i] = turn{Message: engine.Message{Role: m.Role, Content: m.Content}}
		if m.Role == "user" {
			out[i].passages = storedPassages(m.Passages)
		}
	}
	return out, nil
}

// baseKey names what g's prompt holds before this turn's passages: the
// model, the workspace and the conversation so far.
func (q *question) baseKey(g Generator) string {
	h := sha256.New()
	for _, m := range q.history {
		fmt.Fprintf(h, "%s\x00%s\x00", m.Role, m.Content)
		for _, p := range m.passages {
			fmt.Fprintf(h, "%d,", p.ChunkID)
		}
	}
	return fmt.Sprintf("%s|%d|%x", g.ID(), q.ws.ID, h.Sum(nil)[:8])
}

// find runs the query embedding, then vector ‖ BM25, fused, then rerank:
// the question's candidates, best first.
func (a *App) find(ctx context.Context, q *question, o *observer) (retrieve.Result, error) {
	o.stage(StageRetrieval, stageStart, nil)
	start := time.Now()
	res, err := q.m.retriever.Search(ctx, q.ws.ID, q.text, retrieve.Options{TopK: max(q.s.TopK, q.s.RerankK), EfSearch: q.s.EfSearch})
	if err != nil {
		return res, fmt.Errorf("retrieval: %w", err)
	}
	base := o.rec.since(start)
	for _, st := range []struct {
		name string
		step retrieve.Step
	}{{StageEmbed, res.Timing.Embed}, {StageVector, res.Timing.Vector}, {StageBM25, res.Timing.BM25}} {
		o.rec.set(st.name, st.step.Ms, base+st.step.Start)
	}
	o.rec.add(StageRetrieval, start, time.Now())
	o.found(res)
	if err := o.stage(StageRetrieval, stageDone, map[string]any{"sources": len(res.Passages), "mode": res.Mode}); err != nil {
		return res, err
	}
	return res, a.rerank(ctx, q, &res, o)
}

// rerank reorders the candidates when a reranker exists and its expected
// cost fits the budget. A remote reranker that fails hands over to the
// local one when there is one, else rerank is skipped; either way the
// trace says so (fallback level 1, rerank_route).
func (a *App) rerank(ctx context.Context, q *question, res *retrieve.Result, o *observer) error {
	k := min(q.s.RerankK, len(res.Passages))
	rr := q.m.rerank
	remoteRR := isRemoteReranker(rr)
	if remoteRR {
		o.t.RerankRoute = rr.ID()
	}
	cost := func(r Reranker) float64 { return a.rerankCost(r.ID()) * float64(k) }
	switch {
	case rr == nil:
		o.degrade(FallbackRerank, "rerank skipped: no rerank model")
		o.rec.skip(StageRerank, "no rerank model")
	case k == 0:
		o.rec.skip(StageRerank, "nothing to rerank")
	case q.s.RerankBudgetMs > 0 && cost(rr) > float64(q.s.RerankBudgetMs):
		why := fmt.Sprintf("%d candidates would take ~%.0f ms, over the %d ms budget", k, cost(rr), q.s.RerankBudgetMs)
		o.degrade(FallbackRerank, "rerank skipped: "+why)
		o.rec.skip(StageRerank, why)
	default:
		o.stage(StageRerank, stageStart, map[string]any{"candidates": k})
		start := time.Now()
		d, err := q.m.retriever.Rerank(ctx, rr, q.text, res, k)
		if err == nil {
			a.noteRerank(rr.ID(), ms(d), k)
		}
		if err != nil && remoteRR && ctx.Err() == nil {
			err = a.rerankLocally(ctx, q, res, k, err, time.Since(start), o)
		}
		o.rec.add(StageRerank, start, time.Now())
		if err != nil {
			o.degrade(FallbackRerank, "rerank failed: "+err.Error())
		}
		return o.stage(StageRerank, stageDone, nil)
	}
	return nil
}

// rerankLocally stands in for the remote reranker, which failed with
// failed after spent: the local reranker runs when there is one and it
// fits what is left of the budget, else rerank is skipped, said as such.
// It returns the local reranker's own error (nil when it ran or was
// skipped).
func (a *App) rerankLocally(ctx context.Context, q *question, res *retrieve.Result, k int, failed error, spent time.Duration, o *observer) error {
	rr, local, budget := q.m.rerank, q.m.rerankFallback, q.s.RerankBudgetMs
	o.t.RerankRoute = "none (fallback from " + rr.ID() + ")"
	if local == nil {
		o.degrade(FallbackRerank, "rerank skipped: remote rerank unavailable (no local rerank model to fall back to): "+failed.Error())
		return nil
	}
	if budget > 0 {
		cost, left := a.rerankCost(local.ID())*float64(k), float64(budget)-ms(spent)
		switch {
		case left <= 0:
			o.degrade(FallbackRerank, fmt.Sprintf("rerank skipped: remote rerank unavailable (%v) after %.0f ms: nothing left of the %d ms budget for the local one",
				failed, ms(spent), budget))
			return nil
		case cost > left:
			o.degrade(FallbackRerank, fmt.Sprintf("rerank skipped: remote rerank unavailable (%v) after %.0f ms, and the local one would take ~%.0f ms, over the %.0f ms left of the %d ms budget",
				failed, ms(spent), cost, left, budget))
			return nil
		}
	}
	o.degrade(FallbackRerank, "remote rerank unavailable, the local reranker ran: "+failed.Error())
	d, err := q.m.retriever.Rerank(ctx, local, q.text, res, k)
	if err != nil {
		return err
	}
	o.t.RerankRoute = local.ID() + " (fallback from " + rr.ID() + ")"
	a.noteRerank(local.ID(), ms(d), k)
	return nil
}

// plan is what layOut decided: the chat model that answers and its
// prompt, or (gen nil: no chat model) the passages an extractive answer
// quotes.
type plan struct {
	gen        Generator
	prompt     prompt
	passages   []retrieve.Passage // numbered in this order: the prompt's, or the extractive answer's
	candidates []retrieve.Passage // retrieval's, best first
}

// drafting says whose layout layOut makes: a question's, or a draft's
// (what the drafts read is kept, nothing is left out to meet the
// first-token budget).
type drafting bool

const (
	forQuestion drafting = false
	forDraft    drafting = true
)

// layOut fits the candidates into g's prompt.
func (a *App) layOut(ctx context.Context, q *question, g Generator, res retrieve.Result, who drafting) (plan, error) {
	pl := plan{gen: g, candidates: res.Passages, passages: res.Passages[:min(q.s.TopK, len(res.Passages))]}
	if g == nil {
		return pl, nil
	}
	p, err := a.assemble(ctx, g, q.history, q.text, pl.passages, q.budget, a.reuse(q, g, res.Passages, who))
	if err != nil {
		return pl, err
	}
	pl.prompt, pl.passages = p, p.passages
	return pl, nil
}

// quietPlan finds q's passages and lays out the main chat model's prompt
// for them, telling no one: a draft's plan, or a measurement's.
func (a *App) quietPlan(ctx context.Context, q *question, who drafting) (plan, error) {
	res, err := a.find(ctx, q, quietObserver(ctx, a.cfg.Tracer))
	if err != nil {
		return plan{}, err
	}
	return a.layOut(ctx, q, q.m.chat, res, who)
}

// reuse gives assembly the layouts g's sequences hold after the same
// conversation, to start this turn with: the speculative sequence's (the
// drafts of this question), then the answer sequence's (the question asked
// again), then, for a question, those of earlier questions whose states
// the runner keeps (another chat's passages).
func (a *App) reuse(q *question, g Generator, pool []retrieve.Passage, who drafting) reuse {
	r := reuse{pool: pool}
	id := speedKey(g)
	if who == forQuestion && q.s.RouteTTFTMs > 0 && a.prefill.readable(id, 0, 0) >= 0 {
		// What the model reads in the first-token budget from where the
		// unread passages begin, with a margin for the first decode and a
		// speed that varies; the question is read after them.
		ms, qt := float64(q.s.RouteTTFTMs)*readMargin, questionTokens(q.text)
		r.allowance = func(start int) int { return a.prefill.readable(id, start, ms) - qt }
		r.start = a.warmTokens()
		for _, h := range q.history {
			r.start += len(h.Content) / 4
		}
	}
	a.ahead.layouts(q.baseKey(g), bool(who), &r)
	if l := local(g); l != nil && who == forQuestion {
		a.earlier.layouts(l, q.baseKey(g), &r)
	}
	return r
}

// readMargin is the share of the first-token budget spent reading passages
// after Enter.
const readMargin = 0.85

// specKey names the prompt up to the question: its base and this turn's
// passages in prompt order, so the same key means the same bytes.
func (q *question) specKey(pl plan) string {
	ids := make([]string, len(pl.prompt.turn))
	for i, p := range pl.prompt.turn {
		ids[i] = strconv.FormatInt(p.ChunkID, 10)
	}
	return q.baseKey(pl.gen) + "|" + strings.Join(ids, ",")
}

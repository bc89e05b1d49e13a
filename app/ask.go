package app

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"
	"unicode/utf8"

	"go.opentelemetry.io/otel/trace"

	"lore/engine"
	"lore/index/retrieve"
	"lore/store"
)

// AskRequest is one question.
type AskRequest struct {
	Question  string `json:"question"`
	Workspace string `json:"workspace"`
	ChatID    int64  `json:"chat_id,omitempty"`
	// ClientID is a front door's own name for the request (the desktop's
	// event channel): Cancel accepts it too.
	ClientID string `json:"client_id,omitempty"`
	// Client names the program that asked (an MCP client's name), for the
	// trace; front doors set it, never the request's own JSON.
	Client string `json:"-"`
	// Route picks the chat model: auto (the default: the router's rules,
	// see pickRoute), main or fast.
	Route string `json:"route,omitempty"`
	// RequestID and Received are set by a front door that saw the request
	// first; zero values mean a fresh id and now.
	RequestID string    `json:"-"`
	Received  time.Time `json:"-"`
}

// NewRequestID returns a random request id.
func NewRequestID() string {
	var b [8]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// MaxQuestion is the longest question accepted, in bytes.
const MaxQuestion = 8000

// Ask answers a question, streaming its events to emit, and returns the
// finished trace (also stored). Everything that can refuse the question
// (bad input, unknown workspace or chat, a full queue) does so before the
// first event, so a front door can still answer with a plain status. A
// failing stage degrades the answer (see the fallback levels in
// docs/design.md); it never loses the request.
func (a *App) Ask(ctx context.Context, req AskRequest, emit Sink) (*Trace, error) {
	x, err := a.admitAsk(ctx, req, emit)
	if err != nil {
		return nil, err
	}
	defer x.release()
	a.ahead.asked()
	if r := local(x.m.chat); r != nil {
		// Reading ahead stops now, not when the answer starts: on a
		// small CPU it would slow the question's embedding severalfold.
		defer r.Reserve(ctx)()
	}
	err = x.run(x.start, x.openChat, x.retrieve, x.rerank, x.assemble, x.generate)
	x.finish(err)
	return x.t, err
}

// ask is one question on its way through the pipeline's stages.
type ask struct {
	a    *App
	ctx  context.Context
	q    string
	rec  *recorder
	t    *Trace
	emit Sink
	m    *models
	s    Settings
	ws   store.Workspace
	gen  Generator // the chat model that answers (its route's)
	// routeAsked is the request's route; "" (a prefetch) does not route.
	routeAsked string
	draft      bool // a draft being prefetched, not a question

	history  []turn
	res      retrieve.Result
	passages []retrieve.Passage // fitted into the prompt, in prompt order
	prompt   string
	laid     prompt        // the assembled prompt, with its turn's layout
	parts    []engine.Part // prompt cut around the passages (stitching)
	reasons  []string
	answer   strings.Builder
	release  func()
	newChat  bool  // the question started its chat
	question int64 // the question's stored message
	span     trace.Span
	sendErr  error
}

// admitAsk checks the request, looks up its workspace and chat (creating
// nothing) and takes a place in the queue.
func (a *App) admitAsk(ctx context.Context, req AskRequest, emit Sink) (*ask, error) {
	q := strings.TrimSpace(req.Question)
	if err := CheckText("question", q, MaxQuestion); err != nil {
		return nil, err
	}
	if req.ChatID < 0 {
		return nil, fmt.Errorf("%w: bad chat id", ErrInvalid)
	}
	if err := a.checkRoute(req.Route); err != nil {
		return nil, err
	}
	ws, err := a.lookup(ctx, req.Workspace)
	if err != nil {
		return nil, err
	}
	if req.ChatID > 0 {
		if err := a.chatIn(ctx, req.ChatID, ws); err != nil {
			return nil, err
		}
	}
	t := &Trace{RequestID: req.RequestID, Question: q, Received: req.Received, WorkspaceID: ws.ID, ChatID: req.ChatID, Client: req.Client}
	if t.RequestID == "" {
		t.RequestID = NewRequestID()
	}
	if t.Received.IsZero() {
		t.Received = time.Now()
	}
	ctx, cancel := context.WithTimeout(ctx, a.cfg.RequestTimeout)
	if err := a.runs.admit(t.RequestID, req.ClientID, cancel); err != nil {
		cancel()
		return nil, err
	}
	ctx, span := a.cfg.Tracer.Start(ctx, "ask", trace.WithTimestamp(t.Received))
	m, let := a.hold()
	x := &ask{a: a, ctx: ctx, q: q, t: t, rec: newRecorder(ctx, a.cfg.Tracer, t), emit: emit, m: m,
		s: a.Settings(), ws: ws, span: span, gen: m.chat, routeAsked: cmp.Or(req.Route, RouteAuto)}
	x.release = func() {
		let()
		cancel()
		span.SetAttributes(x.rec.attrs()...)
		span.End()
	}
	t.VersionID = m.versionID()
	return x, nil
}

// quietAsk is a question that only runs stages up to assembly, for the
// main chat model, sending no events and storing nothing (a prefetch, a
// fidelity measurement).
func (a *App) quietAsk(ctx context.Context, q string, m *models, ws store.Workspace) *ask {
	t := &Trace{Received: time.Now(), Stages: map[string]float64{}, StageStarts: map[string]float64{}}
	return &ask{a: a, ctx: ctx, q: q, t: t, rec: newRecorder(ctx, a.cfg.Tracer, t), m: m, s: a.Settings(), ws: ws,
		gen: m.chat, emit: func(Event) error { return nil }}
}

// run calls the stages in order until one fails.
func (x *ask) run(stages ...func() error) error {
	for _, stage := range stages {
		if err := stage(); err != nil {
			return err
		}
	}
	return nil
}

// send emits an event; a sink that fails cancels the answer.
func (x *ask) send(ev Event) error {
	if x.sendErr != nil {
		return x.sendErr
	}
	if err := x.emit(ev); err != nil {
		x.sendErr = fmt.Errorf("client gone: %w", err)
		x.a.Cancel(x.t.RequestID)
		return x.sendErr
	}
	return nil
}

// stage reports a stage (a Stage* name) starting or ending.
func (x *ask) stage(name, state string, detail map[string]any) error {
	ev := StageEvent{Name: trimMs(name), State: state, Detail: detail}
	if state == stageDone {
		ev.Ms = x.t.Stages[name]
	}
	return x.send(ev)
}

func (x *ask) degrade(level Fallback, reason string) {
	x.t.FallbackLevel = max(x.t.FallbackLevel, level)
	x.reasons = append(x.reasons, reason)
}

// start creates the chat if the question starts one, then sends the
// first event with the chat's id: a front door that stops the answer at
// once still knows which chat to continue (a retry goes on in it).
func (x *ask) start() error {
	if x.t.ChatID == 0 {
		c, err := x.a.db.NewChat(x.ctx, x.ws.ID, chatTitle(x.q))
		if err != nil {
			return err
		}
		x.t.ChatID, x.newChat = c.ID, true
	}
	return x.send(Started{RequestID: x.t.RequestID, ChatID: x.t.ChatID})
}

// chatTitle is a chat's title: its first question, cut to 80 bytes on a
// character boundary.
func chatTitle(q string) string {
	if len(q) <= 80 {
		return q
	}
	cut := 80
	for cut > 0 && !utf8.RuneStart(q[cut]) {
		cut--
	}
	return q[:cut] + "…"
}

// openChat loads the chat's earlier turns and stores the question, so it
// is kept even if answering fails.
func (x *ask) openChat() error {
	if !x.newChat {
		if err := x.loadHistory(); err != nil {
			return err
		}
	}
	m, err := x.a.db.AppendMessage(x.ctx, store.Message{ChatID: x.t.ChatID, Role: "user", Content: x.q, RequestID: x.t.RequestID})
	x.question = m.ID
	return err
}

// loadHistory reads the chat's earlier turns.
func (x *ask) loadHistory() error {
	if x.t.ChatID == 0 {
		return nil
	}
	msgs, err := x.a.db.Messages(x.ctx, x.t.ChatID)
	if err != nil {
		return fmt.Errorf("chat %d: %w", x.t.ChatID, err)
	}
	for _, m := range msgs {
		h := turn{Message: engine.Message{Role: m.Role, Content: m.Content}}
		switch {
		case m.Role != "user":
		case m.Passages != nil:
			h.passages = storedPassages(m.Passages)
		case m.RequestID != "":
			h.passages = x.a.turnPassages(x.ctx, m.RequestID) // stored before questions kept their passages
		}
		x.history = append(x.history, h)
	}
	return nil
}

// storedPassages are the passages a question's turn carried, as it sent
// them (a cut one cut), from the JSON stored with the question.
func storedPassages(b []byte) []retrieve.Passage {
	var ss []Source
	if json.Unmarshal(b, &ss) != nil {
		return nil
	}
	out := make([]retrieve.Passage, len(ss))
	for i, s := range ss {
		// Document is the path relative to its folder, or the whole path:
		// as Rel it renders as it did (sourceBlock).
		out[i] = retrieve.Passage{ChunkID: s.ChunkID, Path: s.Path, Rel: s.Document, Heading: s.Heading,
			Page: s.Page, LineStart: s.LineStart, LineEnd: s.LineEnd, Text: s.Text}
	}
	return out
}

// turnPassages are the passages a question's prompt placed in its own
// turn, read back from its trace (the cut one cut again) so that a
// follow-up renders that turn byte for byte: for the questions stored
// before they kept their passages themselves.
// A chunk gone since (re-indexed) is left out: the cache is then reused
// only up to it.
func (a *App) turnPassages(ctx context.Context, requestID string) []retrieve.Passage {
	t, err := a.Trace(ctx, requestID)
	if err != nil || len(t.TurnPassages) == 0 {
		return nil
	}
	hits, err := a.db.ChunkTexts(ctx, t.TurnPassages)
	if err != nil {
		a.log.Warn("earlier passages", "request", requestID, "err", err)
		return nil
	}
	byID := map[int64]store.Hit{}
	for _, h := range hits {
		byID[h.ChunkID] = h
	}
	var out []retrieve.Passage
	for _, id := range t.TurnPassages {
		if h, ok := byID[id]; ok {
			if c := t.Cut; c != nil && c.ChunkID == id {
				h.Text = c.apply(h.Text)
			}
			out = append(out, retrieve.Passage{ChunkID: h.ChunkID, DocID: h.DocumentID, Path: h.Path, Rel: h.Rel, Heading: h.Heading,
				Page: h.Page, LineStart: h.LineStart, LineEnd: h.LineEnd, Text: h.Text})
		}
	}
	return out
}

// retrieve runs the query embedding, then vector ‖ BM25, fused.
func (x *ask) retrieve() error {
	x.stage(StageRetrieval, stageStart, nil)
	start := time.Now()
	res, err := x.m.retriever.Search(x.ctx, x.ws.ID, x.q, retrieve.Options{TopK: max(x.s.TopK, x.s.RerankK), EfSearch: x.s.EfSearch})
	if err != nil {
		return fmt.Errorf("retrieval: %w", err)
	}
	base := x.rec.since(start)
	for _, st := range []struct {
		name string
		step retrieve.Step
	}{{StageEmbed, res.Timing.Embed}, {StageVector, res.Timing.Vector}, {StageBM25, res.Timing.BM25}} {
		x.rec.set(st.name, st.step.Ms, base+st.step.Start)
	}
	x.rec.add(StageRetrieval, start, time.Now())
	x.res = res
	x.t.EmbedCacheHit, x.t.EmbedLookup, x.t.RetrievalCacheHit, x.t.RetrievalMode = res.EmbedCacheHit, res.EmbedLookup, res.CacheHit, res.Mode
	if res.Mode == retrieve.ModeBM25 {
		x.degrade(FallbackBM25, "BM25 only: "+res.Degraded)
	}
	return x.stage(StageRetrieval, stageDone, map[string]any{"sources": len(res.Passages), "mode": res.Mode})
}

// rerank reorders the candidates when a reranker exists and its expected
// cost fits the budget. A remote reranker that fails hands over to the
// local one when there is one, else rerank is skipped; either way the
// trace says so (fallback level 1, rerank_route).
func (x *ask) rerank() error {
	k := min(x.s.RerankK, len(x.res.Passages))
	rr := x.m.rerank
	remoteRR := isRemoteReranker(rr)
	if remoteRR {
		x.t.RerankRoute = rr.ID()
	}
	cost := func(r Reranker) float64 { return x.a.rerankCost(r.ID()) * float64(k) }
	switch {
	case rr == nil:
		x.degrade(FallbackRerank, "rerank skipped: no rerank model")
		x.rec.skip(StageRerank, "no rerank model")
	case k == 0:
		x.rec.skip(StageRerank, "nothing to rerank")
	case x.s.RerankBudgetMs > 0 && cost(rr) > float64(x.s.RerankBudgetMs):
		why := fmt.Sprintf("%d candidates would take ~%.0f ms, over the %d ms budget", k, cost(rr), x.s.RerankBudgetMs)
		x.degrade(FallbackRerank, "rerank skipped: "+why)
		x.rec.skip(StageRerank, why)
	default:
		x.stage(StageRerank, stageStart, map[string]any{"candidates": k})
		start := time.Now()
		d, err := x.m.retriever.Rerank(x.ctx, rr, x.q, &x.res, k)
		if err == nil {
			x.a.noteRerank(rr.ID(), ms(d), k)
		}
		if err != nil && remoteRR && x.ctx.Err() == nil {
			err = x.rerankLocally(k, rr, err, time.Since(start))
		}
		x.rec.add(StageRerank, start, time.Now())
		if err != nil {
			x.degrade(FallbackRerank, "rerank failed: "+err.Error())
		}
		return x.stage(StageRerank, stageDone, nil)
	}
	return nil
}

// rerankLocally stands in for the remote reranker rr, which failed with
// failed after spent: the local reranker runs when there is one and it
// fits what is left of the budget, else rerank is skipped, said as such.
// It returns the local reranker's own error (nil when it ran or was
// skipped).
func (x *ask) rerankLocally(k int, rr Reranker, failed error, spent time.Duration) error {
	local := x.m.rerankFallback
	x.t.RerankRoute = "none (fallback from " + rr.ID() + ")"
	if local == nil {
		x.degrade(FallbackRerank, "rerank skipped: remote rerank unavailable (no local rerank model to fall back to): "+failed.Error())
		return nil
	}
	if x.s.RerankBudgetMs > 0 {
		cost, left := x.a.rerankCost(local.ID())*float64(k), float64(x.s.RerankBudgetMs)-ms(spent)
		switch {
		case left <= 0:
			x.degrade(FallbackRerank, fmt.Sprintf("rerank skipped: remote rerank unavailable (%v) after %.0f ms: nothing left of the %d ms budget for the local one",
				failed, ms(spent), x.s.RerankBudgetMs))
			return nil
		case cost > left:
			x.degrade(FallbackRerank, fmt.Sprintf("rerank skipped: remote rerank unavailable (%v) after %.0f ms, and the local one would take ~%.0f ms, over the %.0f ms left of the %d ms budget",
				failed, ms(spent), cost, left, x.s.RerankBudgetMs))
			return nil
		}
	}
	x.degrade(FallbackRerank, "remote rerank unavailable, the local reranker ran: "+failed.Error())
	d, err := x.m.retriever.Rerank(x.ctx, local, x.q, &x.res, k)
	if err != nil {
		return err
	}
	x.t.RerankRoute = local.ID() + " (fallback from " + rr.ID() + ")"
	x.a.noteRerank(local.ID(), ms(d), k)
	return nil
}

// assemble fits the passages into the prompt's token budget.
func (x *ask) assemble() error {
	passages := x.res.Passages[:min(x.s.TopK, len(x.res.Passages))]
	x.stage(StageAssemble, stageStart, nil)
	start := time.Now()
	if x.gen != nil {
		x.t.ContextBudget, x.t.ContextBudgetFrom = x.a.contextBudget(x.s)
		p, err := x.a.assemble(x.ctx, x.gen, x.history, x.q, passages, x.t.ContextBudget, x.reuse(x.gen))
		if err != nil {
			return err
		}
		if x.routeAsked != "" {
			var g Generator
			x.t.RouteRole, g, x.t.RouteReason = x.pickRoute(p)
			if g != x.gen { // the fast model renders and counts in its own template and vocabulary
				x.gen = g
				if p, err = x.a.assemble(x.ctx, g, x.history, x.q, passages, x.t.ContextBudget, x.reuse(g)); err != nil {
					return err
				}
			}
		}
		x.prompt, x.passages, x.parts, x.laid = p.text(), p.passages, p.parts(), p
		x.t.StalePassages, x.t.LatePassages, x.t.Cut = p.stale, p.late, p.cut
		for _, q := range p.turn {
			x.t.TurnPassages = append(x.t.TurnPassages, q.ChunkID)
		}
	} else {
		x.passages = passages
		x.degrade(FallbackExtractive, "no generation model: extractive answer")
	}
	x.rec.add(StageAssemble, start, time.Now())
	x.t.ContextChunks = len(x.passages)
	x.t.FallbackReason = strings.Join(x.reasons, "; ")
	if err := x.stage(StageAssemble, stageDone, map[string]any{"sources": len(x.passages), "candidates": len(x.res.Passages)}); err != nil {
		return err
	}
	return x.send(toSources(x.passages))
}

// generate streams the answer (or the extractive one) and lays the
// engine's numbers out as stages.
func (x *ask) generate() error {
	var planAt, firstAt time.Time // when the runner said what it will evaluate; the first token
	genStart := time.Now()
	token := func(text string) error {
		if text == "" {
			return nil
		}
		x.answer.WriteString(text)
		sent := time.Now()
		if err := x.send(Token{Text: text}); err != nil {
			return err
		}
		if firstAt.IsZero() && strings.TrimSpace(text) != "" {
			firstAt = time.Now()
			x.t.FirstTokenAt = firstAt
			x.rec.set(StageFlush, ms(firstAt.Sub(sent)), x.rec.since(sent))
			x.rec.set(StageTTFT, x.rec.since(firstAt), 0)
			if !planAt.IsZero() {
				x.rec.add(StagePrefill, planAt, sent) // replaced by the runner's own figure at the end
				x.stage(StagePrefill, stageDone, nil)
			}
			x.send(StageEvent{Name: eventGenerate, State: stageStart})
		}
		return nil
	}
	var err error
	if x.gen == nil {
		x.t.Route = "extractive"
		err = token(extractive(x.passages, "no generation model is configured"))
	} else {
		x.t.Route = x.gen.ID()
		// The model answers one question at a time: a question waits here,
		// not earlier, so its retrieval overlaps the answer before it.
		x.stage(StageQueue, stageStart, nil)
		expected := x.notePrefetch()
		var st engine.Stats
		// A prefetch of other passages is cut back first: its cells would
		// slow this prefill (this is a one-user app: the draft being typed is
		// this question's).
		trim := x.t.Prefetch == PrefetchMiss
		if trim {
			x.cutSpeculation()
		}
		req := engine.GenerateRequest{Prompt: x.prompt, MaxTokens: x.s.MaxTokens, TrimSpeculative: trim,
			Speculate: x.s.Speculate, SpecFloor: specFloor(x.s.SpecFloorPct)}
		if stitch := x.stitchFor(); stitch != nil {
			req.Parts, req.Stitch = x.parts, stitch
		}
		req.OnPlan = func(plan engine.Stats) {
			planAt = time.Now()
			x.send(StageEvent{Name: trimMs(StageQueue), State: stageDone})
			expected := 0.0
			if sp := x.a.prefillSpeed(x.gen); sp > 0 {
				expected = float64(plan.EvalTokens) / sp * 1000
			}
			x.send(StageEvent{Name: trimMs(StagePrefill), State: stageStart, Detail: map[string]any{"prompt_tokens": plan.PromptTokens,
				"cached_tokens": plan.CachedTokens, "eval_tokens": plan.EvalTokens, "stitched_tokens": plan.StitchedTokens,
				"expected_ms": round(expected)}})
		}
		st, err = x.generateChat(req, token) // the remote chat model, or its local fallback
		x.recordGeneration(genStart, st)
		x.noteStitch(st)
		x.adopted(st, expected)
		if st.PromptTokens > 0 {
			x.answeredWith()
		}
		x.queuePassages()
	}
	end := time.Now()
	x.rec.set(StageTotal, x.rec.since(end), 0)
	if x.gen != nil {
		// Decode runs from the first token to the end, on this process's
		// clock: the live event and the stored trace carry the same figure.
		from := end
		if !firstAt.IsZero() {
			from = firstAt
		}
		x.rec.set(StageDecode, ms(end.Sub(from)), x.rec.since(from))
		x.send(StageEvent{Name: eventGenerate, State: stageDone, Ms: x.t.Stages[StageDecode],
			Detail: map[string]any{"decode_tokens": x.t.DecodeTokens, "decode_tok_s": x.t.DecodeTokS}})
	}
	return err
}

// eventGenerate names the decode stage in events (the trace's decode_ms).
const eventGenerate = "generate"

// recordGeneration turns the engine's numbers into stages laid out from
// the moment the prompt was handed over.
func (x *ask) recordGeneration(genStart time.Time, st engine.Stats) {
	t, rec := x.t, x.rec
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
	rec.set(StagePrefill, st.PrefillMs, off+st.TokenizeMs)
	rec.set(StageFirstDecode, st.FirstDecodeMs, off+st.TokenizeMs+st.PrefillMs)
	if st.StitchMs > 0 {
		rec.set(StageStitch, st.StitchMs, off+st.TokenizeMs)
	}
	rec.set(StageRunnerRTT, st.RunnerRTTMs, rec.since(genStart)+st.QueueMs)
	llm := st.ClientTTFT
	if llm == 0 {
		llm = st.TokenizeMs + st.PrefillMs + st.FirstDecodeMs
	}
	rec.set(StageLLMTTFT, llm, rec.since(genStart)+st.QueueMs)
	if st.EvalTokens > 0 && st.PrefillMs > 0 && st.StitchedTokens == 0 {
		// Read as the prompt's tail (stitching reads tokens all through it).
		x.a.notePrefill(x.gen, st.PromptTokens-st.EvalTokens, st.EvalTokens, st.PrefillMs)
	}
}

// finish stores the answer and the trace, and ends the stream with done
// (also for a stopped answer; a failed one ends with the front door's error).
func (x *ask) finish(err error) {
	t := x.t
	ctx := context.WithoutCancel(x.ctx)
	if _, ok := t.Stages[StageTTFT]; !ok {
		x.rec.set(StageTTFT, x.rec.since(time.Now()), 0) // no token: TTFT is the whole wait
	}
	if _, ok := t.Stages[StageTotal]; !ok {
		x.rec.set(StageTotal, x.rec.since(time.Now()), 0)
	}
	for _, name := range seedStages {
		x.rec.skip(name, x.skipReason(err))
	}
	if err != nil {
		t.Error = err.Error()
		if errors.Is(err, context.Canceled) || errors.Is(x.ctx.Err(), context.Canceled) {
			t.StopReason = "cancel"
		}
	} else if x.gen != nil { // an extractive answer quotes its passages: nothing to check
		x.noteSupport()
	}
	x.storeTurn(ctx)
	// The UI's report usually comes before the trace is stored; one that
	// comes while it is being stored is applied after.
	ui := x.a.runs.pendingUI(t.RequestID)
	for {
		if ui != nil {
			setUI(t, ui[0], ui[1])
		}
		if err := x.a.saveTrace(ctx, t); err != nil {
			x.a.log.Error("store trace", "request", t.RequestID, "err", err)
		}
		late := x.a.runs.retire(t.RequestID)
		if late == ui {
			break
		}
		ui = late
	}
	if x.a.cfg.OnTrace != nil {
		x.a.cfg.OnTrace(t)
	}
	if err == nil || t.StopReason == "cancel" {
		x.send(Done{t})
	}
}

// skipReason is why a stage of the question's path did not run, when the
// stage itself did not say.
func (x *ask) skipReason(err error) string {
	switch {
	case err != nil:
		return "the question ended before it"
	case x.gen == nil:
		return "no chat model: extractive answer"
	}
	return "not needed for this question"
}

// storeTurn keeps the turn with its chat: the passages the question's turn
// placed in the prompt (with the question), and the answer with the sources
// it was shown with and whether it was stopped. A chat reopened later
// shows its citations, and a follow-up lays this turn out as it was sent.
func (x *ask) storeTurn(ctx context.Context) {
	t, db := x.t, x.a.db
	if t.ChatID == 0 || x.question == 0 {
		return
	}
	if x.prompt != "" { // assembled: even none are worth knowing
		b, err := json.Marshal(toSources(x.laid.turn))
		if err == nil {
			err = db.SetPassages(ctx, x.question, b)
		}
		if err != nil {
			x.a.log.Error("store passages", "request", t.RequestID, "err", err)
		}
	}
	if x.answer.Len() == 0 && t.Error == "" {
		return
	}
	m := store.Message{ChatID: t.ChatID, Role: "assistant", Content: x.answer.String(), RequestID: t.RequestID,
		Stopped: t.StopReason == "cancel"}
	if len(x.passages) > 0 {
		// Their texts are the questions' (above), or the chunks' (extractive).
		src := toSources(x.passages)
		for i := range src {
			src[i].Text = ""
		}
		b, err := json.Marshal(src)
		if err != nil {
			x.a.log.Error("store sources", "request", t.RequestID, "err", err)
		}
		m.Sources = b
	}
	if _, err := db.AppendMessage(ctx, m); err != nil {
		x.a.log.Error("store answer", "request", t.RequestID, "err", err)
	}
}

// noteSupport records how well the answer is backed by the passages its
// prompt numbered, each as the model read it (CheckSupport).
func (x *ask) noteSupport() {
	texts := make([]string, len(x.passages))
	for i, p := range x.passages {
		texts[i] = sourceBody(p)
	}
	s := CheckSupport(x.answer.String(), texts)
	t := x.t
	t.Support, t.CheckedSentences, t.SupportedSentences, t.UncitedSentences = s.Score, s.Sentences, s.Supported, s.Uncited
}

func (a *App) saveTrace(ctx context.Context, t *Trace) error {
	b, err := json.Marshal(t)
	if err != nil {
		return err
	}
	return a.db.PutTrace(ctx, store.TraceRecord{RequestID: t.RequestID, WorkspaceID: t.WorkspaceID,
		Created: t.Received, TTFTms: t.Stages[StageTTFT], TotalMs: t.Stages[StageTotal],
		FallbackLevel: int(t.FallbackLevel), PromptTokens: t.PromptTokens, Stages: t.Stages, JSON: b})
}

func toSources(ps []retrieve.Passage) Sources {
	out := make(Sources, len(ps))
	for i, p := range ps {
		out[i] = sourceOf(p)
		out[i].N = i + 1
	}
	return out
}

func sourceOf(p retrieve.Passage) Source {
	doc := p.Rel
	if doc == "" {
		doc = p.Path
	}
	return Source{ChunkID: p.ChunkID, Document: doc, Path: p.Path, Page: p.Page,
		Heading: p.Heading, LineStart: p.LineStart, LineEnd: p.LineEnd, Text: p.Text, Scores: Scores(p.Scores)}
}

// chatIn checks that chat id belongs to workspace ws.
func (a *App) chatIn(ctx context.Context, id int64, ws store.Workspace) error {
	chats, err := a.db.Chats(ctx, ws.ID)
	if err != nil {
		return err
	}
	for _, c := range chats {
		if c.ID == id {
			return nil
		}
	}
	return fmt.Errorf("chat %d in workspace %q: %w", id, ws.Name, ErrNotFound)
}

// specFloor is the engine's acceptance floor for a percentage setting:
// 0 means never switch speculation off.
func specFloor(pct int) float64 {
	if pct <= 0 {
		return -1
	}
	return float64(pct) / 100
}

package app

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
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
	if r := local(x.q.m.chat); r != nil {
		// Reading ahead stops now, not when the answer starts: on a
		// small CPU it would slow the question's embedding severalfold.
		defer r.Reserve(ctx)()
	}
	err = x.run()
	x.finish(err)
	return x.t, err
}

// ask is one question on its way through the pipeline's stages: the
// observer that tells its front door and writes its trace, and what the
// stages returned that finishing it needs.
type ask struct {
	*observer
	a     *App
	ctx   context.Context
	q     *question
	route string // the request's (RouteAuto, RouteMain or RouteFast)
	chat  int64  // the chat it goes to (0 until start creates one)

	plan     plan // the layout stage's
	laid     bool // the layout stage ran
	answer   strings.Builder
	release  func()
	newChat  bool  // the question started its chat
	question int64 // the question's stored message
}

// admitAsk checks the request, looks up its workspace and chat (creating
// nothing) and takes a place in the queue.
func (a *App) admitAsk(ctx context.Context, req AskRequest, emit Sink) (*ask, error) {
	q := strings.TrimSpace(req.Question)
	if err := CheckText("question", q, MaxQuestion); err != nil {
		return nil, err
	}
	if err := a.checkRoute(req.Route); err != nil {
		return nil, err
	}
	ws, err := a.chatPlace(ctx, req.Workspace, req.ChatID)
	if err != nil {
		return nil, err
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
	x := &ask{a: a, ctx: ctx, observer: newObserver(ctx, a.cfg.Tracer, t, emit, func() { a.Cancel(t.RequestID) }),
		q: a.newQuestion(q, ws, m), route: cmp.Or(req.Route, RouteAuto), chat: req.ChatID}
	x.release = func() {
		let()
		cancel()
		span.SetAttributes(x.rec.attrs()...)
		span.End()
	}
	t.VersionID = m.versionID()
	return x, nil
}

// run takes the question through its stages: its chat, find, layOut,
// generate.
func (x *ask) run() error {
	if err := x.start(); err != nil {
		return err
	}
	if err := x.openChat(); err != nil {
		return err
	}
	res, err := x.a.find(x.ctx, x.q, x.observer)
	if err != nil {
		return err
	}
	if err := x.layOut(res); err != nil {
		return err
	}
	return x.generate()
}

// start creates the chat if the question starts one, then sends the
// first event with the chat's id: a front door that stops the answer at
// once still knows which chat to continue (a retry goes on in it).
func (x *ask) start() error {
	if x.chat == 0 {
		c, err := x.a.db.NewChat(x.ctx, x.q.ws.ID, chatTitle(x.q.text))
		if err != nil {
			return err
		}
		x.chat, x.newChat = c.ID, true
		x.t.ChatID = c.ID
	}
	return x.send(Started{RequestID: x.t.RequestID, ChatID: x.chat})
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
		h, err := x.a.history(x.ctx, x.chat)
		if err != nil {
			return err
		}
		x.q.history = h
	}
	m, err := x.a.db.AppendMessage(x.ctx, store.Message{ChatID: x.chat, Role: "user", Content: x.q.text, RequestID: x.t.RequestID})
	x.question = m.ID
	return err
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

// layOut lays the prompt out for the main chat model, lets the router pick
// the model that answers, and lays it out again for the fast one when that
// one answers (it renders and counts in its own template and vocabulary).
func (x *ask) layOut(res retrieve.Result) error {
	x.stage(StageAssemble, stageStart, nil)
	start := time.Now()
	pl, err := x.a.layOut(x.ctx, x.q, x.q.m.chat, res, forQuestion)
	if err == nil && pl.gen != nil {
		var g Generator
		x.t.RouteRole, g, x.t.RouteReason = x.a.pickRoute(x.q, x.route, pl.prompt)
		if g != pl.gen {
			pl, err = x.a.layOut(x.ctx, x.q, g, res, forQuestion)
		}
	}
	if err != nil {
		return err
	}
	x.plan, x.laid = pl, true
	x.laidOut(x.q, pl)
	x.rec.add(StageAssemble, start, time.Now())
	if err := x.stage(StageAssemble, stageDone, map[string]any{"sources": len(pl.passages), "candidates": len(res.Passages)}); err != nil {
		return err
	}
	return x.send(toSources(pl.passages))
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
	gen, s := x.plan.gen, x.q.s
	if gen == nil {
		x.t.Route = "extractive"
		err = token(extractive(x.plan.passages, "no generation model is configured"))
	} else {
		x.t.Route = gen.ID()
		// The model answers one question at a time: a question waits here,
		// not earlier, so its retrieval overlaps the answer before it.
		x.stage(StageQueue, stageStart, nil)
		held := x.notePrefetch()
		var st engine.Stats
		// A prefetch of other passages is cut back first: its cells would
		// slow this prefill (this is a one-user app: the draft being typed is
		// this question's).
		trim := held == PrefetchMiss
		if trim {
			x.cutSpeculation()
		}
		req := engine.GenerateRequest{Prompt: x.plan.prompt.text(), MaxTokens: s.MaxTokens, TrimSpeculative: trim,
			Speculate: s.Speculate, SpecFloor: specFloor(s.SpecFloorPct)}
		req.Parts, req.Stitch = x.stitchFor()
		l := local(gen)
		if l != nil && req.Stitch == nil && len(x.plan.prompt.turn) > 0 {
			// With passage KV on, the passages are what is saved (a stitched
			// sequence is not kept: it is not exact).
			req.Restore = x.plan.prompt.restore
			req.KeepAs = x.a.earlier.nameFor(l, x.q.baseKey(gen), x.plan.prompt.turn)
		}
		req.OnPlan = func(plan engine.Stats) {
			planAt = time.Now()
			x.prefillStarts(gen, plan)
		}
		st, err = x.generateChat(req, token) // the remote chat model, or its local fallback
		x.generated(genStart, st)
		if req.Restore != "" {
			x.restored(st)
		}
		if st.EvalTokens > 0 && st.PrefillMs > 0 && st.StitchedTokens == 0 {
			// Read as the prompt's tail (stitching reads tokens all through it).
			x.a.notePrefill(gen, st.PromptTokens-st.EvalTokens, st.EvalTokens, st.PrefillMs)
		}
		x.adopted(st, held == PrefetchHit)
		if st.PromptTokens > 0 {
			lay := x.answeredWith()
			if l != nil && err == nil {
				x.a.earlier.kept(earlierTurn{heldLayout: lay, chat: l, name: req.KeepAs}, st.Kept)
			}
		}
		x.a.queuePassages(x.ctx, s, x.plan)
	}
	end := time.Now()
	x.rec.set(StageTotal, x.rec.since(end), 0)
	if gen != nil {
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

// prefillStarts tells the front door the runner's plan: the wait is over
// and the prompt's unread tokens are being read, in about expected_ms.
func (x *ask) prefillStarts(gen Generator, plan engine.Stats) {
	x.send(StageEvent{Name: trimMs(StageQueue), State: stageDone})
	expected := 0.0
	if sp := x.a.prefillSpeed(gen); sp > 0 {
		expected = float64(plan.EvalTokens) / sp * 1000
	}
	x.send(StageEvent{Name: trimMs(StagePrefill), State: stageStart, Detail: map[string]any{"prompt_tokens": plan.PromptTokens,
		"cached_tokens": plan.CachedTokens, "eval_tokens": plan.EvalTokens, "stitched_tokens": plan.StitchedTokens,
		"expected_ms": round(expected)}})
}

// eventGenerate names the decode stage in events (the trace's decode_ms).
const eventGenerate = "generate"

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
	} else if x.plan.gen != nil { // an extractive answer quotes its passages: nothing to check
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
	case x.plan.gen == nil:
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
	if x.chat == 0 || x.question == 0 {
		return
	}
	if x.laid && x.plan.gen != nil { // assembled: even none are worth knowing
		b, err := json.Marshal(toSources(x.plan.prompt.turn))
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
	m := store.Message{ChatID: x.chat, Role: "assistant", Content: x.answer.String(), RequestID: t.RequestID,
		Stopped: t.StopReason == "cancel"}
	if ps := x.plan.passages; len(ps) > 0 {
		// Their texts are the questions' (above), or the chunks' (extractive).
		src := toSources(ps)
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
	texts := make([]string, len(x.plan.passages))
	for i, p := range x.plan.passages {
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

// chatPlace looks up the workspace a question or draft is asked in, and
// checks that its chat (0: a new one) is one of that workspace's.
func (a *App) chatPlace(ctx context.Context, workspace string, chat int64) (store.Workspace, error) {
	if chat < 0 {
		return store.Workspace{}, fmt.Errorf("%w: bad chat id", ErrInvalid)
	}
	ws, err := a.lookup(ctx, workspace)
	if err != nil || chat == 0 {
		return ws, err
	}
	chats, err := a.db.Chats(ctx, ws.ID)
	if err != nil {
		return ws, err
	}
	for _, c := range chats {
		if c.ID == chat {
			return ws, nil
		}
	}
	return ws, fmt.Errorf("chat %d in workspace %q: %w", chat, ws.Name, ErrNotFound)
}

// specFloor is the engine's acceptance floor for a percentage setting:
// 0 means never switch speculation off.
func specFloor(pct int) float64 {
	if pct <= 0 {
		return -1
	}
	return float64(pct) / 100
}

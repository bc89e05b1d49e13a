package app

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

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
	// RequestID and Received are set by a front door that saw the request
	// first; zero values mean now and a fresh id.
	RequestID string    `json:"-"`
	Received  time.Time `json:"-"`
}

// Sink receives the answer's events as they happen: "trace", "stage",
// "sources", "token", "done". It should flush each one; an error from it
// (a client gone) cancels the request.
type Sink func(event string, data any) error

// StageEvent reports a stage starting or finishing.
type StageEvent struct {
	Name   string         `json:"name"`
	State  string         `json:"state"` // start, done
	Ms     float64        `json:"ms,omitempty"`
	Detail map[string]any `json:"detail,omitempty"`
}

// Source is a passage as the UI shows it, numbered as the answer cites it.
type Source struct {
	N         int             `json:"n"`
	ChunkID   int64           `json:"chunk_id"`
	Document  string          `json:"document"`
	Path      string          `json:"path"`
	Page      int             `json:"page"`
	Heading   string          `json:"heading"`
	LineStart int             `json:"line_start"`
	LineEnd   int             `json:"line_end"`
	Text      string          `json:"text"`
	Scores    retrieve.Scores `json:"scores"`
}

// NewRequestID returns a random request id.
func NewRequestID() string {
	var b [8]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Ask answers a question, streaming its events to emit, and returns the
// finished trace (also stored). A failing stage degrades the answer (see
// the fallback levels in the README); it never loses the request.
func (a *App) Ask(ctx context.Context, req AskRequest, emit Sink) (*Trace, error) {
	q := strings.TrimSpace(req.Question)
	if q == "" {
		return nil, errNoQuestion
	}
	if len(q) > 8000 {
		return nil, fmt.Errorf("question too long (%d bytes, at most 8000)", len(q))
	}
	t := &Trace{RequestID: req.RequestID, Question: q, Received: req.Received}
	if t.RequestID == "" {
		t.RequestID = NewRequestID()
	}
	if t.Received.IsZero() {
		t.Received = time.Now()
	}
	ctx, cancel := context.WithTimeout(ctx, a.cfg.RequestTimeout)
	defer cancel()
	ctx, span := a.cfg.Tracer.Start(ctx, "ask", trace.WithTimestamp(t.Received))
	rec := newRecorder(ctx, a.cfg.Tracer, t)
	defer func() {
		span.SetAttributes(rec.attrs()...)
		span.End()
	}()

	// The id goes out at once, so a client can cancel while queued; a new
	// chat's id comes with the done event (it is created once admitted).
	if err := emit("trace", map[string]any{"request_id": t.RequestID, "chat_id": req.ChatID}); err != nil {
		return nil, err
	}
	stage := func(name, state string, ms float64, detail map[string]any) error {
		return emit("stage", StageEvent{Name: name, State: state, Ms: round(ms), Detail: detail})
	}

	// Admission: one question at a time reaches the engine; beyond the
	// queue's capacity the request is refused at once, before it writes
	// anything.
	stage("queue", "start", 0, nil)
	start := time.Now()
	release, _, err := a.queue.Acquire(engine.WithPriority(ctx, engine.Interactive))
	if err != nil {
		return nil, err
	}
	defer release()
	rec.add(StageQueue, start, time.Now())
	stage("queue", "done", t.Stages[StageQueue], nil)

	ws, err := a.workspace(ctx, req.Workspace)
	if err != nil {
		return nil, err
	}
	t.WorkspaceID = ws.ID
	a.mu.Lock()
	a.inflight[t.RequestID] = true
	a.mu.Unlock()
	defer func() { // finish clears it; this covers early returns
		a.mu.Lock()
		delete(a.inflight, t.RequestID)
		delete(a.pendingUI, t.RequestID)
		a.mu.Unlock()
	}()
	history, err := a.openChat(ctx, t, req.ChatID, q)
	if err != nil {
		return nil, err
	}

	a.mu.Lock()
	s, chat, rr, ret := a.settings, a.chat, a.rerank, a.retriever
	t.VersionID = a.versionID()
	a.mu.Unlock()

	// Retrieval: query embedding, then vector ‖ BM25, fused.
	var reasons []string
	degrade := func(level int, reason string) {
		t.FallbackLevel = max(t.FallbackLevel, level)
		reasons = append(reasons, reason)
	}
	stage("retrieval", "start", 0, nil)
	start = time.Now()
	res, err := ret.Search(ctx, ws.ID, q, retrieve.Options{TopK: max(s.TopK, s.RerankK), EfSearch: s.EfSearch})
	if err != nil {
		return nil, fmt.Errorf("retrieval: %w", err)
	}
	base := rec.since(start)
	for _, st := range []struct {
		name string
		step retrieve.Step
	}{{StageEmbed, res.Timing.Embed}, {StageVector, res.Timing.Vector}, {StageBM25, res.Timing.BM25}} {
		rec.set(st.name, st.step.Ms, base+st.step.Start)
	}
	rec.add(StageRetrieval, start, time.Now())
	t.EmbedCacheHit, t.RetrievalCacheHit, t.RetrievalMode = res.EmbedCacheHit, res.CacheHit, res.Mode
	if res.Mode == "bm25" {
		degrade(2, "BM25 only: "+res.Degraded)
	}
	stage("retrieval", "done", t.Stages[StageRetrieval], map[string]any{"sources": len(res.Passages), "mode": res.Mode})

	// Rerank, when a reranker exists and its expected cost fits the budget.
	k := min(s.RerankK, len(res.Passages))
	switch {
	case rr == nil:
		degrade(1, "rerank skipped: no rerank model")
	case k == 0:
	case s.RerankBudgetMs > 0 && a.rerankCost()*float64(k) > float64(s.RerankBudgetMs):
		degrade(1, fmt.Sprintf("rerank skipped: %d candidates would take ~%.0f ms, over the %d ms budget", k, a.rerankCost()*float64(k), s.RerankBudgetMs))
	default:
		stage("rerank", "start", 0, map[string]any{"candidates": k})
		start = time.Now()
		d, err := ret.Rerank(ctx, rr, q, &res, k)
		rec.add(StageRerank, start, time.Now())
		if err != nil {
			degrade(1, "rerank failed: "+err.Error())
		} else {
			a.noteRerank(d, k)
		}
		stage("rerank", "done", t.Stages[StageRerank], nil)
	}
	if t.Stages[StageRerank] == 0 {
		rec.set(StageRerank, 0, rec.since(time.Now()))
	}
	passages := res.Passages[:min(s.TopK, len(res.Passages))]

	// Prompt assembly, fitted to the token budget.
	start = time.Now()
	stage("prompt_assemble", "start", 0, nil)
	var p prompt
	if chat != nil {
		t.ContextBudget = a.contextBudget(s)
		p, err = assemble(ctx, chat.Template(), chat, history, q, passages, t.ContextBudget)
		if err != nil {
			return nil, err
		}
	} else {
		p = prompt{passages: passages}
		degrade(3, "no generation model: extractive answer")
	}
	rec.add(StageAssemble, start, time.Now())
	stage("prompt_assemble", "done", t.Stages[StageAssemble], nil)
	t.ContextChunks = len(p.passages)
	t.FallbackReason = strings.Join(reasons, "; ")
	sources := toSources(p.passages)
	if err := emit("sources", sources); err != nil {
		return nil, err
	}

	// Generation (or the extractive answer).
	var answer strings.Builder
	var planAt time.Time // when the runner said what it will evaluate
	first := true
	send := func(text string) error {
		if text == "" {
			return nil
		}
		answer.WriteString(text)
		sent := time.Now()
		if err := emit("token", map[string]string{"text": text}); err != nil {
			return err
		}
		if first && strings.TrimSpace(text) != "" {
			first = false
			now := time.Now()
			t.FirstTokenAt = now
			rec.set(StageFlush, ms(now.Sub(sent)), rec.since(sent))
			rec.set(StageTTFT, rec.since(now), 0)
			if !planAt.IsZero() {
				stage("prefill", "done", ms(sent.Sub(planAt)), nil)
			}
			stage("generate", "start", 0, nil)
		}
		return nil
	}
	genStart := time.Now()
	var genErr error
	if chat == nil {
		genErr = send(extractive(p.passages, "no generation model is configured"))
		t.Route = "extractive"
	} else {
		t.Route = chat.ID()
		st, err := chat.Generate(ctx, engine.GenerateRequest{Prompt: p.text, MaxTokens: s.MaxTokens,
			OnPlan: func(plan engine.Stats) {
				planAt = time.Now()
				expected := 0.0
				if sp := a.PrefillSpeed(); sp > 0 {
					expected = float64(plan.EvalTokens) / sp * 1000
				}
				stage("prefill", "start", 0, map[string]any{"prompt_tokens": plan.PromptTokens,
					"cached_tokens": plan.CachedTokens, "eval_tokens": plan.EvalTokens, "expected_ms": round(expected)})
			}}, send)
		genErr = err
		a.recordGeneration(rec, genStart, st)
		stage("generate", "done", st.DecodeMs, map[string]any{"decode_tokens": st.DecodeTokens, "decode_tok_s": round(st.DecodeTokS)})
	}
	end := time.Now()
	rec.set(StageTotal, rec.since(end), 0)
	if chat != nil {
		// Decode runs from the first token to the end, on this process's
		// clock (runner times shifted by an estimated round trip could
		// overshoot the total by a few milliseconds).
		from := end
		if !t.FirstTokenAt.IsZero() {
			from = t.FirstTokenAt
		}
		rec.set(StageDecode, ms(end.Sub(from)), rec.since(from))
	}
	if _, ok := t.Stages[StageTTFT]; !ok {
		rec.set(StageTTFT, rec.since(end), 0) // no token: TTFT is the whole wait
	}
	if genErr != nil {
		t.Error = genErr.Error()
		if errors.Is(genErr, context.Canceled) || errors.Is(ctx.Err(), context.Canceled) {
			t.StopReason = "cancel"
		}
	}
	a.finish(context.WithoutCancel(ctx), t, answer.String())
	if genErr == nil || t.StopReason == "cancel" {
		emit("done", t)
	}
	return t, genErr
}

// recordGeneration turns the engine's numbers into stages laid out from
// the moment the prompt was handed over.
func (a *App) recordGeneration(rec *recorder, genStart time.Time, st engine.Stats) {
	t := rec.t
	t.PromptTokens, t.CachedTokens, t.EvalTokens = st.PromptTokens, st.CachedTokens, st.EvalTokens
	t.DecodeTokens, t.DecodeTokS, t.StopReason = st.DecodeTokens, round(st.DecodeTokS), st.StopReason
	off := rec.since(genStart)
	rtt := st.RunnerRTTMs / 2
	rec.set("engine_queue_ms", st.QueueMs, off)
	off += st.QueueMs + rtt
	rec.set(StageTokenize, st.TokenizeMs, off)
	rec.set(StagePrefill, st.PrefillMs, off+st.TokenizeMs)
	rec.set(StageFirstDecode, st.FirstDecodeMs, off+st.TokenizeMs+st.PrefillMs)
	rec.set(StageRunnerRTT, st.RunnerRTTMs, rec.since(genStart)+st.QueueMs)
	llm := st.ClientTTFT
	if llm == 0 {
		llm = st.TokenizeMs + st.PrefillMs + st.FirstDecodeMs
	}
	rec.set(StageLLMTTFT, llm+st.QueueMs, rec.since(genStart))
	if st.EvalTokens > 0 && st.PrefillMs > 0 {
		a.notePrefill(st.EvalTokens, st.PrefillMs)
	}
}

// openChat returns the earlier turns of the chat (creating it if new) and
// stores the question, so it is kept even if answering fails.
func (a *App) openChat(ctx context.Context, t *Trace, chatID int64, q string) ([]engine.Message, error) {
	if chatID == 0 {
		title := q
		if len(title) > 80 {
			title = title[:80] + "…"
		}
		c, err := a.db.NewChat(ctx, t.WorkspaceID, title)
		if err != nil {
			return nil, err
		}
		chatID = c.ID
	} else if !a.chatIn(ctx, chatID, t.WorkspaceID) {
		return nil, fmt.Errorf("chat %d: %w in this workspace", chatID, ErrNotFound)
	}
	msgs, err := a.db.Messages(ctx, chatID)
	if err != nil {
		return nil, fmt.Errorf("chat %d: %w", chatID, err)
	}
	t.ChatID = chatID
	var history []engine.Message
	for _, m := range msgs {
		history = append(history, engine.Message{Role: m.Role, Content: m.Content})
	}
	if _, err := a.db.AppendMessage(ctx, store.Message{ChatID: chatID, Role: "user", Content: q, RequestID: t.RequestID}); err != nil {
		return nil, err
	}
	return history, nil
}

// finish stores the answer and the trace.
func (a *App) finish(ctx context.Context, t *Trace, answer string) {
	if answer != "" || t.Error != "" {
		content := answer
		if t.StopReason == "cancel" {
			content += " [stopped]"
		}
		a.db.AppendMessage(ctx, store.Message{ChatID: t.ChatID, Role: "assistant", Content: content, RequestID: t.RequestID})
	}
	a.mu.Lock()
	ui, ok := a.pendingUI[t.RequestID]
	delete(a.pendingUI, t.RequestID)
	delete(a.inflight, t.RequestID)
	a.mu.Unlock()
	if ok {
		setUI(t, ui[0], ui[1])
	}
	a.saveTrace(ctx, t)
	if a.cfg.OnTrace != nil {
		a.cfg.OnTrace(t)
	}
}

func (a *App) saveTrace(ctx context.Context, t *Trace) error {
	b, err := json.Marshal(t)
	if err != nil {
		return err
	}
	return a.db.PutTrace(ctx, store.TraceRecord{RequestID: t.RequestID, WorkspaceID: t.WorkspaceID,
		Created: t.Received, TTFTms: t.Stages[StageTTFT], TotalMs: t.Stages[StageTotal],
		FallbackLevel: t.FallbackLevel, PromptTokens: t.PromptTokens, Stages: t.Stages, JSON: b})
}

func toSources(ps []retrieve.Passage) []Source {
	out := make([]Source, len(ps))
	for i, p := range ps {
		doc := p.Rel
		if doc == "" {
			doc = p.Path
		}
		out[i] = Source{N: i + 1, ChunkID: p.ChunkID, Document: doc, Path: p.Path, Page: p.Page,
			Heading: p.Heading, LineStart: p.LineStart, LineEnd: p.LineEnd, Text: p.Text, Scores: p.Scores}
	}
	return out
}

// rerankCost is the measured milliseconds per reranked candidate.
func (a *App) rerankCost() float64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.rerankMs
}

func (a *App) noteRerank(d time.Duration, k int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	per := ms(d) / float64(max(k, 1))
	if a.rerankMs == 0 {
		a.rerankMs = per
	} else {
		a.rerankMs = 0.7*a.rerankMs + 0.3*per
	}
}

// chatIn reports whether chat id belongs to workspace ws.
func (a *App) chatIn(ctx context.Context, id, ws int64) bool {
	chats, err := a.db.Chats(ctx, ws)
	if err != nil {
		return false
	}
	for _, c := range chats {
		if c.ID == id {
			return true
		}
	}
	return false
}

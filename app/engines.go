package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"time"

	"lore/engine"
	"lore/index/retrieve"
)

// models is one immutable set of open models and the retriever that
// embeds with them. A question or an indexing run holds the set it started
// with to the end; a settings change swaps in a new set, and the models it
// replaced close once no one holds the sets that used them.
type models struct {
	chat     Generator
	fast     Generator // the router's fast chat model (nil: none)
	fallback Generator // the local chat model when chat is remote
	embed    Embedder
	rerank   Reranker
	// rerankFallback is the local reranker when rerank is remote.
	rerankFallback Reranker
	retriever      *retrieve.Retriever
	warmed         chan struct{} // closed when the chat model's system prefix is cached

	refs int         // holders (guarded by App.mu)
	drop []io.Closer // what this set used that its successor does not
}

// hold returns the current models; release lets go of them.
func (a *App) hold() (m *models, release func()) {
	a.mu.Lock()
	m = a.cur
	m.refs++
	a.mu.Unlock()
	return m, func() { a.let(m) }
}

// holdOpen is hold for background work, which may outlive the app: false
// once it is closed.
func (a *App) holdOpen() (m *models, release func(), open bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.cur == nil {
		return nil, nil, false
	}
	m = a.cur
	m.refs++
	return m, func() { a.let(m) }, true
}

func (a *App) let(m *models) {
	a.mu.Lock()
	m.refs--
	// Close the oldest retired sets first, and only when every older one is
	// released too: an older set can still use what a newer one dropped.
	var closing []io.Closer
	for len(a.retired) > 0 && a.retired[0].refs == 0 {
		closing = append(closing, a.retired[0].drop...)
		a.retired = a.retired[1:]
	}
	a.mu.Unlock()
	for _, c := range closing {
		if l, ok := c.(localChat); ok {
			a.earlier.forget(l)
		}
		c.Close()
	}
}

func (m *models) closeAll() {
	cs := append(m.drop, closers(m.chat, m.fast, m.fallback, m.embed, m.rerank, m.rerankFallback)...)
	if m.retriever != nil { // not in closers: a nil *Retriever is a non-nil io.Closer
		cs = append(cs, m.retriever)
	}
	for _, c := range cs {
		c.Close()
	}
}

// closers drops the nil interfaces from cs.
func closers(cs ...io.Closer) []io.Closer {
	var out []io.Closer
	for _, c := range cs {
		if c != nil {
			out = append(out, c)
		}
	}
	return out
}

// openModels opens the models named in s. A model given for this run (a
// CLI flag) must open; a saved one that no longer does is skipped and
// logged, so the app still starts and the pipeline degrades.
func (a *App) openModels(s Settings) (*models, error) {
	m := &models{warmed: make(chan struct{})}
	for _, role := range []struct {
		name     string
		path     string
		explicit bool
		set      func(*engine.Model)
	}{
		{"chat", s.ChatModel, a.cfg.ChatModel != "", func(e *engine.Model) { m.chat = e }},
		{"fast chat", s.FastChatModel, a.cfg.FastChatModel != "", func(e *engine.Model) { m.fast = e }},
		{"embedding", s.EmbedModel, a.cfg.EmbedModel != "" && s.EmbedURL == "", func(e *engine.Model) { m.embed = e }},
		{"rerank", s.RerankModel, a.cfg.RerankModel != "", func(e *engine.Model) { m.rerank = e }},
	} {
		if role.path == "" || role.name == "embedding" && s.EmbedURL != "" {
			continue
		}
		draft := ""
		if role.name == "chat" {
			draft = s.draft()
		}
		e, err := a.openModel(role.path, s, draft)
		if errors.Is(err, engine.ErrDraft) && a.cfg.DraftModel == "" {
			// A saved draft that no longer fits costs speculation (prompt
			// lookup then), not the model.
			a.log.Warn("draft model skipped", "path", draft, "err", err)
			e, err = a.openModel(role.path, s, "")
		}
		if err != nil {
			if role.explicit {
				m.closeAll()
				return nil, fmt.Errorf("%s model: %w", role.name, err)
			}
			a.log.Warn("model skipped", "role", role.name, "path", role.path, "err", err)
			continue
		}
		role.set(e)
	}
	if err := a.openRemotes(m, s); err != nil {
		m.closeAll()
		return nil, err
	}
	m.retriever = a.newRetriever(m.embed)
	return m, nil
}

// openModel opens one local model; draft, for the main chat model, is the
// model that drafts its speculative tokens ("": prompt lookup).
func (a *App) openModel(path string, s Settings, draft string) (*engine.Model, error) {
	return engine.Open(engine.Options{Path: path, Threads: s.Threads, GPULayers: s.GPULayers, KV: a.kv, Draft: draft,
		KeepBytes: keepBytes})
}

func (a *App) newRetriever(e Embedder) *retrieve.Retriever {
	var emb retrieve.Embedder
	if e != nil {
		emb = e
	}
	return retrieve.New(a.db, filepath.Join(a.cfg.DataDir, "vectors"), emb)
}

// switchModels opens the models whose paths changed in s and swaps them
// in. Questions already running finish on the set they started with.
func (a *App) switchModels(s Settings) error {
	cur := a.Settings()
	next := *a.current()
	next.refs, next.drop, next.warmed = 0, nil, make(chan struct{})
	var opened, dropped []io.Closer
	// open opens path in place of was (with the chat model's draft: a
	// changed draft reopens it).
	open := func(path, was string, draft *string, assign func(*engine.Model), old io.Closer) error {
		if path == was && (draft == nil || *draft == cur.draft()) {
			return nil
		}
		if old != nil {
			dropped = append(dropped, old)
		}
		if path == "" {
			assign(nil)
			return nil
		}
		d := ""
		if draft != nil {
			d = *draft
		}
		e, err := a.openModel(path, s, d)
		if err != nil {
			return fmt.Errorf("%w: %v", ErrInvalid, err)
		}
		opened = append(opened, e)
		assign(e)
		return nil
	}
	// With a remote chat model the local one is its fallback.
	chat := &next.chat
	if isRemote(next.chat) {
		chat = &next.fallback
	}
	err := open(s.ChatModel, cur.ChatModel, new(s.draft()), func(e *engine.Model) { *chat = nilIfNone[Generator](e) }, *chat)
	if err == nil {
		err = open(s.FastChatModel, cur.FastChatModel, nil, func(e *engine.Model) { next.fast = nilIfNone[Generator](e) }, next.fast)
	}
	if err == nil {
		err = open(s.EmbedModel, cur.EmbedModel, nil, func(e *engine.Model) { next.embed = nilIfNone[Embedder](e) }, next.embed)
	}
	// Likewise the local reranker.
	rerank := &next.rerank
	if isRemoteReranker(next.rerank) {
		rerank = &next.rerankFallback
	}
	if err == nil {
		err = open(s.RerankModel, cur.RerankModel, nil, func(e *engine.Model) { *rerank = nilIfNone[Reranker](e) }, *rerank)
	}
	if err != nil {
		for _, c := range opened {
			c.Close()
		}
		return err
	}
	if s.EmbedModel != cur.EmbedModel {
		dropped = append(dropped, next.retriever)
		next.retriever = a.newRetriever(next.embed)
	}
	a.mu.Lock()
	old := a.cur
	old.drop = append(old.drop, dropped...)
	a.retired = append(a.retired, old)
	a.cur = &next
	old.refs++ // let it go through let, which closes what no one holds
	a.mu.Unlock()
	a.let(old)
	if !a.spawn(func(ctx context.Context) { a.warm(ctx, &next) }) {
		close(next.warmed) // closing: no warm-up, and nothing waits on one
	}
	return nil
}

// nilIfNone keeps a nil *engine.Model from becoming a non-nil interface.
func nilIfNone[T any](e *engine.Model) T {
	var zero T
	if e == nil {
		return zero
	}
	return any(e).(T)
}

func (a *App) current() *models {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.cur
}

// warm starts the runners and evaluates the chat models' system prefix
// (the main model's, then the fast one's: each route keeps its own), so
// the first question pays for neither. Their prefill speeds seed the
// estimates.
func (a *App) warm(ctx context.Context, m *models) {
	defer close(m.warmed)
	// The embedding and rerank runners too, so the first question's query
	// embedding does not pay for loading a model.
	for _, e := range []any{m.embed, m.rerank, m.rerankFallback, m.fallback} {
		if s, ok := e.(interface{ Start(context.Context) error }); ok {
			a.spawn(func(ctx context.Context) {
				if err := s.Start(engine.WithPriority(ctx, engine.Background)); err != nil && ctx.Err() == nil {
					a.log.Warn("model start failed", "err", err)
				}
			})
		}
	}
	if m.chat == nil {
		return
	}
	if w, ok := a.warmChat(ctx, m.chat); ok {
		a.mu.Lock()
		a.warmed = w
		a.mu.Unlock()
	}
	if m.fast != nil {
		a.warmChat(ctx, m.fast)
	}
}

// warmChat reads (or restores) g's system prefix into its cache.
func (a *App) warmChat(ctx context.Context, g Generator) (WarmInfo, bool) {
	prefix, err := g.Template().Prefix(systemPrompt)
	if err != nil {
		a.log.Warn("system prefix", "model", g.ID(), "err", err)
		return WarmInfo{}, false
	}
	wm := local(g)
	if wm == nil {
		return WarmInfo{}, false // a remote model: its server's cache is its own
	}
	start := time.Now()
	st, err := wm.Warm(engine.WithPriority(ctx, engine.Interactive), prefix)
	if err != nil {
		a.log.Warn("warm chat model", "model", g.ID(), "err", err)
		return WarmInfo{}, false
	}
	if !st.Restored && st.PrefillMs > 0 {
		a.notePrefill(g, st.PromptTokens-st.EvalTokens, st.EvalTokens, st.PrefillMs)
	}
	w := WarmInfo{Model: g.ID(), Tokens: st.PromptTokens, Restored: st.Restored, RestoreMs: round(st.RestoreMs),
		PrefillMs: round(st.PrefillMs), ReadyMs: round(ms(time.Since(start)))}
	a.log.Debug("chat model warm", "model", w.Model, "tokens", w.Tokens, "restored", w.Restored, "restore_ms", w.RestoreMs, "prefill_ms", w.PrefillMs)
	return w, true
}

// WarmInfo is how the chat model's system prefix got into its cache: read
// (PrefillMs) or restored from a saved state (RestoreMs); ReadyMs is the
// whole warm-up, the model's load and runner start included.
type WarmInfo struct {
	Model     string  `json:"model"`
	Tokens    int     `json:"tokens"`
	Restored  bool    `json:"restored"`
	RestoreMs float64 `json:"restore_ms"`
	PrefillMs float64 `json:"prefill_ms"`
	ReadyMs   float64 `json:"ready_ms"`
}

// Warmed reports the chat model's last warm-up (zero before the first).
func (a *App) Warmed() WarmInfo {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.warmed
}

// WaitWarm blocks until the chat model's prefix is warm (or ctx ends).
func (a *App) WaitWarm(ctx context.Context) error {
	select {
	case <-a.current().warmed:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// notePrefill records that model read tokens from position start in ms.
// The figures are saved in the background: the answer that measured
// them does not wait on the database.
func (a *App) notePrefill(g Generator, start, tokens int, ms float64) {
	model := speedKey(g)
	if !a.prefill.note(model, start, tokens, ms) {
		return
	}
	a.spawn(func(ctx context.Context) {
		if err := a.prefill.save(context.WithoutCancel(ctx)); err != nil {
			a.log.Warn("save the measured prefill speed", "model", model, "err", err)
		}
	})
}

// PrefillSpeed is the main chat model's measured prompt-reading speed in
// tokens/s (0 if unknown), in this run or an earlier one on this machine.
func (a *App) PrefillSpeed() float64 {
	m := a.current()
	if m.chat == nil {
		return 0
	}
	return a.prefillSpeed(m.chat)
}

func (a *App) prefillSpeed(g Generator) float64 {
	s, _ := a.prefill.tokS(speedKey(g))
	return s
}

// speedKey names what a prefill speed is measured for: the model and, for
// a local one, the threads, GPU layers and flash attention it runs with
// (the machine is the saved figures' own key: machineID).
func speedKey(g Generator) string {
	l := local(g)
	if l == nil {
		return g.ID()
	}
	in := l.Info()
	return fmt.Sprintf("%s|threads %d|gpu layers %d|flash attention %s", g.ID(), in.Threads, in.GPULayers, in.FlashAttention)
}

// rerankCost is the measured milliseconds per reranked candidate of the
// reranker with that ID (a remote one and its local fallback differ).
func (a *App) rerankCost(id string) float64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.rerankMs[id]
}

func (a *App) noteRerank(id string, ms float64, k int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.rerankMs[id] = ewma(a.rerankMs[id], ms/float64(max(k, 1)))
}

func ewma(cur, x float64) float64 {
	if cur == 0 {
		return x
	}
	return 0.7*cur + 0.3*x
}

// versionID ties a trace to the model files and the prompt version.
func (m *models) versionID() string {
	id := func(c interface{ ID() string }, none bool) string {
		if none {
			return "none"
		}
		return c.ID()
	}
	return fmt.Sprintf("%s+%s+%s+%s", id(m.chat, m.chat == nil), id(m.embed, m.embed == nil), id(m.rerank, m.rerank == nil), PromptVersion)
}

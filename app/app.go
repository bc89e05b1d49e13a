// Package app is Lore's application service: the desktop shell, the HTTP
// server and the CLI all call it. It owns the library (store, indexer,
// retriever), the models, and the ask pipeline with its traces.
package app

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"lore/engine"
	"lore/index/retrieve"
	"lore/store"
)

// Generator is what the pipeline needs of a chat model. engine.Model is
// one; an OpenAI-compatible HTTP backend could be another.
type Generator interface {
	Generate(ctx context.Context, req engine.GenerateRequest, fn func(string) error) (engine.Stats, error)
	Warm(ctx context.Context, prefix string) (engine.Stats, error)
	Tokenize(ctx context.Context, text string, special bool) ([]int, error)
	Template() *engine.Template
	Info() engine.Info
	ID() string
	Close() error
}

// Embedder turns texts into normalised vectors.
type Embedder interface {
	Embed(ctx context.Context, texts []string) ([][]float32, error)
	ID() string
	Close() error
}

// Reranker scores documents against a query with a cross-encoder.
type Reranker interface {
	Rerank(ctx context.Context, query string, docs []string) ([]float32, error)
	ID() string
	Close() error
}

// Config is fixed for the life of an App.
type Config struct {
	DataDir string
	// Models override the saved settings for this run ("" keeps them).
	ChatModel, EmbedModel, RerankModel string
	// WorkerCmd starts a parse worker (default: this executable with "parse-worker").
	WorkerCmd []string
	// QueueCapacity bounds questions waiting for the engine; beyond it Ask
	// fails at once with ErrBusy (default 16).
	QueueCapacity  int
	RequestTimeout time.Duration // default 5 minutes
	// Watch keeps workspaces current with a file watcher (long-running
	// front doors: the server and the desktop app).
	Watch  bool
	Tracer trace.Tracer // default: no-op
	// OnTrace is called with each finished trace (metrics).
	OnTrace func(*Trace)
}

// ErrBusy is returned when too many questions are waiting.
var ErrBusy = engine.ErrBusy

// App is the service.
type App struct {
	cfg       Config
	db        *store.DB
	retriever *retrieve.Retriever
	queue     *engine.Queue

	mu       sync.Mutex // guards the models and settings
	settings Settings
	chat     Generator
	embed    Embedder
	rerank   Reranker
	warmed   chan struct{} // closed when the system prefix is in the KV cache
	prefill  float64       // measured prefill tokens/s (EWMA), for budgets and ETAs
	rerankMs float64       // measured rerank cost per candidate (EWMA)

	idx *indexer

	inflight  map[string]bool       // request ids being answered
	pendingUI map[string][2]float64 // UI timings reported before their trace was stored
}

// DefaultDataDir is $LORE_DATA, else the OS's per-user data folder.
func DefaultDataDir() string {
	if d := os.Getenv("LORE_DATA"); d != "" {
		return d
	}
	if runtime.GOOS == "linux" {
		if d := os.Getenv("XDG_DATA_HOME"); d != "" {
			return filepath.Join(d, "lore")
		}
		if h, err := os.UserHomeDir(); err == nil {
			return filepath.Join(h, ".local", "share", "lore")
		}
	}
	if d, err := os.UserConfigDir(); err == nil { // macOS Application Support, Windows AppData
		return filepath.Join(d, "Lore")
	}
	return "lore-data"
}

// New opens the data folder and the configured models. Models load in the
// DefaultQueueCapacity is Config.QueueCapacity's default.
const DefaultQueueCapacity = 16

// background; the chat model's system prefix is warmed as soon as it loads.
func New(ctx context.Context, cfg Config) (*App, error) {
	if cfg.DataDir == "" {
		cfg.DataDir = DefaultDataDir()
	}
	if cfg.QueueCapacity == 0 {
		cfg.QueueCapacity = DefaultQueueCapacity
	}
	if cfg.RequestTimeout == 0 {
		cfg.RequestTimeout = 5 * time.Minute
	}
	if cfg.Tracer == nil {
		cfg.Tracer = noop.NewTracerProvider().Tracer("lore")
	}
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("data folder: %w", err)
	}
	db, err := store.Open(ctx, filepath.Join(cfg.DataDir, "lore.db"))
	if err != nil {
		return nil, err
	}
	a := &App{cfg: cfg, db: db, queue: engine.NewQueue(cfg.QueueCapacity), warmed: make(chan struct{}),
		inflight: map[string]bool{}, pendingUI: map[string][2]float64{}}
	if a.settings, err = loadSettings(ctx, db); err != nil {
		db.Close()
		return nil, err
	}
	for _, o := range []struct {
		dst *string
		v   string
	}{
		{&a.settings.ChatModel, cfg.ChatModel}, {&a.settings.EmbedModel, cfg.EmbedModel}, {&a.settings.RerankModel, cfg.RerankModel}} {
		if o.v != "" {
			*o.dst = o.v
		}
	}
	if err := a.openModels(); err != nil {
		db.Close()
		return nil, err
	}
	a.retriever = retrieve.New(db, filepath.Join(cfg.DataDir, "vectors"), a.embedder())
	a.idx = newIndexer(a)
	if wss, err := db.Workspaces(ctx); err == nil {
		for _, w := range wss {
			a.retriever.Preload(w.ID) // load vector graphs in the background
			a.idx.watch(w.ID)
		}
	}
	go a.warm(context.WithoutCancel(ctx), a.warmed)
	return a, nil
}

// DB is the app's store (for commands that read it directly).
func (a *App) DB() *store.DB { return a.db }

// DataDir is the folder holding the database, graphs and token.
func (a *App) DataDir() string { return a.cfg.DataDir }

// Close stops the models and closes the database.
func (a *App) Close() error {
	a.idx.stop()
	a.mu.Lock()
	defer a.mu.Unlock()
	a.retriever.Close()
	for _, c := range []interface{ Close() error }{a.chat, a.embed, a.rerank} {
		if c != nil {
			c.Close()
		}
	}
	return a.db.Close()
}

// openModels opens the models named in the settings. A model given for
// this run (a CLI flag) must open; a saved one that no longer does is
// skipped and reported, so the app still starts and the pipeline degrades.
func (a *App) openModels() error {
	for _, role := range []struct {
		name     string
		path     string
		explicit bool
		set      func(*engine.Model)
	}{
		{"chat", a.settings.ChatModel, a.cfg.ChatModel != "", func(m *engine.Model) { a.chat = m }},
		{"embedding", a.settings.EmbedModel, a.cfg.EmbedModel != "", func(m *engine.Model) { a.embed = m }},
		{"rerank", a.settings.RerankModel, a.cfg.RerankModel != "", func(m *engine.Model) { a.rerank = m }},
	} {
		if role.path == "" {
			continue
		}
		m, err := a.openModel(role.path, a.settings)
		if err != nil {
			if role.explicit {
				return fmt.Errorf("%s model: %w", role.name, err)
			}
			fmt.Fprintf(os.Stderr, "lore: %s model skipped: %v\n", role.name, err)
			continue
		}
		role.set(m)
	}
	return nil
}

func (a *App) openModel(path string, s Settings) (*engine.Model, error) {
	return engine.Open(engine.Options{Path: path, Threads: s.Threads, GPULayers: s.GPULayers})
}

// switchModels replaces the models whose paths changed in s, between two
// questions: it waits for the one being answered, swaps, closes the old
// runners (freeing their memory) and warms the new chat model.
func (a *App) switchModels(ctx context.Context, s Settings) error {
	release, _, err := a.queue.Acquire(engine.WithPriority(ctx, engine.Interactive))
	if err != nil {
		return err
	}
	defer release()
	cur := a.Settings()
	type swap struct {
		old, new string
		m        *engine.Model
	}
	roles := []*swap{{old: cur.ChatModel, new: s.ChatModel}, {old: cur.EmbedModel, new: s.EmbedModel}, {old: cur.RerankModel, new: s.RerankModel}}
	for _, r := range roles {
		if r.new == r.old || r.new == "" {
			continue
		}
		if r.m, err = a.openModel(r.new, s); err != nil {
			for _, o := range roles {
				if o.m != nil {
					o.m.Close()
				}
			}
			return fmt.Errorf("%w: %v", ErrInvalid, err)
		}
	}
	a.mu.Lock()
	var retired []interface{ Close() error }
	set := func(r *swap, cur any, assign func(*engine.Model)) {
		if r.new == r.old {
			return
		}
		if c, ok := cur.(interface{ Close() error }); ok && c != nil {
			retired = append(retired, c)
		}
		assign(r.m)
	}
	set(roles[0], a.chat, func(m *engine.Model) {
		a.chat = nil
		if m != nil {
			a.chat = m
		}
	})
	set(roles[1], a.embed, func(m *engine.Model) {
		a.embed = nil
		if m != nil {
			a.embed = m
		}
	})
	set(roles[2], a.rerank, func(m *engine.Model) {
		a.rerank = nil
		if m != nil {
			a.rerank = m
		}
	})
	if roles[1].new != roles[1].old {
		retired = append(retired, a.retriever)
		a.retriever = retrieve.New(a.db, filepath.Join(a.cfg.DataDir, "vectors"), a.embedder())
		a.idx.setEmbedder(a.embed)
	}
	a.warmed = make(chan struct{})
	warmed := a.warmed
	a.mu.Unlock()
	for _, c := range retired {
		c.Close()
	}
	go a.warm(context.WithoutCancel(ctx), warmed)
	return nil
}

// retrieverNow is the current retriever (it changes with the embedding model).
func (a *App) retrieverNow() *retrieve.Retriever {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.retriever
}

func (a *App) embedder() retrieve.Embedder {
	if a.embed == nil {
		return nil
	}
	return a.embed
}

// warm loads the chat model and evaluates the system prefix, so the first
// question does not pay for either. Its prefill speed seeds the estimates.
func (a *App) warm(ctx context.Context, done chan struct{}) {
	defer close(done)
	a.mu.Lock()
	chat, emb, rr := a.chat, a.embed, a.rerank
	a.mu.Unlock()
	// Start the embedding and rerank runners too, so the first question's
	// query embedding does not pay for loading a model.
	for _, m := range []any{emb, rr} {
		if s, ok := m.(interface{ Start(context.Context) error }); ok && m != nil {
			go s.Start(engine.WithPriority(ctx, engine.Background))
		}
	}
	if chat == nil {
		return
	}
	prefix, err := chat.Template().Prefix(systemPrompt)
	if err != nil {
		return
	}
	st, err := chat.Warm(engine.WithPriority(ctx, engine.Interactive), prefix)
	if err == nil && st.PrefillMs > 0 {
		a.notePrefill(st.EvalTokens, st.PrefillMs)
	}
}

// WaitWarm blocks until the chat model's prefix is warm (or ctx ends).
func (a *App) WaitWarm(ctx context.Context) error {
	a.mu.Lock()
	warmed := a.warmed
	a.mu.Unlock()
	select {
	case <-warmed:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (a *App) notePrefill(tokens int, ms float64) {
	if tokens < 16 || ms <= 0 {
		return
	}
	speed := float64(tokens) / (ms / 1000)
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.prefill == 0 {
		a.prefill = speed
	} else {
		a.prefill = 0.7*a.prefill + 0.3*speed
	}
}

// PrefillSpeed is the measured prompt-reading speed in tokens/s (0 if unknown).
func (a *App) PrefillSpeed() float64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.prefill
}

// versionID ties a trace to the model files and the prompt version.
func (a *App) versionID() string {
	id := func(m interface{ ID() string }) string {
		if m == nil {
			return "none"
		}
		return m.ID()
	}
	var c, e, r interface{ ID() string }
	if a.chat != nil {
		c = a.chat
	}
	if a.embed != nil {
		e = a.embed
	}
	if a.rerank != nil {
		r = a.rerank
	}
	return fmt.Sprintf("%s+%s+%s+%s", id(c), id(e), id(r), PromptVersion)
}

// workspace resolves a workspace name ("" is "default"), creating it.
func (a *App) workspace(ctx context.Context, name string) (store.Workspace, error) {
	if name == "" {
		name = "default"
	}
	return a.db.EnsureWorkspace(ctx, name)
}

var errNoQuestion = errors.New("empty question")

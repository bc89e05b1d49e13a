// Package app is Lore's application service: the desktop shell, the HTTP
// server and the CLI all call it. It owns the library (store, indexer,
// retriever), the models, and the ask pipeline with its traces.
package app

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"lore/engine"
	"lore/engine/kv"
	"lore/store"
)

// Generator is what the pipeline needs of a chat model. engine.Model is
// one; an OpenAI-compatible HTTP backend could be another.
type Generator interface {
	Generate(ctx context.Context, req engine.GenerateRequest, fn func(string) error) (engine.Stats, error)
	CountTokens(ctx context.Context, text string) (int, error)
	Template() *engine.Template
	ID() string
	Close() error
}

// localChat is what a chat model that runs in Lore's own runner can do
// besides answering (engine.Model): its KV cache is within reach. A remote
// model has none of it.
type localChat interface {
	Generator
	// Warm reads prefix (the system prompt) into the answer sequence, or
	// restores it from a saved state.
	Warm(ctx context.Context, prefix string) (engine.Stats, error)
	// Prefetch reads text into the speculative sequence at background
	// priority, for a Generate that starts with it to adopt; the runner
	// reports how many of marks (byte offsets in text) it holds.
	Prefetch(ctx context.Context, text string, marks ...int) (engine.Stats, error)
	// TrimSeq cuts a sequence back to its first keep cells.
	TrimSeq(ctx context.Context, seq, keep int) error
	// Reserve keeps background work off while a question gets ready.
	Reserve(ctx context.Context) (release func())
	// CachePassage saves a passage's KV, evaluated after prefix.
	CachePassage(ctx context.Context, prefix, passage string) (engine.Stats, error)
	// Info describes the loaded model (its attention window among it).
	Info() engine.Info
}

var _ localChat = (*engine.Model)(nil)

// local is g's local capabilities (nil: g is remote).
func local(g Generator) localChat {
	l, _ := g.(localChat)
	return l
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
	// FastChatModel is the router's fast chat model for this run (see
	// Settings.FastChatModel; "" keeps the saved one).
	FastChatModel string
	// DraftModel and Speculate turn on speculative decoding for this run
	// (see Settings.Speculate; "" and 0 keep the saved ones).
	DraftModel string
	Speculate  int
	// ChatURL and EmbedURL send the chat or embedding role to an
	// OpenAI-compatible server for this run, with the model names to ask
	// for (override the settings; "" keeps them). A local ChatModel then
	// answers when the remote is down, slow or refusing.
	ChatURL, ChatURLModel, EmbedURL, EmbedURLModel string
	// RerankURL sends the rerank role to a server with llama-server's
	// /v1/rerank; a local RerankModel then reranks when it fails.
	RerankURL, RerankURLModel string
	// APIKey is sent to the remote servers (the CLI takes it from
	// LORE_API_KEY or the OS keyring: LookupAPIKey); it is never stored in
	// the settings, printed or put in an error.
	APIKey string
	// Keyring looks the key up in the OS keyring (LookupAPIKey) when
	// APIKey is empty and a remote role is configured; never otherwise, so
	// a fully local Lore does not touch the keyring.
	Keyring bool
	// WorkerCmd starts a parse worker (default: this executable with "parse-worker").
	WorkerCmd []string
	// QueueCapacity bounds the questions waiting behind the one being
	// answered; beyond it Ask fails at once with ErrBusy, before any event
	// (default 16).
	QueueCapacity  int
	RequestTimeout time.Duration // default 5 minutes
	// Watch keeps workspaces current with a file watcher (long-running
	// front doors: the server and the desktop app).
	Watch bool
	// Warm starts the model runners at once and reads the system prompt
	// into the chat model's cache, so the first question pays for neither.
	// Commands that only read the library leave it off.
	Warm   bool
	Tracer trace.Tracer // default: no-op
	Logger *slog.Logger // default: slog.Default()
	// OnTrace is called with each finished trace (metrics).
	OnTrace func(*Trace)
}

// ErrBusy is returned when too many questions are in flight.
var ErrBusy = engine.ErrBusy

// App is the service.
type App struct {
	cfg Config
	db  *store.DB
	log *slog.Logger
	// passages waiting to have their KV saved (its own lock)
	passages passageQueue
	ahead    *readAhead    // reading the prompt ahead while the user types (its own lock)
	prefill  *prefillMeter // what the chat models' prompt reading measured (its own lock)
	kv       *kv.Store     // saved KV states (the warm system prefix, passages), RAM and disk
	earlier  earlierTurns  // layouts of recent questions whose states the chat models' runners keep (its own lock)
	runs     runs          // the questions in flight (its own lock)
	// passages' token counts per chat model (its own lock)
	tokenCounts tokenCounts

	mu       sync.Mutex // guards everything below
	settings Settings
	stored   Settings           // what the data folder holds: settings without this run's flags
	cur      *models            // the models questions start with now
	retired  []*models          // replaced sets still held by a question, oldest first
	rerankMs map[string]float64 // measured rerank cost per candidate (EWMA) per reranker
	warmed   WarmInfo           // the chat model's last warm-up

	jobs *jobs

	// life ends at Close; tasks are the goroutines started with spawn,
	// which Close waits for (none starts once closing is set).
	life    context.Context
	end     context.CancelFunc
	tasksMu sync.Mutex
	closing bool
	tasks   sync.WaitGroup
}

// spawn runs f in a goroutine the app owns: its context ends at Close,
// which waits for it to return. It is false, and f does not run, once the
// app is closing: the caller undoes what it prepared for f.
func (a *App) spawn(f func(ctx context.Context)) bool {
	a.tasksMu.Lock()
	defer a.tasksMu.Unlock()
	if a.closing {
		return false
	}
	a.tasks.Go(func() { f(a.life) })
	return true
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

// DefaultQueueCapacity is Config.QueueCapacity's default.
const DefaultQueueCapacity = 16

// New opens the data folder and prepares the configured models; runners
// start on first use, or at once with Config.Warm.
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
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if err := privateDir(cfg.DataDir); err != nil {
		return nil, err
	}
	db, err := store.Open(ctx, filepath.Join(cfg.DataDir, "lore.db"))
	if err != nil {
		return nil, err
	}
	a := &App{cfg: cfg, db: db, log: cfg.Logger, runs: runs{capacity: cfg.QueueCapacity, byID: map[string]*run{}},
		rerankMs: map[string]float64{}}
	a.life, a.end = context.WithCancel(context.Background())
	a.ahead = newReadAhead(a.life)
	if a.settings, err = loadSettings(ctx, db); err != nil {
		db.Close()
		return nil, err
	}
	a.stored = a.settings
	if a.prefill, err = newPrefillMeter(ctx, db); err != nil {
		a.log.Warn("measured prefill speeds not loaded: measuring again", "err", err)
	}
	cfg.runOnly(&a.settings)
	if err := a.settings.validate(); err != nil {
		db.Close()
		return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	// The default workspace exists from the start, so that no read has to
	// create it.
	if _, err := db.EnsureWorkspace(ctx, DefaultWorkspace); err != nil {
		db.Close()
		return nil, err
	}
	// Warm prefixes' KV states persist under the data folder, so a restarted
	// app restores its system prefix instead of reading it again.
	if a.kv, err = kv.Open(kv.Options{Dir: filepath.Join(cfg.DataDir, "kv")}); err != nil {
		db.Close()
		return nil, err
	}
	if a.cfg.APIKey == "" && a.cfg.Keyring && a.settings.remote() {
		key, _, err := LookupAPIKey()
		if err != nil { // the server may need none; if it does, its 401 says so
			a.log.Warn("remote backends get no API key", "err", err)
		}
		a.cfg.APIKey = key
	} else if a.cfg.APIKey != "" {
		// From the environment: trimmed and checked as a stored one is.
		if a.cfg.APIKey, err = cleanAPIKey(a.cfg.APIKey); err != nil {
			db.Close()
			return nil, fmt.Errorf("$%s: %w", APIKeyEnv, err)
		}
	}
	if err := a.backfillPassages(ctx); err != nil {
		a.log.Warn("earlier questions' passages not stored: follow-ups in those chats lay them out without", "err", err)
	}
	if a.cur, err = a.openModels(a.settings); err != nil {
		db.Close()
		return nil, err
	}
	a.jobs = newJobs(a)
	if wss, err := db.Workspaces(ctx); err == nil {
		for _, w := range wss {
			a.cur.retriever.Preload(w.ID) // load vector graphs in the background
			if cfg.Watch {
				a.jobs.get(w).watch()
			}
		}
	}
	if cfg.Warm {
		m := a.cur
		a.spawn(func(ctx context.Context) { a.warm(ctx, m) }) // New has not returned: nothing closes it yet
	} else {
		close(a.cur.warmed)
	}
	return a, nil
}

// privateDir creates the data folder readable by the user alone, and
// tightens one that exists with wider permissions: it holds the library's
// text, the chats and the server's tokens. Files inside are 0600 as well
// (the store and the token files see to theirs).
func privateDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("data folder: %w", err)
	}
	st, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("data folder: %w", err)
	}
	if runtime.GOOS != "windows" && st.Mode().Perm()&0o077 != 0 {
		if err := os.Chmod(dir, st.Mode().Perm()&0o700); err != nil {
			return fmt.Errorf("data folder %s is readable by others and cannot be made private: %w", dir, err)
		}
	}
	return nil
}

// DefaultWorkspace is the workspace used when none is named.
const DefaultWorkspace = "default"

// DataDir is the folder holding the database, graphs and token.
func (a *App) DataDir() string { return a.cfg.DataDir }

// Close stops indexing and the models and closes the database.
func (a *App) Close() error {
	a.jobs.stop()
	a.passages.stop()
	a.mu.Lock()
	if a.cur == nil {
		a.mu.Unlock()
		return nil // closed already
	}
	sets := append(a.retired, a.cur)
	a.retired, a.cur = nil, nil
	a.mu.Unlock()
	a.tasksMu.Lock()
	a.closing = true // no new task: Close waits for those running
	a.tasksMu.Unlock()
	a.end() // the warm-ups and read-ahead stop; the runners' end stops what ignores it
	for _, m := range sets {
		m.closeAll()
	}
	a.tasks.Wait()
	return a.db.Close()
}

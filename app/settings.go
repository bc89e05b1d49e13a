package app

import (
	"context"
	"fmt"
	"net/url"
	"reflect"

	"lore/store"
)

// Settings are the user's choices, stored in the database.
type Settings struct {
	ChatModel   string `json:"chat_model"`
	EmbedModel  string `json:"embed_model"`
	RerankModel string `json:"rerank_model"`
	// TopK passages go to the prompt (after fusion and rerank).
	TopK int `json:"top_k"`
	// RerankK candidates are reranked; RerankBudgetMs skips rerank when its
	// last measured cost per candidate says it would not fit.
	RerankK        int `json:"rerank_k"`
	RerankBudgetMs int `json:"rerank_budget_ms"`
	EfSearch       int `json:"ef_search"`
	// ContextTokens caps the passages' tokens; 0 sizes it from the measured
	// prefill speed so that reading them takes about a second.
	ContextTokens int `json:"context_tokens"`
	MaxTokens     int `json:"max_tokens"`
	Threads       int `json:"threads"`
	GPULayers     int `json:"gpu_layers"`

	// Remote backends speak the OpenAI-compatible API (llama-server, vLLM,
	// Ollama, another Lore). Empty URLs, the default, keep everything on
	// this machine; a chat URL sends questions and passages to that
	// server, an embedding URL sends the library's text and the questions,
	// a rerank URL the questions and the passages retrieved for them.
	// They take effect when the app starts. The API key is never a setting:
	// it comes from LORE_API_KEY or the OS keyring (Config.APIKey).
	ChatURL        string `json:"chat_url,omitempty"`
	ChatURLModel   string `json:"chat_url_model,omitempty"`
	EmbedURL       string `json:"embed_url,omitempty"`
	EmbedURLModel  string `json:"embed_url_model,omitempty"`
	RerankURL      string `json:"rerank_url,omitempty"`
	RerankURLModel string `json:"rerank_url_model,omitempty"`
	RemoteInsecure bool   `json:"remote_insecure_tls,omitempty"` // skip TLS certificate checks
	// RemotePlainKey allows the API key over plain http to another
	// machine; without it such a remote URL fails the start.
	RemotePlainKey bool `json:"remote_plain_key,omitempty"`
	// RemoteTTFTMs is the remote chat's first-token budget: past it the
	// local chat model answers, when there is one (0: 60 s).
	RemoteTTFTMs int `json:"remote_ttft_ms,omitempty"`

	// PassageKV saves each passage's KV once and stitches it into later
	// prompts instead of reading the passage again (approximate: see
	// passages.go; off by default). PassageRepair is how many of each
	// stitched passage's first tokens are read again in place.
	PassageKV     bool `json:"passage_kv"`
	PassageRepair int  `json:"passage_repair"`

	// FastChatModel is a smaller chat model beside the main one ("": none).
	// The router (route.go) sends a question to it when the main model
	// would miss RouteTTFTMs (0: no budget) reading the question's new
	// tokens at its measured speed, or when the question has at most
	// RouteShortWords words (0: off) and starts a chat.
	FastChatModel   string `json:"fast_chat_model"`
	RouteTTFTMs     int    `json:"route_ttft_ms"`
	RouteShortWords int    `json:"route_short_words"`

	// Speculate drafts up to that many tokens a step for the main model to
	// verify in one batch (0: off, the default): DraftModel's picks, a
	// smaller model with the same vocabulary, or else prompt lookup (what
	// followed the same tokens in the passages). Each route measures its
	// acceptance; below SpecFloorPct percent it switches speculation off
	// and retries later. It speeds up the tokens after the first, not the
	// first.
	Speculate    int    `json:"speculate"`
	DraftModel   string `json:"draft_model"`
	SpecFloorPct int    `json:"spec_floor_pct"`
}

// remote says whether any role is served by another machine.
func (s Settings) remote() bool { return s.ChatURL != "" || s.EmbedURL != "" || s.RerankURL != "" }

// draft is the chat model's draft model: loaded only while speculation is on.
func (s Settings) draft() string {
	if s.Speculate > 0 {
		return s.DraftModel
	}
	return ""
}

// DefaultSettings are what a new data folder starts with.
func DefaultSettings() Settings {
	return Settings{TopK: 6, RerankK: 20, RerankBudgetMs: 1500, MaxTokens: 256, PassageRepair: DefaultPassageRepair,
		RouteTTFTMs: 1000, SpecFloorPct: 60}
}

const settingsKey = "settings"

func loadSettings(ctx context.Context, db *store.DB) (Settings, error) {
	s := DefaultSettings()
	if _, err := db.Setting(ctx, settingsKey, &s); err != nil {
		return s, fmt.Errorf("load settings: %w", err)
	}
	return s, nil
}

// Settings returns the current settings.
func (a *App) Settings() Settings {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.settings
}

// SaveSettings validates and stores s. Changed models are switched at once,
// between two questions.
func (a *App) SaveSettings(ctx context.Context, s Settings) error {
	if err := s.validate(); err != nil {
		return fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	if cur := a.Settings(); cur.ChatModel != s.ChatModel || cur.EmbedModel != s.EmbedModel || cur.RerankModel != s.RerankModel ||
		cur.FastChatModel != s.FastChatModel || cur.draft() != s.draft() {
		// Discovering models reads every GGUF header found: only when they change.
		if err := a.checkModels(ctx, s); err != nil {
			return err
		}
		if err := a.switchModels(s); err != nil {
			return err
		}
	}
	a.mu.Lock()
	keep := saved(s, a.settings, a.stored)
	a.mu.Unlock()
	if err := a.db.PutSetting(ctx, settingsKey, keep); err != nil {
		return err
	}
	a.mu.Lock()
	a.settings, a.stored = s, keep
	a.mu.Unlock()
	return nil
}

// runOnly applies this run's choices (the command line's models, remote
// URLs, speculation) to s: they hold for this run, and saved keeps them out
// of the data folder.
func (c Config) runOnly(s *Settings) {
	pick := func(dst *string, run string) {
		if run != "" {
			*dst = run
		}
	}
	pick(&s.ChatModel, c.ChatModel)
	pick(&s.EmbedModel, c.EmbedModel)
	pick(&s.RerankModel, c.RerankModel)
	pick(&s.FastChatModel, c.FastChatModel)
	pick(&s.DraftModel, c.DraftModel)
	pick(&s.ChatURL, c.ChatURL)
	pick(&s.ChatURLModel, c.ChatURLModel)
	pick(&s.EmbedURL, c.EmbedURL)
	pick(&s.EmbedURLModel, c.EmbedURLModel)
	pick(&s.RerankURL, c.RerankURL)
	pick(&s.RerankURLModel, c.RerankURLModel)
	if c.Speculate > 0 {
		s.Speculate = c.Speculate
	}
}

// saved is what the data folder keeps when the user saves s over this
// run's settings cur, stored being what it holds: each field the user
// changed, as they set it; each one they left alone, as stored. The page
// sends every field back, so a one-run flag (a --chat-url would keep
// questions leaving the machine) is never saved by a save that did not
// touch it, and a deliberate choice is never undone, whatever the flags.
func saved(s, cur, stored Settings) Settings {
	out := stored
	sv, cv, ov := reflect.ValueOf(s), reflect.ValueOf(cur), reflect.ValueOf(&out).Elem()
	for i := range sv.NumField() {
		if !reflect.DeepEqual(sv.Field(i).Interface(), cv.Field(i).Interface()) {
			ov.Field(i).Set(sv.Field(i))
		}
	}
	return out
}

// contextBudget is the token budget for passages, and where it came from
// (the trace says it: a first question after a restart used to be sized by
// a guess).
func (a *App) contextBudget(s Settings) (int, string) {
	if s.ContextTokens > 0 {
		return s.ContextTokens, BudgetSetting
	}
	m := a.current()
	if m.chat == nil {
		return budgetAssumed, BudgetAssumed
	}
	speed, saved := a.prefill.tokS(speedKey(m.chat))
	if speed == 0 {
		return budgetAssumed, BudgetAssumed
	}
	from := BudgetMeasured
	if saved {
		from = BudgetSaved
	}
	return min(max(int(speed), 256), 1536), from // about one second of prefill
}

// Where a question's passage budget came from (Trace.ContextBudgetFrom).
const (
	BudgetSetting  = "setting"          // Settings.ContextTokens
	BudgetMeasured = "measured"         // the prefill speed measured in this run
	BudgetSaved    = "measured earlier" // measured in an earlier run on this machine
	BudgetAssumed  = "assumed"          // nothing measured yet: budgetAssumed
)

// budgetAssumed is the passage budget before any prefill was measured.
const budgetAssumed = 768

// checkModels accepts only model files Lore found on the machine (or the
// ones already configured), so settings cannot point the engine at an
// arbitrary file.
func (a *App) checkModels(ctx context.Context, s Settings) error {
	cur := a.Settings()
	found, err := a.Models(ctx)
	if err != nil {
		return err
	}
	known := map[string]bool{"": true, cur.ChatModel: true, cur.EmbedModel: true, cur.RerankModel: true, cur.FastChatModel: true,
		cur.DraftModel: true}
	for _, m := range found {
		if m.Error == "" {
			known[m.Path] = true
		}
	}
	for _, p := range []string{s.ChatModel, s.EmbedModel, s.RerankModel, s.FastChatModel, s.DraftModel} {
		if !known[p] {
			return fmt.Errorf("%w: %s is not among the models found on this machine (see the Models view)", ErrInvalid, p)
		}
	}
	return nil
}

// validate checks every field against its range (0 means "auto" where the
// field says so).
func (s Settings) validate() error {
	for _, f := range []struct {
		name      string
		v, lo, hi int
	}{
		{"top_k", s.TopK, 1, 50},
		{"rerank_k", s.RerankK, 0, 100},
		{"rerank_budget_ms", s.RerankBudgetMs, 0, 60_000},
		{"ef_search", s.EfSearch, 0, 4096},
		{"context_tokens", s.ContextTokens, 0, 32768},
		{"max_tokens", s.MaxTokens, 0, 32768},
		{"threads", s.Threads, 0, 256},
		{"gpu_layers", s.GPULayers, 0, 1024},
		{"remote_ttft_ms", s.RemoteTTFTMs, 0, 600_000},
		{"passage_repair", s.PassageRepair, 0, 4096},
		{"route_ttft_ms", s.RouteTTFTMs, 0, 600_000},
		{"route_short_words", s.RouteShortWords, 0, 100},
		{"speculate", s.Speculate, 0, 16},
		{"spec_floor_pct", s.SpecFloorPct, 0, 100},
	} {
		if f.v < f.lo || f.v > f.hi {
			return fmt.Errorf("%s must be %d–%d, got %d", f.name, f.lo, f.hi, f.v)
		}
	}
	for _, u := range []struct{ name, url string }{{"chat_url", s.ChatURL}, {"embed_url", s.EmbedURL}, {"rerank_url", s.RerankURL}} {
		if u.url == "" {
			continue
		}
		if p, err := url.Parse(u.url); err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" || p.User != nil {
			return fmt.Errorf("%s must be http(s)://host[:port]/v1 without credentials (the key comes from LORE_API_KEY or `lore key set`)", u.name)
		}
	}
	return nil
}

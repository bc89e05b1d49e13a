package app

import (
	"context"
	"fmt"

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
}

// DefaultSettings are what a new data folder starts with.
func DefaultSettings() Settings {
	return Settings{TopK: 6, RerankK: 20, RerankBudgetMs: 1500, MaxTokens: 256}
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
	if s.TopK < 1 || s.TopK > 50 {
		return fmt.Errorf("top_k must be 1–50, got %d", s.TopK)
	}
	if s.RerankK < 0 || s.RerankK > 100 {
		return fmt.Errorf("rerank_k must be 0–100, got %d", s.RerankK)
	}
	if s.ContextTokens < 0 || s.ContextTokens > 32768 {
		return fmt.Errorf("context_tokens must be 0 (auto) to 32768, got %d", s.ContextTokens)
	}
	if s.EfSearch < 0 || s.EfSearch > 4096 || s.Threads < 0 || s.Threads > 256 || s.GPULayers < 0 || s.MaxTokens < 0 {
		return fmt.Errorf("ef_search, threads, gpu_layers and max_tokens must be non-negative and sane")
	}
	if cur := a.Settings(); cur.ChatModel != s.ChatModel || cur.EmbedModel != s.EmbedModel || cur.RerankModel != s.RerankModel {
		// Discovering models reads every GGUF header found: only when they change.
		if err := a.checkModels(ctx, s); err != nil {
			return err
		}
		if err := a.switchModels(ctx, s); err != nil {
			return err
		}
	}
	if err := a.db.PutSetting(ctx, settingsKey, s); err != nil {
		return err
	}
	a.mu.Lock()
	a.settings = s
	a.mu.Unlock()
	return nil
}

// contextBudget is the token budget for passages.
func (a *App) contextBudget(s Settings) int {
	if s.ContextTokens > 0 {
		return s.ContextTokens
	}
	speed := a.PrefillSpeed()
	if speed == 0 {
		return 768
	}
	return min(max(int(speed), 256), 1536) // about one second of prefill
}

// checkModels accepts only model files Lore found on the machine (or the
// ones already configured), so settings cannot point the engine at an
// arbitrary file.
func (a *App) checkModels(ctx context.Context, s Settings) error {
	cur := a.Settings()
	found, err := a.Models(ctx)
	if err != nil {
		return err
	}
	known := map[string]bool{"": true, cur.ChatModel: true, cur.EmbedModel: true, cur.RerankModel: true}
	for _, m := range found {
		if m.Error == "" {
			known[m.Path] = true
		}
	}
	for _, p := range []string{s.ChatModel, s.EmbedModel, s.RerankModel} {
		if !known[p] {
			return fmt.Errorf("%w: %s is not among the models found on this machine (see the Models view)", ErrInvalid, p)
		}
	}
	return nil
}

package app

import (
	"context"
	"fmt"
	"time"
)

// HNSWSweep is the efSearch trade-off `lore bench retrieval --sweep`
// measured on this machine: recall@10 and latency per efSearch at each
// corpus size, kept so that Settings can show the curve beside ef_search.
type HNSWSweep struct {
	MeasuredAt time.Time   `json:"measured_at"`
	CPU        string      `json:"cpu"` // the CPU's features, as `lore cpu` names them
	Sizes      []SweepSize `json:"sizes"`
}

// SweepSize is the curve on one graph of N vectors.
type SweepSize struct {
	N          int          `json:"n"`
	Dim        int          `json:"dim"`
	BuildS     float64      `json:"build_s"`
	ExactP95Ms float64      `json:"exact_p95_ms"` // exact search, the knee's other side
	Points     []SweepPoint `json:"points"`
}

// SweepPoint is HNSW search at one efSearch.
type SweepPoint struct {
	EfSearch int     `json:"ef_search"`
	Recall10 float64 `json:"recall_at_10"`
	P50Ms    float64 `json:"p50_ms"`
	P95Ms    float64 `json:"p95_ms"`
}

const sweepKey = "hnsw_sweep"

// SaveSweep keeps the latest sweep.
func (a *App) SaveSweep(ctx context.Context, s HNSWSweep) error {
	if err := a.db.PutSetting(ctx, sweepKey, s); err != nil {
		return fmt.Errorf("save the sweep: %w", err)
	}
	return nil
}

// Sweep returns the latest sweep; one with no sizes when none was run.
func (a *App) Sweep(ctx context.Context) (HNSWSweep, error) {
	s := HNSWSweep{Sizes: []SweepSize{}}
	if _, err := a.db.Setting(ctx, sweepKey, &s); err != nil {
		return s, fmt.Errorf("load the sweep: %w", err)
	}
	return s, nil
}

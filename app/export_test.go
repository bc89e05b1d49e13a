package app

import "context"

// SpeculationDone reports whether the last prefetch finished reading.
func (a *App) SpeculationDone() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.spec != nil && a.spec.done
}

// PutFidelity stores f as the measured fidelity of its model.
func (a *App) PutFidelity(ctx context.Context, f Fidelity) error {
	return a.db.PutSetting(ctx, fidelityKey(f.Model), f)
}

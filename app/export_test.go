package app

import "context"

// PutFidelity stores f as the measured fidelity of its model.
func (a *App) PutFidelity(ctx context.Context, f Fidelity) error {
	return a.db.PutSetting(ctx, fidelityKey(f.Model), f)
}

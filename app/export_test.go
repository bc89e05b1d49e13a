package app

// SpeculationDone reports whether the last prefetch finished reading.
func (a *App) SpeculationDone() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.spec != nil && a.spec.done
}

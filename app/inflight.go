package app

import (
	"context"
	"fmt"
	"math"
	"regexp"
	"sync"
)

// run is a question being answered, in the one registry every front door
// cancels and reports through.
type run struct {
	cancel context.CancelFunc
	client string      // the front door's own id for it, if any
	ui     *[2]float64 // the UI's TTFT report, if it came before the trace was stored
}

// runs are the questions in flight, by request id (their own lock).
type runs struct {
	mu       sync.Mutex
	capacity int // questions waiting besides the one answered
	byID     map[string]*run
}

var clientIDRe = regexp.MustCompile(`^[A-Za-z0-9_-]{8,64}$`)

// admit registers a question, or refuses it at once when the queue is full
// (one being answered plus capacity waiting) or its client id is taken.
func (rs *runs) admit(id, client string, cancel context.CancelFunc) error {
	if client != "" && !clientIDRe.MatchString(client) {
		return fmt.Errorf("%w: client_id must be 8–64 letters, digits, dashes or underscores", ErrInvalid)
	}
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if len(rs.byID) > rs.capacity {
		return fmt.Errorf("%w: %d questions are already waiting", ErrBusy, rs.capacity)
	}
	for _, r := range rs.byID {
		if client != "" && r.client == client {
			return fmt.Errorf("%w: client_id %s is already in use", ErrInvalid, client)
		}
	}
	rs.byID[id] = &run{cancel: cancel, client: client}
	return nil
}

// pendingUI is the UI report that came for a question in flight, if any.
func (rs *runs) pendingUI(id string) *[2]float64 {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if r := rs.byID[id]; r != nil {
		return r.ui
	}
	return nil
}

// retire removes a finished question and returns the UI report that came
// for it meanwhile.
func (rs *runs) retire(id string) *[2]float64 {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	r := rs.byID[id]
	delete(rs.byID, id)
	if r == nil {
		return nil
	}
	return r.ui
}

// reportUI keeps the UI's report for a question in flight (false: none is).
func (rs *runs) reportUI(id string, ui [2]float64) bool {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if r, ok := rs.byID[id]; ok {
		r.ui = &ui
		return true
	}
	return false
}

// Cancel stops a question being answered, by its request id or the client
// id its front door gave.
func (a *App) Cancel(id string) error {
	rs := &a.runs
	rs.mu.Lock()
	defer rs.mu.Unlock()
	for rid, r := range rs.byID {
		if rid == id || r.client != "" && r.client == id {
			r.cancel()
			return nil
		}
	}
	return fmt.Errorf("request %q: %w (not in flight)", id, ErrNotFound)
}

// ReportUI adds the UI's own measurements to a trace: the user-visible TTFT
// and the paint time. The gap to ttft_ms is transport and rendering.
func (a *App) ReportUI(ctx context.Context, id string, uiTTFT, paint float64) error {
	if !(uiTTFT > 0 && uiTTFT <= 3.6e6 && paint >= 0 && paint <= uiTTFT) || math.IsNaN(uiTTFT+paint) {
		return fmt.Errorf("%w: ui_ttft_ms must be in (0, 1h] and paint_ms in [0, ui_ttft_ms]", ErrInvalid)
	}
	// The UI reports as soon as it paints the first token, usually before
	// the answer (and so its trace) is finished: keep it until then.
	if a.runs.reportUI(id, [2]float64{uiTTFT, paint}) {
		return nil
	}
	t, err := a.Trace(ctx, id)
	if err != nil {
		return err
	}
	setUI(t, uiTTFT, paint)
	return a.saveTrace(ctx, t)
}

func setUI(t *Trace, uiTTFT, paint float64) {
	t.Stages[StageUITTFT] = round(uiTTFT)
	t.Stages[StagePaint] = round(paint)
	t.StageStarts[StageUITTFT] = 0
	t.StageStarts[StagePaint] = round(uiTTFT - paint)
}

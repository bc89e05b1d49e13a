package engine

import (
	"fmt"
	"sync"
)

// DefaultSpecFloor is the acceptance rate below which speculative decoding
// switches itself off: drafting costs a wider batch per step, which pays
// only when most drafted tokens are kept.
const DefaultSpecFloor = 0.6

// Speculation's live measure: acceptance over at least specWindow drafted
// tokens of the latest answers; switched off, it is retried after
// specBackoff answers, doubling up to specMaxBackoff while it keeps
// failing.
const (
	specWindow     = 64
	specBackoff    = 4
	specMaxBackoff = 64
)

// speculation is one model's switch for speculative decoding.
type speculation struct {
	mu        sync.Mutex
	steps     [][2]int // drafted, accepted per answer, oldest first
	off       int      // answers left before speculation is retried
	backoff   int
	lastRate  float64
	lastTried bool
}

// allow returns how many tokens the next answer may draft (0: off) and a
// note for the trace.
func (s *speculation) allow(k int) (int, string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.off > 0 {
		s.off--
		return 0, fmt.Sprintf("off: %.0f%% of drafted tokens accepted, below the floor; retried in %d answers", 100*s.lastRate, s.off+1)
	}
	return k, ""
}

// record adds an answer's drafts and returns the acceptance rate over the
// window (-1 before enough was drafted), switching speculation off below
// floor.
func (s *speculation) record(drafted, accepted int, floor float64) float64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if drafted == 0 {
		return -1
	}
	s.steps = append(s.steps, [2]int{drafted, accepted})
	var d, a int
	for i := len(s.steps) - 1; i >= 0; i-- {
		d, a = d+s.steps[i][0], a+s.steps[i][1]
		if d >= specWindow {
			s.steps = s.steps[i:]
			break
		}
	}
	if d < specWindow/2 {
		return -1
	}
	s.lastRate = float64(a) / float64(d)
	if floor > 0 && s.lastRate < floor {
		s.backoff = min(max(2*s.backoff, specBackoff), specMaxBackoff)
		s.off, s.steps = s.backoff, nil
	} else if len(s.steps) > 0 && d >= specWindow {
		s.backoff = 0 // it pays: the next failure starts the backoff afresh
	}
	return s.lastRate
}

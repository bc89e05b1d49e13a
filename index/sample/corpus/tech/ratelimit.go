//go:build ignore

// Package netutil holds small helpers shared by the field app's sync client.
//
// This file implements a token-bucket rate limiter. The sync client uses it so
// that a phone coming back into coverage with hundreds of queued edits does
// not hammer the API: requests are let through at a steady rate, with a small
// burst allowed after a quiet period.
package netutil

import (
	"context"
	"sync"
	"time"
)

// Limiter lets events happen at most Rate times per second on average, with
// bursts of up to Burst events. The zero value is not usable; call NewLimiter.
//
// The bucket holds up to Burst tokens and refills continuously at Rate tokens
// per second. Each event takes one token; when the bucket is empty the caller
// waits until a token has accumulated.
type Limiter struct {
	mu     sync.Mutex
	rate   float64 // tokens per second
	burst  float64 // bucket capacity
	tokens float64 // tokens available at last
	last   time.Time
	now    func() time.Time // for tests
}

// NewLimiter returns a limiter that starts with a full bucket.
func NewLimiter(rate float64, burst int) *Limiter {
	if rate <= 0 || burst < 1 {
		panic("netutil: rate must be positive and burst at least 1")
	}
	return &Limiter{rate: rate, burst: float64(burst), tokens: float64(burst), now: time.Now}
}

// refill adds the tokens earned since the last call. Callers hold mu.
func (l *Limiter) refill(t time.Time) {
	if !l.last.IsZero() {
		l.tokens += t.Sub(l.last).Seconds() * l.rate
		if l.tokens > l.burst {
			l.tokens = l.burst
		}
	}
	l.last = t
}

// Allow reports whether an event may happen now, taking a token if so. It
// never blocks: use it to drop or defer work when the limit is reached.
func (l *Limiter) Allow() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.refill(l.now())
	if l.tokens >= 1 {
		l.tokens--
		return true
	}
	return false
}

// Wait blocks until an event may happen or ctx is done. It reserves its token
// before sleeping, so concurrent waiters queue fairly rather than all waking
// at once and racing for the same token.
func (l *Limiter) Wait(ctx context.Context) error {
	l.mu.Lock()
	t := l.now()
	l.refill(t)
	l.tokens-- // may go negative: that is the reservation
	var delay time.Duration
	if l.tokens < 0 {
		delay = time.Duration(-l.tokens / l.rate * float64(time.Second))
	}
	l.mu.Unlock()
	if delay == 0 {
		return nil
	}
	timer := time.NewTimer(delay)
	defer timer.Stop()
	select {
	case <-timer.C:
		return nil
	case <-ctx.Done():
		// Give the reserved token back so the next waiter is not delayed
		// for nothing.
		l.mu.Lock()
		l.tokens++
		l.mu.Unlock()
		return ctx.Err()
	}
}

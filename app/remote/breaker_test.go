package remote

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestBreaker: one outage is one failure however many calls it caught;
// the cooldown doubles with each failure in a row up to MaxCooldown; a
// cancelled call counts nothing; a success resets it.
func TestBreaker(t *testing.T) {
	t0 := time.Unix(0, 0)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	fail := errors.New("HTTP 503")
	b := breaker{first: 10 * time.Second}
	b.done(at(0), at(1), fail)
	b.done(at(0.5), at(2), fail) // under way when the first failed
	if b.fails != 1 || !b.until.Equal(at(11)) {
		t.Fatalf("two calls caught by one outage: %d failures, backed off until %v", b.fails, b.until.Sub(t0))
	}
	if err := b.check(at(10.9)); err == nil {
		t.Error("called within the cooldown")
	}
	if err := b.check(at(11)); err != nil {
		t.Errorf("after the cooldown: %v", err)
	}
	b.done(at(11), at(12), fail) // the trial call fails too
	if b.fails != 2 || !b.until.Equal(at(32)) {
		t.Errorf("second failure in a row: %d, until %v; want 2, 32 s", b.fails, b.until.Sub(t0))
	}
	b.done(at(33), at(34), context.Canceled)
	if b.fails != 2 {
		t.Errorf("a cancelled call counted: %d failures", b.fails)
	}
	b.done(at(33), at(34), nil)
	if b.fails != 0 || b.check(at(34)) != nil {
		t.Errorf("a success did not reset: %d failures", b.fails)
	}
	now := at(40)
	for range 40 {
		b.done(now, now, fail)
		now = b.until
	}
	if d := b.until.Sub(b.failed); d != MaxCooldown {
		t.Errorf("cooldown after 40 failures in a row: %v, want the %v cap", d, MaxCooldown)
	}
	off := breaker{}
	off.done(at(0), at(1), fail)
	if off.check(at(1)) != nil {
		t.Error("a breaker without a cooldown refused a call")
	}
}

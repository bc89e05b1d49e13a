//go:build ignore

package netutil

import (
	"context"
	"errors"
	"math/rand/v2"
	"net/http"
	"time"
)

// RetryPolicy says how often and how patiently to retry a failed call.
//
// After the routing API outage in April 2024, clients that retried instantly
// and in lockstep slowed the recovery down. Every retry loop in the SDK now
// goes through Do, which waits longer after each failure (exponential
// backoff) and randomises each wait (full jitter) so that thousands of
// clients do not all come back at the same moment.
type RetryPolicy struct {
	Attempts int           // total tries, including the first; 0 means 5
	Base     time.Duration // first backoff ceiling; 0 means 200ms
	Max      time.Duration // largest backoff ceiling; 0 means 30s
}

// ErrPermanent marks an error that retrying cannot fix, such as a 400 or a
// 403. Wrap it (fmt.Errorf("...: %w", ErrPermanent)) to stop Do at once.
var ErrPermanent = errors.New("permanent failure")

// Do calls fn until it succeeds, returns a permanent error, runs out of
// attempts, or ctx is done. It returns the last error from fn.
func (p RetryPolicy) Do(ctx context.Context, fn func(context.Context) error) error {
	attempts, base, ceiling := p.Attempts, p.Base, p.Max
	if attempts <= 0 {
		attempts = 5
	}
	if base <= 0 {
		base = 200 * time.Millisecond
	}
	if ceiling <= 0 {
		ceiling = 30 * time.Second
	}
	var err error
	for i := 0; i < attempts; i++ {
		if err = fn(ctx); err == nil || errors.Is(err, ErrPermanent) {
			return err
		}
		if i == attempts-1 {
			break
		}
		// Full jitter: sleep a random time between zero and the current
		// ceiling, which doubles after every failure up to Max.
		backoff := ceiling
		if i < 30 && base<<i < ceiling {
			backoff = base << i
		}
		sleep := time.Duration(rand.Int64N(int64(backoff) + 1))
		t := time.NewTimer(sleep)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return errors.Join(err, ctx.Err())
		}
	}
	return err
}

// Retryable reports whether an HTTP status is worth retrying: server errors,
// 429 Too Many Requests and 408 Request Timeout. Other 4xx errors mean the
// request itself is wrong and will fail again.
func Retryable(status int) bool {
	return status >= 500 || status == http.StatusTooManyRequests || status == http.StatusRequestTimeout
}

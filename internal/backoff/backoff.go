// Package backoff is the one reconnect policy of the project's long-lived
// clients (the relay publisher, the relay tailer, the kap-server bridge):
// exponential backoff with jitter.
//
// The rule: every failed attempt, and every connection that ended before it
// had stayed up for Max, doubles the delay (from Min, up to Max); a
// connection that stayed up for at least Max proves the peer healthy, and
// the next delay starts again from Min. A peer that accepts and then drops
// at once (flapping, shedding load) is therefore backed off like one that
// refuses, while one lost after a long healthy run is retried promptly.
package backoff

import (
	"context"
	"errors"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Defaults for a zero Backoff.
const (
	DefaultMin = 250 * time.Millisecond
	DefaultMax = 30 * time.Second
)

// Backoff hands out reconnect delays. The zero value uses DefaultMin and
// DefaultMax. It is not safe for concurrent use: one reconnect loop owns it.
type Backoff struct {
	// Min is the first delay and Max the largest; the delay doubles in
	// between, and Max is also how long a connection must stay up to reset
	// it.
	Min, Max time.Duration
	// Rand returns a uniform value in [0, n]; nil uses math/rand/v2. Tests
	// inject a deterministic source.
	Rand func(n int64) int64

	cur time.Duration // the next delay before jitter; 0 means Min
}

func (b *Backoff) bounds() (lo, hi time.Duration) {
	lo, hi = b.Min, b.Max
	if lo <= 0 {
		lo = DefaultMin
	}
	if hi <= 0 {
		hi = DefaultMax
	}
	return lo, max(lo, hi)
}

// Next returns the delay before the next attempt, spread over [d/2, d] so
// clients restarted together do not reconnect in lockstep, and doubles d
// for the attempt after.
func (b *Backoff) Next() time.Duration {
	lo, hi := b.bounds()
	d := min(max(b.cur, lo), hi)
	b.cur = min(2*d, hi)
	half := int64(d / 2)
	r := b.Rand
	if r == nil {
		r = func(n int64) int64 { return rand.Int64N(n + 1) }
	}
	return d/2 + time.Duration(r(half))
}

// NextAtLeast is Next, but never less than the delay the peer asked for
// (its Retry-After), itself capped at Max: a peer shedding load spreads its
// clients out, and cannot hold one off longer than its own policy would.
func (b *Backoff) NextAtLeast(asked time.Duration) time.Duration {
	d := b.Next()
	_, hi := b.bounds()
	return max(d, min(asked, hi))
}

// Up records that a connection ended after staying up for d: at least Max
// resets the delay to Min, anything shorter leaves the backoff growing.
func (b *Backoff) Up(d time.Duration) {
	if _, hi := b.bounds(); d >= hi {
		b.cur = 0
	}
}

// Wait sleeps Next(), or until ctx ends; it reports whether the full delay
// passed.
func (b *Backoff) Wait(ctx context.Context) bool {
	return Sleep(ctx, b.Next())
}

// Sleep waits d, or until ctx ends; it reports whether the full d passed.
func Sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// RetryAfter reads a Retry-After header: delay-seconds or an HTTP date; 0
// when absent, malformed or past.
func RetryAfter(v string, now time.Time) time.Duration {
	if v == "" {
		return 0
	}
	if n, err := strconv.Atoi(strings.TrimSpace(v)); err == nil && n > 0 {
		return time.Duration(n) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}

// LaterError is a refusal whose peer said when to try again.
type LaterError struct {
	Err   error
	After time.Duration
}

func (e *LaterError) Error() string { return e.Err.Error() }
func (e *LaterError) Unwrap() error { return e.Err }

// Later wraps err with the peer's Retry-After from h (nil h, or none, is
// err unchanged).
func Later(err error, h http.Header) error {
	if h == nil {
		return err
	}
	if d := RetryAfter(h.Get("Retry-After"), time.Now()); d > 0 {
		return &LaterError{Err: err, After: d}
	}
	return err
}

// Asked is the delay err's peer asked for (a LaterError in its chain), or 0.
func Asked(err error) time.Duration {
	var le *LaterError
	if errors.As(err, &le) {
		return le.After
	}
	return 0
}

package fleetpage

import (
	"net"
	"sync"
	"time"
)

// maxLimitedAddrs bounds the client addresses the login limiter tracks;
// past it idle ones are forgotten first, then the least limited.
const maxLimitedAddrs = 4096

// loginLimiter spaces login attempts per client address: a burst, then one
// every interval (a token bucket kept as the time the bucket is full again).
type loginLimiter struct {
	burst int
	every time.Duration

	mu   sync.Mutex
	full map[string]time.Time // address -> when its bucket is full again
}

func newLoginLimiter(burst int, every time.Duration) *loginLimiter {
	return &loginLimiter{burst: burst, every: every, full: make(map[string]time.Time)}
}

// allow takes one attempt for the client at remote (host:port), or says
// how long until the next one is allowed.
func (l *loginLimiter) allow(remote string, now time.Time) (bool, time.Duration) {
	addr := remote
	if h, _, err := net.SplitHostPort(remote); err == nil {
		addr = h
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	at := l.full[addr]
	if at.Before(now) {
		at = now
	}
	window := time.Duration(l.burst) * l.every
	if at.Add(l.every).Sub(now) > window {
		return false, at.Add(l.every).Sub(now) - window
	}
	if _, held := l.full[addr]; !held && len(l.full) >= maxLimitedAddrs {
		l.forget(now)
	}
	l.full[addr] = at.Add(l.every)
	return true, 0
}

// forget drops the addresses whose buckets are full again, or, when none
// is, the one closest to full.
func (l *loginLimiter) forget(now time.Time) {
	var soonest string
	var soonestAt time.Time
	for a, at := range l.full {
		if !at.After(now) {
			delete(l.full, a)
			continue
		}
		if soonest == "" || at.Before(soonestAt) {
			soonest, soonestAt = a, at
		}
	}
	if len(l.full) >= maxLimitedAddrs {
		delete(l.full, soonest)
	}
}

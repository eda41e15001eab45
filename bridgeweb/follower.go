package bridgeweb

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aep-kimi/aep-kimi/internal/backoff"
)

// follower follows one kap-server: a registry record's server, or the fixed
// KapURL. It connects, and after a loss backs off and connects again, until
// its context ends (the bridge stops, or the server's record is gone). What
// it knows about its server (the server-wide stream's position, the live
// connection control goes through, the subscription counts) lives here, so
// several servers are followed side by side.
type follower struct {
	b    *Bridge
	inst Instance // zero with a fixed KapURL

	// gmu guards global: the server-wide stream's position.
	gmu    sync.Mutex
	global cursor

	// active is the live connection, for control's REST calls.
	active atomic.Pointer[activeLink]

	followed, dormant atomic.Int64

	stMu       sync.Mutex
	state      string
	stateSince time.Time
	kapURL     string
	lastErr    string
}

func newFollower(b *Bridge, inst Instance) *follower {
	f := &follower{b: b, inst: inst}
	f.setState(KapConnecting, "", nil)
	return f
}

// run is the connect loop.
func (f *follower) run(ctx context.Context) {
	b := f.b
	bo := backoff.Backoff{Min: b.cfg.BackoffMin, Max: b.cfg.BackoffMax}
	for ctx.Err() == nil {
		ep, ok := f.endpoint(ctx)
		if !ok {
			return
		}
		start := b.cfg.Now()
		err := f.connect(ctx, ep)
		if ctx.Err() != nil {
			return
		}
		f.counts(0, 0)
		reason, state := classify(err)
		b.metrics.connErrors.WithLabelValues(reason).Inc()
		f.setState(state, ep.base, err)
		if f.starting() && reason == "io" {
			// It registers itself before its listener is up.
			b.reportOnce(slog.LevelInfo, "kimi web is still starting; retrying", "kap", ep.base)
		} else {
			b.reportOnce(slog.LevelWarn, "kap connection ended; reconnecting with backoff", "kap", ep.base, "reason", reason, "err", err)
		}
		bo.Up(b.cfg.Now().Sub(start))
		if !bo.Wait(ctx) {
			return
		}
	}
}

// starting reports whether the server registered itself recently enough
// that its refusals are taken for start-up rather than trouble.
func (f *follower) starting() bool {
	return f.inst.StartedAt > 0 && f.b.cfg.Now().Sub(time.UnixMilli(f.inst.StartedAt)) < startupGrace
}

// endpoint waits for what one connection attempt needs: the server's URL and
// the token, read fresh each time (rotate-token). It returns false when ctx
// ends.
func (f *follower) endpoint(ctx context.Context) (endpoint, bool) {
	b := f.b
	base := b.cfg.KapURL
	if base == "" {
		base = f.inst.BaseURL()
	}
	for {
		token, err := readToken(b.cfg.KapTokenFile)
		if err == nil {
			ep, eerr := newEndpoint(base, token)
			if eerr == nil {
				ep.instance = f.inst
				return ep, true
			}
			f.setState(KapDown, base, eerr)
			b.reportOnce(slog.LevelError, "kap URL unusable", "err", eerr)
		} else {
			f.setState(KapUnauthorized, base, err)
			level := slog.LevelWarn
			if f.starting() {
				level = slog.LevelInfo // it writes the token as it starts
			}
			b.reportOnce(level, "kap token unreadable; retrying", "err", err)
		}
		if !backoff.Sleep(ctx, b.cfg.DiscoveryPoll) {
			return endpoint{}, false
		}
	}
}

func (f *follower) setState(state, url string, err error) {
	f.stMu.Lock()
	if state != f.state {
		f.stateSince = f.b.cfg.Now()
		if state == KapConnected {
			// A new connection: a later loss is news again.
			f.b.forgetReported()
		}
	}
	f.state, f.kapURL = state, url
	f.lastErr = ""
	if err != nil {
		f.lastErr = err.Error()
	}
	f.stMu.Unlock()
	f.b.publishState()
}

// health is this server's part of /healthz.
func (f *follower) health() KapHealth {
	f.stMu.Lock()
	defer f.stMu.Unlock()
	return KapHealth{State: f.state, URL: f.kapURL, Since: f.stateSince, Error: f.lastErr, PID: f.inst.PID,
		SessionsFollowed: f.followed.Load(), SessionsDormant: f.dormant.Load()}
}

// counts records this server's subscription counts and refreshes the
// bridge's totals.
func (f *follower) counts(live, dormant int64) {
	f.followed.Store(live)
	f.dormant.Store(dormant)
	f.b.recount()
}

// startupGrace is how long after a kap-server registers itself its refusals
// are taken for start-up rather than trouble.
const startupGrace = 30 * time.Second

// classify turns a connection's end into a metric reason and a state.
func classify(err error) (reason, state string) {
	switch {
	case errors.Is(err, ErrUnauthorized):
		return "unauthorized", KapUnauthorized
	case errors.Is(err, errProbe):
		return "server_gone", KapDown
	case errors.Is(err, errSilent):
		return "silent", KapDown
	case errors.Is(err, errHandshake):
		return "handshake", KapDown
	case err == nil:
		return "closed", KapDown
	}
	return "io", KapDown
}

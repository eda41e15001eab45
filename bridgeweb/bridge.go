package bridgeweb

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/aep-kimi/aep-kimi/aep"
	"github.com/aep-kimi/aep-kimi/internal/backoff"
	"github.com/aep-kimi/aep-kimi/internal/httpdrain"
	"github.com/aep-kimi/aep-kimi/internal/httpguard"
	"github.com/aep-kimi/aep-kimi/internal/journal"
	"github.com/aep-kimi/aep-kimi/internal/ledger"
	"github.com/aep-kimi/aep-kimi/mapping"
)

// Bridge is the bridge-web daemon: it follows one kap-server at a time and
// publishes its sessions as AEP events.
type Bridge struct {
	cfg     Config
	log     *slog.Logger
	epoch   int64
	metrics *metrics
	newID   func() string

	mu       sync.Mutex
	sessions map[string]*session // by kap session id

	// gmu guards global: the kap server-wide stream's position.
	gmu    sync.Mutex
	global cursor

	stMu       sync.Mutex
	state      string
	stateSince time.Time
	kapURL     string
	lastErr    string
	reported   map[string]bool // log lines already written once (keyed by message)

	followed atomic.Int64
	dormant  atomic.Int64
	// active is the live connection, for control's REST calls.
	active atomic.Pointer[activeLink]

	web *httpdrain.Endpoint

	ready chan struct{}
	cmds  ledger.Ledger

	tornTails *prometheus.CounterVec
}

// activeLink is the connection control commands go through.
type activeLink struct {
	l   *link
	kap kapClient
}

// NewBridge prepares the bridge: this run's epoch and its metrics. It does no
// network I/O; Run does.
func NewBridge(cfg Config) (*Bridge, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	b := &Bridge{cfg: cfg, log: cfg.Logger, sessions: map[string]*session{}, ready: make(chan struct{}),
		newID: aep.NewID, reported: map[string]bool{}}
	if err := privateDirs(cfg.Home); err != nil {
		return nil, err
	}
	if b.epoch, err = nextEpoch(cfg.Home, cfg.Now()); err != nil {
		return nil, err
	}
	b.metrics = newMetrics(b)
	b.tornTails = newTornTails(b.metrics.reg)
	b.setState(KapDiscovering, "", nil)
	b.web = httpdrain.NewEndpoint("bridge-web", cfg.Listen, b.Handler())
	return b, nil
}

// Ready is closed once Run serves /healthz.
func (b *Bridge) Ready() <-chan struct{} { return b.ready }

// Epoch is this bridge run's epoch.
func (b *Bridge) Epoch() int64 { return b.epoch }

// Accepts lists the command types declared at hello.
func (b *Bridge) Accepts() []string { return AcceptsFor(b.cfg.Mode, b.cfg.Control) }

// AckWindow is the ack window declared at hello.
func (b *Bridge) AckWindow() time.Duration { return b.cfg.Control.AckWindow }

func (b *Bridge) controlOn() bool {
	return len(b.Accepts()) > 0
}

// Listen binds the HTTP address; Run calls it when the caller has not.
func (b *Bridge) Listen() (net.Addr, error) { return b.web.Listen() }

// Run serves /healthz and /metrics and follows the kap-server until ctx is
// done: discover, connect, subscribe, map; on any loss, back off and start
// over (a restarted server is found again through the registry).
func (b *Bridge) Run(ctx context.Context) error {
	addr, err := b.Listen()
	if err != nil {
		return err
	}
	b.log.Info("bridge-web listening", "addr", addr.String(), "mode", b.cfg.Mode.String(), "epoch", b.epoch,
		"home", b.cfg.Home, "kimi_home", b.cfg.KimiHome, "kap", b.cfg.KapURL, "control", b.Accepts())
	errc, err := b.web.Serve()
	if err != nil {
		return err
	}
	close(b.ready)
	followCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		b.follow(followCtx)
	}()
	hkDone := make(chan struct{})
	go func() {
		defer close(hkDone)
		b.housekeeping(followCtx)
	}()
	select {
	case <-ctx.Done():
	case err = <-errc:
	}
	cancel()
	<-done
	<-hkDone
	shutCtx, stop := context.WithTimeout(context.Background(), b.cfg.DrainTimeout)
	defer stop()
	serr := b.web.Shutdown(shutCtx)
	b.closeAll()
	if err != nil {
		return fmt.Errorf("bridge-web: serve: %w", err)
	}
	if serr != nil {
		return fmt.Errorf("bridge-web: shutdown: %w", serr)
	}
	return nil
}

func (b *Bridge) closeAll() {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, s := range b.sessions {
		s.mu.Lock()
		if err := s.stream.Log().Close(); err != nil {
			b.log.Error("closing a session log", "session", s.id, "err", err)
		}
		s.mu.Unlock()
	}
}

// housekeeping closes the logs of sessions gone quiet.
func (b *Bridge) housekeeping(ctx context.Context) {
	t := time.NewTicker(DefaultIdleClose / 10)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			b.closeIdle(b.cfg.Now().Add(-DefaultIdleClose))
		}
	}
}

// closeIdle closes the log of every session with no event since before.
func (b *Bridge) closeIdle(before time.Time) {
	b.mu.Lock()
	sessions := make([]*session, 0, len(b.sessions))
	for _, s := range b.sessions {
		sessions = append(sessions, s)
	}
	b.mu.Unlock()
	for _, s := range sessions {
		s.mu.Lock()
		if s.lastAt.Before(before) {
			if err := s.stream.Log().Close(); err != nil {
				b.log.Error("closing an idle session log", "session", s.id, "err", err)
			}
		}
		s.mu.Unlock()
	}
}

// follow is the discover/connect loop.
func (b *Bridge) follow(ctx context.Context) {
	bo := backoff.Backoff{Min: b.cfg.BackoffMin, Max: b.cfg.BackoffMax}
	for ctx.Err() == nil {
		ep, ok := b.endpoint(ctx)
		if !ok {
			return
		}
		start := b.cfg.Now()
		err := b.connect(ctx, ep)
		if ctx.Err() != nil {
			return
		}
		b.followed.Store(0)
		b.metrics.followed.Set(0)
		reason, state := classify(err)
		b.metrics.connErrors.WithLabelValues(reason).Inc()
		b.setState(state, ep.base, err)
		if starting := ep.instance.StartedAt > 0 && b.cfg.Now().Sub(time.UnixMilli(ep.instance.StartedAt)) < startupGrace; starting && reason == "io" {
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

// endpoint waits for a kap-server to connect to: the fixed URL, or the newest
// live registry record, with the token read fresh each time (rotate-token).
// It returns false when ctx ends.
func (b *Bridge) endpoint(ctx context.Context) (endpoint, bool) {
	counted := map[Skipped]bool{}
	for {
		token, terr := readToken(b.cfg.KapTokenFile)
		var base string
		var inst Instance
		var derr error
		if b.cfg.KapURL != "" {
			base = b.cfg.KapURL
		} else {
			var skipped []Skipped
			inst, skipped, derr = Discover(b.cfg.KimiHome, b.cfg.Now(), b.cfg.StaleInstance, b.cfg.PIDAlive, b.cfg.AllowRemoteKap)
			for _, s := range skipped {
				if !counted[s] {
					counted[s] = true
					b.metrics.skipped.WithLabelValues(s.Reason).Inc()
					if s.Reason == SkipRemote {
						b.reportOnce(slog.LevelWarn, "kimi web instance record names a non-loopback host; refusing to send the kap token there (--allow-remote-kap allows it)",
							"record", s.Path, "host", s.Host)
						continue
					}
					b.log.Debug("instance record skipped", "record", s.Path, "reason", s.Reason)
				}
			}
			base = inst.BaseURL()
		}
		switch {
		case derr != nil:
			b.setState(KapDiscovering, "", derr)
			b.reportOnce(slog.LevelInfo, "waiting for kimi web to start", "registry", InstancesDir(b.cfg.KimiHome), "err", derr)
		case terr != nil:
			b.setState(KapUnauthorized, base, terr)
			level := slog.LevelWarn
			if inst.StartedAt > 0 && b.cfg.Now().Sub(time.UnixMilli(inst.StartedAt)) < startupGrace {
				level = slog.LevelInfo // it writes the token as it starts
			}
			b.reportOnce(level, "kap token unreadable; retrying", "err", terr)
		default:
			ep, err := newEndpoint(base, token)
			if err == nil {
				ep.instance = inst
				return ep, true
			}
			b.setState(KapDown, base, err)
			b.reportOnce(slog.LevelError, "kap URL unusable", "err", err)
		}
		if !backoff.Sleep(ctx, b.cfg.DiscoveryPoll) {
			return endpoint{}, false
		}
	}
}

// reportOnce logs a message the first time it is seen with these args, and
// at debug level after that, so a retry loop cannot flood the log.
func (b *Bridge) reportOnce(level slog.Level, msg string, args ...any) {
	key := msg + fmt.Sprint(args...)
	b.stMu.Lock()
	seen := b.reported[key]
	if !seen {
		if len(b.reported) > MaxReportedMessages {
			b.reported = map[string]bool{}
		}
		b.reported[key] = true
	}
	b.stMu.Unlock()
	if seen {
		level = slog.LevelDebug
	}
	b.log.Log(context.Background(), level, msg, args...)
}

func (b *Bridge) setState(state, url string, err error) {
	b.stMu.Lock()
	defer b.stMu.Unlock()
	if state != b.state {
		b.stateSince = b.cfg.Now()
		if state == KapConnected {
			// A new connection: a later loss is news again.
			b.reported = map[string]bool{}
		}
	}
	b.state, b.kapURL = state, url
	b.lastErr = ""
	if err != nil {
		b.lastErr = err.Error()
	}
	for _, s := range kapStates {
		v := 0.0
		if s == state {
			v = 1
		}
		b.metrics.state.WithLabelValues(s).Set(v)
	}
}

// session returns the state of a kap session, loading it (the cursor and
// open pairs recovered from its log) on first touch.
func (b *Bridge) session(kap string) *session {
	b.mu.Lock()
	s, ok := b.sessions[kap]
	if !ok {
		s = newSession(b, kap)
		b.sessions[kap] = s
	}
	b.mu.Unlock()
	if !ok {
		s.mu.Lock()
		s.recover()
		s.mu.Unlock()
	}
	return s
}

// lookup returns a loaded session by its AEP session name, nil if unknown.
func (b *Bridge) lookup(aepSession string) *session {
	kap := aepSession
	if b.cfg.Mode == mapping.Companion {
		var ok bool
		if kap, ok = strings.CutSuffix(aepSession, CompanionSuffix); !ok {
			return nil
		}
	}
	if kap == "" || kap == mapping.GlobalSession {
		return nil
	}
	return b.session(kap)
}

// knownSessions lists the sessions the bridge holds state for.
func (b *Bridge) knownSessions() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make([]string, 0, len(b.sessions))
	for id := range b.sessions {
		out = append(out, id)
	}
	sort.Strings(out)
	return out
}

// Handler serves /healthz and /metrics.
func (b *Bridge) Handler() http.Handler {
	r := chi.NewRouter()
	r.Use(httpguard.Hosts(b.cfg.AllowedHosts))
	r.Get("/healthz", b.serveHealth)
	r.Handle("/metrics", promhttp.HandlerFor(b.metrics.reg, promhttp.HandlerOpts{}))
	r.NotFound(func(w http.ResponseWriter, _ *http.Request) {
		writeError(w, http.StatusNotFound, "not-found", "endpoints: GET /healthz, GET /metrics")
	})
	r.MethodNotAllowed(func(w http.ResponseWriter, _ *http.Request) {
		writeError(w, http.StatusMethodNotAllowed, "method-not-allowed", "GET /healthz, GET /metrics")
	})
	return r
}

func writeError(w http.ResponseWriter, status int, code, detail string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]string{"error": code, "detail": detail}) //nolint:errcheck // client gone
}

// KapHealth is the kap connection's part of /healthz.
type KapHealth struct {
	State string    `json:"state"`
	URL   string    `json:"url,omitempty"`
	Since time.Time `json:"since"`
	Error string    `json:"error,omitempty"`
}

// Health is the /healthz body.
type Health struct {
	OK               bool      `json:"ok"`
	Mode             string    `json:"mode"`
	Kap              KapHealth `json:"kap"`
	SessionsFollowed int64     `json:"sessions_followed"`
	SessionsDormant  int64     `json:"sessions_dormant"`
	Relay            string    `json:"relay"`
	Outbox           int       `json:"relay_outbox,omitempty"`
	Epoch            int64     `json:"epoch"`
	Control          []string  `json:"control"`
}

// HealthNow reports the bridge's health. ok means the daemon runs; whether
// it currently follows a kap-server is kap.state.
func (b *Bridge) HealthNow() Health {
	b.stMu.Lock()
	kh := KapHealth{State: b.state, URL: b.kapURL, Since: b.stateSince, Error: b.lastErr}
	b.stMu.Unlock()
	h := Health{OK: true, Mode: b.cfg.Mode.String(), Kap: kh, SessionsFollowed: b.followed.Load(),
		SessionsDormant: b.dormant.Load(), Relay: "none", Epoch: b.epoch, Control: b.Accepts()}
	if b.cfg.Publisher != nil {
		h.Relay = "unknown"
	}
	if ps, ok := b.cfg.Publisher.(journal.PublisherStatus); ok {
		h.Relay, h.Outbox = ps.State(), ps.OutboxDepth()
	}
	return h
}

func (b *Bridge) serveHealth(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(b.HealthNow()) //nolint:errcheck // client gone
}

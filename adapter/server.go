package adapter

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/aep-kimi/aep-kimi/emitter"
	"github.com/aep-kimi/aep-kimi/internal/httpdrain"
	"github.com/aep-kimi/aep-kimi/internal/httpguard"
	"github.com/aep-kimi/aep-kimi/internal/periodic"
	"github.com/aep-kimi/aep-kimi/internal/spool"
	"github.com/aep-kimi/aep-kimi/mapping"
)

// Channel states of the hook channel (per session and overall).
const (
	ChannelUnavailable = "unavailable" // no hook has arrived since start
	ChannelActive      = "active"      // hooks arrive
	ChannelStale       = "stale"       // a live session has gone quiet longer than heartbeats allow
	ChannelStopped     = "stopped"     // every session seen has ended
)

// Server is the adapter daemon: a source of sessions on the emitter core,
// whose face toward the relay (epoch, hello declarations, commands) it
// shows as its own.
type Server struct {
	emitter.Emitter
	core    *emitter.Core[*hookSession]
	cfg     Config
	log     *slog.Logger
	token   string
	metrics *metrics

	// turnHooks is set once any TurnStarted arrives: this Kimi has the 0.32+
	// hook surface registered, so prompts can be queued behind a turn.
	turnHooks atomic.Bool
	anyHook   atomic.Bool

	spoolMu sync.Mutex

	web *httpdrain.Endpoint

	// ready is closed once the spool is ingested and the listener serves.
	ready chan struct{}
	// stopping is closed when shutdown begins; held hooks release on it.
	stopping chan struct{}
	stopOnce sync.Once

	hard hardening

	// life watches Kimi processes and reports presence and health.
	life *lifecycle
}

// NewServer prepares the adapter: the hook token (created 0600 on first
// start), this run's epoch, and the log directory.
func NewServer(cfg Config) (*Server, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, log: cfg.Logger, stopping: make(chan struct{}), ready: make(chan struct{})}
	if s.core, err = emitter.New(cfg.Config, s.spec(), source{s}); err != nil {
		return nil, err
	}
	s.Emitter = s.core
	if s.token, err = ensureToken(cfg.Home); err != nil {
		return nil, err
	}
	s.metrics = newMetrics(s.core.Metrics())
	s.hard = newHardening(s.core.Metrics())
	s.metrics.channel.WithLabelValues(ChannelUnavailable).Set(1)
	s.life = newLifecycle(s)
	s.web = httpdrain.NewEndpoint("adapter", cfg.Listen, s.Handler())
	return s, nil
}

// Ready is closed once Run has ingested the spool and serves hooks.
func (s *Server) Ready() <-chan struct{} { return s.ready }

// Handler serves /hook, /healthz and /metrics.
func (s *Server) Handler() http.Handler {
	return s.core.Handler(s.cfg.AllowedHosts, func() any { return s.HealthNow() },
		emitter.Route{Method: http.MethodPost, Path: "/hook", Handler: s.serveHook})
}

// Listen binds the HTTP address; Run calls it when the caller has not.
func (s *Server) Listen() (net.Addr, error) { return s.web.Listen() }

// Close releases what Listen bound, for a Server that will not Run after
// all; Run releases it on its own.
func (s *Server) Close() error { return s.web.Close() }

// Run ingests the spool, serves until ctx is done, then shuts down in order:
// stop intake, release held hooks (fail-open), close the logs, flush the
// publisher (emitter.Core.Run).
func (s *Server) Run(ctx context.Context) error { return s.core.Run(ctx, s.serve) }

// Registry is the adapter's metrics registry, the one /metrics serves.
func (s *Server) Registry() *prometheus.Registry { return s.core.Registry() }

func (s *Server) serve(ctx context.Context) error {
	// Bound before the spool is read: a hook that comes while it is read
	// waits in the listen queue for its turn instead of being refused, and
	// refused, spooled after the read, it was ingested on the next pass,
	// behind the newer hooks of its session served live meanwhile.
	addr, err := s.Listen()
	if err != nil {
		return err
	}
	// Spooled payloads go first, ahead of newer hooks of their sessions.
	s.ingestSpool(0)
	s.life.recoverLive()
	s.log.Info("adapter listening", "addr", addr.String(), "epoch", s.Epoch(), "home", s.cfg.Home,
		"capture", s.cfg.Posture.Capture.String(), "attention_capture", s.cfg.Posture.AttentionCapture.String(),
		"gate", s.cfg.Control.Gate, "instruct", s.cfg.Control.Instruct)
	if g, ok := s.Gate(); ok {
		s.log.Info("gate timing", "hold", time.Duration(g.EffectiveHoldMs)*time.Millisecond, "on_timeout", g.OnTimeout,
			"kimi_timeout_s", g.KimiTimeoutS)
		if g.EffectiveHoldMs < g.HoldMs {
			s.log.Warn("the gate holds a tool call for less than configured: Kimi's PreToolUse timeout ends it first; run `aep-setup write kimi-code --control`",
				"configured", time.Duration(g.HoldMs)*time.Millisecond, "kimi_timeout_s", g.KimiTimeoutS)
		}
	}
	errc, err := s.web.Serve()
	if err != nil {
		return err
	}
	close(s.ready)
	var wg sync.WaitGroup
	loopCtx, cancel := context.WithCancel(ctx)
	wg.Add(1)
	go func() {
		defer wg.Done()
		periodic.Every(loopCtx, s.cfg.SpoolPoll, func() { s.ingestSpool(s.cfg.SpoolGrace) })
	}()
	wg.Add(1)
	go func() {
		defer wg.Done()
		// Channel gauges, the sessions' presence and silent ends, then the
		// core's idle eviction.
		periodic.Every(loopCtx, HousekeepingInterval, func() {
			s.life.tick(s.refreshChannel())
			s.core.Sweep()
		})
	}()

	select {
	case <-ctx.Done():
	case err := <-errc:
		cancel()
		wg.Wait()
		return fmt.Errorf("adapter: serve: %w", err)
	}
	s.stopOnce.Do(func() { close(s.stopping) })
	s.releaseAllHolds() // fail-open: a stopping adapter never blocks a tool
	shutCtx, done := context.WithTimeout(context.Background(), s.cfg.DrainTimeout)
	defer done()
	err = s.web.Shutdown(shutCtx)
	cancel()
	wg.Wait()
	s.life.close()
	s.ingestSpool(0) // anything spooled while we were stopping
	if err != nil {
		return fmt.Errorf("adapter: shutdown: %w", err)
	}
	return nil
}

// errNotUTF8 refuses a hook payload that is not UTF-8.
var errNotUTF8 = errors.New("hook payload is not valid UTF-8 (JSON text must be UTF-8)")

// maxDeliveryID bounds the delivery header kimi-hook sends.
const maxDeliveryID = 64

func (s *Server) serveHook(w http.ResponseWriter, r *http.Request) {
	now := s.cfg.Now()
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		s.metrics.badRequests.WithLabelValues("content-type").Inc()
		httpguard.WriteError(w, http.StatusUnsupportedMediaType, "unsupported-media-type", "send the hook payload as application/json")
		return
	}
	auth := r.Header.Get("Authorization")
	want := "Bearer " + s.token
	if subtle.ConstantTimeCompare([]byte(auth), []byte(want)) != 1 {
		s.metrics.badRequests.WithLabelValues("unauthorized").Inc()
		httpguard.WriteError(w, http.StatusUnauthorized, "unauthorized", "missing or wrong hook token (see "+tokenPath(s.cfg.Home)+")")
		return
	}
	body, err := httpguard.ReadBody(w, r, mapping.MaxPayloadBytes, s.cfg.BodyTimeout)
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			s.metrics.badRequests.WithLabelValues("too-large").Inc()
			httpguard.WriteError(w, http.StatusRequestEntityTooLarge, "payload-too-large", fmt.Sprintf("hook payloads are limited to %d bytes", mapping.MaxPayloadBytes))
			return
		}
		if errors.Is(err, httpguard.ErrBodyTimeout) {
			s.metrics.badRequests.WithLabelValues("timeout").Inc()
			httpguard.WriteError(w, http.StatusRequestTimeout, "body-timeout", err.Error())
			return
		}
		s.metrics.badRequests.WithLabelValues("read").Inc()
		httpguard.WriteError(w, http.StatusBadRequest, "bad-request", "could not read the body")
		return
	}
	d := &delivery{payload: body, at: now, arrived: now, proc: procFromRequest(r), wait: hookWait(r.Header.Get("X-Kimi-Hook-Wait-Ms"))}
	if id := r.Header.Get("X-Kimi-Hook-Delivery"); validDeliveryID(id) {
		d.id = id
	}
	if t, err := time.Parse(time.RFC3339Nano, r.Header.Get("X-Kimi-Hook-Time")); err == nil && t.Before(now.Add(MaxHookClockSkew)) && now.Sub(t) < MaxHookAge {
		d.at = t
	}
	out, hook, err := s.ingest(d, false)
	if err != nil {
		s.metrics.badRequests.WithLabelValues("payload").Inc()
		httpguard.WriteError(w, http.StatusBadRequest, "invalid-payload", err.Error())
		return
	}
	if out.wait != nil {
		select {
		case out = <-out.wait:
		case <-r.Context().Done():
			if out.gone != nil {
				out.gone()
			}
			out = outcome{reply: emptyReply()}
		}
	}
	out = out.durable()
	s.metrics.hooks.WithLabelValues(hookLabel(hook)).Inc()
	s.metrics.roundTrip.Observe(s.cfg.Now().Sub(d.at).Seconds())
	if out.err != nil {
		// Nothing is acknowledged that is not on disk: kimi-hook keeps (or
		// writes) the payload in its spool on any answer but 200.
		// The log line is the core's, one per change (emitter.Health).
		s.metrics.notDurable.Inc()
		httpguard.WriteError(w, http.StatusServiceUnavailable, "not-durable", "the hook's events could not be written to the session log; spool the payload and retry")
		return
	}
	reply := out.reply
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(reply)))
	w.Write(reply) //nolint:errcheck // kimi-hook gone: it spools
}

// maxHookWait bounds the wait kimi-hook declares: Kimi's longest hook
// timeout.
const maxHookWait = 600 * time.Second

// hookWait reads X-Kimi-Hook-Wait-Ms, the time kimi-hook waits for the reply
// from now on; 0 when absent or out of range.
func hookWait(v string) time.Duration {
	ms, err := strconv.Atoi(v)
	if err != nil || ms <= 0 || time.Duration(ms)*time.Millisecond > maxHookWait {
		return 0
	}
	return time.Duration(ms) * time.Millisecond
}

func validDeliveryID(id string) bool {
	if id == "" || len(id) > maxDeliveryID {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// hookLabel keeps metric label cardinality bounded: unknown hook names
// collapse into one label.
func hookLabel(h string) string {
	if mapping.KnownHook(h) {
		return h
	}
	return "other"
}

// logPacer lets one line through per interval and counts the rest, so a
// failing disk under a flood costs one log line per interval, not one per
// hook.
type logPacer struct {
	mu         sync.Mutex
	last       time.Time
	suppressed int
}

// allow reports whether to log now and how many lines were held back since
// the last one.
func (p *logPacer) allow(now time.Time, every time.Duration) (bool, int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.last.IsZero() && now.Sub(p.last) < every {
		p.suppressed++
		return false, 0
	}
	n := p.suppressed
	p.last, p.suppressed = now, 0
	return true, n
}

// ingest maps one delivery and applies it to its session.
func (s *Server) ingest(d *delivery, spooled bool) (outcome, string, error) {
	d.spooled = spooled
	if !utf8.Valid(d.payload) {
		// The one rule for every intake: text that is not UTF-8 would be
		// read lossily (U+FFFD), merging distinct session ids. The payload
		// is refused (400; from the spool: quarantined), never renamed.
		return outcome{}, "", errNotUTF8
	}
	r, err := mapping.Hook(d.payload, s.cfg.Posture)
	if err != nil {
		return outcome{}, "", err
	}
	if r.Facts.Hook == mapping.HookTurnStarted {
		s.turnHooks.Store(true)
	}
	id := r.Facts.Session
	if id == "" {
		id = UnknownSession
	}
	sess := s.core.Lock(id)
	out := sess.handle(d, r)
	proc := sess.afterDelivery(d)
	sess.Unlock()
	s.life.ensure(id, proc, d.spooled)
	s.anyHook.Store(true)
	return out, r.Facts.Hook, nil
}

// ingestSpool takes spooled records in spool order. Records younger than
// minAge are left alone: kimi-hook writes one ahead of each fire-and-forget
// delivery and removes it once delivered, so a young record is usually in
// flight. Records that cannot be parsed are quarantined with a log line and a
// metric, never dropped.
func (s *Server) ingestSpool(minAge time.Duration) int {
	s.spoolMu.Lock()
	defer s.spoolMu.Unlock()
	dir := spool.Dir(s.cfg.Home)
	files, err := spool.List(dir)
	if err != nil {
		s.log.Error("spool unreadable", "dir", dir, "err", err)
		return 0
	}
	s.metrics.spoolBacklog.Set(float64(len(files)))
	n, quarantined := 0, false
	defer func() { s.pruneQuarantine(quarantined) }()
	now := s.cfg.Now()
	for i, path := range files {
		if minAge > 0 {
			if st, err := os.Stat(path); err != nil || now.Sub(st.ModTime()) < minAge {
				continue
			}
		}
		rec, err := spool.Read(path)
		if errors.Is(err, os.ErrNotExist) {
			continue // delivered and removed meanwhile
		}
		if err == nil && rec.Reason == "oversize" {
			err = fmt.Errorf("payload larger than %d bytes", mapping.MaxPayloadBytes)
		}
		var out outcome
		if err == nil {
			d := &delivery{id: rec.Delivery, payload: rec.Payload, at: rec.Time(s.cfg.Now()), proc: parseProc(rec.Pid, rec.PidStart)}
			if !validDeliveryID(d.id) {
				d.id = ""
			}
			out, _, err = s.ingest(d, true)
			if err == nil && out.wait != nil {
				out = <-out.wait // parked for the reorder window; spooled hooks are never held
			}
			out = out.durable() // the record goes only once its events are on the disk
		}
		if err == nil && out.err != nil {
			// Still not durable: the record stays for a later pass.
			s.metrics.notDurable.Inc()
			continue
		}
		if err != nil {
			dst, qerr := spool.Quarantine(path, err.Error())
			s.metrics.quarantined.Inc()
			quarantined = true
			s.log.Warn("spool record quarantined", "record", path, "moved_to", dst, "err", err, "move_err", qerr)
		} else if rerr := spool.Remove(path); rerr != nil {
			s.log.Error("spool record not removed; it will be deduped on the next pass", "record", path, "err", rerr)
		} else {
			s.metrics.spooled.Inc()
			n++
		}
		s.metrics.spoolBacklog.Set(float64(len(files) - i - 1))
	}
	if n > 0 {
		s.log.Info("spool ingested", "records", n)
	}
	return n
}

// ChannelReport is the hook channel's health.
type ChannelReport struct {
	State    string         `json:"state"`
	Sessions map[string]int `json:"sessions"`
}

// Channel computes the hook channel state: active while some live session's
// hooks arrive, stale when live sessions exist but all went quiet for longer
// than Kimi's heartbeat cadence allows, stopped when every session ended,
// unavailable before the first hook.
func (s *Server) Channel() ChannelReport {
	now := s.cfg.Now()
	counts := map[string]int{ChannelActive: 0, ChannelStale: 0, ChannelStopped: 0}
	s.core.Each(func(sess *hookSession) {
		switch {
		case sess.ended:
			counts[ChannelStopped]++
		case now.Sub(sess.LastActive()) > s.cfg.StaleAfter:
			counts[ChannelStale]++
		default:
			counts[ChannelActive]++
		}
	})
	state := ChannelUnavailable
	switch {
	case !s.anyHook.Load():
	case counts[ChannelActive] > 0:
		state = ChannelActive
	case counts[ChannelStale] > 0:
		state = ChannelStale
	default:
		state = ChannelStopped
	}
	return ChannelReport{State: state, Sessions: counts}
}

func (s *Server) refreshChannel() ChannelReport {
	rep := s.Channel()
	for _, st := range []string{ChannelUnavailable, ChannelActive, ChannelStale, ChannelStopped} {
		v := 0.0
		if st == rep.State {
			v = 1
		}
		s.metrics.channel.WithLabelValues(st).Set(v)
	}
	for st, n := range rep.Sessions {
		s.metrics.sessions.WithLabelValues(st).Set(float64(n))
	}
	return rep
}

// Health is the /healthz body.
type Health struct {
	emitter.Health
	Channel ChannelReport `json:"channel"`
	Spool   int           `json:"spool_backlog"`
	Gate    *GateReport   `json:"gate,omitempty"`
}

// GateReport is the held gate's timing, so `aep-setup check` can compare it
// with the PreToolUse timeout Kimi has registered.
type GateReport struct {
	// HoldMs is the configured longest hold; EffectiveHoldMs what is left
	// of it under the Kimi timeout registered now.
	HoldMs          int64 `json:"hold_ms"`
	EffectiveHoldMs int64 `json:"effective_hold_ms"`
	// OnTimeout is applied when nobody answers: allow or deny.
	OnTimeout string `json:"on_timeout"`
	// KimiTimeoutS is the PreToolUse timeout Kimi's config.toml registers
	// now (absent: not known); NeedsKimiTimeoutS the one HoldMs needs.
	KimiTimeoutS      int `json:"kimi_timeout_s,omitempty"`
	NeedsKimiTimeoutS int `json:"needs_kimi_timeout_s"`
}

// Gate reports the held gate's timing; ok is false when the gate is off.
func (s *Server) Gate() (GateReport, bool) {
	if !s.gateOn() {
		return GateReport{}, false
	}
	c := s.cfg.Control
	kimi := c.RegisteredTimeout()
	hold, _ := c.holdUnder(kimi)
	return GateReport{
		HoldMs: c.HoldTimeout.Milliseconds(), EffectiveHoldMs: hold.Milliseconds(), OnTimeout: c.OnTimeout,
		KimiTimeoutS: int(kimi / time.Second), NeedsKimiTimeoutS: NeededKimiTimeout(c.HoldTimeout),
	}, true
}

// HealthNow reports the adapter's health.
func (s *Server) HealthNow() Health {
	h := Health{Health: s.core.Health(), Channel: s.refreshChannel()}
	if g, ok := s.Gate(); ok {
		h.Gate = &g
	}
	if files, err := spool.List(spool.Dir(s.cfg.Home)); err == nil {
		h.Spool = len(files)
	}
	return h
}

// SessionIDs lists the sessions in memory, sorted.
func (s *Server) SessionIDs() []string { return s.core.Keys() }

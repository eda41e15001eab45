package bridgeweb

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/errgroup"

	"github.com/aep-kimi/aep-kimi/aep"
	"github.com/aep-kimi/aep-kimi/emitter"
	"github.com/aep-kimi/aep-kimi/internal/backoff"
	"github.com/aep-kimi/aep-kimi/internal/httpdrain"
	"github.com/aep-kimi/aep-kimi/internal/periodic"
)

// Bridge is the bridge-web daemon: it follows every live kap-server of its
// instance registry (or one fixed URL) and publishes their sessions as AEP
// events. It is a source of sessions on the emitter core (sessions keyed by
// kap session id), whose face toward the relay (epoch, hello declarations,
// commands) it shows as its own.
type Bridge struct {
	emitter.Emitter
	core    *emitter.Core[*webSession]
	cfg     Config
	log     *slog.Logger
	metrics *metrics
	newID   func() string

	// fmu guards followers: one per kap-server followed now.
	fmu       sync.Mutex
	followers map[*follower]bool

	// stMu guards the registry's own state, reported while no server is
	// followed, and the log-once memory.
	stMu       sync.Mutex
	state      string
	stateSince time.Time
	kapURL     string
	lastErr    string
	reported   map[string]bool // log lines already written once (keyed by message)

	followed atomic.Int64
	dormant  atomic.Int64

	web *httpdrain.Endpoint

	ready chan struct{}
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
	b := &Bridge{cfg: cfg, log: cfg.Logger, followers: map[*follower]bool{}, ready: make(chan struct{}),
		newID: aep.NewID, reported: map[string]bool{}}
	if b.core, err = emitter.New(cfg.Config, b.spec(), source{b}); err != nil {
		return nil, err
	}
	b.Emitter = b.core
	b.metrics = newMetrics(b.core.Metrics())
	b.setState(KapDiscovering, "", nil)
	b.web = httpdrain.NewEndpoint("bridge-web", cfg.Listen, b.Handler())
	return b, nil
}

// Ready is closed once Run serves /healthz.
func (b *Bridge) Ready() <-chan struct{} { return b.ready }

// controlOn reports whether the bridge answers Kimi's requests (a rating
// alone actuates nothing).
func (b *Bridge) controlOn() bool {
	return slices.Contains(b.Accepts(), CmdRespond)
}

// Listen binds the HTTP address; Run calls it when the caller has not.
func (b *Bridge) Listen() (net.Addr, error) { return b.web.Listen() }

// Run serves /healthz and /metrics and follows the kap-server until ctx is
// done: discover, connect, subscribe, map; on any loss, back off and start
// over (a restarted server is found again through the registry). The
// publisher runs around it (emitter.Core.Run).
func (b *Bridge) Run(ctx context.Context) error { return b.core.Run(ctx, b.serve) }

// Registry is the bridge's metrics registry, the one /metrics serves.
func (b *Bridge) Registry() *prometheus.Registry { return b.core.Registry() }

func (b *Bridge) serve(ctx context.Context) error {
	addr, err := b.Listen()
	if err != nil {
		return err
	}
	b.log.Info("bridge-web listening", "addr", addr.String(), "mode", b.cfg.Mode.String(), "epoch", b.Epoch(),
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
		// Quiet sessions' logs close (DefaultIdleClose).
		periodic.Every(followCtx, DefaultIdleClose/10, b.core.Sweep)
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
	if err != nil {
		return fmt.Errorf("bridge-web: serve: %w", err)
	}
	if serr != nil {
		return fmt.Errorf("bridge-web: shutdown: %w", serr)
	}
	return nil
}

// follow follows the fixed KapURL, or every live server of the instance
// registry: each server that appears gets a follower, and when one is gone
// (its record removed, its process dead) its follower stops and its sessions
// end (endInstance); the bridge waits for the next.
func (b *Bridge) follow(ctx context.Context) {
	if b.cfg.KapURL != "" {
		f := b.addFollower(Instance{})
		defer b.removeFollower(f)
		f.run(ctx)
		return
	}
	type running struct {
		f      *follower
		cancel context.CancelCauseFunc
		done   chan struct{}
	}
	followers := map[string]*running{}
	var g errgroup.Group
	defer func() {
		for _, r := range followers {
			r.cancel(nil)
		}
		g.Wait() //nolint:errcheck // followers return no error
	}()
	reg := registry{kimiHome: b.cfg.KimiHome, staleAfter: b.cfg.StaleInstance, pidAlive: b.cfg.PIDAlive,
		allowRemote: b.cfg.AllowRemoteKap}
	counted := map[Skipped]bool{}
	for {
		ch, err := reg.poll(b.cfg.Now())
		for _, s := range ch.skipped {
			if !counted[s] {
				counted[s] = true
				b.metrics.skipped.WithLabelValues(s.Reason).Inc()
				switch s.Reason {
				case SkipRemote:
					b.reportOnce(slog.LevelWarn, "kimi web instance record names a non-loopback host; refusing to send the kap token there (--allow-remote-kap allows it)",
						"record", s.Path, "host", s.Host)
					continue
				case SkipLink:
					b.reportOnce(slog.LevelWarn, "instance record is a link or not a regular file; refusing it", "record", s.Path)
					continue
				}
				b.log.Debug("instance record skipped", "record", s.Path, "reason", s.Reason)
			}
		}
		for _, in := range ch.gone {
			r := followers[in.key()]
			delete(followers, in.key())
			r.cancel(errInstanceGone)
			<-r.done
			ended := b.endInstance(r.f, b.cfg.Now())
			b.removeFollower(r.f)
			b.metrics.instanceEnds.Inc()
			b.log.Info("kimi web stopped; its sessions ended", "kap", in.BaseURL(), "server_pid", in.PID, "sessions", ended)
		}
		for _, in := range ch.appeared {
			fctx, cancel := context.WithCancelCause(ctx)
			r := &running{f: b.addFollower(in), cancel: cancel, done: make(chan struct{})}
			followers[in.key()] = r
			b.log.Info("kimi web found; following it", "kap", in.BaseURL(), "server_pid", in.PID)
			g.Go(func() error {
				defer close(r.done)
				r.f.run(fctx)
				return nil
			})
		}
		if len(followers) == 0 {
			if err == nil {
				err = ErrNoInstance
			}
			b.setState(KapDiscovering, "", err)
			b.reportOnce(slog.LevelInfo, "waiting for kimi web to start", "registry", InstancesDir(b.cfg.KimiHome), "err", err)
		}
		if !backoff.Sleep(ctx, b.cfg.DiscoveryPoll) {
			return
		}
	}
}

func (b *Bridge) addFollower(in Instance) *follower {
	f := newFollower(b, in)
	b.fmu.Lock()
	b.followers[f] = true
	b.fmu.Unlock()
	b.metrics.instances.Inc()
	b.publishState()
	return f
}

func (b *Bridge) removeFollower(f *follower) {
	b.fmu.Lock()
	delete(b.followers, f)
	b.fmu.Unlock()
	b.metrics.instances.Dec()
	b.recount()
	b.publishState()
}

// followerList is the servers followed now, the newest start first.
func (b *Bridge) followerList() []*follower {
	b.fmu.Lock()
	out := make([]*follower, 0, len(b.followers))
	for f := range b.followers {
		out = append(out, f)
	}
	b.fmu.Unlock()
	sort.Slice(out, func(i, j int) bool {
		if out[i].inst.StartedAt != out[j].inst.StartedAt {
			return out[i].inst.StartedAt > out[j].inst.StartedAt
		}
		return out[i].inst.key() < out[j].inst.key()
	})
	return out
}

// recount sums the followers' subscription counts.
func (b *Bridge) recount() {
	var live, dormant int64
	for _, f := range b.followerList() {
		live += f.followed.Load()
		dormant += f.dormant.Load()
	}
	b.followed.Store(live)
	b.dormant.Store(dormant)
	b.metrics.followed.Set(float64(live))
	b.metrics.dormant.Set(float64(dormant))
}

// endInstance ends the sessions a stopped server held (see
// session.endObserved) and returns how many it ended. Its follower has
// stopped: no frame of that server is mapped after this.
func (b *Bridge) endInstance(f *follower, at time.Time) int {
	n := 0
	b.core.Each(func(s *webSession) {
		if s.owner == f {
			s.owner = nil
			if s.endObserved(at) {
				n++
			}
		}
	})
	return n
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

// forgetReported makes every message news again.
func (b *Bridge) forgetReported() {
	b.stMu.Lock()
	b.reported = map[string]bool{}
	b.stMu.Unlock()
}

// setState records the registry's own state, reported while no server is
// followed.
func (b *Bridge) setState(state, url string, err error) {
	b.stMu.Lock()
	if state != b.state {
		b.stateSince = b.cfg.Now()
	}
	b.state, b.kapURL = state, url
	b.lastErr = ""
	if err != nil {
		b.lastErr = err.Error()
	}
	b.stMu.Unlock()
	b.publishState()
}

// kapHealth is the connection state /healthz leads with: the newest server
// followed, else the registry's own.
func (b *Bridge) kapHealth() (KapHealth, []KapHealth) {
	fs := b.followerList()
	if len(fs) == 0 {
		b.stMu.Lock()
		defer b.stMu.Unlock()
		return KapHealth{State: b.state, URL: b.kapURL, Since: b.stateSince, Error: b.lastErr}, nil
	}
	all := make([]KapHealth, len(fs))
	for i, f := range fs {
		all[i] = f.health()
	}
	return all[0], all
}

// publishState sets the state gauge from the leading connection state.
func (b *Bridge) publishState() {
	if b.metrics == nil {
		return
	}
	kh, _ := b.kapHealth()
	for _, s := range kapStates() {
		v := 0.0
		if s == kh.State {
			v = 1
		}
		b.metrics.state.WithLabelValues(s).Set(v)
	}
}

// lock returns a kap session's state, locked, loading it (the cursor and
// open pairs recovered from its log) on first touch. The caller unlocks it.
func (b *Bridge) lock(kap string) *webSession { return b.core.Lock(kap) }

// Handler serves /healthz and /metrics.
func (b *Bridge) Handler() http.Handler {
	return b.core.Handler(b.cfg.AllowedHosts, func() any { return b.HealthNow() })
}

// KapHealth is one kap connection's part of /healthz.
type KapHealth struct {
	State string    `json:"state"`
	URL   string    `json:"url,omitempty"`
	Since time.Time `json:"since"`
	Error string    `json:"error,omitempty"`
	// PID is the server's process, from its registry record.
	PID              int   `json:"pid,omitempty"`
	SessionsFollowed int64 `json:"sessions_followed,omitempty"`
	SessionsDormant  int64 `json:"sessions_dormant,omitempty"`
}

// Health is the /healthz body.
type Health struct {
	emitter.Health
	Mode string `json:"mode"`
	// Kap is the newest server followed (or, with none, the registry's
	// state); Instances lists every server followed.
	Kap              KapHealth   `json:"kap"`
	Instances        []KapHealth `json:"instances,omitempty"`
	SessionsFollowed int64       `json:"sessions_followed"`
	SessionsDormant  int64       `json:"sessions_dormant"`
}

// HealthNow reports the bridge's health. ok means the daemon runs; whether
// it currently follows a kap-server is kap.state.
func (b *Bridge) HealthNow() Health {
	kh, all := b.kapHealth()
	return Health{Health: b.core.Health(), Mode: b.cfg.Mode.String(), Kap: kh, Instances: all,
		SessionsFollowed: b.followed.Load(), SessionsDormant: b.dormant.Load()}
}

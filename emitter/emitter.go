// Package emitter is the core every source of sessions runs on. A source
// (the hook adapter, the kimi web bridge) turns what its agent does into
// mapped events and decides what a control command means for one of its
// sessions; the core owns the rest, once for every source:
//
//   - the session table: each session's lock and its journal.Stream, built
//     and recovered from its log on first touch (Lock), visited one lock at
//     a time (Each), evicted from memory when idle or over a bound and its
//     log closed when quiet (Sweep);
//   - the command protocol (HandleCommand): dedupe through the ledger, the
//     session lookup, the source's decision, one ack, a redelivery answered
//     with the recorded ack;
//   - the publisher's lifetime (Run): it starts before the source's intake
//     and stops after every log is closed;
//   - what every source serves and counts: /healthz and /metrics (Handler,
//     Health) and the metrics every source has, on the registry its own
//     join (Metrics).
//
// A source supplies its mapping (Source: what a session is and how its log
// folds back into it) and its decide (Source.Decide); it may keep its
// sessions in memory while a reply waits on them (Evictor).
//
// One writer per session: a session's events are emitted only while its
// lock is held, and the core hands out sessions locked (Lock, Each); what
// that buys is journal.Stream's to say.
//
// Lock order: a session's lock, then the table's. Whoever holds the table's
// lock never waits for a session's (it tries, TryLock, or takes the lock of
// one nobody else can see yet), so the two never wait on each other.
package emitter

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/aep-kimi/aep-kimi/aep"
	"github.com/aep-kimi/aep-kimi/internal/buildinfo"
	"github.com/aep-kimi/aep-kimi/internal/journal"
	"github.com/aep-kimi/aep-kimi/internal/ledger"
	"github.com/aep-kimi/aep-kimi/internal/safefile"
)

// Source is what a source of sessions plugs into the core.
type Source[S Member] interface {
	// New builds the empty state of key's session and names its stream.
	// It is called with the table locked, so it must not block.
	New(key string) (S, Identity)
	// Fold folds one event of the session's log back into its state, on
	// first touch. Callers hold its lock.
	Fold(s S, ev *aep.Event)
	// Key is the table key of the session a command names; false for a
	// session this source does not publish.
	Key(session string) (string, bool)
	// Decide judges a command the core has authenticated, found accepted
	// and valid, for s. Callers hold its lock.
	Decide(ctx context.Context, s S, cmd *aep.Event) Verdict
	// Ack puts an event the core made for a command (its ack, a rating's
	// feedback) on s's stream with the source's own extension attributes.
	// Callers hold its lock.
	Ack(s S, ack journal.Entry) *aep.Event
}

// Emitter is what a source shows of its core: an AEP emitter's face toward
// a relay (its epoch, what it declares at hello, where commands go). A
// source embeds it, so the core's methods are the source's own.
type Emitter interface {
	Epoch() int64
	Accepts() []string
	AckWindow() time.Duration
	HandleCommand(ctx context.Context, cmd *aep.Event)
}

// Runner is a publisher with a life of its own (the relay client): Run
// carries what is published until its context ends, then flushes, and
// hands the commands the relay routes to this source to onCommand (the
// core's HandleCommand).
type Runner interface {
	Run(ctx context.Context, onCommand func(context.Context, *aep.Event)) error
}

// Core is one source's sessions, commands and publisher.
type Core[S Member] struct {
	cfg     Config
	spec    Spec
	src     Source[S]
	log     *slog.Logger
	epoch   int64
	build   buildinfo.Info
	handles *journal.Handles
	metrics *metrics
	// cmds records command decisions for dedupe (AEP-0004 §3).
	cmds ledger.Ledger

	mu       sync.Mutex
	sessions map[string]S

	// lastRun is when the run before this one started (republish).
	lastRun time.Time

	// notDurable is why the session logs do not reach the disk as their
	// mode promises, nil while they do (journal.Handles.OnDurable).
	notDurable atomic.Pointer[error]
}

// New prepares the core of a source: its private directories, this run's
// epoch and its metrics. cfg is filled with its defaults.
func New[S Member](cfg Config, spec Spec, src Source[S]) (*Core[S], error) {
	spec, err := spec.withDefaults()
	if err != nil {
		return nil, err
	}
	if cfg, err = cfg.WithDefaults(spec.Name); err != nil {
		return nil, err
	}
	dirs := append([]string{filepath.Dir(spec.LogDir), spec.LogDir, filepath.Dir(spec.EpochFile)}, spec.Dirs...)
	for _, d := range dirs {
		if err := safefile.PrivateDir(d); err != nil {
			return nil, fmt.Errorf("%s home: %w", spec.Name, err)
		}
	}
	c := &Core[S]{cfg: cfg, spec: spec, src: src, log: cfg.Logger, sessions: map[string]S{},
		handles: journal.NewHandles(cfg.MaxOpenLogs), build: buildinfo.Get()}
	c.handles.SetSync(cfg.Sync, cfg.Syncer, c.syncFailed).OnDurable(c.durability)
	c.lastRun = lastRunStart(spec.EpochFile)
	// The epoch never repeats for a session across restarts, even with a
	// wiped home (journal.NextEpoch).
	if c.epoch, err = journal.NextEpoch(spec.EpochFile, cfg.Now()); err != nil {
		return nil, err
	}
	c.metrics = newMetrics(c)
	return c, nil
}

// syncFailed hears of a sync of a session log that failed: what it
// covered may not survive a power loss. It is counted; the log line is
// durability's, one per change.
func (c *Core[S]) syncFailed(string, error) { c.metrics.AppendFailed() }

// durability hears that the session logs stopped reaching the disk (err)
// or do again (nil), once per change: /healthz, the logs_durable gauge and
// one log line follow it.
//
// The line is logged first, so whoever sees the new state finds it logged.
func (c *Core[S]) durability(err error) {
	if err != nil {
		c.log.Error("session logs are not reaching the disk: events are not durable and hooks are answered not-durable until a write succeeds again", "err", err)
		c.notDurable.Store(&err)
		c.metrics.durable.Set(0)
		return
	}
	c.log.Info("session logs reach the disk again")
	c.notDurable.Store(nil)
	c.metrics.durable.Set(1)
}

// Epoch is this run's epoch.
func (c *Core[S]) Epoch() int64 { return c.epoch }

// Accepts lists the command types declared at hello.
func (c *Core[S]) Accepts() []string { return append([]string{}, c.spec.Accepts...) }

// AckWindow is the ack window declared at hello.
func (c *Core[S]) AckWindow() time.Duration { return c.spec.AckWindow }

// OpenLogs is the number of session log files open now.
func (c *Core[S]) OpenLogs() int { return c.handles.Open() }

// Health is what every source reports on /healthz: that it runs, its relay
// link, its epoch, the commands it accepts and its build (`aep-setup check`
// compares it with the kimi-hook Kimi runs). A source's health embeds it.
type Health struct {
	// OK is false while the source cannot make what it takes durable;
	// Reason says why.
	OK     bool   `json:"ok"`
	Reason string `json:"reason,omitempty"`
	// Relay is the publisher's state ("none" without one, "unknown" for
	// one that does not report: journal.PublisherStatus); Outbox its depth.
	Relay   string         `json:"relay"`
	Outbox  int            `json:"relay_outbox,omitempty"`
	Epoch   int64          `json:"epoch"`
	Control []string       `json:"control"`
	Build   buildinfo.Info `json:"build"`
}

// Health is the source's health as far as the core knows it.
func (c *Core[S]) Health() Health {
	h := Health{OK: true, Epoch: c.epoch, Control: c.Accepts(), Build: c.build}
	if err := c.notDurable.Load(); err != nil {
		h.OK, h.Reason = false, "session logs are not reaching the disk: "+(*err).Error()
	}
	h.Relay, h.Outbox = c.relay()
	return h
}

// Healthy is h.OK: /healthz answers 503 when it is false.
func (h Health) Healthy() bool { return h.OK }

// relay is the publisher's state and outbox depth.
func (c *Core[S]) relay() (state string, outbox int) {
	if ps, ok := c.cfg.Publisher.(journal.PublisherStatus); ok {
		return ps.State(), ps.OutboxDepth()
	}
	if c.cfg.Publisher != nil {
		return "unknown", 0
	}
	return "none", 0
}

// AgentStream is a stream for the source's agent-scoped events (presence,
// health): published and counted, never logged.
func (c *Core[S]) AgentStream() *journal.Stream {
	return journal.NewStream(journal.StreamConfig{
		Source: aep.AgentSourceURI(c.cfg.Host, agent), Agent: agent,
		Publisher: c.cfg.Publisher, Counters: c.metrics, Logger: c.log, NewID: c.spec.NewID,
	})
}

// Run runs serve, the source's intake, until it returns, inside the
// publisher's lifetime: a publisher that runs (Runner) starts first and
// stops last, after serve returned and every session's log is closed, so
// the events a stopping source emits still reach the relay. The commands
// the relay routes here go from the publisher straight to HandleCommand.
func (c *Core[S]) Run(ctx context.Context, serve func(context.Context) error) error {
	var g errgroup.Group
	pubCtx, stopPub := context.WithCancel(context.WithoutCancel(ctx))
	defer stopPub()
	if r, ok := c.cfg.Publisher.(Runner); ok {
		g.Go(func() error { return r.Run(pubCtx, c.HandleCommand) })
	}
	c.republish()
	err := serve(ctx)
	c.CloseAll()
	stopPub()
	if perr := g.Wait(); perr != nil {
		c.log.Error("publisher stopped", "err", perr)
	}
	return err
}

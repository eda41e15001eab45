// Package adapter is the aep-kimi hook adapter: it takes every Kimi hook
// payload (from kimi-hook over HTTP, or from the spool), maps it through the
// pure mapping table, gives it identity and session order, writes it to the
// session's JSONL log and publishes it to a relay.
//
// It is a source of sessions on the emitter core, which owns the session
// table, its locks and streams, eviction and the command protocol; the
// adapter supplies the hook mapping and the decisions on its commands.
// Kimi's arrival order is not its dispatch order, so pairing and run
// boundaries follow correlation ids and scope stacks, with a short, bounded
// reorder window for a result that arrives before its request.
package adapter

import (
	"errors"
	"fmt"
	"time"

	"github.com/aep-kimi/aep-kimi/emitter"
	"github.com/aep-kimi/aep-kimi/internal/defaults"
	"github.com/aep-kimi/aep-kimi/mapping"
)

// Defaults for Config. The environment names in brackets are the ones
// cmd/aep-kimi maps onto these fields; the rest are fixed.
const (
	// DefaultListen is the hook intake address, loopback [AEP_KIMI_ADDR].
	DefaultListen = "127.0.0.1:8398"
	// DefaultReorderWindow bounds how long a result waits for its request.
	DefaultReorderWindow = 250 * time.Millisecond
	// DefaultStaleAfter is how long a live session may go without a hook
	// before its channel reads stale: two and a half of Kimi's 60 s
	// SessionHeartbeat periods, so one late heartbeat is not an alarm.
	DefaultStaleAfter = 150 * time.Second
	// DefaultSpoolPoll paces the running adapter's look at the spool.
	DefaultSpoolPoll = 250 * time.Millisecond
	// DefaultSpoolGrace is how old a spool record must be before the running
	// adapter ingests it: younger ones are write-ahead copies of deliveries
	// still in flight.
	DefaultSpoolGrace = 2 * time.Second
	// DefaultIdleEvict drops an idle session's state from memory (its log
	// stays; state is recovered from the log if it comes back).
	DefaultIdleEvict = 6 * time.Hour
	// DefaultDrainTimeout bounds the shutdown wait for hook requests in
	// flight.
	DefaultDrainTimeout = 5 * time.Second
	// DefaultHoldTimeout is how long the control gate holds a PreToolUse
	// [AEP_ATTENTION_TIMEOUT_MS].
	DefaultHoldTimeout = 50 * time.Second
	// HookGiveUpMargin is how long before Kimi's hook timeout kimi-hook
	// stops waiting for the adapter's reply (it then exits without an
	// answer, and Kimi proceeds).
	HookGiveUpMargin = 1500 * time.Millisecond
	// GateReplyMargin is how long before kimi-hook stops waiting the gate
	// answers an unanswered hold itself, so its answer (a deny) still
	// reaches Kimi.
	GateReplyMargin = 500 * time.Millisecond
	// DefaultOnTimeout is what the gate does when nobody answers in time
	// [AEP_KIMI_ON_TIMEOUT]: let Kimi proceed, Kimi's own fail-open default.
	DefaultOnTimeout = mapping.OnExpiryAllow
	// DefaultAckWindow is the control ack window declared at hello.
	DefaultAckWindow = emitter.DefaultAckWindow
	// HousekeepingInterval paces the channel-gauge refresh and the eviction
	// of idle sessions.
	HousekeepingInterval = 5 * time.Second
	// MaxHookClockSkew and MaxHookAge bound the read time kimi-hook stamps
	// on a delivery (X-Kimi-Hook-Time): one further ahead of the adapter's
	// clock or older than this is not trusted, and the arrival time is used.
	MaxHookClockSkew = time.Second
	MaxHookAge       = time.Hour
	// MaxInstructions and MaxInstructionChars cap the instruct queue.
	MaxInstructions     = 20
	MaxInstructionChars = 4000
	// DefaultBodyTimeout bounds the time to receive one /hook body:
	// kimi-hook writes a whole payload at once over loopback, so only a
	// stuck or hostile client takes longer.
	DefaultBodyTimeout = 10 * time.Second
	// DefaultMaxOpenLogs bounds the session log files open at once; the
	// others reopen (append mode) on their next event
	// [AEP_KIMI_MAX_OPEN_LOGS].
	DefaultMaxOpenLogs = emitter.DefaultMaxOpenLogs
	// DefaultMaxSessions bounds the sessions kept in memory: past it, the
	// longest-idle ones are evicted (never one with a parked or held hook or
	// queued instructions); a session that comes back recovers its state
	// from its log's tail [AEP_KIMI_MAX_SESSIONS].
	DefaultMaxSessions = 4096
	// DefaultMaxWatches bounds the Kimi processes watched at once (each
	// costs a descriptor; sessions of one process share its watch): past
	// it, a session naming another process falls back to silence
	// [AEP_KIMI_MAX_WATCHES].
	DefaultMaxWatches = 1024
	// MaxEvictedLive bounds the sessions evicted from memory before they
	// ended that the adapter still tracks for their end (a process binding
	// or a last hook time, a few dozen bytes each).
	MaxEvictedLive = 1 << 16
	// BoundLogEvery paces the warning for sessions past a bound (watched
	// processes, tracked evicted sessions): one line, with a count, per
	// interval at most.
	BoundLogEvery = 10 * time.Second
	// UnknownSession names the session of a payload without session_id.
	UnknownSession = "unknown"
	// DefaultIdleEnd ends a session whose Kimi process cannot be watched
	// (a hook from another machine, a platform without a watcher) after this
	// much silence, with reason timeout [AEP_KIMI_IDLE_END]. Kimi sends a
	// heartbeat every 60 s while a session is loaded, so only a session that
	// is really gone stays silent this long.
	DefaultIdleEnd = 30 * time.Minute
	// DefaultExitGrace is the wait between a watched Kimi process's exit and
	// the session's end: hooks Kimi fired just before it died (fire-and-
	// forget deliveries, spooled write-aheads) land first. Detection plus
	// grace plus the spool pass stay well under 5 s.
	DefaultExitGrace = time.Second
	// DefaultProcPoll paces the slow watcher used where the platform has no
	// exit notification (or the kernel lacks pidfd).
	DefaultProcPoll = time.Second
	// DefaultStatusInterval is the least time between two agent.presence
	// events of one session, and between two agent.health events of the
	// hook channel: a flapping state is reported at this pace, its latest
	// value last.
	DefaultStatusInterval = 10 * time.Second
)

// Control configures the opt-in control legs.
type Control struct {
	// Gate holds PreToolUse for an answer (AEP_KIMI_CONTROL=1).
	Gate bool
	// GateTools limits the gate to these tool names; empty means all.
	GateTools []string
	// HoldTimeout bounds one hold; on expiry OnTimeout is applied. The hold
	// never outlasts what Kimi waits: it is capped by KimiTimeout here and,
	// per hook, by the wait kimi-hook declares.
	HoldTimeout time.Duration
	// OnTimeout is applied to a hold nobody answered by its deadline:
	// "allow" lets Kimi proceed, "deny" denies the call (AEP_KIMI_ON_TIMEOUT;
	// "" means DefaultOnTimeout).
	OnTimeout string
	// KimiTimeout is the PreToolUse timeout registered in Kimi's
	// config.toml, read at start (0: not known).
	KimiTimeout time.Duration
	// KimiTimeoutNow, when set, reads that timeout again as it is now (0:
	// not known): each hold and each report go by it, so a registration
	// changed under a running adapter (aep-setup write kimi-code --control)
	// governs the next held call without a restart.
	KimiTimeoutNow func() time.Duration
	// Instruct enables the x.kimi-code.control.instruct queue (AEP_INSTRUCT=1).
	Instruct bool
	// AckWindow is declared at hello as ack_window_ms; zero means
	// DefaultAckWindow.
	AckWindow time.Duration
	// Authenticated says commands can reach the adapter over an
	// authenticated binding (a relay token is set); without it nothing is
	// accepted.
	Authenticated bool
}

// Config is everything the adapter needs; only cmd reads the environment.
// The embedded emitter.Config holds what every source has: the home (logs
// under Home/logs/kimi-code; the hook token, epoch and spool under
// Home/kimi), host, posture, publisher, log bound, logger and clock.
type Config struct {
	emitter.Config
	// Listen is the HTTP address for /hook, /healthz and /metrics.
	Listen string
	// AllowedHosts are the names besides loopback a request's Host may carry
	// (httpguard.Hosts): a defence against DNS rebinding.
	AllowedHosts []string
	// BodyTimeout bounds the time to receive one /hook body.
	BodyTimeout time.Duration
	// ReorderWindow bounds how long a result waits for its request.
	ReorderWindow time.Duration
	// StaleAfter is the heartbeat window: a live session without a hook for
	// this long reads stale on /healthz, and, when its process is not
	// watched, offline on the stream (agent.presence) [AEP_KIMI_STALE_AFTER].
	StaleAfter time.Duration
	// IdleEnd ends an unwatched session after this much silence (reason
	// timeout) [AEP_KIMI_IDLE_END].
	IdleEnd time.Duration
	// ExitGrace is the wait between a watched process's exit and the end.
	ExitGrace time.Duration
	// ProcPoll paces the slow process watcher.
	ProcPoll time.Duration
	// StatusInterval rate-limits agent.presence and agent.health.
	StatusInterval time.Duration
	SpoolPoll      time.Duration
	SpoolGrace     time.Duration
	IdleEvict      time.Duration
	// MaxSessions bounds the sessions kept in memory.
	MaxSessions int
	// MaxWatches bounds the Kimi processes watched at once.
	MaxWatches int
	// DrainTimeout bounds the shutdown wait for requests in flight.
	DrainTimeout time.Duration
	Control      Control
}

// withDefaults returns c with every zero field set to its default, or an
// error for a missing Home or a negative duration.
func (c Config) withDefaults() (Config, error) {
	const component = "adapter config"
	defaults.Set(&c.Listen, DefaultListen)
	err := errors.Join(
		defaults.Positive(component, "ReorderWindow", &c.ReorderWindow, DefaultReorderWindow),
		defaults.Positive(component, "BodyTimeout", &c.BodyTimeout, DefaultBodyTimeout),
		defaults.Positive(component, "StaleAfter", &c.StaleAfter, DefaultStaleAfter),
		defaults.Positive(component, "IdleEnd", &c.IdleEnd, DefaultIdleEnd),
		defaults.Positive(component, "ExitGrace", &c.ExitGrace, DefaultExitGrace),
		defaults.Positive(component, "ProcPoll", &c.ProcPoll, DefaultProcPoll),
		defaults.Positive(component, "StatusInterval", &c.StatusInterval, DefaultStatusInterval),
		defaults.Positive(component, "SpoolPoll", &c.SpoolPoll, DefaultSpoolPoll),
		defaults.Positive(component, "SpoolGrace", &c.SpoolGrace, DefaultSpoolGrace),
		defaults.Positive(component, "IdleEvict", &c.IdleEvict, DefaultIdleEvict),
		defaults.Positive(component, "MaxSessions", &c.MaxSessions, DefaultMaxSessions),
		defaults.Positive(component, "MaxWatches", &c.MaxWatches, DefaultMaxWatches),
		defaults.Positive(component, "DrainTimeout", &c.DrainTimeout, DefaultDrainTimeout),
		defaults.Positive(component, "Control.HoldTimeout", &c.Control.HoldTimeout, DefaultHoldTimeout),
		c.Control.check(),
	)
	defaults.Set(&c.Control.OnTimeout, DefaultOnTimeout)
	var cerr error
	c.Config, cerr = c.Config.WithDefaults("adapter")
	return c, errors.Join(cerr, err)
}

// check refuses an on-timeout choice the gate cannot apply, and a gate whose
// registered Kimi timeout leaves no time to hold a call at all.
func (c Control) check() error {
	switch c.OnTimeout {
	case "", mapping.OnExpiryAllow, mapping.OnExpiryDeny:
	default:
		return fmt.Errorf("adapter config: on-timeout %q: want allow or deny", c.OnTimeout)
	}
	if c.Gate && c.KimiTimeout > 0 && GateWindow(c.KimiTimeout) <= 0 {
		return fmt.Errorf("the PreToolUse timeout registered with Kimi is %s, too short to hold a tool call for an answer: run `aep-setup write kimi-code --control`", c.KimiTimeout)
	}
	return nil
}

// GateWindow is the longest the gate may hold a PreToolUse whose registered
// Kimi timeout is kimiTimeout: kimi-hook stops waiting HookGiveUpMargin
// before Kimi's timeout, and the gate answers GateReplyMargin before that.
// Not positive when kimiTimeout leaves no room.
func GateWindow(kimiTimeout time.Duration) time.Duration {
	return kimiTimeout - HookGiveUpMargin - GateReplyMargin
}

// NeededKimiTimeout is the smallest PreToolUse timeout, in whole seconds as
// Kimi's config takes it, whose GateWindow holds hold.
func NeededKimiTimeout(hold time.Duration) int {
	need := hold + HookGiveUpMargin + GateReplyMargin
	return int((need + time.Second - 1) / time.Second)
}

// RegisteredTimeout is Kimi's PreToolUse timeout as the gate knows it now
// (0: not known).
func (c Control) RegisteredTimeout() time.Duration {
	if c.KimiTimeoutNow != nil {
		return c.KimiTimeoutNow()
	}
	return c.KimiTimeout
}

// Hold is the gate's longest hold: HoldTimeout, capped by the registered
// Kimi timeout when known; capped reports that the cap applied.
func (c Control) Hold() (hold time.Duration, capped bool) {
	return c.holdUnder(c.RegisteredTimeout())
}

func (c Control) holdUnder(kimi time.Duration) (hold time.Duration, capped bool) {
	hold = c.HoldTimeout
	if kimi > 0 {
		if w := GateWindow(kimi); w < hold {
			return max(w, 0), true
		}
	}
	return hold, false
}

// gateDeadline is when a hold gives up waiting for an answer: the hold from
// the hook's read time at, and never later than GateReplyMargin before the
// moment kimi-hook stops waiting (its declared wait from arrival, when
// known).
func gateDeadline(at, arrived time.Time, hold, wait time.Duration) time.Time {
	deadline := at.Add(hold)
	if wait > 0 {
		if stop := arrived.Add(wait - GateReplyMargin); stop.Before(deadline) {
			deadline = stop
		}
	}
	return deadline
}

// Package adapter is the aep-kimi hook adapter: it takes every Kimi hook
// payload (from kimi-hook over HTTP, or from the spool), maps it through the
// pure mapping table, gives it identity and session order, writes it to the
// session's JSONL log and publishes it to a relay.
//
// One writer per session: seq assignment, the log append and the publish
// happen in one critical section, so log order, seq order and publish order
// are one order. Kimi's arrival order is not its dispatch order, so pairing
// and run boundaries follow correlation ids and scope stacks, with a short,
// bounded reorder window for a result that arrives before its request.
package adapter

import (
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/aep-kimi/aep-kimi/aep"
	"github.com/aep-kimi/aep-kimi/mapping"
)

// Defaults.
const (
	DefaultListen        = "127.0.0.1:8398"
	DefaultReorderWindow = 250 * time.Millisecond
	// DefaultStaleAfter is how long a live session may go without a hook
	// before its channel reads stale: two and a half of Kimi's 60 s
	// SessionHeartbeat periods, so one late heartbeat is not an alarm.
	DefaultStaleAfter = 150 * time.Second
	DefaultSpoolPoll  = 250 * time.Millisecond
	// DefaultSpoolGrace is how old a spool record must be before the running
	// adapter ingests it: younger ones are write-ahead copies of deliveries
	// still in flight.
	DefaultSpoolGrace = 2 * time.Second
	// DefaultIdleEvict drops an idle session's state from memory (its log
	// stays; state is recovered from the log if it comes back).
	DefaultIdleEvict = 6 * time.Hour
	// DefaultHoldTimeout is how long the control gate holds a PreToolUse.
	DefaultHoldTimeout = 50 * time.Second
	// DefaultAckWindow is the control ack window declared at hello.
	DefaultAckWindow = 10 * time.Second
	// MaxInstructions and MaxInstructionChars cap the instruct queue.
	MaxInstructions     = 20
	MaxInstructionChars = 4000
	// UnknownSession names the session of a payload without session_id.
	UnknownSession = "unknown"
)

// Publisher takes sequenced events toward a relay. Publish must not block.
type Publisher interface {
	Publish(ev *aep.Event)
}

// PublisherStatus is the optional health a Publisher can report.
type PublisherStatus interface {
	State() string
	OutboxDepth() int
	Drops() uint64
}

// Control configures the opt-in control legs.
type Control struct {
	// Gate holds PreToolUse for an answer (AEP_KIMI_CONTROL=1).
	Gate bool
	// GateTools limits the gate to these tool names; empty means all.
	GateTools []string
	// HoldTimeout bounds one hold; on expiry the hook is released with no
	// objection (fail-open).
	HoldTimeout time.Duration
	// Instruct enables the x.kimi-code.control.instruct queue (AEP_INSTRUCT=1).
	Instruct bool
	// AckWindow is declared at hello as ack_window_ms.
	AckWindow time.Duration
	// Authenticated says commands can reach the adapter over an
	// authenticated binding (a relay token is set); without it nothing is
	// accepted.
	Authenticated bool
}

// Config is everything the adapter needs; only cmd reads the environment.
type Config struct {
	// Listen is the HTTP address for /hook, /healthz and /metrics.
	Listen string
	// Home is the AEP home: logs under Home/logs/kimi-code, the hook token,
	// epoch and spool under Home/kimi.
	Home string
	// Host names this machine in source URIs.
	Host string
	// Posture is the capture posture and redaction pipeline.
	Posture mapping.Posture
	// Publisher sends events to a relay; nil runs without one.
	Publisher Publisher
	// ReorderWindow bounds how long a result waits for its request.
	ReorderWindow time.Duration
	StaleAfter    time.Duration
	SpoolPoll     time.Duration
	SpoolGrace    time.Duration
	IdleEvict     time.Duration
	Control       Control
	Logger        *slog.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

func (c *Config) setDefaults() error {
	if c.Home == "" {
		return errors.New("adapter: Config.Home is required")
	}
	if c.Listen == "" {
		c.Listen = DefaultListen
	}
	if c.Host == "" {
		c.Host, _ = os.Hostname()
	}
	if c.ReorderWindow <= 0 {
		c.ReorderWindow = DefaultReorderWindow
	}
	if c.StaleAfter <= 0 {
		c.StaleAfter = DefaultStaleAfter
	}
	if c.SpoolPoll <= 0 {
		c.SpoolPoll = DefaultSpoolPoll
	}
	if c.SpoolGrace <= 0 {
		c.SpoolGrace = DefaultSpoolGrace
	}
	if c.IdleEvict <= 0 {
		c.IdleEvict = DefaultIdleEvict
	}
	if c.Control.HoldTimeout <= 0 {
		c.Control.HoldTimeout = DefaultHoldTimeout
	}
	if c.Control.AckWindow <= 0 {
		c.Control.AckWindow = DefaultAckWindow
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Posture.Redactor == nil {
		c.Posture.Redactor = &aep.Redactor{}
	}
	return nil
}

// Paths under an AEP home.
func kimiDir(home string) string   { return filepath.Join(home, "kimi") }
func logDir(home string) string    { return filepath.Join(home, "logs", mapping.Agent) }
func tokenPath(home string) string { return filepath.Join(kimiDir(home), "hook.token") }

// TokenPath is where the hook token lives for an AEP home.
func TokenPath(home string) string { return tokenPath(home) }

package emitter

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/aep-kimi/aep-kimi/aep"
	"github.com/aep-kimi/aep-kimi/internal/defaults"
	"github.com/aep-kimi/aep-kimi/internal/journal"
	"github.com/aep-kimi/aep-kimi/internal/syncmode"
	"github.com/aep-kimi/aep-kimi/mapping"
)

// Defaults every source shares. The environment names in brackets are the
// ones cmd/aep-kimi maps onto a source's fields.
const (
	// DefaultMaxOpenLogs bounds the session log files open at once; the
	// others reopen (append mode) on their next event
	// [AEP_KIMI_MAX_OPEN_LOGS, AEP_KIMI_WEB_MAX_OPEN_LOGS].
	DefaultMaxOpenLogs = journal.DefaultMaxOpenLogs
	// DefaultAckWindow is the control ack window declared at hello.
	DefaultAckWindow = 10 * time.Second
	// RecoveryTail bounds how much of a session's log is read to recover its
	// state on first touch.
	RecoveryTail = 1 << 20
)

// Config is what every source of sessions is configured with; a source's
// own Config embeds it. Only cmd reads the environment.
type Config struct {
	// Home is the AEP home: the source's logs and epoch counter live under
	// it. Required.
	Home string
	// Host names this machine in source URIs; empty means os.Hostname.
	Host string
	// Posture is the capture posture and redaction pipeline.
	Posture mapping.Posture
	// Publisher sends events toward a relay; nil runs without one. It may
	// implement journal.PublisherStatus to report its health, and Runner to
	// be run for as long as the source runs (Core.Run).
	Publisher journal.Publisher
	// Collectors are registered on the source's /metrics next to its own
	// (the relay publisher's, for one).
	Collectors []prometheus.Collector
	// MaxOpenLogs bounds the session log files open at once.
	MaxOpenLogs int
	// Sync is when the session logs reach the disk, and so what a hook's
	// acknowledgement promises; empty is syncmode.Default. Answers and
	// decisions are synced before they are acknowledged in every mode.
	Sync syncmode.Mode
	// Syncer syncs a log's file; nil is journal.FileSync (tests inject one).
	Syncer syncmode.Syncer
	Logger *slog.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// WithDefaults returns c with every zero field set to its default, or an
// error for a missing Home or a negative bound; component names the source
// in the error ("adapter").
func (c Config) WithDefaults(component string) (Config, error) {
	var errs []error
	if c.Home == "" {
		errs = append(errs, fmt.Errorf("%s: Config.Home is required", component))
	}
	if c.Host == "" {
		c.Host, _ = os.Hostname()
	}
	errs = append(errs, defaults.Positive(component+" config", "MaxOpenLogs", &c.MaxOpenLogs, DefaultMaxOpenLogs))
	if sync, err := syncmode.Parse(string(c.Sync)); err != nil {
		errs = append(errs, fmt.Errorf("%s config: Sync: %w", component, err))
	} else {
		c.Sync = sync
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
	return c, errors.Join(errs...)
}

// Spec is what a source tells the core about itself: where its files live,
// what it accepts, and how its sessions leave memory.
type Spec struct {
	// Name is the source's component name: its metrics are named
	// aepkimi_<Name>_* and its errors and logs name it ("adapter").
	Name string
	// LogDir holds the session logs, EpochFile the source's own epoch
	// counter (journal.NextEpoch). Both are made private (0700) with Dirs,
	// the other directories the source keeps under the home.
	LogDir, EpochFile string
	Dirs              []string

	// Commands are the command types the source knows: each is a label of
	// the commands metric, any other counts as "other".
	Commands []string
	// Accepts are the command types declared at hello and taken; any other
	// is rejected unsupported, with Unsupported's detail (nil: a generic
	// one). Authenticated says commands reach the source over an
	// authenticated relay binding: without it every command is rejected
	// unauthorized.
	Accepts       []string
	Unsupported   func(typ string) string
	Authenticated bool
	// AckWindow is declared at hello as ack_window_ms.
	AckWindow time.Duration

	// EventLabel bounds the type label of the events metric (a hostile or
	// newer agent can name any type); nil counts registered types by name
	// and every other type as "other".
	EventLabel func(typ string) string
	// NewID assigns event ids; nil means aep.NewID.
	NewID func() string

	// MaxSessions bounds the sessions in memory: past it the longest-idle
	// evictable ones leave (see Evictor). Zero keeps every session.
	MaxSessions int
	// IdleEvict drops a session idle this long from memory at the next
	// Sweep; IdleClose closes the log of one idle this long. Zero: never.
	IdleEvict, IdleClose time.Duration
}

func (s Spec) withDefaults() (Spec, error) {
	if s.Name == "" || s.LogDir == "" || s.EpochFile == "" {
		return s, errors.New("emitter: Spec needs Name, LogDir and EpochFile")
	}
	err := defaults.Positive(s.Name+" config", "AckWindow", &s.AckWindow, DefaultAckWindow)
	if s.Unsupported == nil {
		name := s.Name
		s.Unsupported = func(typ string) string { return fmt.Sprintf("%s is not in this %s's control.accepts", typ, name) }
	}
	if s.EventLabel == nil {
		s.EventLabel = registeredLabel
	}
	if s.NewID == nil {
		s.NewID = aep.NewID
	}
	return s, err
}

// registeredLabel counts registered types by name and any other as "other".
func registeredLabel(typ string) string {
	if _, ok := aep.LookupType(typ); ok {
		return typ
	}
	return "other"
}

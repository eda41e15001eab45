package bridgeweb

import (
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/aep-kimi/aep-kimi/emitter"
	"github.com/aep-kimi/aep-kimi/internal/defaults"
	"github.com/aep-kimi/aep-kimi/mapping"
)

// Defaults for Config. The environment names in brackets are the ones
// cmd/aep-kimi maps onto these fields; the rest are fixed.
const (
	// DefaultListen is the /healthz and /metrics address, loopback
	// [AEP_KIMI_WEB_ADDR].
	DefaultListen = "127.0.0.1:4323"
	// DefaultDiscoveryPoll is how often the instance registry is read while
	// no kap-server runs.
	DefaultDiscoveryPoll = time.Second
	// DefaultStaleInstance: a registry record whose heartbeat (rewritten
	// every 15 s) is older than this is not a server to connect to.
	DefaultStaleInstance = 60 * time.Second
	// DefaultBackoffMin and DefaultBackoffMax bound the reconnect backoff.
	DefaultBackoffMin = 250 * time.Millisecond
	DefaultBackoffMax = 10 * time.Second
	// DefaultHandshakeTimeout bounds the dial and the server_hello.
	DefaultHandshakeTimeout = 10 * time.Second
	// DefaultProbeInterval paces the REST liveness probe while connected:
	// a kap-server told to shut down closes its listener at once but keeps
	// running as long as a WebSocket client stays, so the bridge lets go
	// when the listener is gone.
	DefaultProbeInterval = 2 * time.Second
	// DefaultProbeFailures is how many failed probes in a row end a
	// connection.
	DefaultProbeFailures = 2
	// DefaultDormantRetry paces re-subscribing sessions the server did not
	// have loaded: a resumed session's events are only journaled once
	// someone subscribes, so the bridge keeps asking.
	DefaultDormantRetry = 2 * time.Second
	// DefaultRESTTimeout bounds one REST call.
	DefaultRESTTimeout = 5 * time.Second
	// DefaultAckWindow is the control ack window declared at hello.
	DefaultAckWindow = emitter.DefaultAckWindow
	// DefaultReadLimit bounds one WebSocket message; frames above
	// mapping.MaxPayloadBytes are refused as bad frames, not as a broken
	// connection.
	DefaultReadLimit = 64 << 20
	// DefaultIdleClose closes the log file of a session quiet this long (it
	// reopens on the next event), so a bridge that has seen many sessions
	// does not hold a descriptor for each.
	DefaultIdleClose = 10 * time.Minute
	// DefaultMaxOpenLogs bounds the session log files open at once, as the
	// hook adapter does; the others reopen (append mode) on their next
	// event [AEP_KIMI_WEB_MAX_OPEN_LOGS].
	DefaultMaxOpenLogs = emitter.DefaultMaxOpenLogs
	// DefaultDrainTimeout bounds the shutdown wait for /healthz and /metrics
	// requests in flight.
	DefaultDrainTimeout = 5 * time.Second
	// MaxReportedMessages bounds the distinct messages the bridge remembers
	// having logged once; past it the memory starts over.
	MaxReportedMessages = 256
	// DefaultKimiHome is Kimi's home, relative to the user's home directory
	// [KIMI_CODE_HOME].
	DefaultKimiHome = ".kimi-code"
)

// Command types the bridge can accept (AEP-0004 §5).
const (
	CmdRespond = "control.attention.respond"
	CmdCancel  = "control.cancel"
)

// Control configures the opt-in control leg.
type Control struct {
	// Enabled is AEP_KIMI_WEB_CONTROL=1. It only takes effect in primary
	// mode with an authenticated binding.
	Enabled bool
	// Authenticated says commands reach the bridge over an authenticated
	// relay binding (a relay token is set); without it nothing is accepted.
	Authenticated bool
	// AckWindow is declared at hello as ack_window_ms; zero means
	// DefaultAckWindow.
	AckWindow time.Duration
}

// Config is everything the bridge needs; only cmd reads the environment.
// The embedded emitter.Config holds what every source has: the home (logs
// under Home/logs/kimi-code-web, the epoch under Home/kimi/web-epoch), host,
// posture, publisher, collectors, log bound, logger and clock.
type Config struct {
	emitter.Config
	// Listen is the HTTP address for /healthz and /metrics.
	Listen string
	// AllowedHosts are the names besides loopback a request's Host may carry
	// (httpguard.Hosts): a defence against DNS rebinding.
	AllowedHosts []string
	// Mode is companion (default) or primary.
	Mode mapping.Mode
	// KimiHome is KIMI_CODE_HOME: the instance registry and server.token.
	KimiHome string
	// KapURL, when set, is the kap-server to connect to instead of
	// discovering one; KapTokenFile overrides KimiHome/server.token.
	KapURL       string
	KapTokenFile string
	// AllowRemoteKap lets discovery connect to (and send the kap token to)
	// an instance record naming a non-loopback host; off, such records are
	// skipped (SkipRemote). A fixed KapURL is the operator's choice either
	// way.
	AllowRemoteKap bool
	Control        Control

	DiscoveryPoll, StaleInstance    time.Duration
	BackoffMin, BackoffMax          time.Duration
	HandshakeTimeout, ProbeInterval time.Duration
	ProbeFailures                   int
	DormantRetry, RESTTimeout       time.Duration
	ReadLimit                       int64
	DrainTimeout                    time.Duration
	HTTPClient                      *http.Client
	// PIDAlive tests a registry record's pid; nil means kill(pid, 0).
	PIDAlive func(pid int) bool
}

// withDefaults returns c with every zero field set to its default, or an
// error for a missing Home, no way to reach a kap-server, or a negative
// value.
func (c Config) withDefaults() (Config, error) {
	const component = "bridgeweb config"
	var cerr error
	c.Config, cerr = c.Config.WithDefaults("bridgeweb")
	defaults.Set(&c.Listen, DefaultListen)
	if c.KimiHome == "" && c.KapURL == "" {
		h, err := os.UserHomeDir()
		if err != nil {
			return c, errors.Join(cerr, errors.New("bridgeweb: Config.KimiHome is required (no home directory to default from)"))
		}
		c.KimiHome = filepath.Join(h, DefaultKimiHome)
	}
	if c.KapTokenFile == "" {
		if c.KimiHome == "" {
			return c, errors.Join(cerr, errors.New("bridgeweb: a fixed KapURL needs KapTokenFile or KimiHome"))
		}
		c.KapTokenFile = TokenPath(c.KimiHome)
	}
	err := errors.Join(
		defaults.Positive(component, "DiscoveryPoll", &c.DiscoveryPoll, DefaultDiscoveryPoll),
		defaults.Positive(component, "StaleInstance", &c.StaleInstance, DefaultStaleInstance),
		defaults.Positive(component, "BackoffMin", &c.BackoffMin, DefaultBackoffMin),
		defaults.Positive(component, "BackoffMax", &c.BackoffMax, DefaultBackoffMax),
		defaults.Positive(component, "HandshakeTimeout", &c.HandshakeTimeout, DefaultHandshakeTimeout),
		defaults.Positive(component, "ProbeInterval", &c.ProbeInterval, DefaultProbeInterval),
		defaults.Positive(component, "ProbeFailures", &c.ProbeFailures, DefaultProbeFailures),
		defaults.Positive(component, "DormantRetry", &c.DormantRetry, DefaultDormantRetry),
		defaults.Positive(component, "RESTTimeout", &c.RESTTimeout, DefaultRESTTimeout),
		defaults.Positive(component, "ReadLimit", &c.ReadLimit, DefaultReadLimit),
		defaults.Positive(component, "DrainTimeout", &c.DrainTimeout, DefaultDrainTimeout),
	)
	defaults.Set(&c.HTTPClient, &http.Client{})
	return c, errors.Join(cerr, err)
}

// AcceptsFor lists the command types a bridge declares at hello, in primary
// mode over an authenticated binding: ratings (they change nothing Kimi
// does), and both verbs when control is on. A companion bridge takes none:
// the hook adapter owns the session.
func AcceptsFor(mode mapping.Mode, c Control) []string {
	if !c.Authenticated || mode != mapping.Primary {
		return []string{}
	}
	if !c.Enabled {
		return []string{mapping.TypeRate}
	}
	return []string{CmdRespond, CmdCancel, mapping.TypeRate}
}

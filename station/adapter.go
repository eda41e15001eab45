package station

import (
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"path/filepath"
	"time"

	"github.com/aep-kimi/aep-kimi/adapter"
	"github.com/aep-kimi/aep-kimi/bridgeweb"
	"github.com/aep-kimi/aep-kimi/emitter"
	"github.com/aep-kimi/aep-kimi/internal/cli"
	"github.com/aep-kimi/aep-kimi/internal/httpguard"
	"github.com/aep-kimi/aep-kimi/internal/tlsconf"
	"github.com/aep-kimi/aep-kimi/internal/tokenfile"
	"github.com/aep-kimi/aep-kimi/mapping"
	"github.com/aep-kimi/aep-kimi/relay/client"
	"github.com/aep-kimi/aep-kimi/setup"
)

// AdapterOptions is the hook adapter's flag surface besides its
// environment (adapter.ConfigFromEnv): `adapter` binds them all, `up` the
// few it shares.
type AdapterOptions struct {
	Listen, RelayURL, Home, TokenFile string
	AllowedHosts                      string
	// CAFile is --ca: a PEM bundle trusted for an https relay.
	CAFile string
	// RelayHTTP, when set, reaches the relay instead of a client made
	// from CAFile (up's, trusting the certificate its relay serves).
	RelayHTTP *http.Client
	Verbose   bool
	Life      adapter.Lifecycle
	Gate      Gate
	LogSync   LogSync
}

// BindFlags registers the adapter's flags, their defaults read through
// getenv.
func (o *AdapterOptions) BindFlags(fs *flag.FlagSet, getenv func(string) string) {
	fs.StringVar(&o.Listen, "listen", cli.EnvOr(getenv, "AEP_KIMI_ADDR", adapter.DefaultListen), "hook intake address (env AEP_KIMI_ADDR)")
	fs.StringVar(&o.RelayURL, "relay", client.URLFromEnv(getenv), "relay base URL, or none (env AEP_RELAY)")
	fs.StringVar(&o.Home, "home", tokenfile.AEPHome(getenv), "AEP home: logs, hook token, spool (env AEP_HOME)")
	fs.StringVar(&o.TokenFile, "token-file", getenv("AEP_TOKEN_FILE"), "file holding the relay token (env AEP_TOKEN_FILE; AEP_TOKEN also works)")
	tlsconf.CAFlag(fs, &o.CAFile, getenv)
	httpguard.AllowedHostsFlag(fs, &o.AllowedHosts, getenv)
	o.Life.BindFlags(fs, getenv)
	o.Gate.BindFlags(fs, getenv)
	o.LogSync.BindFlags(fs, getenv)
	fs.StringVar(&o.Gate.KimiHome, "kimi-home", o.Gate.KimiHome, "Kimi's home, whose config.toml says how long Kimi waits for a held tool call (env KIMI_CODE_HOME)")
	fs.BoolVar(&o.Verbose, "v", false, "debug logging")
}

// NewAdapter builds the adapter wired to the relay publisher it publishes
// with and runs (emitter.Core.Run): the publisher outlives the adapter's
// intake so the last events still reach the relay.
func NewAdapter(o AdapterOptions, token string, getenv func(string) string, log *slog.Logger) (*adapter.Server, error) {
	cfg, err := adapter.ConfigFromEnv(getenv)
	if err != nil {
		return nil, err
	}
	if err := httpguard.CheckExposure(o.Listen, false, token); err != nil {
		return nil, err
	}
	if cfg.AllowedHosts, err = httpguard.ParseAllowedHostsFlag(o.AllowedHosts); err != nil {
		return nil, err
	}
	cfg.Listen, cfg.Home, cfg.Logger = o.Listen, o.Home, log
	if err := o.Life.Apply(&cfg); err != nil {
		return nil, err
	}
	if err := o.LogSync.Apply(&cfg.Config); err != nil {
		return nil, err
	}
	cfg.MaxOpenLogs = emitter.FDShareBound("open session logs", cfg.MaxOpenLogs, adapter.DefaultMaxOpenLogs, log)
	cfg.MaxWatches = emitter.FDShareBound("watched Kimi processes", cfg.MaxWatches, adapter.DefaultMaxWatches, log)
	if err := o.Gate.Apply(&cfg, log); err != nil {
		return nil, err
	}
	cfg.Control.Authenticated = token != "" && !client.IsNone(o.RelayURL)
	if cfg.Control.Gate && !cfg.Control.Authenticated {
		log.Warn("the gate is asked for (--control, AEP_KIMI_CONTROL) but there is no relay token: it stays off (control needs an authenticated relay binding)")
	}
	h := sourceHello{role: "adapter", metrics: "aepkimi_adapter",
		emits: []string{"session", "run", "tool", "attention", "delegation", "progress", "control", "agent"}}
	if cfg.Control.Authenticated {
		h.control = helloControl(adapter.AcceptsFor(cfg.Control), cfg.Control.AckWindow)
	}
	link, err := newRelayLink(o.RelayURL, token, o.RelayHTTP, o.CAFile)
	if err != nil {
		return nil, err
	}
	if err := relayPublisher(&cfg.Config, link, h, log); err != nil {
		return nil, err
	}
	return adapter.NewServer(cfg)
}

// KimiHome is $KIMI_CODE_HOME, else ~/.kimi-code (Kimi's own rule).
func KimiHome(getenv func(string) string) string {
	if h := getenv("KIMI_CODE_HOME"); h != "" {
		return h
	}
	return filepath.Join(tokenfile.UserHome(), bridgeweb.DefaultKimiHome)
}

// Gate is the held gate's surface, shared by adapter and up: whether
// PreToolUse is held for an answer, what happens when nobody answers, and
// where Kimi's config.toml says how long Kimi waits.
type Gate struct {
	Control   bool
	OnTimeout string
	KimiHome  string
}

// BindFlags registers --control and --on-timeout (AEP_KIMI_CONTROL,
// AEP_KIMI_ON_TIMEOUT) and sets KimiHome from the environment.
func (g *Gate) BindFlags(fs *flag.FlagSet, getenv func(string) string) {
	fs.BoolVar(&g.Control, "control", cli.EnvBool(getenv, "AEP_KIMI_CONTROL", false),
		"hold each tool call (PreToolUse) for an answer from the fleet; register the hooks with aep-setup write kimi-code --control (env AEP_KIMI_CONTROL)")
	fs.StringVar(&g.OnTimeout, "on-timeout", cli.EnvOr(getenv, "AEP_KIMI_ON_TIMEOUT", adapter.DefaultOnTimeout),
		"when nobody answers a held call before Kimi stops waiting: allow (Kimi runs it) or deny (env AEP_KIMI_ON_TIMEOUT)")
	g.KimiHome = KimiHome(getenv)
}

// Apply puts the gate on cfg. With the gate on it reads the PreToolUse
// timeout Kimi has registered, so the gate never holds longer than Kimi
// waits, and reads it again whenever config.toml changes; a hook not
// registered yet keeps to the wait each kimi-hook declares.
func (g Gate) Apply(cfg *adapter.Config, log *slog.Logger) error {
	switch g.OnTimeout {
	case "", mapping.OnExpiryAllow, mapping.OnExpiryDeny: // "": the adapter's default
	default:
		return fmt.Errorf("--on-timeout %q: want allow or deny (AEP_KIMI_ON_TIMEOUT)", g.OnTimeout)
	}
	cfg.Control.Gate, cfg.Control.OnTimeout = g.Control, g.OnTimeout
	if !g.Control {
		return nil
	}
	path := setup.Config{Home: g.KimiHome}.ConfigPath()
	secs, ok, err := setup.PreToolUseTimeout(g.KimiHome)
	switch {
	case err != nil:
		log.Warn("cannot read the hooks Kimi has registered; the gate keeps within the wait each hook declares", "err", err)
	case !ok:
		log.Info("no AEP PreToolUse hook registered yet; the gate keeps within the wait each hook declares",
			"config", path, "register", setup.WriteCommand(setupFor(cfg.Control)))
	default:
		cfg.Control.KimiTimeout = time.Duration(secs) * time.Second
		if adapter.GateWindow(cfg.Control.KimiTimeout) <= 0 {
			return fmt.Errorf("the PreToolUse timeout in %s is %ds, too short to hold a tool call for an answer: run `%s`",
				path, secs, setup.WriteCommand(setupFor(cfg.Control)))
		}
	}
	// Each hold reads the registration as it is then.
	reg := &registration{home: g.KimiHome, log: log}
	reg.Timeout()
	cfg.Control.KimiTimeoutNow = reg.Timeout
	return nil
}

// setupFor is the registration a gate configuration needs.
func setupFor(c adapter.Control) setup.Config {
	return setup.Config{Control: c.Gate, HoldMs: int(c.HoldTimeout.Milliseconds())}
}

// BannerGate is the gate's part of up's banner: off, or how long it holds,
// what happens then, and the registration it needs.
func BannerGate(srv *adapter.Server, instruct bool) Control {
	c := Control{Instruct: instruct, Setup: setup.WriteCommand(setup.Config{})}
	g, on := srv.Gate()
	if !on {
		return c
	}
	c.Gate = true
	c.Hold = time.Duration(g.EffectiveHoldMs) * time.Millisecond
	c.OnTimeout = g.OnTimeout
	c.Setup = setup.WriteCommand(setup.Config{Control: true, HoldMs: int(g.HoldMs)})
	if g.EffectiveHoldMs < g.HoldMs {
		c.KimiTimeout = time.Duration(g.KimiTimeoutS) * time.Second
	}
	return c
}

// hooksRegistered is the config.toml holding the hooks Kimi runs for this
// adapter, read back: "" when none are registered, or when the gate is on
// and Kimi's PreToolUse timeout is too short for its hold (the banner then
// names the command that registers them).
func hooksRegistered(kimiHome string, srv *adapter.Server) string {
	reg, err := setup.Registered(kimiHome)
	pre, ok := reg[mapping.HookPreToolUse]
	if err != nil || !ok {
		return ""
	}
	if g, on := srv.Gate(); on && pre.Timeout < g.NeedsKimiTimeoutS {
		return ""
	}
	return setup.Config{Home: kimiHome}.ConfigPath()
}

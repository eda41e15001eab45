package station

import (
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/aep-kimi/aep-kimi/bridgeweb"
	"github.com/aep-kimi/aep-kimi/emitter"
	"github.com/aep-kimi/aep-kimi/internal/cli"
	"github.com/aep-kimi/aep-kimi/internal/httpguard"
	"github.com/aep-kimi/aep-kimi/internal/tlsconf"
	"github.com/aep-kimi/aep-kimi/internal/tokenfile"
	"github.com/aep-kimi/aep-kimi/mapping"
	"github.com/aep-kimi/aep-kimi/relay/client"
)

// BridgeOptions is the kimi web bridge's flag surface besides its
// environment: `bridge-web` binds them all, `up` the few it shares.
type BridgeOptions struct {
	Listen, Mode, KimiHome, KapURL, KapTokenFile string
	RelayURL, Home, TokenFile                    string
	AllowedHosts                                 string
	// CAFile is --ca: a PEM bundle trusted for an https relay.
	CAFile string
	// RelayHTTP, when set, reaches the relay instead of a client made
	// from CAFile (up's, trusting the certificate its relay serves).
	RelayHTTP      *http.Client
	Verbose        bool
	AllowRemoteKap bool
	LogSync        LogSync
}

// BindFlags registers the bridge's flags, their defaults read through
// getenv.
func (o *BridgeOptions) BindFlags(fs *flag.FlagSet, getenv func(string) string) {
	fs.StringVar(&o.Listen, "listen", cli.EnvOr(getenv, "AEP_KIMI_WEB_ADDR", bridgeweb.DefaultListen), "/healthz and /metrics address (env AEP_KIMI_WEB_ADDR)")
	fs.StringVar(&o.Mode, "mode", cli.EnvOr(getenv, "AEP_KIMI_WEB_MODE", "companion"), "companion (x.kimi-code.web.* only, next to the hook adapter) or primary (core types) (env AEP_KIMI_WEB_MODE)")
	fs.StringVar(&o.KimiHome, "kimi-home", KimiHome(getenv), "Kimi's home: the kap-server instance registry and server.token (env KIMI_CODE_HOME)")
	fs.StringVar(&o.KapURL, "kap", getenv("AEP_KIMI_KAP_URL"), "a fixed kap-server URL instead of discovery (env AEP_KIMI_KAP_URL)")
	fs.StringVar(&o.KapTokenFile, "kap-token-file", getenv("AEP_KIMI_KAP_TOKEN_FILE"), "the kap-server token file (default KIMI_HOME/server.token; env AEP_KIMI_KAP_TOKEN_FILE)")
	fs.StringVar(&o.RelayURL, "relay", client.URLFromEnv(getenv), "relay base URL, or none (env AEP_RELAY)")
	fs.StringVar(&o.Home, "home", tokenfile.AEPHome(getenv), "AEP home: logs and the epoch counter (env AEP_HOME)")
	fs.StringVar(&o.TokenFile, "token-file", getenv("AEP_TOKEN_FILE"), "file holding the relay token (env AEP_TOKEN_FILE; AEP_TOKEN also works)")
	tlsconf.CAFlag(fs, &o.CAFile, getenv)
	httpguard.AllowedHostsFlag(fs, &o.AllowedHosts, getenv)
	fs.BoolVar(&o.Verbose, "v", false, "debug logging")
	o.LogSync.BindFlags(fs, getenv)
	o.bindAllowRemoteKap(fs, getenv)
}

// bindAllowRemoteKap is bridge-web's and up's --allow-remote-kap.
func (o *BridgeOptions) bindAllowRemoteKap(fs *flag.FlagSet, getenv func(string) string) {
	fs.BoolVar(&o.AllowRemoteKap, "allow-remote-kap", cli.EnvBool(getenv, "AEP_KIMI_WEB_ALLOW_REMOTE_KAP", false),
		"follow a kimi web instance record naming a non-loopback host, sending it the kap token; off, such records are skipped (env AEP_KIMI_WEB_ALLOW_REMOTE_KAP)")
}

// NewBridge builds the bridge wired to the relay publisher it publishes with
// and runs (emitter.Core.Run).
func NewBridge(o BridgeOptions, token string, getenv func(string) string, log *slog.Logger) (*bridgeweb.Bridge, error) {
	mode, err := mapping.ParseMode(o.Mode)
	if err != nil {
		return nil, fmt.Errorf("--mode: %w", err)
	}
	posture, err := emitter.PostureFromEnv(getenv)
	if err != nil {
		return nil, err
	}
	if err := httpguard.CheckExposure(o.Listen, false, token); err != nil {
		return nil, err
	}
	hosts, err := httpguard.ParseAllowedHostsFlag(o.AllowedHosts)
	if err != nil {
		return nil, err
	}
	cfg := bridgeweb.Config{
		Config: emitter.Config{Home: o.Home, Posture: posture, Logger: log},
		Listen: o.Listen, Mode: mode, KimiHome: o.KimiHome, AllowedHosts: hosts,
		KapURL: o.KapURL, KapTokenFile: o.KapTokenFile, AllowRemoteKap: o.AllowRemoteKap,
	}
	if err := cli.EnvPositiveInts(getenv, []cli.EnvInt{{Name: "AEP_KIMI_WEB_MAX_OPEN_LOGS", Dst: &cfg.MaxOpenLogs}}); err != nil {
		return nil, err
	}
	if err := o.LogSync.Apply(&cfg.Config); err != nil {
		return nil, err
	}
	cfg.MaxOpenLogs = emitter.FDShareBound("open session logs", cfg.MaxOpenLogs, bridgeweb.DefaultMaxOpenLogs, log)
	cfg.Control.Enabled = cli.EnvBool(getenv, "AEP_KIMI_WEB_CONTROL", false)
	cfg.Control.Authenticated = token != "" && !client.IsNone(o.RelayURL)
	switch {
	case cfg.Control.Enabled && mode != mapping.Primary:
		log.Warn("AEP_KIMI_WEB_CONTROL is set but the mode is companion: control stays off (the hook adapter owns companion sessions)")
	case cfg.Control.Enabled && !cfg.Control.Authenticated:
		log.Warn("AEP_KIMI_WEB_CONTROL is set but no relay token: control stays off (control needs an authenticated relay binding)")
	}
	// The hello always declares what the bridge accepts: nothing when
	// control is off.
	h := sourceHello{role: "bridge-web", metrics: "aepkimi_bridgeweb",
		control: helloControl(bridgeweb.AcceptsFor(mode, cfg.Control), cfg.Control.AckWindow)}
	if mode == mapping.Primary {
		h.emits = []string{"run", "tool", "attention", "session", "control"}
	}
	link, err := newRelayLink(o.RelayURL, token, o.RelayHTTP, o.CAFile)
	if err != nil {
		return nil, err
	}
	if err := relayPublisher(&cfg.Config, link, h, log); err != nil {
		return nil, err
	}
	return bridgeweb.NewBridge(cfg)
}

// BridgeChoice is whether and how `up` runs the kimi web bridge.
type BridgeChoice struct {
	// Force runs the bridge (the default): it watches the instance registry
	// and attaches each kimi web server as it starts, so one started after
	// up is followed without a restart.
	Force bool
	Opts  BridgeOptions
}

// BindFlags registers up's bridge flags: --web, and the few of the
// bridge's own up exposes under its own names.
func (b *BridgeChoice) BindFlags(fs *flag.FlagSet, getenv func(string) string) {
	fs.BoolVar(&b.Force, "web", true, "run the kimi web bridge, which follows every kimi web server as it starts and stops (--web=false: hooks only)")
	// The bridge's own defaults and environment, through a throwaway flag
	// set.
	b.Opts.BindFlags(flag.NewFlagSet("bridge-web", flag.ContinueOnError), getenv)
	fs.StringVar(&b.Opts.Mode, "mode", b.Opts.Mode, "bridge mode: companion (next to the hook adapter) or primary (env AEP_KIMI_WEB_MODE)")
	fs.StringVar(&b.Opts.Listen, "bridge-listen", b.Opts.Listen, "bridge /healthz and /metrics address (env AEP_KIMI_WEB_ADDR)")
	fs.StringVar(&b.Opts.KimiHome, "kimi-home", b.Opts.KimiHome, "Kimi's home, where kimi web registers itself (env KIMI_CODE_HOME)")
	b.Opts.bindAllowRemoteKap(fs, getenv)
}

// start builds the bridge (unless --web=false) and says what happened, for
// up's banner.
func (b *BridgeChoice) start(home, relayURL string, relayHTTP *http.Client, token string, getenv func(string) string, log *slog.Logger) (*bridgeweb.Bridge, string, error) {
	if !b.Force {
		return nil, "not started (--web=false)", nil
	}
	_, _, err := bridgeweb.Discover(b.Opts.KimiHome, time.Now(), bridgeweb.DefaultStaleInstance, nil, b.Opts.AllowRemoteKap)
	found := err == nil
	o := b.Opts
	o.Home, o.RelayURL, o.RelayHTTP = home, relayURL, relayHTTP
	d, err := NewBridge(o, token, getenv, log)
	if err != nil {
		return nil, "", err
	}
	note := fmt.Sprintf("http://%s   %s mode, following kimi web", o.Listen, o.Mode)
	if !found {
		note += " (none running yet: each one is attached as it starts)"
	}
	return d, note, nil
}

package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"path/filepath"

	"github.com/aep-kimi/aep-kimi/bridgeweb"
	"github.com/aep-kimi/aep-kimi/emitter"
	"github.com/aep-kimi/aep-kimi/internal/cli"
	"github.com/aep-kimi/aep-kimi/internal/httpguard"
	"github.com/aep-kimi/aep-kimi/internal/logging"
	"github.com/aep-kimi/aep-kimi/internal/tokenfile"
	"github.com/aep-kimi/aep-kimi/mapping"
)

// bridgeWebOptions is bridge-web's flag and environment surface.
type bridgeWebOptions struct {
	listen, mode, kimiHome, kapURL, kapTokenFile string
	relayURL, home, token                        string
	allowedHosts                                 string
	verbose                                      bool
	allowRemoteKap                               bool
}

func (o *bridgeWebOptions) flags(fs *flag.FlagSet, getenv func(string) string) {
	fs.StringVar(&o.listen, "listen", cli.EnvOr(getenv, "AEP_KIMI_WEB_ADDR", bridgeweb.DefaultListen), "/healthz and /metrics address (env AEP_KIMI_WEB_ADDR)")
	fs.StringVar(&o.mode, "mode", cli.EnvOr(getenv, "AEP_KIMI_WEB_MODE", "companion"), "companion (x.kimi-code.web.* only, next to the hook adapter) or primary (core types) (env AEP_KIMI_WEB_MODE)")
	fs.StringVar(&o.kimiHome, "kimi-home", kimiHome(getenv), "Kimi's home: the kap-server instance registry and server.token (env KIMI_CODE_HOME)")
	fs.StringVar(&o.kapURL, "kap", getenv("AEP_KIMI_KAP_URL"), "a fixed kap-server URL instead of discovery (env AEP_KIMI_KAP_URL)")
	fs.StringVar(&o.kapTokenFile, "kap-token-file", getenv("AEP_KIMI_KAP_TOKEN_FILE"), "the kap-server token file (default KIMI_HOME/server.token; env AEP_KIMI_KAP_TOKEN_FILE)")
	fs.StringVar(&o.relayURL, "relay", cli.EnvOr(getenv, "AEP_RELAY", DefaultRelayURL), "relay base URL, or none (env AEP_RELAY)")
	fs.StringVar(&o.home, "home", tokenfile.AEPHome(getenv), "AEP home: logs and the epoch counter (env AEP_HOME)")
	fs.StringVar(&o.token, "token-file", getenv("AEP_TOKEN_FILE"), "file holding the relay token (env AEP_TOKEN_FILE; AEP_TOKEN also works)")
	httpguard.AllowedHostsFlag(fs, &o.allowedHosts, getenv)
	fs.BoolVar(&o.verbose, "v", false, "debug logging")
	allowRemoteKapFlag(fs, &o.allowRemoteKap, getenv)
}

// allowRemoteKapFlag is bridge-web's and up's --allow-remote-kap.
func allowRemoteKapFlag(fs *flag.FlagSet, v *bool, getenv func(string) string) {
	fs.BoolVar(v, "allow-remote-kap", cli.EnvBool(getenv, "AEP_KIMI_WEB_ALLOW_REMOTE_KAP", false),
		"follow a kimi web instance record naming a non-loopback host, sending it the kap token; off, such records are skipped (env AEP_KIMI_WEB_ALLOW_REMOTE_KAP)")
}

// kimiHome is $KIMI_CODE_HOME, else ~/.kimi-code (Kimi's own rule).
func kimiHome(getenv func(string) string) string {
	if h := getenv("KIMI_CODE_HOME"); h != "" {
		return h
	}
	return filepath.Join(tokenfile.UserHome(), bridgeweb.DefaultKimiHome)
}

// bridgeWebCommand is `aep-kimi bridge-web`: kimi web sessions -> AEP
// events.
func bridgeWebCommand(getenv func(string) string, io stdio) cli.Command {
	return cli.Command{
		Name:    "bridge-web",
		Summary: "follow kimi web (kap-server) sessions -> AEP events, logs and relay",
		Forms: []string{"[--listen 127.0.0.1:4323] [--mode companion|primary] [--kimi-home DIR]\n" +
			"[--kap URL --kap-token-file F] [--relay URL|none] [--home DIR]"},
		About: "Follows `kimi web` (the kap-server) over its WebSocket and REST API and publishes its sessions as AEP\n" +
			"events: per-session JSONL logs under HOME/logs/kimi-code-web and a relay.",
		Env: []string{"AEP_TOKEN", "AEP_CAPTURE (metadata)", "AEP_CAPTURE_ATTENTION (redacted)", "AEP_REDACT_NAMES",
			"AEP_REDACT_PII (1)", "AEP_KIMI_WEB_CONTROL (primary mode: answer approvals and cancel runs)",
			fmt.Sprintf("AEP_KIMI_WEB_MAX_OPEN_LOGS (%d)", bridgeweb.DefaultMaxOpenLogs)},
		Args: cli.NoArgs,
		Flags: func(fs *flag.FlagSet) cli.Run {
			var o bridgeWebOptions
			o.flags(fs, getenv)
			return func(ctx context.Context, _ []string) int {
				log := logging.New(io.err, o.verbose)
				return serveDaemon(ctx, "bridge-web", io, getenv, o.token, func(token string) (daemon, error) {
					return newBridgeWeb(o, token, getenv, log)
				})
			}
		},
	}
}

// newBridgeWeb builds the bridge wired to the relay emitter it publishes
// with and runs (emitter.Core.Run).
func newBridgeWeb(o bridgeWebOptions, token string, getenv func(string) string, log *slog.Logger) (*bridgeweb.Bridge, error) {
	mode, err := mapping.ParseMode(o.mode)
	if err != nil {
		return nil, fmt.Errorf("--mode: %w", err)
	}
	// The capture and redaction environment is the adapter's.
	acfg, err := adapterConfigFromEnv(getenv)
	if err != nil {
		return nil, err
	}
	if err := httpguard.CheckExposure(o.listen, false, token); err != nil {
		return nil, err
	}
	hosts, err := httpguard.ParseAllowedHostsFlag(o.allowedHosts)
	if err != nil {
		return nil, err
	}
	cfg := bridgeweb.Config{
		Config: emitter.Config{Home: o.home, Posture: acfg.Posture, Logger: log},
		Listen: o.listen, Mode: mode, KimiHome: o.kimiHome, AllowedHosts: hosts,
		KapURL: o.kapURL, KapTokenFile: o.kapTokenFile, AllowRemoteKap: o.allowRemoteKap,
	}
	if err := cli.EnvPositiveInts(getenv, []cli.EnvInt{{Name: "AEP_KIMI_WEB_MAX_OPEN_LOGS", Dst: &cfg.MaxOpenLogs}}); err != nil {
		return nil, err
	}
	cfg.MaxOpenLogs = fdShareBound("open session logs", cfg.MaxOpenLogs, bridgeweb.DefaultMaxOpenLogs, fileLimit(), log)
	cfg.Control.Enabled = cli.EnvBool(getenv, "AEP_KIMI_WEB_CONTROL", false)
	cfg.Control.Authenticated = token != "" && !isNone(o.relayURL)
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
	bind, err := relayEmitter(&cfg.Config, o.relayURL, token, h, log)
	if err != nil {
		return nil, err
	}
	b, err := bridgeweb.NewBridge(cfg)
	if err != nil {
		return nil, err
	}
	bind(b)
	return b, nil
}

package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/aep-kimi/aep-kimi/adapter"
	"github.com/aep-kimi/aep-kimi/aep"
	"github.com/aep-kimi/aep-kimi/internal/cli"
	"github.com/aep-kimi/aep-kimi/internal/httpguard"
	"github.com/aep-kimi/aep-kimi/internal/logging"
	"github.com/aep-kimi/aep-kimi/internal/tokenfile"
	"github.com/aep-kimi/aep-kimi/mapping"
)

// DefaultRelayURL is where the daemons publish unless told otherwise.
const DefaultRelayURL = "http://127.0.0.1:8787"

// adapterOptions is the adapter's flag and environment surface.
type adapterOptions struct {
	listen, relayURL, home, token string
	allowedHosts                  string
	verbose                       bool
	life                          lifecycleOptions
	gate                          gateOptions
}

func (o *adapterOptions) flags(fs *flag.FlagSet, getenv func(string) string) {
	fs.StringVar(&o.listen, "listen", cli.EnvOr(getenv, "AEP_KIMI_ADDR", adapter.DefaultListen), "hook intake address (env AEP_KIMI_ADDR)")
	fs.StringVar(&o.relayURL, "relay", cli.EnvOr(getenv, "AEP_RELAY", DefaultRelayURL), "relay base URL, or none (env AEP_RELAY)")
	fs.StringVar(&o.home, "home", tokenfile.AEPHome(getenv), "AEP home: logs, hook token, spool (env AEP_HOME)")
	fs.StringVar(&o.token, "token-file", getenv("AEP_TOKEN_FILE"), "file holding the relay token (env AEP_TOKEN_FILE; AEP_TOKEN also works)")
	httpguard.AllowedHostsFlag(fs, &o.allowedHosts, getenv)
	o.life.flags(fs, getenv)
	o.gate.flags(fs, getenv)
	fs.StringVar(&o.gate.kimiHome, "kimi-home", o.gate.kimiHome, "Kimi's home, whose config.toml says how long Kimi waits for a held tool call (env KIMI_CODE_HOME)")
	fs.BoolVar(&o.verbose, "v", false, "debug logging")
}

// adapterCommand is `aep-kimi adapter`: hook intake -> AEP events -> logs
// and relay.
func adapterCommand(getenv func(string) string, io stdio) cli.Command {
	return cli.Command{
		Name:    "adapter",
		Summary: "run the hook adapter: Kimi hooks -> AEP events, logs and relay",
		Forms:   []string{"[--listen ADDR] [--relay URL|none] [--home DIR] [--token-file F] [--control [--on-timeout allow|deny]]"},
		About:   "Takes Kimi hook payloads from kimi-hook (POST /hook), writes per-session JSONL logs and publishes to a relay.",
		Env: []string{"AEP_TOKEN", "AEP_CAPTURE (metadata)", "AEP_CAPTURE_ATTENTION (redacted)", "AEP_REDACT_NAMES",
			"AEP_REDACT_PII (1)", "AEP_KIMI_CONTROL", "AEP_KIMI_ON_TIMEOUT (allow)", "AEP_KIMI_GATE_TOOLS", "AEP_ATTENTION_TIMEOUT_MS (50000)",
			"KIMI_CODE_HOME", "AEP_INSTRUCT",
			fmt.Sprintf("AEP_KIMI_MAX_OPEN_LOGS (%d)", adapter.DefaultMaxOpenLogs),
			fmt.Sprintf("AEP_KIMI_MAX_SESSIONS (%d)", adapter.DefaultMaxSessions),
			fmt.Sprintf("AEP_KIMI_MAX_WATCHES (%d)", adapter.DefaultMaxWatches)},
		Args: cli.NoArgs,
		Flags: func(fs *flag.FlagSet) cli.Run {
			var o adapterOptions
			o.flags(fs, getenv)
			return func(ctx context.Context, _ []string) int {
				log := logging.New(io.err, o.verbose)
				return serveDaemon(ctx, "adapter", io, getenv, o.token, func(token string) (daemon, error) {
					return newAdapter(o, token, getenv, log)
				})
			}
		},
	}
}

// newAdapter builds the adapter wired to the relay emitter it publishes
// with and runs (emitter.Core.Run): the emitter outlives the adapter's
// intake so the last events still reach the relay.
func newAdapter(o adapterOptions, token string, getenv func(string) string, log *slog.Logger) (*adapter.Server, error) {
	cfg, err := adapterConfigFromEnv(getenv)
	if err != nil {
		return nil, err
	}
	if err := httpguard.CheckExposure(o.listen, false, token); err != nil {
		return nil, err
	}
	if cfg.AllowedHosts, err = httpguard.ParseAllowedHostsFlag(o.allowedHosts); err != nil {
		return nil, err
	}
	cfg.Listen, cfg.Home, cfg.Logger = o.listen, o.home, log
	if err := o.life.apply(&cfg); err != nil {
		return nil, err
	}
	cfg.MaxOpenLogs = fdShareBound("open session logs", cfg.MaxOpenLogs, adapter.DefaultMaxOpenLogs, fileLimit(), log)
	cfg.MaxWatches = fdShareBound("watched Kimi processes", cfg.MaxWatches, adapter.DefaultMaxWatches, fileLimit(), log)
	if err := o.gate.apply(&cfg, log); err != nil {
		return nil, err
	}
	cfg.Control.Authenticated = token != "" && !isNone(o.relayURL)
	if cfg.Control.Gate && !cfg.Control.Authenticated {
		log.Warn("the gate is asked for (--control, AEP_KIMI_CONTROL) but there is no relay token: it stays off (control needs an authenticated relay binding)")
	}
	h := sourceHello{role: "adapter", metrics: "aepkimi_adapter",
		emits: []string{"session", "run", "tool", "attention", "delegation", "progress", "control", "agent"}}
	if cfg.Control.Authenticated {
		h.control = helloControl(adapter.AcceptsFor(cfg.Control), cfg.Control.AckWindow)
	}
	bind, err := relayEmitter(&cfg.Config, o.relayURL, token, h, log)
	if err != nil {
		return nil, err
	}
	srv, err := adapter.NewServer(cfg)
	if err != nil {
		return nil, err
	}
	bind(srv)
	return srv, nil
}

// fdShare is the part of the process's file limit one kind of descriptor
// may hold (session logs, process watches): the rest is for hook
// connections, the relay link and the spool.
const fdShare = 4

// fdShareBound keeps a descriptor bound (def when not configured) under a
// quarter of the file limit, so idle logs or watches can never starve the
// listener of descriptors (an accept that fails for want of one would leave
// every hook waiting).
func fdShareBound(what string, configured, def int, limit uint64, log *slog.Logger) int {
	if configured <= 0 {
		configured = def
	}
	if limit == 0 || limit/fdShare >= uint64(configured) {
		return configured
	}
	bound := max(int(limit/fdShare), 1)
	log.Info(what+" bounded by the file limit", "bound", bound, "file_limit", limit)
	return bound
}

// adapterConfigFromEnv reads the adapter's capture, redaction and control
// environment.
func adapterConfigFromEnv(getenv func(string) string) (adapter.Config, error) {
	var cfg adapter.Config
	var names []string
	for _, n := range strings.Split(getenv("AEP_REDACT_NAMES"), ",") {
		if n = strings.TrimSpace(n); n != "" {
			names = append(names, n)
		}
	}
	ro := aep.RedactOptions{Home: tokenfile.UserHome(), SecretNames: names, NoPII: !cli.EnvBool(getenv, "AEP_REDACT_PII", true)}
	// A configured name's value, where this process can see it, is a secret
	// value too (AEP-0003 §9.4 b).
	for _, n := range names {
		if v := getenv(n); v != "" {
			ro.SecretValues = append(ro.SecretValues, v)
		}
	}
	p, err := mapping.ParsePosture(getenv("AEP_CAPTURE"), getenv("AEP_CAPTURE_ATTENTION"), ro)
	if err != nil {
		return cfg, err
	}
	cfg.Posture = p
	cfg.Control.Instruct = cli.EnvBool(getenv, "AEP_INSTRUCT", false)
	for _, t := range strings.Split(getenv("AEP_KIMI_GATE_TOOLS"), ",") {
		if t = strings.TrimSpace(t); t != "" {
			cfg.Control.GateTools = append(cfg.Control.GateTools, t)
		}
	}
	if v := strings.TrimSpace(getenv("AEP_ATTENTION_TIMEOUT_MS")); v != "" {
		ms, err := strconv.Atoi(v)
		if err != nil || ms <= 0 {
			return cfg, fmt.Errorf("AEP_ATTENTION_TIMEOUT_MS=%q is not a positive number of milliseconds", v)
		}
		cfg.Control.HoldTimeout = time.Duration(ms) * time.Millisecond
	}
	if err := cli.EnvPositiveInts(getenv, []cli.EnvInt{
		{Name: "AEP_KIMI_MAX_OPEN_LOGS", Dst: &cfg.MaxOpenLogs}, {Name: "AEP_KIMI_MAX_SESSIONS", Dst: &cfg.MaxSessions},
		{Name: "AEP_KIMI_MAX_WATCHES", Dst: &cfg.MaxWatches},
	}); err != nil {
		return cfg, err
	}
	return cfg, nil
}

func isNone(url string) bool { u := strings.TrimSpace(url); return u == "" || u == "none" }

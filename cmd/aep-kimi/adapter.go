package main

import (
	"context"
	"flag"
	"fmt"

	"github.com/aep-kimi/aep-kimi/adapter"
	"github.com/aep-kimi/aep-kimi/internal/cli"
	"github.com/aep-kimi/aep-kimi/internal/logging"
	"github.com/aep-kimi/aep-kimi/internal/syncmode"
	"github.com/aep-kimi/aep-kimi/station"
)

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
			fmt.Sprintf("AEP_KIMI_MAX_WATCHES (%d)", adapter.DefaultMaxWatches),
			fmt.Sprintf("AEP_LOG_SYNC (%s)", syncmode.Default)},
		Args: cli.NoArgs,
		Flags: func(fs *flag.FlagSet) cli.Run {
			var o station.AdapterOptions
			o.BindFlags(fs, getenv)
			return func(ctx context.Context, _ []string) int {
				log := logging.New(io.err, o.Verbose)
				return serveDaemon(ctx, "adapter", io, getenv, o.TokenFile, func(token string) (daemon, error) {
					return station.NewAdapter(o, token, getenv, log)
				})
			}
		},
	}
}

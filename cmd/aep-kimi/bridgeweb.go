package main

import (
	"context"
	"flag"
	"fmt"

	"github.com/aep-kimi/aep-kimi/bridgeweb"
	"github.com/aep-kimi/aep-kimi/internal/cli"
	"github.com/aep-kimi/aep-kimi/internal/logging"
	"github.com/aep-kimi/aep-kimi/internal/syncmode"
	"github.com/aep-kimi/aep-kimi/station"
)

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
			fmt.Sprintf("AEP_KIMI_WEB_MAX_OPEN_LOGS (%d)", bridgeweb.DefaultMaxOpenLogs),
			fmt.Sprintf("AEP_LOG_SYNC (%s)", syncmode.Default)},
		Args: cli.NoArgs,
		Flags: func(fs *flag.FlagSet) cli.Run {
			var o station.BridgeOptions
			o.BindFlags(fs, getenv)
			return func(ctx context.Context, _ []string) int {
				log := logging.New(io.err, o.Verbose)
				return serveDaemon(ctx, "bridge-web", io, getenv, o.TokenFile, func(token string) (daemon, error) {
					return station.NewBridge(o, token, getenv, log)
				})
			}
		},
	}
}

package main

import (
	"context"
	"flag"
	"fmt"
	"path/filepath"

	"github.com/aep-kimi/aep-kimi/internal/httpguard"
	"github.com/aep-kimi/aep-kimi/internal/tlsconf"

	"github.com/aep-kimi/aep-kimi/aep"
	"github.com/aep-kimi/aep-kimi/internal/cli"
	"github.com/aep-kimi/aep-kimi/internal/tokenfile"
	"github.com/aep-kimi/aep-kimi/relay/client"
	"github.com/aep-kimi/aep-kimi/relay/consumer"
	"github.com/aep-kimi/aep-kimi/relay/wire"
)

// tailCommand is `aep-kimi tail`: a terminal timeline of a relay's stream
// over SSE, deduplicated on (source, id), resuming from a state file.
func tailCommand(getenv func(string) string, io stdio) cli.Command {
	return cli.Command{
		Name:    "tail",
		Summary: "follow a relay's event stream as a terminal timeline",
		Forms:   []string{"[--relay URL] [--ca FILE] [--filter JSON] [--capture LEVEL] [--from all] [--state FILE] [--token-file F] [--once] [--details] [--no-color]"},
		About: "Follows a relay's event stream as a timeline, resuming where the last run stopped.\n" +
			"Each row: time, session (project, Kimi's title, short id) and what happened in words\n" +
			"(the tool and its arguments as far as the capture level carried them, outcomes,\n" +
			"durations, who answered); --details adds seq, event type, agent, ids and digests.\n" +
			"Rows fit the terminal (or COLUMNS). Under a request still waiting: its options and\n" +
			"expiry, and either the command that answers it, ready to paste (aep-kimi respond\n" +
			"--option deny SESSION ID), or where to answer it (in Kimi itself); a replay lists the\n" +
			"requests still waiting at its end. Colour only on a terminal, never with --no-color\n" +
			"or NO_COLOR. See also: aep-kimi pending.",
		Env:  []string{"AEP_TOKEN", "AEP_TOKEN_FILE", "AEP_HOME", "AEP_RELAY_CA", "NO_COLOR", "COLUMNS"},
		Args: cli.NoArgs,
		Flags: func(fs *flag.FlagSet) cli.Run {
			var o tailOptions
			fs.StringVar(&o.relayURL, "relay", client.URLFromEnv(getenv), "relay base URL (env AEP_RELAY)")
			fs.StringVar(&o.filter, "filter", "", `attr-match filter JSON, e.g. '{"type":"attention.*"}'`)
			fs.StringVar(&o.capture, "capture", "", "capture ceiling: none, metadata, redacted or full")
			fs.StringVar(&o.from, "from", "", `replay first: "all" (everything the relay holds, whatever --state has seen), or a JSON array of {session, epoch, seq}`)
			fs.StringVar(&o.statePath, "state", filepath.Join(tokenfile.AEPHome(getenv), "tail-state.json"), `resume state file ("none" disables)`)
			fs.StringVar(&o.tokenFile, "token-file", "", "file holding the relay bearer token, not readable by others (default: AEP_TOKEN, AEP_TOKEN_FILE, else $AEP_HOME/token)")
			tlsconf.CAFlag(fs, &o.caFile, getenv)
			fs.StringVar(&o.token, "token", "", "bearer token: deprecated, a command line is readable by every local user (use --token-file)")
			fs.BoolVar(&o.once, "once", false, "print the replay and exit instead of following")
			fs.BoolVar(&o.noColor, "no-color", false, "never colour the output")
			fs.BoolVar(&o.details, "details", false, "show seq, event type, agent, ids and digests in each row")
			return func(ctx context.Context, _ []string) int { return runTail(ctx, o, getenv, io) }
		},
	}
}

// tailOptions is `aep-kimi tail`'s flag surface.
type tailOptions struct {
	relayURL, filter, capture, from, statePath, token, tokenFile, caFile string
	once, noColor, details                                               bool
}

// runTail follows the relay until ctx is done (or, with --once, until the
// replay ends).
func runTail(ctx context.Context, o tailOptions, getenv func(string) string, io stdio) int {
	token, err := commandLineToken(getenv, o.tokenFile, o.token, "tail", io)
	if err != nil {
		fmt.Fprintf(io.err, "aep-kimi tail: %v\n", err)
		return 2
	}
	hc, err := tlsconf.HTTPClient(o.caFile)
	if err != nil {
		fmt.Fprintf(io.err, "aep-kimi tail: %v\n", err)
		return 2
	}
	if _, err := aep.ParseFilter([]byte(o.filter)); err != nil {
		fmt.Fprintf(io.err, "aep-kimi tail: --filter: %v\n", err)
		return 2
	}
	if o.capture != "" {
		if _, err := aep.ParseCapture(o.capture); err != nil {
			fmt.Fprintf(io.err, "aep-kimi tail: --capture: %v\n", err)
			return 2
		}
	}
	fromReq, err := wire.ParseFrom([]byte(o.from))
	if err != nil {
		fmt.Fprintf(io.err, "aep-kimi tail: --from: %v\n", err)
		return 2
	}

	state := client.NewTailState()
	persist := o.statePath != "" && o.statePath != "none"
	if persist {
		if state, err = client.LoadTailState(o.statePath); err != nil {
			fmt.Fprintf(io.err, "aep-kimi tail: %v (starting fresh)\n", err)
		}
	}
	pr := &consumer.Printer{W: io.out, Color: consumer.UseColor(o.noColor, getenv, io.out),
		Width: consumer.Width(getenv, io.out), Details: o.details}
	if pr.Color {
		// The colour codes are ours, and the printer passed every field
		// through the sanitizer before colouring it.
		pr.W = consumer.Unwrapped(io.out)
	}
	if o.relayURL != client.URLFromEnv(getenv) {
		pr.RelayArg = httpguard.DisplayURL(o.relayURL)
	}
	pr.Hints = readerHints(ctx, o.relayURL, token, hc, pr.RelayArg)
	cfg := consumer.FollowConfig{
		Tail: client.TailConfig{URL: o.relayURL, Token: token, Filter: o.filter, Capture: o.capture,
			From: fromReq, State: state, Live: !o.once, HTTPClient: hc},
		Printer: pr,
		Relay:   httpguard.DisplayURL(o.relayURL),
		Report:  func(msg string) { fmt.Fprintf(io.err, "aep-kimi tail: %s\n", msg) },
	}
	if persist {
		cfg.Save = func() error { return state.Save(o.statePath) }
	}
	f, err := consumer.NewFollower(cfg)
	if err != nil {
		fmt.Fprintf(io.err, "aep-kimi tail: %v\n", err)
		return 2
	}
	if err := f.Run(ctx); err != nil {
		fmt.Fprintf(io.err, "aep-kimi tail: %v\n", err)
		return 1
	}
	return 0
}

package main

import (
	"context"
	"flag"
	"fmt"
	"github.com/aep-kimi/aep-kimi/internal/httpguard"
	"time"

	"github.com/aep-kimi/aep-kimi/internal/cli"
	"github.com/aep-kimi/aep-kimi/relay/client"
	"github.com/aep-kimi/aep-kimi/relay/consumer"
)

// pendingCommand is `aep-kimi pending`: the attention requests that wait
// on a person across the fleet now, oldest first, from the relay's replay.
func pendingCommand(getenv func(string) string, io stdio) cli.Command {
	return cli.Command{
		Name:    "pending",
		Summary: "list the attention requests waiting on you across the fleet",
		Forms:   []string{"[--relay URL] [--token-file F]"},
		About: "Lists the attention requests waiting on a person across every session the relay\n" +
			"holds, oldest first: session and title, request id, age, time left, prompt, options,\n" +
			"and the command that answers each (or where to answer it). Answered, resolved and\n" +
			"expired requests are left out.",
		Env:  []string{"AEP_TOKEN"},
		Exit: "Exit 0 (also when nothing is pending), 1 when the relay cannot be read, 2 usage.",
		Args: cli.NoArgs,
		Flags: func(fs *flag.FlagSet) cli.Run {
			rc := relayConnFlags(fs, getenv)
			return func(ctx context.Context, _ []string) int { return runPending(ctx, *rc, getenv, io) }
		},
	}
}

// runPending prints what waits.
func runPending(ctx context.Context, rc relayClient, getenv func(string) string, io stdio) int {
	token, err := rc.token()
	if err != nil {
		fmt.Fprintf(io.err, "aep-kimi pending: %v\n", err)
		return 2
	}
	hc, err := rc.http()
	if err != nil {
		fmt.Fprintf(io.err, "aep-kimi pending: %v\n", err)
		return 2
	}
	f, err := consumer.LoadPending(ctx, rc.url, token, hc)
	if err != nil {
		fmt.Fprintf(io.err, "aep-kimi pending: %v\n", err)
		return 1
	}
	relayArg := ""
	if rc.url != client.URLFromEnv(getenv) {
		relayArg = httpguard.DisplayURL(rc.url)
	}
	consumer.WritePendingList(io.out, f, time.Now(), readerHints(ctx, rc.url, token, hc, relayArg))
	return 0
}

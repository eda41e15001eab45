package main

import (
	"context"
	"errors"
	"flag"
	"fmt"

	"github.com/aep-kimi/aep-kimi/internal/cli"
	"github.com/aep-kimi/aep-kimi/mapping"
	"github.com/aep-kimi/aep-kimi/relay/client"
	"github.com/aep-kimi/aep-kimi/relay/consumer"
)

// rateExit maps why rate has no run to rate to its exit code (respond's
// codes for the same kinds of trouble).
var rateExit = map[consumer.TargetProblem]int{
	consumer.UnknownSession: exitUnknownSession,
	consumer.UnknownRun:     exitUnknownRequest,
	consumer.RunNotFinished: exitNotPending,
}

// rateCommand rates a finished run: aep-kimi rate SESSION [RUN] up|down
// [--note TEXT].
func rateCommand(getenv func(string) string, io stdio) cli.Command {
	return cli.Command{
		Name:    "rate",
		Summary: "rate a finished run: thumbs up or down, with a note",
		Forms:   []string{"[--relay URL] SESSION [RUN] up|down [--note TEXT]"},
		About: "Gives a finished run a thumbs up or down (AEP-0009 feedback), with an optional note of\n" +
			"one line (at most " + fmt.Sprint(mapping.MaxNoteRunes) + " characters). Without RUN it rates the session's latest run to end.\n" +
			"The relay records who rated (your token's name); the page shows it on the run.",
		Env:          []string{"AEP_TOKEN"},
		Interspersed: true,
		Exit: senderExitCodes + "\n" +
			"Before sending, rate checks the run against the relay's replay: 5 unknown session, 6\n" +
			"unknown run, 7 the run has not finished (or the session has none that has). A verdict\n" +
			"other than up or down, or a note that is too long or holds a control character, is 2.",
		Examples: []string{"aep-kimi rate SESSION down --note 'it edited the wrong file'", "aep-kimi rate SESSION RUN up"},
		Args:     cli.Args{Min: 2, Max: 3},
		Flags: func(fs *flag.FlagSet) cli.Run {
			var o senderOptions
			o.flags(fs, getenv)
			note := fs.String("note", "", "a note on the run, one line")
			return func(ctx context.Context, args []string) int {
				return runRate(ctx, o, args, *note, io)
			}
		},
	}
}

// runRate checks the rating, finds the run, and sends it.
func runRate(ctx context.Context, o senderOptions, args []string, note string, io stdio) int {
	session, run, verdict := args[0], "", args[len(args)-1]
	if len(args) == 3 {
		run = args[1]
	}
	// Checked first, so a rating that cannot be sent fails before any lookup.
	if err := (mapping.Rating{Verdict: verdict, Note: note}).Check(); err != nil {
		fmt.Fprintf(io.err, "aep-kimi rate: %v\n", err)
		return cli.ExitUsage
	}
	token, hc, ok := o.requireToken("rate", io)
	if !ok {
		return cli.ExitUsage
	}
	f, err := consumer.LoadRuns(ctx, o.url, token, hc)
	if err != nil {
		fmt.Fprintf(io.err, "aep-kimi rate: %v\n", err)
		return 1
	}
	session, r, err := f.RunTarget(session, run)
	var te *consumer.TargetError
	switch {
	case errors.As(err, &te):
		fmt.Fprintf(io.err, "aep-kimi rate: %s\n", te.Reason)
		return rateExit[te.Problem]
	case err != nil:
		fmt.Fprintf(io.err, "aep-kimi rate: %v\n", err)
		return 1
	}
	cmd, err := client.Rate(session, r.ID, verdict, note)
	return o.sendBuilt(ctx, "rate", cmd, err, io)
}

package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/aep-kimi/aep-kimi/adapter"
	"github.com/aep-kimi/aep-kimi/internal/cli"
	"github.com/aep-kimi/aep-kimi/internal/spool"
	"github.com/aep-kimi/aep-kimi/internal/tokenfile"
	"github.com/aep-kimi/aep-kimi/relay/consumer"
)

// quarantineCommand lists what aep-kimi set aside under its home rather
// than drop: spool records the adapter could not ingest and torn log tails.
func quarantineCommand(getenv func(string) string, std stdio) cli.Command {
	return cli.Command{
		Name:    "quarantine",
		Summary: "list payloads and log tails set aside under the home, with why",
		Forms:   []string{"[--home DIR] [--json]"},
		About: "Lists the files aep-kimi set aside instead of dropping them, oldest first: path, size, age, reason.\n" +
			fmt.Sprintf("  %-9s  a hook payload the adapter could not ingest, under HOME/kimi/spool/quarantine. It is RAW:\n", adapter.QuarantineSpool) +
			"             prompts and tool output, unredacted. The adapter keeps at most " +
			fmt.Sprintf("%d MiB of them, none older than %s,\n", spool.QuarantineMaxBytes>>20, spool.QuarantineMaxAge) +
			"             removing the oldest first.\n" +
			fmt.Sprintf("  %-9s  the partial last line of a session log (a crash or a full disk), cut off before the next\n", adapter.QuarantineTorn) +
			"             append, next to the log as <session>.jsonl.torn-<time>. Kept until you delete it.\n" +
			"Delete a file with rm once you have looked at it.",
		Args: cli.NoArgs,
		Flags: func(fs *flag.FlagSet) cli.Run {
			home := fs.String("home", tokenfile.AEPHome(getenv), "AEP home (env AEP_HOME)")
			asJSON := fs.Bool("json", false, "one JSON object per line instead of a table")
			return func(_ context.Context, _ []string) int { return runQuarantine(*home, *asJSON, std) }
		},
	}
}

// runQuarantine prints the list.
func runQuarantine(home string, asJSON bool, std stdio) int {
	files, err := adapter.ListQuarantined(home, time.Now())
	if err != nil {
		fmt.Fprintf(std.err, "aep-kimi quarantine: %v\n", err)
		return 1
	}
	if asJSON {
		enc := json.NewEncoder(std.out)
		for _, f := range files {
			enc.Encode(f) //nolint:errcheck // stdout gone
		}
		return 0
	}
	if len(files) == 0 {
		fmt.Fprintf(std.out, "nothing in quarantine under %s\n", home)
		return 0
	}
	tw := tabwriter.NewWriter(std.out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "KIND\tAGE\tSIZE\tPATH\tREASON")
	for _, f := range files {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\n", f.Kind, time.Duration(f.AgeS)*time.Second, f.Size, consumer.Line(f.Path), consumer.Line(f.Reason))
	}
	tw.Flush()
	return 0
}

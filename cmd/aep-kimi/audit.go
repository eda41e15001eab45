package main

import (
	"context"
	"flag"
	"fmt"
	"time"

	"github.com/aep-kimi/aep-kimi/internal/cli"
	"github.com/aep-kimi/aep-kimi/relay/consumer"
)

// auditCommand is `aep-kimi audit`: who answered which attention request,
// when, through which surface, with rule decisions and timeouts, from the
// relay's replay or from the session logs on disk.
func auditCommand(getenv func(string) string, io stdio) cli.Command {
	return cli.Command{
		Name:    "audit",
		Summary: "list who answered which request, when and how, with rule decisions and timeouts",
		Forms:   []string{"[--since D] [--json|--csv] [--relay URL] [--token-file F]", "[--since D] [--json|--csv] --logs DIR"},
		About: "Lists the outcome of every attention request, oldest first: when it was decided (UTC), the\n" +
			"session, what was asked (the tool and its arguments, as far as the capture level lets them\n" +
			"out), the outcome (allowed, denied, answered OPTION, proceeded when nobody answered, ...),\n" +
			"by whom (a person, a rule's id, or nobody), through what (page, cli, push, link, rule,\n" +
			"timeout, kimi) and how long it waited. It reads what the relay holds (all of it with the\n" +
			"JetStream store), or with --logs the session logs an adapter or bridge wrote\n" +
			"($AEP_HOME/logs, or one of its directories). Requests still waiting are left out.\n" +
			"--json prints one object per line, --csv RFC 4180 CSV with a header row; a cell a\n" +
			"spreadsheet would take for a formula starts with an apostrophe.",
		Env:  []string{"AEP_TOKEN"},
		Exit: "Exit 0 (also when there is nothing to list), 1 when the relay or the logs cannot be read, 2 usage.",
		Args: cli.NoArgs,
		Flags: func(fs *flag.FlagSet) cli.Run {
			rc := relayConnFlags(fs, getenv)
			since := fs.String("since", "", "only outcomes from then on: a duration back (90m, 24h, 7d), an RFC 3339 time or a date")
			asJSON := fs.Bool("json", false, "one JSON object per line")
			asCSV := fs.Bool("csv", false, "RFC 4180 CSV with a header row")
			logs := fs.String("logs", "", "read the session logs under DIR instead of the relay")
			return func(ctx context.Context, _ []string) int {
				return runAudit(ctx, auditOptions{rc: *rc, since: *since, json: *asJSON, csv: *asCSV, logs: *logs}, io)
			}
		},
	}
}

type auditOptions struct {
	rc        relayClient
	since     string
	json, csv bool
	logs      string
}

// runAudit prints the record.
func runAudit(ctx context.Context, o auditOptions, io stdio) int {
	fail := func(code int, format string, args ...any) int {
		fmt.Fprintf(io.err, "aep-kimi audit: "+format+"\n", args...)
		return code
	}
	if o.json && o.csv {
		return fail(cli.ExitUsage, "--json and --csv: choose one")
	}
	var since time.Time
	if o.since != "" {
		t, err := consumer.ParseSince(o.since, time.Now())
		if err != nil {
			return fail(cli.ExitUsage, "%v", err)
		}
		since = t
	}
	var f *consumer.Fold
	if o.logs != "" {
		fold, read, err := consumer.LoadLogs(o.logs)
		if err != nil {
			return fail(1, "%v", err)
		}
		for _, e := range read.Unreadable {
			fmt.Fprintf(io.err, "aep-kimi audit: %v\n", e)
		}
		if read.Skipped > 0 {
			fmt.Fprintf(io.err, "aep-kimi audit: %d line(s) in the logs are not events and were passed over\n", read.Skipped)
		}
		f = fold
	} else {
		token, err := o.rc.token()
		if err != nil {
			return fail(cli.ExitUsage, "%v", err)
		}
		hc, err := o.rc.http()
		if err != nil {
			return fail(cli.ExitUsage, "%v", err)
		}
		fold, err := consumer.LoadPending(ctx, o.rc.url, token, hc)
		if err != nil {
			return fail(1, "%v", err)
		}
		f = fold
	}
	rows := f.Audit(since)
	var err error
	switch {
	case o.json:
		err = consumer.WriteAuditJSON(io.out, rows)
	case o.csv:
		// RFC 4180 ends records in CRLF, which the sanitizing writer
		// would escape: every cell went through Line already, so the
		// CSV writer adds nothing but quotes, commas and line ends.
		out := io.out
		if sw, ok := out.(*consumer.Writer); ok {
			out = sw.Unwrap()
		}
		err = consumer.WriteAuditCSV(out, rows)
	default:
		err = consumer.WriteAuditText(io.out, rows)
	}
	if err != nil {
		return fail(1, "%v", err)
	}
	return 0
}

package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/aep-kimi/aep-kimi/aep"
	"github.com/aep-kimi/aep-kimi/export"
	"github.com/aep-kimi/aep-kimi/internal/cli"
)

// exportCommand converts event streams through an AEP-0005 bridge, one
// mode per bridge. Exit 0 when every input converted or was out of the
// bridge's scope, 1 when an input was bad or unreadable, 2 for usage errors.
func exportCommand(getenv func(string) string, io stdio) cli.Command {
	return cli.Command{
		Name:    "export",
		Summary: "convert events to CloudEvents, OTLP or OCSF (AEP-0005 bridges)",
		About: "Without --relay: converts JSONL (stdin, or FILEs; - is stdin) to one record per\n" +
			"line on stdout (AEP-0005 bridges); skipped and bad inputs are counted on stderr.\n" +
			"With --relay: follows the relay and delivers every event matching --filter,\n" +
			"resuming after a restart from --state; progress on --metrics ADDR (/metrics).",
		Exit: "Exit 0 when every input converted or was out of the bridge's scope, 1 when an input was bad\n" +
			"or unreadable (or the relay refused the subscription), 2 usage.",
		Modes: []cli.Command{
			exportMode("ce", []string{"[--inverse] [FILE...]", "--relay URL --sink URL"}, getenv, io),
			exportMode("otlp", []string{"[--max-capture LEVEL] [--service-name NAME] [FILE...]",
				"--relay URL --endpoint http://HOST:4318 [--signal logs|traces|both] [--header K=V]..."}, getenv, io),
			exportMode("ocsf", []string{"[--max-capture LEVEL] [FILE...]", "--relay URL (--out FILE | --sink URL)"}, getenv, io),
		},
	}
}

// exportMode is one bridge of `aep-kimi export`.
func exportMode(mode string, forms []string, getenv func(string) string, io stdio) cli.Command {
	return cli.Command{
		Name:  mode,
		Forms: forms,
		Args:  cli.AnyArgs,
		Flags: func(fs *flag.FlagSet) cli.Run {
			o := exportOptions{mode: mode, conv: export.Converter{MaxCapture: export.DefaultMaxCapture}}
			o.maxCapture = export.DefaultMaxCapture.String()
			o.live.register(fs, mode, getenv)
			switch mode {
			case "ce":
				fs.BoolVar(&o.inverse, "inverse", false, "CloudEvents in, AEP events out (AEP-0005 §2)")
			case "otlp":
				o.conv.Mode = export.ModeOTLP
				fs.StringVar(&o.conv.ServiceName, "service-name", "", "OTLP service.name for every record (default: the event's agent)")
				fs.StringVar(&o.maxCapture, "max-capture", o.maxCapture, "capture ceiling: payloads above it are not exported (none, metadata, redacted, full)")
			case "ocsf":
				o.conv.Mode = export.ModeOCSF
				fs.StringVar(&o.maxCapture, "max-capture", o.maxCapture, "capture ceiling: payloads above it are not exported (none, metadata, redacted, full)")
			}
			return func(ctx context.Context, files []string) int { return runExport(ctx, &o, files, getenv, io) }
		},
	}
}

// exportOptions is one export mode's flag surface.
type exportOptions struct {
	mode       string
	conv       export.Converter
	inverse    bool
	maxCapture string
	live       liveFlags
}

// runExport converts files, or follows a relay with --relay.
func runExport(ctx context.Context, o *exportOptions, files []string, getenv func(string) string, io stdio) int {
	modeName, conv, maxCapture, live := o.mode, o.conv, o.maxCapture, &o.live
	if o.inverse {
		conv.Mode = export.ModeCEInverse
	}
	c, err := aep.ParseCapture(maxCapture)
	if err != nil || maxCapture == "" {
		fmt.Fprintf(io.err, "aep-kimi export: --max-capture: want none, metadata, redacted or full, not %q\n", maxCapture)
		return 2
	}
	conv.MaxCapture = c
	if live.relay != "" {
		if len(files) > 0 {
			fmt.Fprintln(io.err, "aep-kimi export: FILE arguments and --relay exclude each other")
			return 2
		}
		return runExportLive(ctx, modeName, conv, live, getenv, io)
	}
	if live.set() {
		fmt.Fprintln(io.err, "aep-kimi export: --endpoint, --sink, --out and the other live flags need --relay")
		return 2
	}
	if len(files) == 0 {
		files = []string{"-"}
	}
	var total export.Counts
	unreadable := 0
	for _, name := range files {
		n, err := convertFile(conv, name, io)
		total.In += n.In
		total.Out += n.Out
		total.Skipped += n.Skipped
		total.Bad += n.Bad
		total.Dropped += n.Dropped
		if err != nil {
			fmt.Fprintf(io.err, "aep-kimi export: %s: %v\n", name, err)
			unreadable++
		}
	}
	fmt.Fprintf(io.err, "export %s: %d in, %d out, %d skipped, %d bad", modeName, total.In, total.Out, total.Skipped, total.Bad)
	if total.Dropped > 0 {
		fmt.Fprintf(io.err, ", %d attribute(s) dropped", total.Dropped)
	}
	fmt.Fprintln(io.err)
	if total.Bad > 0 || unreadable > 0 {
		return 1
	}
	return 0
}

func convertFile(conv export.Converter, name string, std stdio) (export.Counts, error) {
	var r io.Reader = std.in
	if name != "-" {
		f, err := os.Open(name)
		if err != nil {
			return export.Counts{}, err
		}
		defer f.Close()
		r = f
	}
	return conv.Run(r, std.out, func(line int, msg string) {
		fmt.Fprintf(std.err, "%s:%d: %s\n", name, line, msg)
	})
}

package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/aep-kimi/aep-kimi/aep"
	"github.com/aep-kimi/aep-kimi/export"
)

const exportUsage = `usage: aep-kimi export ce [--inverse] [FILE...]
       aep-kimi export otlp [--max-capture LEVEL] [--service-name NAME] [FILE...]
       aep-kimi export ocsf [--max-capture LEVEL] [FILE...]
       aep-kimi export otlp --relay URL --endpoint http://HOST:4318 [--signal logs|traces|both] [--header K=V]...
       aep-kimi export ce --relay URL --sink URL
       aep-kimi export ocsf --relay URL (--out FILE | --sink URL)
Without --relay: converts JSONL (stdin, or FILEs; - is stdin) to one record per
line on stdout (AEP-0005 bridges); skipped and bad inputs are counted on stderr.
With --relay: follows the relay and delivers every event matching --filter,
resuming after a restart from --state; progress on --metrics ADDR (/metrics).`

// runExport converts event streams through an AEP-0005 bridge. Exit 0 when
// every input converted or was out of the bridge's scope, 1 when an input
// was bad or unreadable, 2 for usage errors.
func runExport(ctx context.Context, args []string, io stdio) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprintln(io.err, exportUsage)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	modeName := args[0]
	fs := flag.NewFlagSet("export "+modeName, flag.ContinueOnError)
	fs.Usage = func() { fmt.Fprintln(io.err, exportUsage); fs.PrintDefaults() }
	conv := export.Converter{MaxCapture: export.DefaultMaxCapture}
	var inverse *bool
	maxCapture := export.DefaultMaxCapture.String()
	var live liveFlags
	live.register(fs, modeName)
	switch modeName {
	case "ce":
		inverse = fs.Bool("inverse", false, "CloudEvents in, AEP events out (AEP-0005 §2)")
	case "otlp":
		conv.Mode = export.ModeOTLP
		fs.StringVar(&conv.ServiceName, "service-name", "", "OTLP service.name for every record (default: the event's agent)")
		fs.StringVar(&maxCapture, "max-capture", maxCapture, "capture ceiling: payloads above it are not exported (none, metadata, redacted, full)")
	case "ocsf":
		conv.Mode = export.ModeOCSF
		fs.StringVar(&maxCapture, "max-capture", maxCapture, "capture ceiling: payloads above it are not exported (none, metadata, redacted, full)")
	default:
		fmt.Fprintf(io.err, "aep-kimi export: unknown mode %q (want ce, otlp or ocsf)\n", modeName)
		return 2
	}
	if code, ok := parseFlags(fs, args[1:], io, -1); !ok {
		return code
	}
	if inverse != nil && *inverse {
		conv.Mode = export.ModeCEInverse
	}
	c, err := aep.ParseCapture(maxCapture)
	if err != nil || maxCapture == "" {
		fmt.Fprintf(io.err, "aep-kimi export: --max-capture: want none, metadata, redacted or full, not %q\n", maxCapture)
		return 2
	}
	conv.MaxCapture = c
	if live.relay != "" {
		if fs.NArg() > 0 {
			fmt.Fprintln(io.err, "aep-kimi export: FILE arguments and --relay exclude each other")
			return 2
		}
		return runExportLive(ctx, modeName, conv, &live, io)
	}
	if live.set() {
		fmt.Fprintln(io.err, "aep-kimi export: --endpoint, --sink, --out and the other live flags need --relay")
		return 2
	}
	files := fs.Args()
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

package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"path/filepath"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/aep-kimi/aep-kimi/aep"
	"github.com/aep-kimi/aep-kimi/export"
	"github.com/aep-kimi/aep-kimi/internal/cli"
	"github.com/aep-kimi/aep-kimi/internal/tokenfile"
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
			"resuming after a restart from --state; progress on --metrics ADDR (/metrics).\n" +
			"The relay token comes from --token-file, else AEP_TOKEN, AEP_TOKEN_FILE or $AEP_HOME/token.",
		Env: []string{"AEP_TOKEN", "AEP_TOKEN_FILE", "AEP_HOME"},
		Exit: "Exit 0 when every input converted or was out of the bridge's scope, 1 when an input was bad\n" +
			"or unreadable (or the relay refused the subscription), 2 usage.",
		Modes: []cli.Command{
			exportMode(export.NameCE, []string{"[--inverse] [FILE...]", "--relay URL --sink URL"}, getenv, io),
			exportMode(export.NameOTLP, []string{"[--max-capture LEVEL] [--service-name NAME] [FILE...]",
				"--relay URL --endpoint http://HOST:4318 [--signal logs|traces|both] [--header K=V]..."}, getenv, io),
			exportMode(export.NameOCSF, []string{"[--max-capture LEVEL] [FILE...]", "--relay URL (--out FILE | --sink URL)"}, getenv, io),
		},
	}
}

// exportOptions is one export mode's flag surface.
type exportOptions struct {
	conv       export.Converter
	inverse    bool
	maxCapture string
	live       liveFlags
}

// liveFlags are the flags of the live (relay-following) exporters.
type liveFlags struct {
	relay, token, tokenFile, filter, state, metrics string
	sink                                            export.SinkConfig
	headers                                         export.Headers
	fs                                              *flag.FlagSet
}

// exportMode is one bridge of `aep-kimi export`.
func exportMode(mode string, forms []string, getenv func(string) string, io stdio) cli.Command {
	return cli.Command{
		Name:  mode,
		Forms: forms,
		Args:  cli.AnyArgs,
		Flags: func(fs *flag.FlagSet) cli.Run {
			o := exportOptions{conv: export.Converter{MaxCapture: export.DefaultMaxCapture}, maxCapture: export.DefaultMaxCapture.String()}
			l := &o.live
			l.fs, l.sink.Mode = fs, mode
			fs.StringVar(&l.relay, "relay", "", "follow this relay (base URL) instead of converting files")
			fs.StringVar(&l.tokenFile, "token-file", "", "file holding the relay bearer token, not readable by others (default: AEP_TOKEN, AEP_TOKEN_FILE, else $AEP_HOME/token)")
			fs.StringVar(&l.token, "token", "", "relay bearer token: deprecated, a command line is readable by every local user (use --token-file)")
			fs.StringVar(&l.filter, "filter", "", `attr-match filter JSON, e.g. '{"type":"tool.*"}'`)
			fs.StringVar(&l.state, "state", filepath.Join(tokenfile.AEPHome(getenv), "export-"+mode+"-state.json"), `resume positions file ("none" disables)`)
			fs.StringVar(&l.metrics, "metrics", "", "serve /metrics and /healthz on this loopback address (e.g. 127.0.0.1:9464)")
			fs.StringVar(&l.sink.URL, "sink", "", "POST each record to this URL")
			fs.Var(&l.headers, "header", "HTTP header K=V on every request (repeatable; K=@FILE reads V from FILE)")
			switch mode {
			case export.NameCE:
				fs.BoolVar(&o.inverse, "inverse", false, "CloudEvents in, AEP events out (AEP-0005 §2)")
			case export.NameOTLP:
				o.conv.Mode = export.ModeOTLP
				fs.StringVar(&o.conv.ServiceName, "service-name", "", "OTLP service.name for every record (default: the event's agent)")
				fs.StringVar(&o.maxCapture, "max-capture", o.maxCapture, "capture ceiling: payloads above it are not exported (none, metadata, redacted, full)")
				fs.StringVar(&l.sink.Endpoint, "endpoint", "", "OTLP/HTTP endpoint base URL (http://HOST:4318)")
				fs.StringVar(&l.sink.TracesEndpoint, "traces-endpoint", "", "full URL for traces when the backend uses its own path")
				fs.StringVar(&l.sink.Signal, "signal", "logs", "what to send: logs, traces or both")
			case export.NameOCSF:
				o.conv.Mode = export.ModeOCSF
				fs.StringVar(&o.maxCapture, "max-capture", o.maxCapture, "capture ceiling: payloads above it are not exported (none, metadata, redacted, full)")
				fs.StringVar(&l.sink.Out, "out", "", "append records to this NDJSON file (rotated by size)")
				fs.Int64Var(&l.sink.RotateBytes, "rotate-bytes", export.DefaultRotateBytes, "rotate --out at this size")
			}
			return func(ctx context.Context, files []string) int { return runExport(ctx, mode, &o, files, getenv, io) }
		},
	}
}

// runExport converts files, or follows a relay with --relay.
func runExport(ctx context.Context, mode string, o *exportOptions, files []string, getenv func(string) string, io stdio) int {
	conv := o.conv
	if o.inverse {
		conv.Mode = export.ModeCEInverse
	}
	c, err := aep.ParseCapture(o.maxCapture)
	if err != nil || o.maxCapture == "" {
		fmt.Fprintf(io.err, "aep-kimi export: --max-capture: want none, metadata, redacted or full, not %q\n", o.maxCapture)
		return 2
	}
	conv.MaxCapture = c
	if o.live.relay != "" {
		if len(files) > 0 {
			fmt.Fprintln(io.err, "aep-kimi export: FILE arguments and --relay exclude each other")
			return 2
		}
		return runExportLive(ctx, mode, conv, &o.live, getenv, io)
	}
	if o.live.set() {
		fmt.Fprintln(io.err, "aep-kimi export: --endpoint, --sink, --out and the other live flags need --relay")
		return 2
	}
	if len(files) == 0 {
		files = []string{"-"}
	}
	unreadable := 0
	total := conv.ConvertFiles(files, io.in, io.out,
		func(name string, line int, msg string) { fmt.Fprintf(io.err, "%s:%d: %s\n", name, line, msg) },
		func(name string, err error) {
			fmt.Fprintf(io.err, "aep-kimi export: %s: %v\n", name, err)
			unreadable++
		})
	fmt.Fprintf(io.err, "export %s: %d in, %d out, %d skipped, %d bad", mode, total.In, total.Out, total.Skipped, total.Bad)
	if total.Dropped > 0 {
		fmt.Fprintf(io.err, ", %d attribute(s) dropped", total.Dropped)
	}
	fmt.Fprintln(io.err)
	if total.Bad > 0 || unreadable > 0 {
		return 1
	}
	return 0
}

// set reports whether a live-only flag was given.
func (l *liveFlags) set() bool {
	found := false
	l.fs.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "endpoint", "traces-endpoint", "signal", "sink", "out", "header", "filter", "metrics", "token", "token-file":
			found = true
		}
	})
	return found
}

// runExportLive runs one live exporter until ctx ends: exit 2 for bad
// configuration, 1 when the relay refuses the subscription.
func runExportLive(ctx context.Context, mode string, conv export.Converter, l *liveFlags, getenv func(string) string, io stdio) int {
	fail := func(format string, a ...any) int {
		fmt.Fprintf(io.err, "aep-kimi export "+mode+": "+format+"\n", a...)
		return 2
	}
	if conv.Mode == export.ModeCEInverse {
		return fail("--inverse has no live mode")
	}
	if l.filter != "" {
		if _, err := aep.ParseFilter([]byte(l.filter)); err != nil {
			return fail("--filter: %v", err)
		}
	}
	token, err := commandLineToken(getenv, l.tokenFile, l.token, "export", io)
	if err != nil {
		return fail("%v", err)
	}
	l.sink.Conv, l.sink.Headers = conv, l.headers
	sink, closeSink, err := l.sink.Build()
	if err != nil {
		return fail("%v", err)
	}
	defer closeSink()
	state := l.state
	if state == "none" {
		state = ""
	}
	reg := prometheus.NewRegistry()
	exp := &export.Live{
		Relay: l.relay, Token: token, Filter: l.filter, StatePath: state,
		Sink: sink, Log: slog.New(slog.NewTextHandler(io.err, nil)).With("exporter", mode), Metrics: export.NewMetrics(reg, mode),
	}
	if err := export.Serve(ctx, exp, reg, l.metrics); err != nil {
		fmt.Fprintf(io.err, "aep-kimi export %s: %v\n", mode, err)
		return 1
	}
	return 0
}

// upOTLP is `up --otlp`: the OTLP exporter beside the other components.
type upOTLP struct {
	endpoint, signal, maxCapture string
	headers                      export.Headers
}

func (u *upOTLP) flags(fs *flag.FlagSet) {
	fs.StringVar(&u.endpoint, "otlp", "", "also export to this OTLP/HTTP endpoint (http://HOST:4318), resuming from $AEP_HOME/export-otlp-state.json")
	fs.StringVar(&u.signal, "otlp-signal", "both", "with --otlp: logs, traces or both")
	fs.StringVar(&u.maxCapture, "otlp-max-capture", export.DefaultMaxCapture.String(), "with --otlp: capture ceiling of what is exported")
	fs.Var(&u.headers, "otlp-header", "with --otlp: HTTP header K=V (repeatable; K=@FILE reads V from FILE)")
}

// exporter is the configured exporter (relay URL and token still to set),
// or nil without --otlp.
func (u *upOTLP) exporter(home string, log *slog.Logger) (*export.Live, error) {
	if u.endpoint == "" {
		return nil, nil
	}
	if _, err := export.ParseSignal(u.signal); err != nil {
		return nil, fmt.Errorf("--otlp-signal: %w", err)
	}
	c, err := aep.ParseCapture(u.maxCapture)
	if err != nil || u.maxCapture == "" {
		return nil, fmt.Errorf("--otlp-max-capture: want none, metadata, redacted or full, not %q", u.maxCapture)
	}
	sink, _, err := export.SinkConfig{Mode: export.NameOTLP, Endpoint: u.endpoint, Signal: u.signal, Headers: u.headers,
		Conv: export.Converter{Mode: export.ModeOTLP, MaxCapture: c}}.Build()
	if err != nil {
		return nil, err
	}
	return &export.Live{StatePath: filepath.Join(home, "export-otlp-state.json"), Sink: sink, Log: log}, nil
}

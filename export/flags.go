package export

import (
	"flag"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/aep-kimi/aep-kimi/aep"
	"github.com/aep-kimi/aep-kimi/internal/tlsconf"
)

// Options is one `aep-kimi export MODE`'s flag surface: the converter's
// and, with Relay, the live exporter's.
type Options struct {
	Mode       string // NameCE, NameOTLP or NameOCSF
	Conv       Converter
	Inverse    bool
	MaxCapture string
	// Relay, when set, follows that relay instead of converting files.
	Relay, Token, TokenFile, Filter, State, Metrics string
	// CAFile is --ca: a PEM bundle trusted for an https relay.
	CAFile  string
	Sink    SinkConfig
	Headers Headers
	fs      *flag.FlagSet
}

// BindFlags registers mode's flags; the resume state defaults under home.
func (o *Options) BindFlags(fs *flag.FlagSet, mode, home string) {
	o.Mode, o.fs, o.Sink.Mode = mode, fs, mode
	o.Conv.MaxCapture, o.MaxCapture = DefaultMaxCapture, DefaultMaxCapture.String()
	fs.StringVar(&o.Relay, "relay", "", "follow this relay (base URL) instead of converting files")
	fs.StringVar(&o.TokenFile, "token-file", "", "file holding the relay bearer token, not readable by others (default: AEP_TOKEN, AEP_TOKEN_FILE, else $AEP_HOME/token)")
	fs.StringVar(&o.Token, "token", "", "relay bearer token: deprecated, a command line is readable by every local user (use --token-file)")
	fs.StringVar(&o.CAFile, "ca", "", "PEM file of CA certificates to trust for an https relay, besides the system's (env "+tlsconf.EnvCA+")")
	fs.StringVar(&o.Filter, "filter", "", `attr-match filter JSON, e.g. '{"type":"tool.*"}'`)
	fs.StringVar(&o.State, "state", filepath.Join(home, "export-"+mode+"-state.json"), `resume positions file ("none" disables)`)
	fs.StringVar(&o.Metrics, "metrics", "", "serve /metrics and /healthz on this loopback address (e.g. 127.0.0.1:9464)")
	fs.StringVar(&o.Sink.URL, "sink", "", "POST each record to this URL")
	fs.Var(&o.Headers, "header", "HTTP header K=V on every request (repeatable; K=@FILE reads V from FILE)")
	maxCapture := func() {
		fs.StringVar(&o.MaxCapture, "max-capture", o.MaxCapture, "capture ceiling: payloads above it are not exported (none, metadata, redacted, full)")
	}
	switch mode {
	case NameCE:
		fs.BoolVar(&o.Inverse, "inverse", false, "CloudEvents in, AEP events out (AEP-0005 §2)")
	case NameOTLP:
		o.Conv.Mode = ModeOTLP
		fs.StringVar(&o.Conv.ServiceName, "service-name", "", "OTLP service.name for every record (default: the event's agent)")
		maxCapture()
		fs.StringVar(&o.Sink.Endpoint, "endpoint", "", "OTLP/HTTP endpoint base URL (http://HOST:4318)")
		fs.StringVar(&o.Sink.TracesEndpoint, "traces-endpoint", "", "full URL for traces when the backend uses its own path")
		fs.StringVar(&o.Sink.Signal, "signal", "logs", "what to send: logs, traces or both")
	case NameOCSF:
		o.Conv.Mode = ModeOCSF
		maxCapture()
		fs.StringVar(&o.Sink.Out, "out", "", "append records to this NDJSON file (rotated by size)")
		fs.Int64Var(&o.Sink.RotateBytes, "rotate-bytes", DefaultRotateBytes, "rotate --out at this size")
	}
}

// Converter is the converter the flags ask for.
func (o *Options) Converter() (Converter, error) {
	conv := o.Conv
	if o.Inverse {
		conv.Mode = ModeCEInverse
	}
	c, err := parseMaxCapture("--max-capture", o.MaxCapture)
	conv.MaxCapture = c
	return conv, err
}

func parseMaxCapture(flagName, v string) (aep.Capture, error) {
	c, err := aep.ParseCapture(v)
	if err != nil || v == "" {
		return c, fmt.Errorf("%s: want none, metadata, redacted or full, not %q", flagName, v)
	}
	return c, nil
}

// LiveSet reports whether a flag only the live exporter takes was given.
func (o *Options) LiveSet() bool {
	found := false
	o.fs.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "endpoint", "traces-endpoint", "signal", "sink", "out", "header", "filter", "metrics", "token", "token-file":
			found = true
		}
	})
	return found
}

// Live builds the live exporter for conv with the relay token (read once
// the flags are checked), its metrics registry and what closes its sink;
// an error is a configuration mistake.
func (o *Options) Live(conv Converter, readToken func() (string, error), log *slog.Logger) (*Live, *prometheus.Registry, func(), error) {
	if conv.Mode == ModeCEInverse {
		return nil, nil, nil, fmt.Errorf("--inverse has no live mode")
	}
	if o.Filter != "" {
		if _, err := aep.ParseFilter([]byte(o.Filter)); err != nil {
			return nil, nil, nil, fmt.Errorf("--filter: %w", err)
		}
	}
	token, err := readToken()
	if err != nil {
		return nil, nil, nil, err
	}
	hc, err := tlsconf.HTTPClient(o.CAFile)
	if err != nil {
		return nil, nil, nil, err
	}
	log = log.With("exporter", o.Mode)
	o.Sink.Conv, o.Sink.Headers, o.Sink.Log = conv, o.Headers, log
	sink, closeSink, err := o.Sink.Build()
	if err != nil {
		return nil, nil, nil, err
	}
	state := o.State
	if state == "none" {
		state = ""
	}
	reg := prometheus.NewRegistry()
	return &Live{
		Relay: o.Relay, Token: token, Filter: o.Filter, StatePath: state, HTTPClient: hc,
		Sink: sink, Log: log, Metrics: NewMetrics(reg, o.Mode),
	}, reg, closeSink, nil
}

// Summary is the line a file conversion ends with.
func (c Counts) Summary(mode string) string {
	s := fmt.Sprintf("export %s: %d in, %d out, %d skipped, %d bad", mode, c.In, c.Out, c.Skipped, c.Bad)
	if c.Dropped > 0 {
		s += fmt.Sprintf(", %d attribute(s) dropped", c.Dropped)
	}
	return s
}

// UpOTLP is `up --otlp`: the OTLP exporter beside the other components.
type UpOTLP struct {
	Endpoint, Signal, MaxCapture string
	Headers                      Headers
}

// BindFlags registers --otlp and its companions.
func (u *UpOTLP) BindFlags(fs *flag.FlagSet) {
	fs.StringVar(&u.Endpoint, "otlp", "", "also export to this OTLP/HTTP endpoint (http://HOST:4318), resuming from $AEP_HOME/export-otlp-state.json")
	fs.StringVar(&u.Signal, "otlp-signal", "both", "with --otlp: logs, traces or both")
	fs.StringVar(&u.MaxCapture, "otlp-max-capture", DefaultMaxCapture.String(), "with --otlp: capture ceiling of what is exported")
	fs.Var(&u.Headers, "otlp-header", "with --otlp: HTTP header K=V (repeatable; K=@FILE reads V from FILE)")
}

// Exporter is the configured exporter (relay URL and token still to set),
// or nil without --otlp.
func (u *UpOTLP) Exporter(home string, log *slog.Logger) (*Live, error) {
	if u.Endpoint == "" {
		return nil, nil
	}
	if _, err := ParseSignal(u.Signal); err != nil {
		return nil, fmt.Errorf("--otlp-signal: %w", err)
	}
	c, err := parseMaxCapture("--otlp-max-capture", u.MaxCapture)
	if err != nil {
		return nil, err
	}
	sink, _, err := SinkConfig{Mode: NameOTLP, Endpoint: u.Endpoint, Signal: u.Signal, Headers: u.Headers,
		Conv: Converter{Mode: ModeOTLP, MaxCapture: c}, Log: log}.Build()
	if err != nil {
		return nil, err
	}
	return &Live{StatePath: filepath.Join(home, "export-otlp-state.json"), Sink: sink, Log: log}, nil
}

// ConvertReport converts files ("-": stdin; none: stdin) to out, writing
// each bad line and unreadable file on errw and the summary last; ok is
// false when an input was bad or unreadable.
func (c Converter) ConvertReport(files []string, stdin io.Reader, out, errw io.Writer, mode string) (ok bool) {
	if len(files) == 0 {
		files = []string{"-"}
	}
	unreadable := 0
	total := c.ConvertFiles(files, stdin, out,
		func(name string, line int, msg string) { fmt.Fprintf(errw, "%s:%d: %s\n", name, line, msg) },
		func(name string, err error) {
			fmt.Fprintf(errw, "aep-kimi export: %s: %v\n", name, err)
			unreadable++
		})
	fmt.Fprintln(errw, total.Summary(mode))
	return total.Bad == 0 && unreadable == 0
}

package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/aep-kimi/aep-kimi/aep"
	"github.com/aep-kimi/aep-kimi/export"
	"github.com/aep-kimi/aep-kimi/internal/httpguard"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"golang.org/x/sync/errgroup"
)

// liveFlags are the flags of the live (relay-following) exporters.
type liveFlags struct {
	relay, token, filter, state, metrics string
	endpoint, tracesEndpoint, signal     string
	sink, out                            string
	headers                              headerFlag
	rotateBytes                          int64
	fs                                   *flag.FlagSet
}

// headerFlag collects repeated K=V flags.
type headerFlag map[string]string

func (h *headerFlag) String() string { return "" }

func (h *headerFlag) Set(v string) error {
	k, val, ok := strings.Cut(v, "=")
	if !ok || strings.TrimSpace(k) == "" {
		return errors.New("want K=V")
	}
	if name, ok := strings.CutPrefix(val, "@"); ok {
		// K=@FILE keeps a credential out of the process arguments.
		b, err := os.ReadFile(name)
		if err != nil {
			return err
		}
		val = strings.TrimSpace(string(b))
	}
	if *h == nil {
		*h = make(headerFlag)
	}
	(*h)[strings.TrimSpace(k)] = val
	return nil
}

func (l *liveFlags) register(fs *flag.FlagSet, mode string, getenv func(string) string) {
	l.fs = fs
	fs.StringVar(&l.relay, "relay", "", "follow this relay (base URL) instead of converting files")
	fs.StringVar(&l.token, "token", "", "relay bearer token (default: AEP_TOKEN, AEP_TOKEN_FILE, else $AEP_HOME/token)")
	fs.StringVar(&l.filter, "filter", "", `attr-match filter JSON, e.g. '{"type":"tool.*"}'`)
	fs.StringVar(&l.state, "state", filepath.Join(aepHome(getenv), "export-"+mode+"-state.json"), `resume positions file ("none" disables)`)
	fs.StringVar(&l.metrics, "metrics", "", "serve /metrics and /healthz on this loopback address (e.g. 127.0.0.1:9464)")
	fs.StringVar(&l.sink, "sink", "", "POST each record to this URL")
	fs.Var(&l.headers, "header", "HTTP header K=V on every request (repeatable; K=@FILE reads V from FILE)")
	switch mode {
	case "otlp":
		fs.StringVar(&l.endpoint, "endpoint", "", "OTLP/HTTP endpoint base URL (http://HOST:4318)")
		fs.StringVar(&l.tracesEndpoint, "traces-endpoint", "", "full URL for traces when the backend uses its own path")
		fs.StringVar(&l.signal, "signal", "logs", "what to send: logs, traces or both")
	case "ocsf":
		fs.StringVar(&l.out, "out", "", "append records to this NDJSON file (rotated by size)")
		fs.Int64Var(&l.rotateBytes, "rotate-bytes", export.DefaultRotateBytes, "rotate --out at this size")
	}
}

// set reports whether a live-only flag was given.
func (l *liveFlags) set() bool {
	found := false
	l.fs.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "endpoint", "traces-endpoint", "signal", "sink", "out", "header", "filter", "metrics", "token":
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
	if l.token = httpguard.TrimToken(l.token); l.token == "" {
		t, err := relayToken(getenv, getenv("AEP_TOKEN_FILE"))
		if err != nil {
			return fail("%v", err)
		}
		l.token = t
	}
	log := slog.New(slog.NewTextHandler(io.err, nil)).With("exporter", mode)
	reg := prometheus.NewRegistry()
	sink, closeSink, err := buildSink(mode, conv, l)
	if err != nil {
		return fail("%v", err)
	}
	defer closeSink()
	state := l.state
	if state == "none" {
		state = ""
	}
	exp := &export.Live{
		Relay: l.relay, Token: l.token, Filter: l.filter, StatePath: state,
		Sink: sink, Log: log, Metrics: export.NewMetrics(reg, mode),
	}
	g, gctx := errgroup.WithContext(ctx)
	if l.metrics != "" {
		ln, err := listenLoopback(l.metrics)
		if err != nil {
			return fail("--metrics: %v", err)
		}
		mux := http.NewServeMux()
		mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
		mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
		srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
		g.Go(func() error {
			if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
				return err
			}
			return nil
		})
		g.Go(func() error {
			<-gctx.Done()
			return srv.Close()
		})
		log.Info("export: metrics", "addr", ln.Addr().String())
	}
	g.Go(func() error {
		err := exp.Run(gctx)
		if err == nil {
			err = context.Canceled // stop the metrics server with the exporter
		}
		return err
	})
	if err := g.Wait(); err != nil && !errors.Is(err, context.Canceled) {
		fmt.Fprintf(io.err, "aep-kimi export %s: %v\n", mode, err)
		return 1
	}
	return 0
}

// listenLoopback listens on addr, refusing a non-loopback host.
func listenLoopback(addr string) (net.Listener, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return nil, fmt.Errorf("%s is not a loopback address", addr)
	}
	return net.Listen("tcp", addr)
}

// buildSink makes the receiver side of a live exporter from its flags.
func buildSink(mode string, conv export.Converter, l *liveFlags) (export.Sink, func(), error) {
	noop := func() {}
	client := &http.Client{Timeout: 30 * time.Second}
	switch mode {
	case "otlp":
		if l.endpoint == "" && l.tracesEndpoint == "" {
			return nil, noop, errors.New("--endpoint is required with --relay")
		}
		sig, err := export.ParseSignal(l.signal)
		if err != nil {
			return nil, noop, err
		}
		if sig&export.SignalLogs != 0 && l.endpoint == "" {
			return nil, noop, errors.New("--endpoint is required for logs")
		}
		return &export.OTLPSink{
			Endpoint: l.endpoint, TracesEndpoint: l.tracesEndpoint, Signal: sig,
			Headers: l.headers, MaxCapture: conv.MaxCapture, ServiceName: conv.ServiceName, Client: client,
		}, noop, nil
	case "ce":
		if l.sink == "" {
			return nil, noop, errors.New("--sink is required with --relay")
		}
		return &export.PostSink{URL: l.sink, ContentType: export.CEContentType, Headers: l.headers, Conv: conv, Client: client}, noop, nil
	case "ocsf":
		switch {
		case (l.out == "") == (l.sink == ""):
			return nil, noop, errors.New("exactly one of --out and --sink is required with --relay")
		case l.out != "":
			fsink := &export.FileSink{Path: l.out, Conv: conv, MaxBytes: l.rotateBytes}
			return fsink, func() { _ = fsink.Close() }, nil
		}
		return &export.PostSink{URL: l.sink, ContentType: "application/json", Headers: l.headers, Conv: conv, Client: client}, noop, nil
	}
	return nil, noop, fmt.Errorf("unknown mode %q", mode)
}

// upOTLP is `up --otlp`: the OTLP exporter beside the other components.
type upOTLP struct {
	endpoint, signal, maxCapture string
	headers                      headerFlag
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
	sig, err := export.ParseSignal(u.signal)
	if err != nil {
		return nil, fmt.Errorf("--otlp-signal: %w", err)
	}
	c, err := aep.ParseCapture(u.maxCapture)
	if err != nil || u.maxCapture == "" {
		return nil, fmt.Errorf("--otlp-max-capture: want none, metadata, redacted or full, not %q", u.maxCapture)
	}
	return &export.Live{
		StatePath: filepath.Join(home, "export-otlp-state.json"),
		Sink: &export.OTLPSink{Endpoint: u.endpoint, Signal: sig, Headers: u.headers, MaxCapture: c,
			Client: &http.Client{Timeout: 30 * time.Second}},
		Log: log,
	}, nil
}

package export

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"golang.org/x/sync/errgroup"

	"github.com/aep-kimi/aep-kimi/internal/httpguard"
)

// Defaults of the live exporters' wiring.
const (
	// DefaultSinkTimeout bounds one delivery to a receiver.
	DefaultSinkTimeout = 30 * time.Second
	// metricsReadHeaderTimeout bounds a scrape's request headers.
	metricsReadHeaderTimeout = 5 * time.Second
)

// Modes by name, as `aep-kimi export MODE` takes them.
const (
	NameCE   = "ce"
	NameOTLP = "otlp"
	NameOCSF = "ocsf"
)

// SinkConfig names a live exporter's receiver: an OTLP/HTTP endpoint, a URL
// each record is POSTed to, or a rotated NDJSON file.
type SinkConfig struct {
	Mode string // NameCE, NameOTLP or NameOCSF
	// Endpoint and TracesEndpoint are OTLP's (base URL; full traces URL);
	// Signal what it sends.
	Endpoint, TracesEndpoint, Signal string
	// URL receives each record by POST (ce, ocsf); Out is ocsf's file,
	// rotated at RotateBytes.
	URL, Out    string
	RotateBytes int64
	Headers     map[string]string
	Conv        Converter
	// Log receives what the sink has to say beside a delivery's outcome
	// (OTLP: a signal the endpoint refuses).
	Log *slog.Logger
}

// Build makes the sink and what closes it.
func (c SinkConfig) Build() (Sink, func(), error) {
	noop := func() {}
	client := &http.Client{Timeout: DefaultSinkTimeout}
	switch c.Mode {
	case NameOTLP:
		if c.Endpoint == "" && c.TracesEndpoint == "" {
			return nil, noop, errors.New("--endpoint is required with --relay")
		}
		sig, err := ParseSignal(c.Signal)
		if err != nil {
			return nil, noop, err
		}
		if sig&SignalLogs != 0 && c.Endpoint == "" {
			return nil, noop, errors.New("--endpoint is required for logs")
		}
		return &OTLPSink{
			Endpoint: c.Endpoint, TracesEndpoint: c.TracesEndpoint, Signal: sig,
			Headers: c.Headers, MaxCapture: c.Conv.MaxCapture, ServiceName: c.Conv.ServiceName, Client: client, Log: c.Log,
		}, noop, nil
	case NameCE:
		if c.URL == "" {
			return nil, noop, errors.New("--sink is required with --relay")
		}
		return &PostSink{URL: c.URL, ContentType: CEContentType, Headers: c.Headers, Conv: c.Conv, Client: client}, noop, nil
	case NameOCSF:
		switch {
		case (c.Out == "") == (c.URL == ""):
			return nil, noop, errors.New("exactly one of --out and --sink is required with --relay")
		case c.Out != "":
			fsink := &FileSink{Path: c.Out, Conv: c.Conv, MaxBytes: c.RotateBytes}
			return fsink, func() { _ = fsink.Close() }, nil
		}
		return &PostSink{URL: c.URL, ContentType: "application/json", Headers: c.Headers, Conv: c.Conv, Client: client}, noop, nil
	}
	return nil, noop, fmt.Errorf("unknown mode %q", c.Mode)
}

// Serve runs l until ctx ends, with, when metricsAddr is set, its metrics
// (registered in reg) on GET /metrics and a GET /healthz on that address,
// which must be loopback. It returns nil once ctx ends, else why l stopped.
func Serve(ctx context.Context, l *Live, reg *prometheus.Registry, metricsAddr string) error {
	g, gctx := errgroup.WithContext(ctx)
	if metricsAddr != "" {
		if !httpguard.LoopbackListen(metricsAddr) {
			return fmt.Errorf("--metrics: %s is not a loopback address", metricsAddr)
		}
		ln, err := net.Listen("tcp", metricsAddr)
		if err != nil {
			return fmt.Errorf("--metrics: %w", err)
		}
		mux := http.NewServeMux()
		mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
		mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
		srv := &http.Server{Handler: mux, ReadHeaderTimeout: metricsReadHeaderTimeout}
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
		if l.Log != nil {
			l.Log.Info("export: metrics", "addr", ln.Addr().String())
		}
	}
	g.Go(func() error {
		err := l.Run(gctx)
		if err == nil {
			err = context.Canceled // stop the metrics server with the exporter
		}
		return err
	})
	if err := g.Wait(); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}

// ConvertFiles converts each named file ("-" is stdin) to out, reporting
// each bad record through bad and each file that cannot be read through
// unreadable, and returns the totals.
func (c Converter) ConvertFiles(names []string, stdin io.Reader, out io.Writer, bad func(name string, line int, msg string), unreadable func(name string, err error)) Counts {
	var total Counts
	for _, name := range names {
		n, err := c.convertFile(name, stdin, out, bad)
		total.In += n.In
		total.Out += n.Out
		total.Skipped += n.Skipped
		total.Bad += n.Bad
		total.Dropped += n.Dropped
		if err != nil {
			unreadable(name, err)
		}
	}
	return total
}

func (c Converter) convertFile(name string, stdin io.Reader, out io.Writer, bad func(string, int, string)) (Counts, error) {
	r := stdin
	if name != "-" {
		f, err := os.Open(name)
		if err != nil {
			return Counts{}, err
		}
		defer f.Close()
		r = f
	}
	return c.Run(r, out, func(line int, msg string) { bad(name, line, msg) })
}

// Headers is a repeatable K=V flag naming HTTP headers for every request
// to a receiver; K=@FILE reads V from FILE, keeping a credential out of
// the process arguments.
type Headers map[string]string

func (h *Headers) String() string { return "" }

// Set adds one K=V.
func (h *Headers) Set(v string) error {
	k, val, ok := strings.Cut(v, "=")
	if !ok || strings.TrimSpace(k) == "" {
		return errors.New("want K=V")
	}
	if name, ok := strings.CutPrefix(val, "@"); ok {
		b, err := os.ReadFile(name)
		if err != nil {
			return err
		}
		val = strings.TrimSpace(string(b))
	}
	if *h == nil {
		*h = make(Headers)
	}
	(*h)[strings.TrimSpace(k)] = val
	return nil
}

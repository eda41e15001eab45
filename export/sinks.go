package export

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"sync"

	"google.golang.org/protobuf/proto"

	"github.com/aep-kimi/aep-kimi/aep"
	"github.com/aep-kimi/aep-kimi/internal/defaults"
	"github.com/aep-kimi/aep-kimi/internal/safefile"
)

// post sends one body and classifies the answer (see statusError).
func post(ctx context.Context, c *http.Client, url, contentType string, headers map[string]string, body []byte) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return &PermanentError{Err: err}
	}
	req.Header.Set("Content-Type", contentType)
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	if c == nil {
		c = http.DefaultClient
	}
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	return statusError(resp)
}

// records converts events with conv, counting those outside its scope.
func records(conv Converter, events []*aep.Event) ([][]byte, int, error) {
	out := make([][]byte, 0, len(events))
	skipped := 0
	for _, e := range events {
		b, err := conv.Event(e)
		if err != nil {
			// Out of scope or unmappable: either way there is no record.
			skipped++
			continue
		}
		out = append(out, b)
	}
	return out, skipped, nil
}

// PostSink POSTs each record on its own (CloudEvents structured mode, or
// one OCSF record as JSON).
type PostSink struct {
	URL         string
	ContentType string
	Headers     map[string]string
	Conv        Converter
	Client      *http.Client
}

// Prepare implements Sink.
func (s *PostSink) Prepare(events []*aep.Event) (Delivery, int, error) {
	recs, skipped, err := records(s.Conv, events)
	return &postDelivery{s: s, recs: recs}, skipped, err
}

type postDelivery struct {
	s    *PostSink
	recs [][]byte
	next int
}

func (d *postDelivery) Send(ctx context.Context) error {
	for d.next < len(d.recs) {
		if err := post(ctx, d.s.Client, d.s.URL, d.s.ContentType, d.s.Headers, d.recs[d.next]); err != nil {
			return err
		}
		d.next++
	}
	return nil
}

// Signal selects what the OTLP exporter sends.
type Signal int

// Signals.
const (
	SignalLogs Signal = 1 << iota
	SignalTraces
	SignalBoth = SignalLogs | SignalTraces
)

// ParseSignal reads logs, traces or both.
func ParseSignal(s string) (Signal, error) {
	switch s {
	case "logs":
		return SignalLogs, nil
	case "traces":
		return SignalTraces, nil
	case "both":
		return SignalBoth, nil
	}
	return 0, fmt.Errorf("unknown signal %q (want logs, traces or both)", s)
}

// OTLP paths under an OTLP/HTTP endpoint.
const (
	OTLPLogsPath   = "/v1/logs"
	OTLPTracesPath = "/v1/traces"
	otlpProtobuf   = "application/x-protobuf"
)

// String names the signal as ParseSignal reads it.
func (s Signal) String() string {
	switch s {
	case SignalLogs:
		return "logs"
	case SignalTraces:
		return "traces"
	case SignalBoth:
		return "both"
	}
	return fmt.Sprintf("Signal(%d)", int(s))
}

// refusesSignal reports whether err is a receiver saying it has nothing at
// a signal's path (no such route, method or feature) rather than refusing
// one batch: Jaeger, for one, takes traces and answers 404 to logs.
func refusesSignal(err error) bool {
	var st *StatusError
	if !errors.As(err, &st) {
		return false
	}
	switch st.Code {
	case http.StatusNotFound, http.StatusMethodNotAllowed, http.StatusNotImplemented:
		return true
	}
	return false
}

// OTLPSink sends OTLP/HTTP protobuf to a collector or backend. Of two
// signals, one the endpoint refuses (refusesSignal) is dropped for good with
// one warning and the other keeps flowing; the last signal left is never
// dropped that way, its refusals drop batches as any sink's do.
type OTLPSink struct {
	// Endpoint is the base URL (http://host:4318); the signal paths are
	// appended. TracesEndpoint, when set, is the full traces URL instead
	// (a traces-only backend with its own path).
	Endpoint, TracesEndpoint string
	Signal                   Signal
	Headers                  map[string]string
	MaxCapture               aep.Capture
	ServiceName              string
	Client                   *http.Client
	// Traces builds spans; it is created on first use when Signal asks for
	// traces.
	Traces *Tracer
	// Log receives the warning when a signal is dropped.
	Log  *slog.Logger
	once sync.Once
	// mu guards refused: the signals the endpoint refused.
	mu      sync.Mutex
	refused Signal
	// labels names the sessions of log records; like Traces, it is used
	// by Prepare alone.
	labels sessionLabels
}

// active is what the sink still sends.
func (s *OTLPSink) active() Signal {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.Signal &^ s.refused
}

// dropRefused drops sig when err says the endpoint refuses it and another
// signal still flows, warning once; it reports whether sig is dropped.
func (s *OTLPSink) dropRefused(sig Signal, url string, err error) bool {
	if !refusesSignal(err) {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.refused&sig != 0 {
		return true
	}
	rest := s.Signal &^ s.refused &^ sig
	if rest == 0 {
		return false
	}
	s.refused |= sig
	if s.Log != nil {
		s.Log.Warn("export: the endpoint refuses "+sig.String()+"; dropping them and sending "+rest.String()+" only",
			"url", url, "err", err)
	}
	return true
}

// Prepare implements Sink.
func (s *OTLPSink) Prepare(events []*aep.Event) (Delivery, int, error) {
	d := &otlpDelivery{s: s}
	skipped := 0
	active := s.active()
	if active&SignalLogs != 0 {
		b := LogsBatch{ServiceName: s.ServiceName}
		for _, e := range events {
			s.labels.observe(e, s.MaxCapture)
			lr, err := LogRecord(e, s.MaxCapture)
			if err != nil {
				skipped++
				continue
			}
			if l := s.labels.label(e); l != "" {
				lr.Attributes = append(lr.Attributes, strKV(AttrSessionLabel, l))
			}
			b.Add(e.Agent, lr)
			if er, ok := EvaluationRecord(e, s.MaxCapture); ok {
				b.Add(e.Agent, er)
			}
		}
		if b.Len() > 0 {
			body, err := proto.Marshal(b.Data())
			if err != nil {
				return nil, 0, err
			}
			d.parts = append(d.parts, otlpPart{signal: SignalLogs, url: strings.TrimSuffix(s.Endpoint, "/") + OTLPLogsPath, body: body})
		}
	}
	if active&SignalTraces != 0 {
		s.once.Do(func() {
			if s.Traces == nil {
				s.Traces = &Tracer{MaxCapture: s.MaxCapture, ServiceName: s.ServiceName}
			}
		})
		td := s.Traces.Add(events)
		if len(td.ResourceSpans) > 0 {
			body, err := proto.Marshal(td)
			if err != nil {
				return nil, 0, err
			}
			u := s.TracesEndpoint
			if u == "" {
				u = strings.TrimSuffix(s.Endpoint, "/") + OTLPTracesPath
			}
			d.parts = append(d.parts, otlpPart{signal: SignalTraces, url: u, body: body})
		}
	}
	return d, skipped, nil
}

type otlpPart struct {
	signal Signal
	url    string
	body   []byte
}

type otlpDelivery struct {
	s     *OTLPSink
	parts []otlpPart
}

func (d *otlpDelivery) Send(ctx context.Context) error {
	for len(d.parts) > 0 {
		p := d.parts[0]
		if err := post(ctx, d.s.Client, p.url, otlpProtobuf, d.s.Headers, p.body); err != nil && !d.s.dropRefused(p.signal, p.url, err) {
			return fmt.Errorf("%s: %w", p.url, err)
		}
		d.parts = d.parts[1:]
	}
	return nil
}

// File sink defaults.
const (
	// DefaultRotateBytes is the size at which an NDJSON file rotates.
	DefaultRotateBytes = 64 << 20
	// DefaultRotateKeep is how many rotated files are kept (FILE.1 newest).
	DefaultRotateKeep = 5
)

// FileSink appends one record per line to a file a SIEM agent can tail,
// fsyncing each batch and rotating by size (FILE -> FILE.1 -> ...).
type FileSink struct {
	Path string
	Conv Converter
	// MaxBytes and Keep default to DefaultRotateBytes and DefaultRotateKeep.
	MaxBytes int64
	Keep     int

	mu   sync.Mutex
	f    *os.File
	size int64
}

// Prepare implements Sink.
func (s *FileSink) Prepare(events []*aep.Event) (Delivery, int, error) {
	recs, skipped, err := records(s.Conv, events)
	var buf bytes.Buffer
	for _, r := range recs {
		buf.Write(r)
		buf.WriteByte('\n')
	}
	return &fileDelivery{s: s, buf: buf.Bytes()}, skipped, err
}

type fileDelivery struct {
	s   *FileSink
	buf []byte
}

func (d *fileDelivery) Send(context.Context) error {
	if len(d.buf) == 0 {
		return nil
	}
	if err := d.s.write(d.buf); err != nil {
		return err
	}
	d.buf = nil
	return nil
}

func (s *FileSink) write(b []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	max := s.MaxBytes
	defaults.SetPositive(&max, DefaultRotateBytes)
	if err := s.open(); err != nil {
		return err
	}
	if s.size > 0 && s.size+int64(len(b)) > max {
		if err := s.rotate(); err != nil {
			return err
		}
		if err := s.open(); err != nil {
			return err
		}
	}
	n, err := s.f.Write(b)
	s.size += int64(n)
	if err == nil {
		err = s.f.Sync()
	}
	return err
}

// open opens the file for appending (0600, never through a symlink) unless
// it is open.
func (s *FileSink) open() error {
	if s.f != nil {
		return nil
	}
	f, err := safefile.OpenFile(s.Path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return err
	}
	s.f, s.size = f, st.Size()
	return nil
}

// rotate shifts FILE.k to FILE.k+1 (dropping the oldest), FILE to FILE.1.
func (s *FileSink) rotate() error {
	keep := s.Keep
	defaults.SetPositive(&keep, DefaultRotateKeep)
	if err := s.f.Close(); err != nil {
		return err
	}
	s.f = nil
	for i := keep - 1; i >= 1; i-- {
		if err := os.Rename(fmt.Sprintf("%s.%d", s.Path, i), fmt.Sprintf("%s.%d", s.Path, i+1)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	return os.Rename(s.Path, s.Path+".1")
}

// Close closes the current file.
func (s *FileSink) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.f == nil {
		return nil
	}
	err := s.f.Close()
	s.f = nil
	return err
}

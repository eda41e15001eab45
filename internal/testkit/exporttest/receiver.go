// Package exporttest is a real OTLP/HTTP receiver for tests: it decodes what
// it is sent with the official OpenTelemetry protobuf types.
package exporttest

import (
	"io"
	"net/http"
	"net/http/httptest"
	"sync"

	logspb "go.opentelemetry.io/proto/otlp/logs/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// Receiver serves /v1/logs and /v1/traces (protobuf) on a loopback port.
type Receiver struct {
	URL string

	srv      *httptest.Server
	mu       sync.Mutex
	failNext int
	refused  map[string]int
	requests map[string]int
	logs     []*logspb.LogRecord
	spans    []*tracepb.Span
	headers  []http.Header
}

// NewReceiver starts a receiver that answers 503 to its first failFirst
// requests; Close stops it.
func NewReceiver(failFirst int) *Receiver {
	r := &Receiver{failNext: failFirst}
	r.srv = httptest.NewServer(r)
	r.URL = r.srv.URL
	return r
}

// Refuse makes the receiver answer status to every request for path (a
// backend without that signal: Jaeger answers 404 on /v1/logs).
func (r *Receiver) Refuse(path string, status int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.refused == nil {
		r.refused = map[string]int{}
	}
	r.refused[path] = status
}

// Requests counts the requests for path so far, answered or not.
func (r *Receiver) Requests(path string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.requests[path]
}

// Close stops the server.
func (r *Receiver) Close() { r.srv.Close() }

func (r *Receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.headers = append(r.headers, req.Header.Clone())
	if r.requests == nil {
		r.requests = map[string]int{}
	}
	r.requests[req.URL.Path]++
	if status, ok := r.refused[req.URL.Path]; ok {
		http.Error(w, "refused", status)
		return
	}
	if r.failNext > 0 {
		r.failNext--
		http.Error(w, "busy", http.StatusServiceUnavailable)
		return
	}
	if req.Header.Get("Content-Type") != "application/x-protobuf" {
		http.Error(w, "content type", http.StatusUnsupportedMediaType)
		return
	}
	switch req.URL.Path {
	case "/v1/logs":
		var d logspb.LogsData
		if err := proto.Unmarshal(body, &d); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		for _, rl := range d.ResourceLogs {
			for _, sl := range rl.ScopeLogs {
				r.logs = append(r.logs, sl.LogRecords...)
			}
		}
	case "/v1/traces":
		var d tracepb.TracesData
		if err := proto.Unmarshal(body, &d); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		for _, rs := range d.ResourceSpans {
			for _, ss := range rs.ScopeSpans {
				r.spans = append(r.spans, ss.Spans...)
			}
		}
	default:
		http.NotFound(w, req)
		return
	}
	w.Header().Set("Content-Type", "application/x-protobuf")
}

// Logs returns the log records received so far.
func (r *Receiver) Logs() []*logspb.LogRecord {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]*logspb.LogRecord(nil), r.logs...)
}

// Spans returns the spans received so far.
func (r *Receiver) Spans() []*tracepb.Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]*tracepb.Span(nil), r.spans...)
}

// Headers returns the request headers received so far.
func (r *Receiver) Headers() []http.Header {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]http.Header(nil), r.headers...)
}

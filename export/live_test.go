package export

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"

	"github.com/aep-kimi/aep-kimi/aep"
	"github.com/aep-kimi/aep-kimi/internal/testkit/aeptest"
	"github.com/aep-kimi/aep-kimi/internal/testkit/exporttest"
	"github.com/aep-kimi/aep-kimi/internal/testkit/poll"
	"github.com/aep-kimi/aep-kimi/internal/testkit/relaytest"
	"github.com/aep-kimi/aep-kimi/internal/testkit/syncbuf"
	"github.com/aep-kimi/aep-kimi/relay"
	"github.com/aep-kimi/aep-kimi/relay/client"
)

const testToken = "export-test-token-0123456789abcdef"

// waitFor bounds every wait for something that should happen promptly.
const waitFor = 10 * time.Second

func startRelay(t *testing.T) *relaytest.Server {
	t.Helper()
	return relaytest.RunServer(t, relay.Config{Token: testToken})
}

// ev builds a positioned event of session s at seq n, run r.
func ev(s, r string, n int64, typ, subject, data string) *aep.Event {
	e := &aep.Event{
		AEP: aep.Version, ID: aep.NewID(), Type: typ, Subject: subject,
		Time:   aep.FormatTime(time.Date(2026, 7, 3, 10, 0, 0, 0, time.UTC).Add(time.Duration(n) * 250 * time.Millisecond)),
		Source: "aep://test/agent/tester/session/" + s, Agent: "tester", Session: s, Run: r,
		Seq: aep.Int64(n), Epoch: aep.Int64(0),
	}
	if data != "" {
		e.Data = []byte(data)
	}
	return e
}

// logIDs are the aep.event_id attributes of what rcv received.
func logIDs(rcv *exporttest.Receiver) []string {
	var ids []string
	for _, lr := range rcv.Logs() {
		ids = append(ids, kvMap(lr.Attributes)["aep.event_id"].(string))
	}
	return ids
}

// tlog sends exporter logs to the test log.
type tlog struct{ t *testing.T }

func (w tlog) Write(b []byte) (int, error) { w.t.Log(string(bytes.TrimSpace(b))); return len(b), nil }

// runLive runs l until the returned stop is called.
func runLive(t *testing.T, l *Live) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- l.Run(ctx) }()
	return func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Live.Run: %v", err)
		}
	}
}

// TestLiveOTLPResume exports logs and traces from a real relay to a real
// OTLP/HTTP receiver through a refused first attempt, then stops the
// exporter, adds events (one to a session it knows, two to one it has never
// seen) and restarts it: every event arrives exactly once.
func TestLiveOTLPResume(t *testing.T) {
	srv := startRelay(t)
	rcv := exporttest.NewReceiver(1)
	defer rcv.Close()
	state := filepath.Join(t.TempDir(), "state.json")
	newLive := func() *Live {
		return &Live{
			Relay: srv.URL, Token: testToken, StatePath: state,
			Sink:       &OTLPSink{Endpoint: rcv.URL, Signal: SignalBoth, MaxCapture: DefaultMaxCapture, Headers: map[string]string{"X-Scope": "team-a"}},
			BackoffMin: 10 * time.Millisecond, BackoffMax: 50 * time.Millisecond,
			Log: slog.New(slog.NewTextHandler(tlog{t}, nil)),
		}
	}
	first := []*aep.Event{
		ev("s1", "r1", 0, "run.started", "", `{"trigger":"user"}`),
		ev("s1", "r1", 1, "tool.requested", "Bash", `{"tool":{"name":"Bash","call_id":"c1"}}`),
		ev("s1", "r1", 2, "tool.completed", "Bash", `{"tool":{"name":"Bash","call_id":"c1"},"status":"success","gen_ai.usage.input_tokens":5}`),
		ev("s1", "r1", 3, "run.finished", "", `{"status":"success"}`),
	}
	srv.Post(t, first...)
	stop := runLive(t, newLive())
	poll.Must(t, waitFor, "the first four log records", func() bool { return len(rcv.Logs()) >= 4 })
	poll.Must(t, waitFor, "the run's two spans", func() bool { return len(rcv.Spans()) >= 2 })
	// Delivery is at least once: stopped between the receiver's ack and the
	// saved position, the exporter would send that batch again. Stop it once
	// the position is saved, so a duplicate here can only be a resume bug.
	poll.Must(t, waitFor, "the first run's position saved", func() bool {
		st, err := client.LoadTailState(state)
		if err != nil {
			return false
		}
		for _, p := range st.From().Positions {
			if p.Session == "s1" && p.Position.Seq == 3 {
				return true
			}
		}
		return false
	})
	stop()

	spans := rcv.Spans()
	var runSpan, toolSpan *tracepb.Span
	for _, sp := range spans {
		switch sp.Name {
		case "invoke_agent tester":
			runSpan = sp
		case "execute_tool Bash":
			toolSpan = sp
		}
	}
	if runSpan == nil || toolSpan == nil {
		t.Fatalf("spans %v", spans)
	}
	if !bytes.Equal(toolSpan.ParentSpanId, runSpan.SpanId) || !bytes.Equal(toolSpan.TraceId, runSpan.TraceId) {
		t.Errorf("tool span not a child of the run span")
	}
	if got := time.Duration(runSpan.EndTimeUnixNano - runSpan.StartTimeUnixNano); got != 750*time.Millisecond {
		t.Errorf("run span lasted %v, want the events' 750ms", got)
	}
	if a := kvMap(toolSpan.Attributes); a["gen_ai.tool.call.id"] != "c1" || a["gen_ai.usage.input_tokens"] != int64(5) {
		t.Errorf("tool span attributes %v", a)
	}
	if h := rcv.Headers()[0].Get("X-Scope"); h != "team-a" {
		t.Errorf("--header not sent: %q", h)
	}

	later := []*aep.Event{
		ev("s1", "r2", 4, "run.started", "", ""),
		ev("s2", "r9", 0, "run.started", "", ""),
		ev("s2", "r9", 1, "run.finished", "", ""),
	}
	srv.Post(t, later...)
	stop = runLive(t, newLive())
	poll.Must(t, waitFor, "all seven log records", func() bool { return len(rcv.Logs()) >= 7 })
	// An event posted now reaches the exporter live, after whatever its
	// resume replays: once it is delivered, a duplicate would have been.
	sentinel := ev("s3", "r1", 0, "run.started", "", "")
	srv.Post(t, sentinel)
	poll.Must(t, waitFor, "the event posted last", func() bool { return slices.Contains(logIDs(rcv), sentinel.ID) })
	stop()
	ids := logIDs(rcv)
	want := map[string]bool{}
	for _, e := range append(append(first, later...), sentinel) {
		want[e.ID] = true
	}
	seen := map[string]bool{}
	for _, id := range ids {
		if seen[id] {
			t.Errorf("event %s delivered twice", id)
		}
		seen[id] = true
		if !want[id] {
			t.Errorf("unexpected event %s", id)
		}
	}
	if len(seen) != len(want) {
		t.Errorf("delivered %d distinct events, want %d", len(seen), len(want))
	}
}

// TestLiveCE posts each event as a structured-mode CloudEvent; the receiver
// maps it back to the original event.
// ceReceiver takes structured-mode CloudEvents on a loopback port; got is
// the AEP events they carry, so far, in order.
func ceReceiver(t *testing.T) (url string, got func() []*aep.Event) {
	t.Helper()
	var mu sync.Mutex
	var evs []*aep.Event
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if r.Header.Get("Content-Type") != CEContentType {
			http.Error(w, "content type", http.StatusUnsupportedMediaType)
			return
		}
		e, _, err := FromCE(b)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		mu.Lock()
		evs = append(evs, e)
		mu.Unlock()
	}))
	t.Cleanup(hs.Close)
	return hs.URL, func() []*aep.Event { mu.Lock(); defer mu.Unlock(); return append([]*aep.Event(nil), evs...) }
}

func TestLiveCE(t *testing.T) {
	srv := startRelay(t)
	url, received := ceReceiver(t)
	in := []*aep.Event{ev("c1", "r1", 0, "run.started", "", `{"trigger":"user"}`), ev("c1", "r1", 1, "run.finished", "", "")}
	srv.Post(t, in...)
	stop := runLive(t, &Live{Relay: srv.URL, Token: testToken, Sink: &PostSink{URL: url, ContentType: CEContentType, Conv: Converter{Mode: ModeCE}}})
	poll.Must(t, waitFor, "two CloudEvents", func() bool { return len(received()) >= 2 })
	stop()
	got := received()
	for i, e := range in {
		a, _ := e.MarshalJSON()
		b, _ := got[i].MarshalJSON()
		if aeptest.Canon(t, a) != aeptest.Canon(t, b) {
			t.Errorf("event %d:\n got %s\nwant %s", i, b, a)
		}
	}
}

// TestLiveOCSFFile appends OCSF records to a rotated file, skipping the
// families §4.2 does not map.
func TestLiveOCSFFile(t *testing.T) {
	srv := startRelay(t)
	dir := t.TempDir()
	out := filepath.Join(dir, "ocsf.ndjson")
	var in []*aep.Event
	for i := range 6 {
		in = append(in, ev("o1", "r1", int64(2*i), "tool.requested", "Bash", fmt.Sprintf(`{"tool":{"name":"Bash","call_id":"c%d"}}`, i)))
		in = append(in, ev("o1", "r1", int64(2*i+1), "progress.status", "", `{"message":"x"}`))
	}
	srv.Post(t, in...)
	sink := &FileSink{Path: out, Conv: Converter{Mode: ModeOCSF, MaxCapture: DefaultMaxCapture}, MaxBytes: 1500, Keep: 10}
	defer sink.Close()
	stop := runLive(t, &Live{Relay: srv.URL, Token: testToken, Sink: sink, BatchSize: 1})
	count := func() int {
		n := 0
		files, _ := filepath.Glob(out + "*")
		for _, f := range files {
			b, _ := os.ReadFile(f)
			n += bytes.Count(b, []byte("\n"))
		}
		return n
	}
	poll.Must(t, waitFor, "six OCSF records", func() bool { return count() >= 6 })
	stop()
	if n := count(); n != 6 {
		t.Errorf("%d records, want 6 (progress.status has no OCSF class)", n)
	}
	if _, err := os.Stat(out + ".1"); err != nil {
		t.Errorf("no rotation at 1500 bytes: %v", err)
	}
	st, err := os.Stat(out)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("output file mode: %v %v", st, err)
	}
}

// TestLiveOTLPSignalRefused sends both signals to an endpoint that has no
// route for one of them (Jaeger answers 404 on /v1/logs): the refused
// signal is dropped after its first refusal with one warning, and every
// batch's other signal arrives, the first batch's included.
func TestLiveOTLPSignalRefused(t *testing.T) {
	for _, tc := range []struct {
		path   string
		status int
	}{
		{OTLPLogsPath, http.StatusNotFound},
		{OTLPLogsPath, http.StatusMethodNotAllowed},
		{OTLPLogsPath, http.StatusNotImplemented},
		{OTLPTracesPath, http.StatusNotFound},
	} {
		t.Run(fmt.Sprintf("%s_%d", tc.path, tc.status), func(t *testing.T) {
			srv := startRelay(t)
			rcv := exporttest.NewReceiver(0)
			defer rcv.Close()
			rcv.Refuse(tc.path, tc.status)
			var logs syncbuf.Buffer
			// What `up --otlp` and `export otlp --signal both` build.
			sink, _, err := SinkConfig{Mode: NameOTLP, Endpoint: rcv.URL, Signal: "both", Conv: Converter{MaxCapture: DefaultMaxCapture},
				Log: slog.New(slog.NewTextHandler(&logs, nil))}.Build()
			if err != nil {
				t.Fatal(err)
			}
			reg := prometheus.NewRegistry()
			stop := runLive(t, &Live{Relay: srv.URL, Token: testToken, Sink: sink, Metrics: NewMetrics(reg, NameOTLP),
				BackoffMin: 10 * time.Millisecond, BackoffMax: 50 * time.Millisecond,
				Log: slog.New(slog.NewTextHandler(io.MultiWriter(&logs, tlog{t}), nil))})
			defer stop()
			// Two batches: the refusal comes with the first, the second
			// must not ask again.
			srv.Post(t, ev("s1", "r1", 0, "run.started", "", `{"trigger":"user"}`), ev("s1", "r1", 1, "run.finished", "", `{"status":"success"}`))
			other := func() int { return len(rcv.Spans()) }
			if tc.path == OTLPTracesPath {
				other = func() int { return len(rcv.Logs()) }
			}
			poll.Must(t, waitFor, "the first batch's other signal", func() bool { return other() >= 1 })
			srv.Post(t, ev("s1", "r2", 2, "run.started", "", `{"trigger":"user"}`), ev("s1", "r2", 3, "run.finished", "", `{"status":"success"}`))
			want := 2 // spans: one per run
			if tc.path == OTLPTracesPath {
				want = 4 // log records: one per event
			}
			poll.Must(t, waitFor, "the second batch's other signal", func() bool { return other() >= want })
			if n := rcv.Requests(tc.path); n != 1 {
				t.Errorf("%d requests for the refused %s, want 1", n, tc.path)
			}
			if n := strings.Count(logs.String(), "level=WARN"); n != 1 {
				t.Errorf("%d warnings, want one:\n%s", n, logs.String())
			}
			if !strings.Contains(logs.String(), "refuses") || strings.Contains(logs.String(), "dropped") {
				t.Errorf("the warning does not say the signal is refused, or events were dropped:\n%s", logs.String())
			}
			mfs, err := reg.Gather()
			if err != nil {
				t.Fatal(err)
			}
			for _, mf := range mfs {
				if mf.GetName() == "aepkimi_export_dropped_total" && mf.GetMetric()[0].GetCounter().GetValue() != 0 {
					t.Errorf("%v events counted dropped", mf.GetMetric()[0].GetCounter().GetValue())
				}
			}
		})
	}
}

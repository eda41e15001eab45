package relay

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/aep-kimi/aep-kimi/aep"
	"github.com/aep-kimi/aep-kimi/internal/testkit/fixtures"
)

const benchSubs = 100

// benchEvent is a typical ~380-byte event (the golden corpus averages 375).
func benchEvent(b testing.TB, session string, seq int64) *Message {
	e := &aep.Event{
		AEP: aep.Version, ID: aep.NewID(), Type: "tool.completed", Subject: "Bash",
		Time: aep.FormatTime(time.Now()), Source: "aep://host-a/agent/kimi-code/session/" + session,
		Agent: "kimi-code", Session: session, Run: "r_0042", Step: "turn-3",
		Seq: aep.Int64(seq), Epoch: aep.Int64(0), Severity: "notice", Capture: "metadata",
		Data: []byte(`{"tool":{"name":"Bash","call_id":"t_91"},"status":"success","duration_ms":1221,"result_digest":"a3f9c2d1e8b7a6f5a3f9c2d1e8b7a6f5"}`),
	}
	raw, err := e.MarshalJSON()
	if err != nil {
		b.Fatal(err)
	}
	ev, err := aep.ParseEvent(raw)
	if err != nil {
		b.Fatal(err)
	}
	m, err := NewMessage(ev, time.Now())
	if err != nil {
		b.Fatal(err)
	}
	return m
}

// BenchmarkFanout100 measures the relay's fan-out core: ingest into the
// in-memory backend (admission, buffering, filter matching, non-blocking
// enqueue) and 100 SSE writers framing every delivery into a buffered
// writer. Sockets are left out (the load tool in bench/relay covers them).
// Compare with BenchmarkRawFanout100, plain channels carrying the same
// bytes in the same frames.
func BenchmarkFanout100(b *testing.B) { benchFanout100(b, nil, 1) }

// benchFanout100 runs the fan-out benchmark over backend (nil: memory),
// ingesting batch events per Ingest call.
func benchFanout100(b *testing.B, backend Backend, batch int) {
	srv, err := NewServer(Config{QueueSize: 4096, Backend: backend})
	if err != nil {
		b.Fatal(err)
	}
	msgs := make([]*Message, 4096)
	for i := range msgs {
		msgs[i] = benchEvent(b, fmt.Sprintf("s%d", i%8), int64(i))
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	subs := benchWriters(b, ctx, srv, &wg, `{"type":["tool.*","run.*"],"severity":{"gte":"info"}}`, false)
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	session := ""
	pending := make([]*Message, 0, batch)
	for i := 0; i < b.N; i++ {
		if i%len(msgs) == 0 {
			// A fresh session per round keeps admission honest: the
			// reused bytes are never duplicates where they are held.
			session = fmt.Sprintf("round-%d", i/len(msgs))
		}
		m := *msgs[i%len(msgs)]
		m.Session = session
		if pending = append(pending, &m); len(pending) == batch || i == b.N-1 {
			srv.backend.Ingest(pending)
			pending = make([]*Message, 0, batch)
		}
		if i%64 == 0 {
			// Pace like a network would: never let a queue overflow.
			for _, s := range subs {
				for s.q.queued() > srv.cfg.QueueSize/2 {
					runtime.Gosched()
				}
			}
		}
	}
	for _, s := range subs {
		for s.q.queued() > 0 {
			runtime.Gosched()
		}
	}
	elapsed := time.Since(start)
	b.StopTimer()
	for _, s := range subs {
		if s.q.overflowed() {
			b.Fatal("a subscriber overflowed")
		}
	}
	cancel()
	wg.Wait()
	b.ReportMetric(float64(b.N)*benchSubs/elapsed.Seconds(), "deliveries/s")
}

// benchWriters subscribes benchSubs SSE writers with filter, each writing
// into a discarding buffer on its own goroutine (counted in wg) until ctx
// ends, as serveStream's writers do minus the socket. shared subscribes
// them as serveStream does, one filter group for all.
func benchWriters(b *testing.B, ctx context.Context, srv *Server, wg *sync.WaitGroup, filter string, shared bool) []*subscription {
	subs := make([]*subscription, benchSubs)
	for i := range subs {
		q := newOutQueue(srv.cfg.QueueSize, srv.metrics)
		subs[i] = newSubscription("", q, 0, 0)
		f, _ := aep.ParseFilter([]byte(filter))
		req := SubscribeRequest{Filter: f}
		if shared {
			req.filterKey = filter
		}
		stop, _ := srv.backend.Subscribe(req, subs[i])
		b.Cleanup(stop)
		<-q.wake
		q.take(nil) // the (empty) replay
		sw := &sseWriter{srv: srv, out: bufio.NewWriterSize(io.Discard, 64<<10), sub: subs[i], ctx: ctx}
		wg.Add(1)
		go func() {
			defer wg.Done()
			var items []outItem
			for {
				select {
				case <-q.wake:
					items = q.take(items)
					_ = sw.deliverAll(items)
					items = release(items)
				case <-ctx.Done():
					return
				}
			}
		}()
	}
	return subs
}

// BenchmarkServeIngest10 is one POST /events of 10 events, through the
// relay's handler, fanned out to 100 writers of one session's stream: the
// 10,000 events/s load's unit of work. Its allocations per batch are what
// drives the relay's garbage collection under that load.
func BenchmarkServeIngest10(b *testing.B) {
	srv, err := NewServer(Config{})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	subs := benchWriters(b, ctx, srv, &wg, `{"session":"s"}`, true)
	defer func() { cancel(); wg.Wait() }()
	h := srv.Handler()
	bodies := make([][]byte, 64)
	for i := range bodies {
		for k := range 10 {
			bodies[i] = append(append(bodies[i], benchEvent(b, "s", int64(i*10+k)).Raw...), '\n')
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		if i%len(bodies) == 0 {
			// Fresh ids: the same bytes again would be duplicates.
			b.StopTimer()
			for j := range bodies {
				bodies[j] = bodies[j][:0]
				for k := range 10 {
					bodies[j] = append(append(bodies[j], benchEvent(b, "s", int64((i+j)*10+k)).Raw...), '\n')
				}
			}
			for _, s := range subs {
				for s.q.queued() > 0 {
					runtime.Gosched()
				}
			}
			b.StartTimer()
		}
		req := httptest.NewRequest(http.MethodPost, "http://127.0.0.1/events", bytes.NewReader(bodies[i%len(bodies)]))
		req.RemoteAddr = "127.0.0.1:1"
		req.Header.Set("Content-Type", "application/x-ndjson")
		req.Header.Set("AEP-Version", aep.Version)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != http.StatusAccepted {
			b.Fatalf("HTTP %d %s", rec.Code, rec.Body)
		}
	}
}

// BenchmarkRawFanout100 is the baseline: the same bytes through 100
// buffered channels to 100 goroutines writing the same SSE frames.
func BenchmarkRawFanout100(b *testing.B) {
	m := benchEvent(b, "s", 0)
	var wg sync.WaitGroup
	chans := make([]chan []byte, benchSubs)
	for i := range chans {
		chans[i] = make(chan []byte, 4096)
		wg.Add(1)
		go func(ch chan []byte) {
			defer wg.Done()
			out := bufio.NewWriterSize(io.Discard, 64<<10)
			for raw := range ch {
				_, _ = out.WriteString("id: s:0:1\nevent: tool.completed\ndata: ")
				_, _ = out.Write(raw)
				_, _ = out.WriteString("\n\n")
				if len(ch) == 0 {
					_ = out.Flush()
				}
			}
		}(chans[i])
	}
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		for _, ch := range chans {
			ch <- m.Raw
		}
	}
	for _, ch := range chans {
		close(ch)
	}
	wg.Wait()
	b.ReportMetric(float64(b.N)*benchSubs/time.Since(start).Seconds(), "deliveries/s")
}

// BenchmarkBufferMemory measures heap bytes per held event against the
// event's JSON size, with full buffers (10 sessions x 10,000 events). The
// "typical" case is one ~455-byte tool event; the "golden" case cycles the
// upstream golden corpus (194 to 832 bytes, mean 375) when the fixtures
// (internal/testkit/fixtures: $AEP_FIXTURES or its default) hold it. The baseline in the same run keeps
// the same JSON as exact-size []byte copies, the least any store can use.
func BenchmarkBufferMemory(b *testing.B) {
	golden := goldenTemplates(b)
	cases := []struct {
		name string
		make func(session string, seq int64) *Message
	}{
		{"typical", func(s string, q int64) *Message { return benchEvent(b, s, q) }},
	}
	if len(golden) > 0 {
		cases = append(cases, struct {
			name string
			make func(session string, seq int64) *Message
		}{"golden", func(s string, q int64) *Message {
			e := golden[int(q)%len(golden)].Clone()
			e.ID, e.Session, e.Seq = aep.NewID(), s, aep.Int64(q)
			raw, _ := e.MarshalJSON()
			ev, err := aep.ParseEvent(raw)
			if err != nil {
				b.Fatal(err)
			}
			m, _ := NewMessage(ev, time.Now())
			return m
		}})
	}
	for _, tc := range cases {
		b.Run(tc.name, func(b *testing.B) {
			const sessions, depth = 10, 10000
			for i := 0; i < b.N; i++ {
				var jsonBytes int64
				base := heapInUse()
				be := NewMemoryBackend(depth, sessions)
				for s := range sessions {
					for seq := range depth {
						m := tc.make(fmt.Sprintf("session-%02d", s), int64(seq))
						jsonBytes += int64(len(m.Raw))
						be.Ingest([]*Message{m})
					}
				}
				held := heapInUse() - base
				runtime.KeepAlive(be)

				base = heapInUse()
				raw := make([][]byte, 0, sessions*depth)
				for s := range sessions {
					for seq := range depth {
						m := tc.make(fmt.Sprintf("session-%02d", s), int64(seq))
						raw = append(raw, append([]byte(nil), m.Raw...))
					}
				}
				floor := heapInUse() - base
				runtime.KeepAlive(raw)

				n := float64(sessions * depth)
				b.ReportMetric(float64(jsonBytes)/n, "json-B/event")
				b.ReportMetric(float64(held)/n, "heap-B/event")
				b.ReportMetric(float64(held)/float64(jsonBytes), "x-json")
				b.ReportMetric(float64(floor)/float64(jsonBytes), "baseline-x-json")
			}
		})
	}
}

// goldenTemplates loads the positioned events of the upstream golden corpus.
func goldenTemplates(b *testing.B) []*aep.Event {
	dir, err := fixtures.Dir()
	if err != nil {
		b.Logf("golden case skipped: %v", err)
		return nil
	}
	data, err := os.ReadFile(filepath.Join(dir, "fixtures", "golden", "golden.jsonl"))
	if err != nil {
		b.Logf("golden case skipped: %v", err)
		return nil
	}
	var out []*aep.Event
	for _, l := range bytes.Split(data, []byte("\n")) {
		e, err := aep.ParseEvent(l)
		if err != nil || e.Seq == nil || aep.ScopeOf(e.Type) != aep.ScopeSession {
			continue
		}
		out = append(out, e)
	}
	return out
}

func heapInUse() int64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}

// BenchmarkIngestParse is the per-event ingest cost before fan-out: parse,
// validate and wrap (what POST and the socket do for every event). The
// baseline, BenchmarkMarshalEvent, is a json.Marshal of the same event.
func BenchmarkIngestParse(b *testing.B) {
	raw := benchEvent(b, "s", 1).Raw
	b.SetBytes(int64(len(raw)))
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		ev, err := aep.ParseEvent(raw)
		if err != nil {
			b.Fatal(err)
		}
		if err := aep.Validate(ev); err != nil {
			b.Fatal(err)
		}
		if _, err := NewMessage(ev, time.Time{}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkIngestBatch is what POST /events does with a body of 100
// events before the store sees them (split, size check, ParseEvent,
// CheckEnvelope, NewMessage), per event: the relay checks the envelope only,
// never the payload.
func BenchmarkIngestBatch(b *testing.B) {
	srv, err := NewServer(Config{})
	if err != nil {
		b.Fatal(err)
	}
	var body []byte
	for i := range 100 {
		body = append(append(body, benchEvent(b, "s", int64(i)).Raw...), '\n')
	}
	b.SetBytes(int64(len(body) / 100))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i += 100 {
		if _, herr := srv.parseBody(body, true); herr != nil {
			b.Fatal(herr.body)
		}
	}
}

func BenchmarkMarshalEvent(b *testing.B) {
	var generic map[string]any
	if err := json.Unmarshal(benchEvent(b, "s", 1).Raw, &generic); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if _, err := json.Marshal(generic); err != nil {
			b.Fatal(err)
		}
	}
}

package export

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/aep-kimi/aep-kimi/aep"
	"github.com/aep-kimi/aep-kimi/internal/testkit/exporttest"
	"github.com/aep-kimi/aep-kimi/internal/testkit/poll"
	"github.com/aep-kimi/aep-kimi/internal/testkit/relaytest"
	"github.com/aep-kimi/aep-kimi/relay"
)

// benchEvents is a run's worth of typical events: tool calls with
// metadata-level payloads and token counts.
func benchEvents(n int) []*aep.Event {
	out := make([]*aep.Event, 0, n)
	for i := range n {
		s := fmt.Sprintf("b%d", i/1000)
		seq := int64(i % 1000)
		var e *aep.Event
		switch i % 4 {
		case 0:
			e = ev(s, "r1", seq, "tool.requested", "Shell", fmt.Sprintf(`{"tool":{"name":"Shell","call_id":"c%d"},"args_digest":"a3f9c2d1e8b7a6f5"}`, i))
		case 1:
			e = ev(s, "r1", seq, "tool.completed", "Shell", fmt.Sprintf(`{"tool":{"name":"Shell","call_id":"c%d"},"status":"success","duration_ms":12,"gen_ai.usage.input_tokens":140,"gen_ai.usage.output_tokens":80}`, i-1))
		case 2:
			e = ev(s, "r1", seq, "progress.status", "", `{"message":"working"}`)
		default:
			e = ev(s, "r1", seq, "attention.requested", "Shell", `{"kind":"permission","prompt":"Allow?"}`)
			e.Capture = "redacted"
		}
		out = append(out, e)
	}
	return out
}

// BenchmarkConvert is the per-event mapping cost of each mode, against the
// same-run baseline of parsing and re-serializing the event (what any
// consumer pays to read it). Reported as events/s on one core.
func BenchmarkConvert(b *testing.B) {
	events := benchEvents(1024)
	lines := make([][]byte, len(events))
	for i, e := range events {
		lines[i], _ = e.MarshalJSON()
	}
	run := func(b *testing.B, fn func(line []byte) error) {
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			if err := fn(lines[i%len(lines)]); err != nil {
				b.Fatal(err)
			}
			i++
		}
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
	}
	b.Run("baseline-parse-marshal", func(b *testing.B) {
		run(b, func(l []byte) error {
			e, err := aep.ParseEvent(l)
			if err == nil {
				e.ClearRaw()
				_, err = e.MarshalJSON()
			}
			return err
		})
	})
	for _, m := range []struct {
		name string
		mode Mode
	}{{"ce", ModeCE}, {"otlp-json", ModeOTLP}, {"ocsf", ModeOCSF}} {
		c := Converter{Mode: m.mode, MaxCapture: DefaultMaxCapture}
		b.Run(m.name, func(b *testing.B) {
			run(b, func(l []byte) error {
				_, err := c.Convert(l, func(string) {})
				if err != nil && !isSkip(err) {
					return err
				}
				return nil
			})
		})
	}
	ces := make([][]byte, len(events))
	for i, e := range events {
		ces[i] = ToCE(e)
	}
	b.Run("ce-inverse", func(b *testing.B) {
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			if _, _, err := FromCE(ces[i%len(ces)]); err != nil {
				b.Fatal(err)
			}
			i++
		}
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
	})
	b.Run("otlp-protobuf-batch512", func(b *testing.B) {
		b.ReportAllocs()
		n := 0
		for b.Loop() {
			var lb LogsBatch
			for _, e := range events[:512] {
				lr, err := LogRecord(e, DefaultMaxCapture)
				if err != nil {
					b.Fatal(err)
				}
				lb.Add(e.Agent, lr)
			}
			if _, err := proto.Marshal(lb.Data()); err != nil {
				b.Fatal(err)
			}
			n += 512
		}
		b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "events/s")
	})
	b.Run("traces", func(b *testing.B) {
		b.ReportAllocs()
		n := 0
		for b.Loop() {
			var tr Tracer
			td := tr.Add(events)
			if _, err := proto.Marshal(td); err != nil {
				b.Fatal(err)
			}
			n += len(events)
		}
		b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "events/s")
	})
}

func isSkip(err error) bool { return errors.Is(err, ErrSkip) }

// BenchmarkLive measures each live path end to end: events already in a
// real relay, replayed over SSE to the exporter and delivered to a real
// receiver (OTLP/HTTP protobuf logs and traces, one CloudEvents POST per
// event, or the fsynced OCSF file); events/s from start to the last one
// delivered.
func BenchmarkLive(b *testing.B) {
	const n = 20000
	events := benchEvents(n)
	var ocsfWant int
	for _, e := range events {
		if OCSFProjects(e.Type) {
			ocsfWant++
		}
	}
	type target struct {
		sink      Sink
		delivered func() int
		close     func()
	}
	cases := []struct {
		name string
		want int
		make func(b *testing.B) target
	}{
		{"otlp", n, func(b *testing.B) target {
			rcv := exporttest.NewReceiver(0)
			return target{&OTLPSink{Endpoint: rcv.URL, Signal: SignalBoth, MaxCapture: DefaultMaxCapture}, func() int { return len(rcv.Logs()) }, rcv.Close}
		}},
		{"ce", n, func(b *testing.B) target {
			var got atomic.Int64
			hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				_, _ = io.Copy(io.Discard, r.Body)
				got.Add(1)
			}))
			return target{&PostSink{URL: hs.URL, ContentType: CEContentType, Conv: Converter{Mode: ModeCE}}, func() int { return int(got.Load()) }, hs.Close}
		}},
		{"ocsf-file", ocsfWant, func(b *testing.B) target {
			path := filepath.Join(b.TempDir(), "ocsf.ndjson")
			fs := &FileSink{Path: path, Conv: Converter{Mode: ModeOCSF, MaxCapture: DefaultMaxCapture}}
			return target{fs, func() int {
				data, _ := os.ReadFile(path)
				return bytes.Count(data, []byte("\n"))
			}, func() { _ = fs.Close() }}
		}},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			var total time.Duration
			for b.Loop() {
				b.StopTimer()
				srv := relaytest.RunServer(b, relay.Config{Token: testToken})
				for i := 0; i < n; i += 1000 {
					srv.Post(b, events[i:i+1000]...)
				}
				tg := c.make(b)
				ctx, cancel := context.WithCancel(context.Background())
				l := &Live{Relay: srv.URL, Token: testToken, Sink: tg.sink}
				done := make(chan error, 1)
				b.StartTimer()
				start := time.Now()
				go func() { done <- l.Run(ctx) }()
				// Short bounds keep poll's checks frequent (5 ms) for the timing.
				for !poll.Until(5*time.Second, func() bool { return tg.delivered() >= c.want }) {
					if time.Since(start) > time.Minute {
						b.Fatalf("%d of %d events delivered within a minute", tg.delivered(), c.want)
					}
				}
				total += time.Since(start)
				b.StopTimer()
				cancel()
				<-done
				tg.close()
				_ = srv.Shutdown()
				b.StartTimer()
			}
			b.ReportMetric(float64(n*b.N)/total.Seconds(), "events/s")
		})
	}
}

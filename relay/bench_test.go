package relay_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/aep-kimi/aep-kimi/internal/testkit/relaytest"
	"github.com/aep-kimi/aep-kimi/relay"
)

const latencyRate = 10_000 // events per second

// BenchmarkDeliverLatency10k measures ingest-to-delivery latency over real
// sockets at 10,000 events/s: an emitter socket sends one event per frame,
// paced, and an SSE consumer timestamps each arrival. The baseline in the
// same run is a bare forwarder (socket in, channel, SSE out) carrying the
// same bytes on the same loopback, so the difference is the relay's own
// cost: parse, validate, buffer, filter, frame.
func BenchmarkDeliverLatency10k(b *testing.B) {
	n := min(max(b.N, 100), 200_000)
	srv := relaytest.RunServer(b, relay.Config{})
	base := startForwarder(b)
	b.ResetTimer()
	relayLat := measureLatency(b, srv.URL, n)
	baseLat := measureLatency(b, base, n)
	b.StopTimer()
	report := func(prefix string, l []time.Duration) {
		b.ReportMetric(float64(pct(l, 0.50).Microseconds())/1000, prefix+"p50-ms")
		b.ReportMetric(float64(pct(l, 0.99).Microseconds())/1000, prefix+"p99-ms")
		b.ReportMetric(float64(pct(l, 1).Microseconds())/1000, prefix+"max-ms")
	}
	report("", relayLat)
	report("baseline-", baseLat)
}

// BenchmarkStoreDeliverLatency10k is BenchmarkDeliverLatency10k on each
// store, in the same run: on jetstream each event is on disk before it is
// fanned out.
func BenchmarkStoreDeliverLatency10k(b *testing.B) {
	for _, st := range []struct {
		name string
		open func(b *testing.B) relay.Backend
	}{
		{relay.StoreMemory, func(*testing.B) relay.Backend { return nil }},
		{relay.StoreJetStream, func(b *testing.B) relay.Backend { return openJetStream(b, 0, 0, 0) }},
	} {
		b.Run(st.name, func(b *testing.B) {
			srv := relaytest.RunServer(b, relay.Config{Backend: st.open(b)})
			l := measureLatency(b, srv.URL, min(max(b.N, 100), 200_000))
			b.ReportMetric(float64(pct(l, 0.50).Microseconds())/1000, "p50-ms")
			b.ReportMetric(float64(pct(l, 0.99).Microseconds())/1000, "p99-ms")
			b.ReportMetric(float64(pct(l, 1).Microseconds())/1000, "max-ms")
		})
	}
}

func pct(l []time.Duration, q float64) time.Duration {
	if len(l) == 0 {
		return 0
	}
	return l[min(len(l)-1, int(q*float64(len(l))))]
}

// measureLatency sends n events at latencyRate through base's socket and
// returns the sorted latencies seen on its SSE stream.
func measureLatency(b *testing.B, base string, n int) []time.Duration {
	b.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	session := fmt.Sprintf("lat-%d", time.Now().UnixNano())
	start := time.Now()
	sentAt := make([]atomic.Int64, n)
	lat := make([]time.Duration, 0, n)
	got := make(chan struct{})

	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/stream?filter="+`%7B%22session%22%3A%22`+session+`%22%7D`, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 200 {
		b.Fatalf("stream: %v %v", err, resp)
	}
	defer resp.Body.Close()
	go func() {
		defer close(got)
		br := bufio.NewReaderSize(resp.Body, 64<<10)
		for len(lat) < n {
			l, err := br.ReadSlice('\n')
			if err != nil {
				return
			}
			if !bytes.HasPrefix(l, []byte("id: ")) {
				continue
			}
			l = bytes.TrimRight(l, "\n")
			var seq int
			for _, c := range l[bytes.LastIndexByte(l, ':')+1:] {
				seq = seq*10 + int(c-'0')
			}
			if seq < n {
				lat = append(lat, time.Since(start)-time.Duration(sentAt[seq].Load()))
			}
		}
	}()

	c, _, err := websocket.Dial(ctx, strings.Replace(base, "http", "ws", 1)+"/socket", nil)
	if err != nil {
		b.Fatal(err)
	}
	defer c.CloseNow()
	if err := c.Write(ctx, websocket.MessageText, []byte(`{"type":"hello","versions":["0.1"],"role":"emitter","identity":{"agent":"kimi-code"}}`)); err != nil {
		b.Fatal(err)
	}
	if _, _, err := c.Read(ctx); err != nil {
		b.Fatal(err)
	}
	go func() { // answer nothing, but keep reading so pings never block
		for {
			if _, _, err := c.Read(ctx); err != nil {
				return
			}
		}
	}()
	frames := make([][]byte, n)
	for i := range frames {
		e := mkEvent(session, int64(i), withType("tool.completed"), withSeverity("notice"),
			withData(`{"tool":{"name":"Bash","call_id":"t_91"},"status":"success","duration_ms":1221}`))
		frames[i] = line(b, e)
	}
	pace := time.Now()
	for i := range frames {
		due := time.Duration(i) * time.Second / latencyRate
		if ahead := due - time.Since(pace); ahead > 200*time.Microsecond {
			time.Sleep(ahead) // pacing the sends at latencyRate, not a synchronisation
		}
		sentAt[i].Store(int64(time.Since(start)))
		if err := c.Write(ctx, websocket.MessageText, frames[i]); err != nil {
			b.Fatal(err)
		}
	}
	select {
	case <-got:
	case <-time.After(30 * time.Second):
		b.Fatalf("only %d of %d events arrived", len(lat), n)
	}
	if len(lat) != n {
		b.Fatalf("%d of %d events arrived", len(lat), n)
	}
	slices.Sort(lat)
	return lat
}

// startForwarder serves the baseline, relaytest.Forwarder.
func startForwarder(b *testing.B) string {
	b.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	hs := &http.Server{Handler: relaytest.Forwarder()}
	go func() { _ = hs.Serve(ln) }()
	b.Cleanup(func() { _ = hs.Close() })
	return "http://" + ln.Addr().String()
}

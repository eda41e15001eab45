package relay_test

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/aep-kimi/aep-kimi/aep"
	"github.com/aep-kimi/aep-kimi/internal/testkit/relaytest"
	"github.com/aep-kimi/aep-kimi/relay"
	"github.com/aep-kimi/aep-kimi/relay/client"
)

// bigEvents returns n notice events of about size bytes each.
func bigEvents(session string, n, size int) []*aep.Event {
	pad := strings.Repeat("x", size)
	return seqEvents(session, 0, int64(n), withSeverity("notice"), withData(`{"message":"`+pad+`"}`),
		func(e *aep.Event) { e.Capture = "full" })
}

// A consumer that stops reading is disconnected rather than slowing ingest
// or other consumers, and never loses a notice+ event silently: what it did
// receive is a gap-free prefix, so it can resume exactly.
func TestSlowSSEConsumer(t *testing.T) {
	t.Parallel()
	srv := relaytest.RunServer(t, relay.Config{QueueSize: 64, WriteTimeout: 500 * time.Millisecond})
	fast := openSSE(t, srv, url.Values{"filter": {`{"session":"s-slow"}`}}, nil)

	// The slow consumer: a raw connection that reads nothing until the
	// flood is over.
	conn, err := net.Dial("tcp", srv.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "GET /stream?filter=%s HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", url.QueryEscape(`{"session":"s-slow"}`))
	eventually(t, "both subscribed", func() bool { return srv.Backend().Stats().Subscribers == 2 })

	evs := bigEvents("s-slow", 600, 32<<10) // ~19 MiB: beyond any socket buffering
	for _, ev := range evs {
		mustPost(t, srv, ev) // one at a time: the fast consumer keeps up
	}
	for i := range evs {
		if it := fast.next(t, false); it.ID != fmt.Sprintf("s-slow:0:%d", i) {
			t.Fatalf("fast consumer: got %s at %d", it.ID, i)
		}
	}
	eventually(t, "slow consumer dropped", func() bool { return srv.Backend().Stats().Subscribers == 1 })

	// Read what the slow consumer got: a prefix, then the end of the stream.
	_ = conn.SetReadDeadline(time.Now().Add(waitShort))
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	r := client.NewSSEReader(resp.Body, 0)
	n := 0
	for {
		it, err := r.Next()
		if err != nil {
			break // cut off: EOF, a truncated chunk, or a reset
		}
		if it.IsComment {
			continue
		}
		if want := fmt.Sprintf("s-slow:0:%d", n); it.ID != want || len(it.Data) != len(line(t, evs[n])) {
			t.Fatalf("slow consumer got %s after %d events: a notice event was skipped", it.ID, n)
		}
		n++
	}
	if n >= len(evs) {
		t.Fatalf("slow consumer received everything (%d); the test did not exercise backpressure", n)
	}
	m := do(t, srv, http.MethodGet, "/metrics", nil, nil)
	if !strings.Contains(string(m.body), `aepkimi_relay_drops_total{reason="disconnect"} 1`) {
		t.Fatalf("disconnect not counted:\n%s", grep(string(m.body), "aepkimi_relay_drops_total"))
	}
}

// Toward a slow socket consumer, debug/info is shed (and counted) while
// notice+ is kept; when even that cannot fit the consumer gets a closing
// frame with its positions.
func TestSlowSocketConsumer(t *testing.T) {
	t.Parallel()
	srv := relaytest.RunServer(t, relay.Config{QueueSize: 16, WriteTimeout: 2 * time.Second})
	// A socket whose owner reads nothing until the flood is over.
	ctx, cancel := context.WithTimeout(context.Background(), waitShort)
	defer cancel()
	c, _, err := websocket.Dial(ctx, strings.Replace(srv.URL, "http", "ws", 1)+"/socket", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseNow()
	c.SetReadLimit(64 << 20)
	write := func(s string) {
		if err := c.Write(ctx, websocket.MessageText, []byte(s)); err != nil {
			t.Fatal(err)
		}
	}
	write(`{"type":"hello","versions":["0.1"],"role":"consumer"}`)
	write(`{"type":"subscribe","id":"s","filter":{"session":"s-wslow"}}`)
	eventually(t, "subscribed", func() bool { return srv.Backend().Stats().Subscribers == 1 })

	evs := bigEvents("s-wslow", 600, 32<<10)
	for i := range evs {
		if i%2 == 1 {
			evs[i].Severity = "info"
		}
	}
	for i := 0; i < len(evs); i += 50 {
		mustPost(t, srv, evs[i:i+50]...)
	}
	// Cut off when its queue overflowed (counted then); the closing frame
	// and the close wait on the socket, which only now starts reading.
	const disconnected = `aepkimi_relay_drops_total{reason="disconnect"} 1`
	eventually(t, "slow consumer cut off", func() bool {
		return strings.Contains(string(do(t, srv, http.MethodGet, "/metrics", nil, nil).body), disconnected)
	})

	// Now read: frames, then possibly the closing frame, then the close.
	rctx, rcancel := context.WithTimeout(context.Background(), waitShort)
	defer rcancel()
	var gotNotice []int64
	var closing string
	for {
		_, b, err := c.Read(rctx)
		if err != nil {
			break
		}
		if strings.HasPrefix(string(b), `{"type":"closing"`) {
			closing = string(b)
			continue
		}
		ev, err := aep.ParseEvent(b)
		if err != nil || ev.Seq == nil {
			continue
		}
		if ev.Severity == "notice" {
			gotNotice = append(gotNotice, *ev.Seq)
		}
	}
	for i, seq := range gotNotice {
		if seq != int64(2*i) {
			t.Fatalf("notice events %v: seq %d missing before %d", gotNotice, 2*i, seq)
		}
	}
	if closing != "" && !strings.Contains(closing, `"reason":"slow-consumer"`) {
		t.Fatalf("closing frame %s", closing)
	}
	if rctx.Err() != nil {
		t.Fatal("the socket was not closed after the slow consumer was cut off")
	}
	eventually(t, "slow consumer dropped", func() bool { return srv.Backend().Stats().Subscribers == 0 })
	m := do(t, srv, http.MethodGet, "/metrics", nil, nil)
	if !strings.Contains(string(m.body), disconnected) {
		t.Fatalf("disconnect counted other than once:\n%s", grep(string(m.body), "aepkimi_relay_drops_total"))
	}
}

func grep(s, substr string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, substr) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

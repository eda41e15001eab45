package relay_test

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/aep-kimi/aep-kimi/access"
	"github.com/aep-kimi/aep-kimi/aep"
	"github.com/aep-kimi/aep-kimi/internal/testkit/poll"
	"github.com/aep-kimi/aep-kimi/internal/testkit/relaytest"
	"github.com/aep-kimi/aep-kimi/relay"
	"github.com/aep-kimi/aep-kimi/relay/client"
	"github.com/aep-kimi/aep-kimi/relay/wire"
)

// runPublisher runs e until the test ends, handing the commands routed to
// it to onCommand.
func runPublisher(t *testing.T, e *client.Publisher, onCommand func(context.Context, *aep.Event)) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.Run(ctx, onCommand) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("publisher Run: %v", err)
		}
	})
}

func newPublisher(t *testing.T, cfg client.PublisherConfig) *client.Publisher {
	t.Helper()
	if cfg.Agent == "" {
		cfg.Agent = "kimi"
	}
	if cfg.BackoffMin == 0 {
		cfg.BackoffMin, cfg.BackoffMax = 10*time.Millisecond, 50*time.Millisecond
	}
	e, err := client.NewPublisher(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func emitted(session string, seq int64, sev string) *aep.Event {
	e := mkEvent(session, seq, withSeverity(sev))
	e.Agent, e.Source = "kimi", "aep://test/agent/kimi/session/"+session
	return e
}

func TestPublisherDisabled(t *testing.T) {
	t.Parallel()
	for _, u := range []string{"", "none", " NONE "} {
		e, err := client.NewPublisher(client.PublisherConfig{URL: u})
		if err != nil {
			t.Fatalf("%q: %v", u, err)
		}
		e.Publish(emitted("s", 0, "info"))
		if e.State() != client.PublisherDisabled || e.Stats().Outbox != 0 {
			t.Fatalf("%q: state %v stats %+v", u, e.State(), e.Stats())
		}
		if err := e.Run(context.Background(), nil); err != nil {
			t.Fatalf("disabled Run: %v", err)
		}
	}
	var nilPublisher *client.Publisher
	nilPublisher.Publish(emitted("s", 0, "info"))
	if nilPublisher.State() != client.PublisherDisabled || nilPublisher.Run(context.Background(), nil) != nil {
		t.Fatal("a nil publisher is a disabled one")
	}
}

func TestPublisherConfigErrors(t *testing.T) {
	t.Parallel()
	for _, cfg := range []client.PublisherConfig{
		{URL: "ftp://x", Agent: "a"},
		{URL: "http://", Agent: "a"},
		{URL: "http://127.0.0.1:1"},
	} {
		if _, err := client.NewPublisher(cfg); err == nil {
			t.Errorf("%+v: accepted", cfg)
		}
	}
}

// Order of Publish is kept on the wire; sessions are claimed with the
// declared control block; routed commands reach Run's handler; acks flow back.
func TestPublisherPublishClaimCommand(t *testing.T) {
	t.Parallel()
	srv := relaytest.RunServer(t, relay.Config{Token: testToken})
	watch := openSSE(t, srv, url.Values{"filter": {`{"agent":"kimi"}`}}, nil)
	got := make(chan *aep.Event, 4)
	e := newPublisher(t, client.PublisherConfig{
		URL: srv.URL, Token: testToken, Instance: "host/1", Emits: []string{"session", "run"},
		Control: &wire.Control{Accepts: []string{"control.cancel"}, AckWindowMS: 5000},
	})
	var evs []*aep.Event
	for i := range 100 {
		evs = append(evs, emitted([]string{"s-a", "s-b"}[i%2], int64(i), []string{"info", "notice"}[i%2]))
		e.Publish(evs[i])
	}
	runPublisher(t, e, func(ctx context.Context, cmd *aep.Event) {
		got <- cmd
		ack := emitted(cmd.Session, 100, "info")
		ack.Type, ack.Cause, ack.Data = "control.accepted", cmd.ID, json.RawMessage(`{}`)
		e.Publish(ack)
	})
	for i, ev := range watch.events(t, len(evs)) {
		if ev.ID != evs[i].ID {
			t.Fatalf("event %d arrived out of publish order", i)
		}
	}
	eventually(t, "connected", func() bool { return e.State() == client.PublisherConnected })

	c := helloWS(t, srv, "consumer", nil, "c")
	c.send(t, map[string]any{"type": "roster", "id": "r"})
	f := c.expect(t, func(f wsFrame) bool { return f.str("type") == "roster" })
	if !strings.Contains(string(f.raw), `"session":"s-a","agent":"kimi","instance":"host/1","control":{"accepts":["control.cancel"],"ack_window_ms":5000},"emits":["session","run"]`) {
		t.Fatalf("roster %s", f.raw)
	}

	cmd := command("control.cancel", "s-b", `{"scope":"session"}`)
	c.send(t, cmd)
	select {
	case in := <-got:
		if string(in.Raw()) != string(stamped(t, cmd, access.OwnerName)) {
			t.Fatalf("the handler got %s", in.Raw())
		}
	case <-time.After(waitShort):
		t.Fatal("command not delivered to Run's handler")
	}
	ack := watch.events(t, 1)[0]
	if ack.Type != "control.accepted" || ack.Cause != cmd.ID {
		t.Fatalf("ack %s %s", ack.Type, ack.Cause)
	}
	eventually(t, "stats", func() bool { st := e.Stats(); return st.Sent == 101 && st.Commands == 1 && st.Dropped == 0 })
}

// A full outbox drops debug/info first, and notice+ only when nothing else
// is left, counting every drop.
func TestPublisherOutboxPolicy(t *testing.T) {
	t.Parallel()
	srv := relaytest.RunServer(t, relay.Config{})
	e := newPublisher(t, client.PublisherConfig{URL: srv.URL, Outbox: 4})
	sevs := []string{"notice", "info", "info", "notice", "notice", "info", "error", "debug", "notice"}
	var evs []*aep.Event
	for i, s := range sevs {
		evs = append(evs, emitted("s-box", int64(i), s))
		e.Publish(evs[i])
	}
	if st := e.Stats(); st.Outbox != 4 || st.Dropped != 5 {
		t.Fatalf("stats %+v, want outbox 4 and 5 drops", st)
	}
	watch := openSSE(t, srv, url.Values{"from": {"all"}, "filter": {`{"session":"s-box"}`}}, nil)
	runPublisher(t, e, nil)
	var seqs []int64
	for _, ev := range watch.events(t, 4) {
		seqs = append(seqs, *ev.Seq)
	}
	if !slices.Equal(seqs, []int64{3, 4, 6, 8}) {
		t.Fatalf("delivered %v, want [3 4 6 8]", seqs)
	}
}

// startRelayAt serves a relay on addr until stop is called.
func startRelayAt(t *testing.T, addr string, cfg relay.Config) (stop func()) {
	t.Helper()
	srv, err := relay.NewServer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var ln net.Listener
	// The port a stopped relay held may take a moment to be free again.
	if !poll.Until(waitShort, func() bool { ln, err = net.Listen("tcp", addr); return err == nil }) {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = srv.Serve(ctx, ln); close(done) }()
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); <-done }) }
	t.Cleanup(stop)
	return stop
}

// After a reconnect the publisher re-sends its recent events and re-claims
// every live session (the latest event of each session not ended), and
// what was published while down follows in order.
func TestPublisherReconnect(t *testing.T) {
	t.Parallel()
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := ln.Addr().String()
	ln.Close()
	stop := startRelayAt(t, addr, relay.Config{Token: testToken})
	e := newPublisher(t, client.PublisherConfig{URL: "http://" + addr, Token: testToken, Resend: 2,
		Control: &wire.Control{Accepts: []string{"control.pause"}}})
	runPublisher(t, e, nil)
	old := emitted("s-old", 0, "info")
	ended := []*aep.Event{emitted("s-ended", 0, "info"), emitted("s-ended", 1, "info")}
	ended[1].Type, ended[1].Data = "session.ended", json.RawMessage(`{"reason":"normal"}`)
	recent := []*aep.Event{emitted("s-new", 0, "info"), emitted("s-new", 1, "info")}
	for _, ev := range append(append([]*aep.Event{old}, ended...), recent...) {
		e.Publish(ev)
	}
	eventually(t, "sent", func() bool { return e.Stats().Sent == 5 })
	stop()
	eventually(t, "disconnected", func() bool { return e.State() != client.PublisherConnected })
	down := emitted("s-new", 2, "notice")
	e.Publish(down)

	startRelayAt(t, addr, relay.Config{Token: testToken})
	eventually(t, "reconnected", func() bool { return e.State() == client.PublisherConnected && e.Stats().Outbox == 0 })
	srv := &relaytest.Server{URL: "http://" + addr, Token: testToken}
	// s-old's latest (a re-claim), the two recent events (the resend ring),
	// then what was published while down. s-ended is not re-claimed. A
	// written frame is not yet an ingested one, so wait for the relay.
	want := []string{old.ID, recent[0].ID, recent[1].ID, down.ID}
	var ids []string
	held := func() bool {
		ids = ids[:0]
		for _, it := range sessionReplayAll(t, srv) {
			ev, _ := aep.ParseEvent([]byte(it.Data))
			ids = append(ids, ev.ID)
		}
		return sameSet(ids, want)
	}
	if !poll.Until(waitShort, held) {
		t.Fatalf("new relay holds %v, want %v (stats %+v)", ids, want, e.Stats())
	}
	c := helloWS(t, srv, "consumer", nil, "c")
	c.send(t, map[string]any{"type": "roster", "id": "r"})
	f := c.expect(t, func(f wsFrame) bool { return f.str("type") == "roster" })
	for _, s := range []string{`"session":"s-old"`, `"session":"s-new"`} {
		if !strings.Contains(string(f.raw), s) {
			t.Fatalf("roster %s lacks %s", f.raw, s)
		}
	}
	if strings.Contains(string(f.raw), "s-ended") {
		t.Fatalf("an ended session was re-claimed: %s", f.raw)
	}
	if e.Stats().Reconnects < 1 {
		t.Fatalf("stats %+v", e.Stats())
	}
}

func sessionReplayAll(t *testing.T, srv *relaytest.Server) []relayItem {
	t.Helper()
	s := openSSE(t, srv, url.Values{"from": {"all"}, "live": {"0"}}, nil)
	var out []relayItem
	for it := range s.items {
		if !it.IsComment {
			out = append(out, relayItem{Data: it.Data})
		}
	}
	return out
}

type relayItem struct{ Data string }

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

// When the socket cannot be established but POST works, the outbox goes
// out as NDJSON batches.
func TestPublisherHTTPFallback(t *testing.T) {
	t.Parallel()
	srv := relaytest.RunServer(t, relay.Config{Token: testToken})
	target, _ := url.Parse(srv.URL)
	proxy := httputil.NewSingleHostReverseProxy(target)
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/socket" {
			http.Error(w, "no websockets here", http.StatusNotFound)
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	defer front.Close()
	watch := openSSE(t, srv, url.Values{"filter": {`{"session":"s-fb"}`}}, nil)
	e := newPublisher(t, client.PublisherConfig{URL: front.URL, Token: testToken, HTTPBatch: 7})
	var evs []*aep.Event
	for i := range 30 {
		evs = append(evs, emitted("s-fb", int64(i), "info"))
		e.Publish(evs[i])
	}
	runPublisher(t, e, nil)
	for i, ev := range watch.events(t, 30) {
		if ev.ID != evs[i].ID {
			t.Fatalf("fallback delivery %d out of order", i)
		}
	}
	more := emitted("s-fb", 30, "notice")
	e.Publish(more)
	if got := watch.events(t, 1)[0]; got.ID != more.ID {
		t.Fatal("a later publish did not go out over the fallback")
	}
	eventually(t, "posted count", func() bool { return e.Stats().Posted == 31 })
	st := e.Stats()
	if !st.Fallback || st.State == client.PublisherConnected || st.LastError == "" {
		t.Fatalf("stats %+v", st)
	}
}

func TestPublisherCollector(t *testing.T) {
	t.Parallel()
	e := newPublisher(t, client.PublisherConfig{URL: "http://127.0.0.1:1"})
	e.Publish(emitted("s", 0, "info"))
	reg := prometheus.NewRegistry()
	reg.MustRegister(e.Collector("aepkimi"))
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			v := m.GetGauge().GetValue() + m.GetCounter().GetValue()
			if mf.GetName() == "aepkimi_emitter_state" && v == 1 {
				names["state="+m.GetLabel()[0].GetValue()] = 1
			}
			names[mf.GetName()] += v
		}
	}
	if names["aepkimi_emitter_outbox_events"] != 1 || names["state=disconnected"] != 1 {
		t.Fatalf("metrics %v", names)
	}
}

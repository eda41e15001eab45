package relay_test

import (
	"bytes"
	"context"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/aep-kimi/aep-kimi/access"
	"github.com/aep-kimi/aep-kimi/aep"
	"github.com/aep-kimi/aep-kimi/internal/testkit/poll"
	"github.com/aep-kimi/aep-kimi/internal/testkit/relaytest"
	"github.com/aep-kimi/aep-kimi/relay"
)

// runNATS starts a JetStream nats-server in the test process, listening on
// loopback; cluster, when set, joins it to a cluster on loopback.
func runNATS(t testing.TB, name string, cluster *server.ClusterOpts, routes []*url.URL) *server.Server {
	t.Helper()
	return runNATSWith(t, name, func(o *server.Options) {
		o.Routes = routes
		if cluster != nil {
			o.Cluster = *cluster
		}
	})
}

// runNATSWith is runNATS with options of the test's own.
func runNATSWith(t testing.TB, name string, mod func(*server.Options)) *server.Server {
	t.Helper()
	opts := &server.Options{ServerName: name, Host: "127.0.0.1", Port: -1, JetStream: true,
		StoreDir: t.TempDir(), NoLog: true, NoSigs: true}
	mod(opts)
	ns, err := server.NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	ns.Start()
	t.Cleanup(ns.Shutdown)
	if !ns.ReadyForConnections(10 * time.Second) {
		t.Fatalf("nats-server %s did not start", name)
	}
	return ns
}

// sharedRelay runs a relay whose store is the stream on the NATS at natsURL.
func sharedRelay(t testing.TB, natsURL string, replicas int) *relaytest.Server {
	t.Helper()
	var b *relay.JetStreamBackend
	var err error
	// Registered first, so it runs once the relay has closed.
	var logs bytes.Buffer
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the relay on %s logged:\n%s", natsURL, logs.String())
		}
	})
	log := newTestLogger(&logs) // the store's and the server's, interleaved
	// A fresh cluster places a replicated stream once every peer reports in.
	poll.Until(30*time.Second, func() bool {
		b, err = relay.OpenJetStream(context.Background(), relay.JetStreamConfig{URL: natsURL, Replicas: replicas, Buffer: 100, Logger: log})
		return err == nil
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := relaytest.RunServer(t, relay.Config{Token: testToken, Backend: b, Logger: log})
	t.Cleanup(func() { b.Close() })
	return srv
}

func seqsOf(evs []*aep.Event) []int64 {
	var out []int64
	for _, e := range evs {
		out = append(out, *e.Seq)
	}
	return out
}

// Two relays on one NATS share one stream: an event POSTed to A reaches B's
// consumers, a redelivery to B of what A admitted is a duplicate, a consumer
// resumes on B from a position it got from A, live-only events cross too,
// and a command sent to B for a session claimed on A is routed to A's
// claimant.
func TestSharedStreamTwoRelays(t *testing.T) {
	t.Parallel()
	ns := runNATS(t, "n1", nil, nil)
	a := sharedRelay(t, ns.ClientURL(), 1)
	b := sharedRelay(t, ns.ClientURL(), 1)

	onB := openSSE(t, b, url.Values{"filter": {`{"session":"s-x"}`}}, nil)
	agentsOnB := openSSE(t, b, url.Values{"filter": {`{"type":["agent.*"]}`}}, nil)
	evs := seqEvents("s-x", 0, 10)
	mustPost(t, a, evs[:5]...)
	if got := seqsOf(onB.events(t, 5)); !slices.Equal(got, []int64{0, 1, 2, 3, 4}) {
		t.Fatalf("B's consumer got %v from A", got)
	}
	if r := post(t, b, evs[2]).json(t); r["duplicates"] != 1.0 || r["buffered"] != 0.0 {
		t.Fatalf("redelivery to B of an event A admitted: %v", r)
	}
	// A consumer saw up to seq 2 on A; it resumes on B.
	onA := openSSE(t, a, url.Values{"from": {"all"}, "live": {"0"}}, nil)
	fromA := onA.events(t, 3)[2]
	mustPost(t, a, evs[5:]...)
	onB.events(t, 6) // the redelivery, then 5..9
	resumed := openSSE(t, b, url.Values{"live": {"0"}, "from": {fmt.Sprintf(`[{"session":%q,"epoch":%d,"seq":%d}]`, fromA.Session, *fromA.Epoch, *fromA.Seq)}}, nil)
	if got := seqsOf(resumed.events(t, 7)); !slices.Equal(got, []int64{3, 4, 5, 6, 7, 8, 9}) {
		t.Fatalf("resumed on B from A's seq 2: %v", got)
	}
	hb := agentEvent()
	mustPost(t, a, hb)
	if got := agentsOnB.events(t, 1)[0]; got.ID != hb.ID {
		t.Fatalf("B's agent consumer got %s", got.ID)
	}

	// A command sent to B for a session claimed on A reaches A's claimant,
	// byte for byte and once (its own subscription skips it), and lands in
	// both relays' history.
	tgt := target(t, a, "both", "kimi", "s-ctl", `{"accepts":["control.cancel"]}`)
	tgt.send(t, subscribeFrame("mine", map[string]any{"session": "s-ctl"}, nil))
	tgt.expect(t, func(f wsFrame) bool { return f.str("type") == "subscribed" })
	eventually(t, "B holds A's claim", func() bool { return len(sessionReplay(t, b, "s-ctl")) == 1 })
	// A takes commands for its claim from B once its claims goroutine
	// has subscribed: until then B finds no relay to route to.
	eventually(t, "A takes commands routed for s-ctl", func() bool { return routeClaimants(t, ns, "s-ctl") == 1 })
	watchA := openSSE(t, a, url.Values{"filter": {`{"session":"s-ctl"}`}}, nil)
	watchB := openSSE(t, b, url.Values{"filter": {`{"session":"s-ctl"}`}}, nil)
	sender := helloWS(t, b, "consumer", nil, "sender")
	cmd := command("control.cancel", "s-ctl", `{"scope":"run"}`)
	sender.send(t, cmd)
	got := tgt.expect(t, func(f wsFrame) bool { return f.str("type") == "control.cancel" })
	if string(got.raw) != string(stamped(t, cmd, access.OwnerName)) {
		t.Fatalf("A's claimant got %s, want the command's bytes, stamped", got.raw)
	}
	for name, w := range map[string]*sseStream{"A": watchA, "B": watchB} {
		if e := w.events(t, 1)[0]; e.ID != cmd.ID {
			t.Fatalf("%s's watcher got %s, want the command", name, e.ID)
		}
	}
	tgt.quiet(t, 300*time.Millisecond) // not a second copy through its subscription
	sender.quiet(t, 100*time.Millisecond)

	// Refusals come from where the claimant is, or from nowhere at all.
	for _, tc := range []struct{ typ, session, code string }{
		{"control.pause", "s-ctl", "unsupported"},
		{"control.cancel", "s-nobody", "no-route"},
	} {
		c := command(tc.typ, tc.session, `{}`)
		sender.send(t, c)
		if f := sender.next(t); f.str("code") != tc.code || f.str("cause") != c.ID {
			t.Fatalf("%s for %s on B: %s, want %s", tc.typ, tc.session, f.raw, tc.code)
		}
	}
	_ = tgt.c.CloseNow()
	askA := helloWS(t, a, "consumer", nil, "asker")
	eventually(t, "A releases the claim of the closed socket", func() bool {
		askA.send(t, map[string]any{"type": "roster", "id": "r"})
		f := askA.expect(t, func(f wsFrame) bool { return f.str("type") == "roster" })
		return !strings.Contains(string(f.raw), `"s-ctl"`)
	})
	gone := command("control.cancel", "s-ctl", `{}`)
	sender.send(t, gone)
	if f := sender.next(t); f.str("code") != "no-route" || f.str("cause") != gone.ID {
		t.Fatalf("command on B once A's claimant has gone: %s, want no-route", f.raw)
	}
}

// Two relays on a three-node JetStream cluster (stream replicas 3): after
// one node stops, both keep serving, nothing admitted is lost, and new
// events still cross from A to B.
func TestSharedStreamClusterNodeLoss(t *testing.T) {
	if testing.Short() {
		t.Skip("forms a three-node JetStream cluster; skipped under -short")
	}
	nodes, urls := startCluster(t)
	if !poll.Until(30*time.Second, func() bool {
		return slices.ContainsFunc(nodes, func(ns *server.Server) bool { return ns.JetStreamIsLeader() })
	}) {
		t.Fatal("the JetStream cluster elected no leader")
	}
	a := sharedRelay(t, urls, 3)
	b := sharedRelay(t, urls, 3)
	onB := openSSE(t, b, url.Values{"filter": {`{"session":"s-c"}`}}, nil)
	evs := seqEvents("s-c", 0, 40)
	mustPost(t, a, evs[:20]...)
	onB.events(t, 20)
	nodes[0].Shutdown()
	stopped := time.Now()
	mustPost(t, a, evs[20:]...)
	// B's follower may need a few heartbeats to find the stream on another
	// node. Across a leader change the stream's order may differ from A's
	// admission order (live delivery is arrival order; replay is by seq).
	// One bound for them all: the stream's heartbeat comments must not
	// restart it.
	var got []int64
	deadline := time.After(30 * time.Second)
	for len(got) < 20 {
		select {
		case it, ok := <-onB.items:
			if !ok {
				t.Fatalf("B's stream ended after a node stopped; it got %v", got)
			}
			if ev, err := aep.ParseEvent([]byte(it.Data)); err == nil && !it.IsComment {
				got = append(got, *ev.Seq)
			}
		case <-deadline:
			t.Fatalf("after a node stopped, B got only %v within 30s", got)
		}
	}
	slices.Sort(got)
	if got[0] != 20 || got[19] != 39 || len(slices.Compact(got)) != 20 {
		t.Fatalf("after a node stopped, B got %v", got)
	}
	t.Logf("B caught up %v after the node stopped", time.Since(stopped))
	for _, srv := range []*relaytest.Server{a, b} {
		var replayed []int64
		for _, it := range sessionReplay(t, srv, "s-c") {
			ev, err := aep.ParseEvent([]byte(it.Data))
			if err != nil {
				t.Fatal(err)
			}
			replayed = append(replayed, *ev.Seq)
		}
		if len(replayed) != 40 || !slices.IsSorted(replayed) || len(slices.Compact(replayed)) != 40 {
			t.Fatalf("after a node stopped, %s replays %v", srv.URL, replayed)
		}
	}
}

// On a shared stream one relay's session cap is its own: a session relay A
// evicts stays on the stream for relay B and for a relay that opens later.
func TestSharedStreamEvictionIsLocal(t *testing.T) {
	t.Parallel()
	ns := runNATS(t, "n1", nil, nil)
	open := func(sessions int) *relay.JetStreamBackend {
		b, err := relay.OpenJetStream(context.Background(), relay.JetStreamConfig{URL: ns.ClientURL(), MaxSessions: sessions})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.Close() })
		return b
	}
	a, b := open(2), open(0)
	for _, s := range []string{"s1", "s2", "s3"} {
		if res := a.Ingest([]*relay.Message{msg(t, mkEvent(s, 0)), msg(t, mkEvent(s, 1))}); res.Err != nil {
			t.Fatal(res.Err)
		}
	}
	if got := sessionNames(a); !slices.Equal(got, []string{"s2", "s3"}) {
		t.Fatalf("A holds %v, want its cap of 2", got)
	}
	eventually(t, "B holds all three sessions", func() bool { return len(sessionNames(b)) == 3 })
	// That A queues no purge of s1 is TestJetStreamSharedEvictionQueuesNoPurge's.
	if got := len(replayAll(t, b, `{"session":"s1"}`)); got != 2 {
		t.Fatalf("B replays %d events of s1 after A evicted it, want 2", got)
	}
	if got := sessionNames(open(0)); !slices.Equal(got, []string{"s1", "s2", "s3"}) {
		t.Fatalf("a relay opened later rebuilds %v", got)
	}
}

// Were sockets on two relays to claim one session (an emitter fault no one
// relay can see), a command sent to a third reaches one of them, never both.
func TestSharedStreamTwoClaimantsGetOneCommand(t *testing.T) {
	t.Parallel()
	ns := runNATS(t, "n1", nil, nil)
	a, b, c := sharedRelay(t, ns.ClientURL(), 1), sharedRelay(t, ns.ClientURL(), 1), sharedRelay(t, ns.ClientURL(), 1)
	onA := target(t, a, "emitter", "kimi", "s-dup", `{"accepts":["control.cancel"]}`)
	onB := target(t, b, "emitter", "kimi", "s-dup", `{"accepts":["control.cancel"]}`)
	eventually(t, "both claimants take routed commands", func() bool { return routeClaimants(t, ns, "s-dup") == 2 })
	sender := helloWS(t, c, "consumer", nil, "sender")
	cmd := command("control.cancel", "s-dup", `{}`)
	sender.send(t, cmd)
	var f wsFrame
	other := onB
	select {
	case f = <-onA.frames:
	case f = <-onB.frames:
		other = onA
	case <-time.After(waitShort):
		t.Fatal("neither claimant got the command")
	}
	if f.str("id") != cmd.ID {
		t.Fatalf("a claimant got %s, want the command", f.raw)
	}
	other.quiet(t, time.Second) // not a second copy
}

// A relay opening a shared stream while another writes to it fast finishes
// its rebuild (it reads up to the stream's end at open; the rest is its
// follower's) and then holds everything the other admitted.
func TestSharedStreamOpensWhileAnotherWrites(t *testing.T) {
	t.Parallel()
	ns := runNATS(t, "n1", nil, nil)
	open := func() *relay.JetStreamBackend {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		b, err := relay.OpenJetStream(ctx, relay.JetStreamConfig{URL: ns.ClientURL(), MaxSessions: 1000})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.Close() })
		return b
	}
	a := open()
	stop := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				done <- nil
				return
			default:
			}
			var batch []*relay.Message
			for j := range 32 {
				batch = append(batch, msg(t, mkEvent(fmt.Sprintf("w%d", j), int64(i))))
			}
			if res := a.Ingest(batch); res.Err != nil {
				done <- res.Err
				return
			}
		}
	}()
	// B opens on a stream with history, still growing.
	eventually(t, "A to admit a few batches", func() bool { return a.Stats().Events >= 10*32 })
	b := open()
	close(stop)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	eventually(t, "B holds what A admitted", func() bool { return b.Stats().Events == a.Stats().Events })
}

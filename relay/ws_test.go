package relay_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/aep-kimi/aep-kimi/internal/testkit/relaytest"
	"github.com/aep-kimi/aep-kimi/relay"
)

func TestSocketHelloRules(t *testing.T) {
	t.Parallel()
	srv := relaytest.RunServer(t, relay.Config{})
	cases := []struct {
		name  string
		first any
		code  string
	}{
		{"event before hello", mkEvent("s", 0), "hello-required"},
		{"not JSON", []byte("hi"), "hello-required"},
		{"no common version", map[string]any{"type": "hello", "versions": []string{"9.9"}, "role": "consumer"}, "version-unsupported"},
		{"no versions", map[string]any{"type": "hello", "role": "consumer"}, "version-unsupported"},
		{"unknown role", map[string]any{"type": "hello", "versions": []string{"0.1"}, "role": "observer"}, "invalid-hello"},
		{"emitter without agent", map[string]any{"type": "hello", "versions": []string{"0.1"}, "role": "emitter"}, "invalid-hello"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := dialWS(t, srv, "")
			w.send(t, tc.first)
			f := w.next(t)
			if f.str("type") != "error" || f.str("code") != tc.code {
				t.Fatalf("got %s, want error %s", f.raw, tc.code)
			}
			if tc.code == "version-unsupported" {
				if v, _ := f.m["versions"].([]any); len(v) != 1 || v[0] != "0.1" {
					t.Errorf("versions %v", f.m["versions"])
				}
			}
			if err := w.waitClosed(t); websocket.CloseStatus(err) != websocket.StatusPolicyViolation {
				t.Errorf("close %v, want policy violation", err)
			}
		})
	}
	t.Run("selects one version", func(t *testing.T) {
		w := dialWS(t, srv, "")
		w.send(t, map[string]any{"type": "hello", "versions": []string{"0.2", "0.1"}, "role": "consumer",
			"capabilities": map[string]any{"futurecap": true, "control": "garbage"}})
		f := w.next(t)
		v, _ := f.m["versions"].([]any)
		if f.str("type") != "hello" || len(v) != 1 || v[0] != "0.1" {
			t.Fatalf("hello reply %s", f.raw)
		}
		caps, _ := f.m["capabilities"].(map[string]any)
		if _, ok := caps["roster"]; !ok {
			t.Errorf("hello capabilities lack roster: %s", f.raw)
		}
	})
}

func TestSocketBinaryRejected(t *testing.T) {
	t.Parallel()
	srv := relaytest.RunServer(t, relay.Config{})
	w := helloWS(t, srv, "consumer", nil, "c")
	ctx, cancel := context.WithTimeout(context.Background(), waitShort)
	defer cancel()
	if err := w.c.Write(ctx, websocket.MessageBinary, []byte{1, 2, 3}); err != nil {
		t.Fatal(err)
	}
	if f := w.next(t); f.str("code") != "binary-unsupported" {
		t.Fatalf("got %s", f.raw)
	}
	if err := w.waitClosed(t); websocket.CloseStatus(err) != websocket.StatusUnsupportedData {
		t.Fatalf("close %v, want 1003", err)
	}
}

// Subscribe refusals come from the closed set, in-band, echo the id, and
// leave the socket and its other subscriptions working (AEP-0003 §6.5).
func TestSocketSubscribeRefusals(t *testing.T) {
	t.Parallel()
	srv := relaytest.RunServer(t, relay.Config{MaxFrom: 2, MaxSubscriptions: 3})
	w := helloWS(t, srv, "consumer", nil, "c")
	w.send(t, subscribeFrame("keep", map[string]any{"session": "s-keep"}, nil))
	w.expect(t, func(f wsFrame) bool { return f.str("type") == "subscribed" && f.str("id") == "keep" })
	cases := []struct {
		name  string
		frame map[string]any
		code  string
	}{
		{"bad filter key", subscribeFrame("a", map[string]any{"time": "x"}, nil), "invalid-filter"},
		{"filter not object", subscribeFrame("b", []any{1}, nil), "invalid-filter"},
		{"from not array", subscribeFrame("c", nil, map[string]any{"from": map[string]any{}}), "invalid-filter"},
		{"from entry without seq", subscribeFrame("d", nil, map[string]any{"from": []any{map[string]any{"session": "x"}}}), "invalid-filter"},
		{"capture unknown", subscribeFrame("e", nil, map[string]any{"capture": "everything"}), "invalid-filter"},
		{"dialect unknown", subscribeFrame("f", nil, map[string]any{"dialect": "cesql"}), "unknown-dialect"},
		{"from over limit", subscribeFrame("g", nil, map[string]any{"from": []any{
			map[string]any{"session": "x", "seq": 0}, map[string]any{"session": "y", "seq": 0}, map[string]any{"session": "z", "seq": 0}}}), "limit-exceeded"},
		{"duplicate id", subscribeFrame("keep", nil, nil), "invalid-filter"},
		{"missing id", map[string]any{"type": "subscribe"}, "invalid-filter"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w.send(t, tc.frame)
			f := w.next(t)
			if f.str("type") != "error" || f.str("code") != tc.code {
				t.Fatalf("got %s, want error %s", f.raw, tc.code)
			}
			if id, _ := tc.frame["id"].(string); f.str("id") != id {
				t.Errorf("error id %q, want %q", f.str("id"), id)
			}
		})
	}
	// Subscription limit: two more fit, the third is refused.
	for i, want := range []string{"subscribed", "subscribed", "error"} {
		w.send(t, subscribeFrame(fmt.Sprintf("n%d", i), nil, nil))
		if f := w.next(t); f.str("type") != want {
			t.Fatalf("subscription %d: got %s, want %s", i, f.raw, want)
		} else if want == "error" && f.str("code") != "limit-exceeded" {
			t.Fatalf("over the limit: %s", f.raw)
		}
	}
	// The original subscription still delivers.
	ev := mkEvent("s-keep", 0)
	mustPost(t, srv, ev)
	if got := w.eventFrames(t, 1)[0]; got.str("id") != ev.ID {
		t.Fatalf("delivery %s", got.raw)
	}
	emitter := helloWS(t, srv, "emitter", nil, "e")
	emitter.send(t, subscribeFrame("x", nil, nil))
	if f := emitter.next(t); f.str("code") != "unauthorized" || f.str("id") != "x" {
		t.Fatalf("emitter subscribe: %s", f.raw)
	}
}

func TestSocketSubscribeReplayLiveUnsubscribe(t *testing.T) {
	t.Parallel()
	srv := relaytest.RunServer(t, relay.Config{Buffer: 4})
	evs := seqEvents("s-ws", 0, 8)
	mustPost(t, srv, evs...)
	w := helloWS(t, srv, "both", nil, "c")
	w.send(t, subscribeFrame("r", map[string]any{"session": "s-ws"}, map[string]any{
		"from": []any{map[string]any{"session": "s-ws", "epoch": 0, "seq": 1}}}))
	if f := w.next(t); f.str("type") != "subscribed" {
		t.Fatalf("got %s", f.raw)
	}
	f := w.next(t)
	earliest, _ := f.m["earliest"].(map[string]any)
	if f.str("type") != "replay-exhausted" || f.str("sub") != "r" || f.str("session") != "s-ws" || earliest["seq"] != float64(4) {
		t.Fatalf("want the replay-exhausted frame first, got %s", f.raw)
	}
	for i, ef := range w.eventFrames(t, 4) {
		if string(ef.raw) != string(line(t, evs[4+i])) {
			t.Fatalf("replayed frame %d not byte-identical: %s", i, ef.raw)
		}
	}
	live := mkEvent("s-ws", 8)
	mustPost(t, srv, live)
	if got := w.eventFrames(t, 1)[0]; got.str("id") != live.ID {
		t.Fatalf("live frame %s", got.raw)
	}
	w.send(t, map[string]any{"type": "unsubscribe", "id": "r"})
	if f := w.next(t); f.str("type") != "unsubscribed" || f.str("id") != "r" {
		t.Fatalf("got %s", f.raw)
	}
	mustPost(t, srv, mkEvent("s-ws", 9))
	w.quiet(t, 100*time.Millisecond)
}

func TestSocketPingUnknownAndErrors(t *testing.T) {
	t.Parallel()
	srv := relaytest.RunServer(t, relay.Config{PingInterval: 30 * time.Millisecond})
	w := helloWS(t, srv, "both", nil, "c")
	w.send(t, map[string]any{"type": "zigzag"})
	w.send(t, map[string]any{"type": "ping", "t": 42})
	if f := w.next(t); f.str("type") != "pong" || f.m["t"] != float64(42) {
		t.Fatalf("got %s, want pong echoing t", f.raw)
	}
	w.send(t, []byte("[1,2]"))
	if f := w.next(t); f.str("code") != "invalid-frame" {
		t.Fatalf("got %s", f.raw)
	}
	bad := mkEvent("s-bad", 0)
	bad.Time = "yesterday"
	w.send(t, bad)
	if f := w.next(t); f.str("code") != "invalid-event" || f.str("cause") != bad.ID {
		t.Fatalf("got %s", f.raw)
	}
	// Still alive.
	w.send(t, map[string]any{"type": "ping"})
	if f := w.next(t); f.str("type") != "pong" {
		t.Fatalf("got %s", f.raw)
	}
}

func TestSocketRelayPings(t *testing.T) {
	t.Parallel()
	srv := relaytest.RunServer(t, relay.Config{PingInterval: 20 * time.Millisecond})
	w := helloWS(t, srv, "consumer", nil, "c")
	deadline := time.After(waitShort)
	for {
		select {
		case f := <-w.frames:
			if f.str("type") == "ping" {
				if _, ok := f.m["t"].(float64); !ok {
					t.Fatalf("ping without t: %s", f.raw)
				}
				return
			}
		case <-deadline:
			t.Fatal("no ping from the relay")
		}
	}
}

func TestSocketConsumerMayNotEmit(t *testing.T) {
	t.Parallel()
	srv := relaytest.RunServer(t, relay.Config{})
	w := helloWS(t, srv, "consumer", nil, "c")
	ev := mkEvent("s-c", 0)
	w.send(t, ev)
	if f := w.next(t); f.str("code") != "unauthorized" || f.str("cause") != ev.ID {
		t.Fatalf("got %s", f.raw)
	}
	if n := srv.Backend().Stats().Events; n != 0 {
		t.Fatalf("consumer event was ingested (%d held)", n)
	}
}

// On drain every socket gets a closing frame with its delivered positions
// per subscription, then close 1001.
func TestSocketDrainClosingFrame(t *testing.T) {
	t.Parallel()
	srv := relaytest.RunServer(t, relay.Config{})
	w := helloWS(t, srv, "consumer", nil, "c")
	w.send(t, subscribeFrame("a", map[string]any{"session": "s-drain"}, nil))
	w.expect(t, func(f wsFrame) bool { return f.str("type") == "subscribed" })
	mustPost(t, srv, mkEvent("s-drain", 3), mkEvent("s-drain", 4, withEpoch(1)))
	w.eventFrames(t, 2)
	if err := srv.Shutdown(); err != nil {
		t.Fatalf("drain: %v", err)
	}
	f := w.next(t)
	if f.str("type") != "closing" {
		t.Fatalf("got %s, want closing", f.raw)
	}
	var closing struct {
		Reason    string `json:"reason"`
		Delivered []struct {
			Sub, Session string
			Epoch, Seq   int64
		} `json:"delivered"`
	}
	if err := json.Unmarshal(f.raw, &closing); err != nil {
		t.Fatal(err)
	}
	if len(closing.Delivered) != 1 || closing.Delivered[0].Sub != "a" || closing.Delivered[0].Session != "s-drain" ||
		closing.Delivered[0].Epoch != 1 || closing.Delivered[0].Seq != 4 {
		t.Fatalf("closing positions %+v", closing.Delivered)
	}
	if err := w.waitClosed(t); websocket.CloseStatus(err) != websocket.StatusGoingAway {
		t.Fatalf("close %v, want 1001", err)
	}
}

func TestSocketRequiresTokenWhenSet(t *testing.T) {
	t.Parallel()
	srv := relaytest.RunServer(t, relay.Config{Token: testToken})
	ctx, cancel := context.WithTimeout(context.Background(), waitShort)
	defer cancel()
	_, resp, err := websocket.Dial(ctx, strings.Replace(srv.URL, "http", "ws", 1)+"/socket", nil)
	if err == nil || resp == nil || resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("unauthenticated socket: err %v resp %v", err, resp)
	}
	// access_token in the query is the browser path.
	c, _, err := websocket.Dial(ctx, strings.Replace(srv.URL, "http", "ws", 1)+"/socket?access_token="+testToken, nil)
	if err != nil {
		t.Fatalf("query token refused: %v", err)
	}
	_ = c.CloseNow()
}

func TestSocketPlainGETIsJSON(t *testing.T) {
	t.Parallel()
	srv := relaytest.RunServer(t, relay.Config{})
	r := do(t, srv, http.MethodGet, "/socket", nil, nil)
	if r.status != http.StatusUpgradeRequired || r.json(t)["error"] != "upgrade-required" {
		t.Fatalf("plain GET /socket: %d %s", r.status, r.body)
	}
	for _, path := range []string{"/nope", "/events/x"} {
		if r := do(t, srv, http.MethodGet, path, nil, nil); r.status != 404 || r.json(t)["error"] != "not-found" {
			t.Fatalf("%s: %d %s", path, r.status, r.body)
		}
	}
	if r := do(t, srv, http.MethodDelete, "/events", nil, nil); r.status != 405 || r.json(t)["error"] != "method-not-allowed" {
		t.Fatalf("DELETE /events: %d %s", r.status, r.body)
	}
}

// Events a socket sends in quick succession reach a live consumer in frame
// order on both stores, however the relay batches them for the store, and
// a command sent between them is routed and delivered in its place.
func TestSocketFramesKeepOrder(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, open storeOpener) {
		srv := relaytest.RunServer(t, relay.Config{Token: testToken, Backend: open(t, 0, 0, 0)})
		tgt := target(t, srv, "emitter", "kimi", "s-ctl", `{"accepts":["control.pause"]}`)
		watch := openSSE(t, srv, url.Values{"filter": {`{"session":["s","s-ctl"]}`}}, nil)
		sender := helloWS(t, srv, "both", nil, "sender")
		var want []string
		for i := range 1000 {
			if i == 500 {
				cmd := command("control.pause", "s-ctl", `{}`)
				sender.send(t, cmd)
				want = append(want, cmd.ID)
			}
			e := mkEvent("s", int64(i))
			sender.send(t, e)
			want = append(want, e.ID)
		}
		var got []string
		for _, e := range watch.events(t, len(want)) {
			got = append(got, e.ID)
		}
		if !slices.Equal(got, want) {
			for i := range got {
				if got[i] != want[i] {
					t.Fatalf("live order differs from frame order at %d of %d (command at 500): got %v, want %v", i, len(want), got[i:min(i+3, len(got))], want[i:min(i+3, len(want))])
				}
			}
		}
		if f := tgt.expect(t, func(f wsFrame) bool { return f.str("type") == "control.pause" }); f.str("id") != want[500] {
			t.Fatalf("target got %s", f.raw)
		}
	})
}

// gatedBackend holds Subscribe at its door until released, to open the
// window between a subscribe frame and the store registering it.
type gatedBackend struct {
	*relay.MemoryBackend
	entered, release chan struct{}
}

func (b *gatedBackend) Subscribe(req relay.SubscribeRequest, sub relay.Subscriber) (func(), error) {
	close(b.entered)
	<-b.release
	return b.MemoryBackend.Subscribe(req, sub)
}

// A consumer that reads subscribed may post at once: nothing it posts
// afterwards passes the subscription by. Before, subscribed went out
// before the store had the subscription, and events posted in that window
// were lost (TestSocketDrainClosingFrame failed 2 in ~221 -race runs).
func TestSocketSubscribedMeansInEffect(t *testing.T) {
	t.Parallel()
	b := &gatedBackend{MemoryBackend: relay.NewMemoryBackend(0, 0), entered: make(chan struct{}), release: make(chan struct{})}
	srv := relaytest.RunServer(t, relay.Config{Backend: b})
	w := helloWS(t, srv, "consumer", nil, "c")
	w.send(t, subscribeFrame("a", map[string]any{"session": "s-window"}, nil))
	<-b.entered
	// While the store has not taken the subscription, no ack may go out.
	// A quarter second is how long the window is held open, not a wait
	// for an outcome: the ack must not come at all until release.
	select {
	case f := <-w.frames:
		if f.str("type") == "subscribed" {
			mustPost(t, srv, mkEvent("s-window", 1))
			close(b.release)
			w.eventFrames(t, 1)
			t.Fatalf("subscribed sent before the subscription was in effect")
		}
		t.Fatalf("unexpected frame %s", f.raw)
	case <-time.After(250 * time.Millisecond):
	}
	close(b.release)
	w.expect(t, func(f wsFrame) bool { return f.str("type") == "subscribed" })
	mustPost(t, srv, mkEvent("s-window", 1), mkEvent("s-window", 2))
	if got := w.eventFrames(t, 2); len(got) != 2 {
		t.Fatalf("got %d events after subscribed, want 2", len(got))
	}
}

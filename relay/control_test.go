package relay_test

import (
	"encoding/json"
	"net/url"
	"testing"
	"time"

	"github.com/aep-kimi/aep-kimi/access"
	"github.com/aep-kimi/aep-kimi/internal/testkit/relaytest"
	"github.com/aep-kimi/aep-kimi/relay"
	"github.com/aep-kimi/aep-kimi/relay/client"
)

// target opens an emitter socket declaring control (raw JSON, kept
// verbatim) and claims session by sending one event for it.
func target(t *testing.T, srv *relaytest.Server, role, agent, session, control string) *wsClient {
	t.Helper()
	w := dialWS(t, srv, srv.Token)
	caps := `{}`
	if control != "" {
		caps = `{"emits":["session","run"],"control":` + control + `}`
	}
	w.send(t, []byte(`{"type":"hello","versions":["0.1"],"role":"`+role+`","identity":{"agent":"`+agent+`","instance":"`+agent+`/1"},"capabilities":`+caps+`}`))
	if f := w.next(t); f.str("type") != "hello" {
		t.Fatalf("hello: %s", f.raw)
	}
	claim := mkEvent(session, 0)
	claim.Agent = agent
	claim.Source = "aep://test/agent/" + agent
	w.send(t, claim)
	syncWS(t, w)
	return w
}

func sessionReplay(t *testing.T, srv *relaytest.Server, session string) []client.SSEItem {
	t.Helper()
	s := openSSE(t, srv, url.Values{"from": {"all"}, "live": {"0"}, "filter": {`{"session":"` + session + `"}`}}, nil)
	var out []client.SSEItem
	for it := range s.items {
		if !it.IsComment {
			out = append(out, it)
		}
	}
	return out
}

func TestControlRouteForwardAndPersist(t *testing.T) {
	t.Parallel()
	srv := relaytest.RunServer(t, relay.Config{Token: testToken})
	tgt := target(t, srv, "both", "kimi", "s-ctl", `{"accepts":["control.cancel"],"ack_window_ms":10000}`)
	tgt.send(t, subscribeFrame("own", map[string]any{"session": "s-ctl"}, nil))
	tgt.expect(t, func(f wsFrame) bool { return f.str("type") == "subscribed" })
	watcher := openSSE(t, srv, url.Values{"filter": {`{"session":"s-ctl"}`}}, nil)

	sender := helloWS(t, srv, "consumer", nil, "sender")
	cmd := command("control.cancel", "s-ctl", `{"scope":"session"}`)
	sender.send(t, cmd)
	got := tgt.eventFrames(t, 1)[0]
	if string(got.raw) != string(stamped(t, cmd, access.OwnerName)) {
		t.Fatalf("command not forwarded as sent, stamped with its sender:\n got %s\nwant %s", got.raw, stamped(t, cmd, access.OwnerName))
	}
	tgt.quiet(t, 100*time.Millisecond) // not a second copy through its own subscription
	w := watcher.next(t, false)
	if w.Event != "control.cancel" || w.HasID {
		t.Fatalf("watcher got event %q id %q; a command carries no resume position", w.Event, w.ID)
	}
	hist := sessionReplay(t, srv, "s-ctl")
	if len(hist) != 2 || hist[1].Event != "control.cancel" || hist[1].Data != string(stamped(t, cmd, access.OwnerName)) {
		t.Fatalf("history %+v: want the claim then the command", hist)
	}
	sender.quiet(t, 50*time.Millisecond) // no refusal
	// The target's ack is an ordinary session event.
	ack := mkEvent("s-ctl", 1, withType("control.accepted"), withData(`{}`))
	ack.Cause = cmd.ID
	ack.Agent, ack.Source = "kimi", "aep://test/agent/kimi"
	tgt.send(t, ack)
	if w := watcher.next(t, false); w.Event != "control.accepted" || w.ID != "s-ctl:0:1" {
		t.Fatalf("ack: %+v", w)
	}
}

func TestControlRefusals(t *testing.T) {
	t.Parallel()
	type setup func(t *testing.T, srv *relaytest.Server)
	cases := []struct {
		name  string
		token string
		setup setup
		cmd   string
		code  string
	}{
		{"watch-only relay", "", func(t *testing.T, srv *relaytest.Server) {
			target(t, srv, "emitter", "kimi", "s-r", `{"accepts":["control.cancel"]}`)
		}, "control.cancel", "unauthorized"},
		{"undeclared type", testToken, func(t *testing.T, srv *relaytest.Server) {
			target(t, srv, "emitter", "kimi", "s-r", `{"accepts":["control.attention.respond"]}`)
		}, "control.cancel", "unsupported"},
		{"no control block", testToken, func(t *testing.T, srv *relaytest.Server) {
			target(t, srv, "emitter", "kimi", "s-r", "")
		}, "control.cancel", "unsupported"},
		{"two claimants", testToken, func(t *testing.T, srv *relaytest.Server) {
			target(t, srv, "emitter", "kimi", "s-r", `{"accepts":["control.cancel"]}`)
			target(t, srv, "emitter", "impostor", "s-r", `{"accepts":["control.cancel"]}`)
		}, "control.cancel", "ambiguous"},
		{"history over HTTP only", testToken, func(t *testing.T, srv *relaytest.Server) {
			mustPost(t, srv, mkEvent("s-r", 0))
		}, "control.cancel", "no-route"},
		{"unknown session", testToken, func(*testing.T, *relaytest.Server) {}, "control.pause", "no-route"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv := relaytest.RunServer(t, relay.Config{Token: tc.token})
			tc.setup(t, srv)
			before := sessionReplay(t, srv, "s-r")
			sender := helloWS(t, srv, "consumer", nil, "sender")
			cmd := command(tc.cmd, "s-r", `{"scope":"run"}`)
			if tc.cmd == "control.pause" {
				cmd.Data = json.RawMessage(`{}`)
			}
			sender.send(t, cmd)
			f := sender.next(t)
			if f.str("type") != "error" || f.str("cause") != cmd.ID || f.str("code") != tc.code {
				t.Fatalf("got %s, want a cause-linked %s error frame", f.raw, tc.code)
			}
			after := sessionReplay(t, srv, "s-r")
			if len(after) != len(before) {
				t.Fatalf("a refused command entered history: %d -> %d events", len(before), len(after))
			}
		})
	}
}

func TestControlClaimLifecycle(t *testing.T) {
	t.Parallel()
	srv := relaytest.RunServer(t, relay.Config{Token: testToken})
	sender := helloWS(t, srv, "consumer", nil, "sender")
	send := func(session string) string {
		cmd := command("control.cancel", session, `{"scope":"run"}`)
		sender.send(t, cmd)
		select {
		case f := <-sender.frames:
			if f.str("cause") == cmd.ID {
				return f.str("code")
			}
			t.Fatalf("unexpected %s", f.raw)
		case <-time.After(200 * time.Millisecond):
		}
		return "routed"
	}
	tgt := target(t, srv, "emitter", "kimi", "s-life", `{"accepts":["control.cancel"]}`)
	if got := send("s-life"); got != "routed" {
		t.Fatalf("live claim: %s", got)
	}
	ended := mkEvent("s-life", 1, withType("session.ended"), withData(`{"reason":"normal"}`))
	ended.Agent, ended.Source = "kimi", "aep://test/agent/kimi"
	tgt.send(t, ended)
	eventually(t, "release", func() bool { return len(sessionReplay(t, srv, "s-life")) >= 3 })
	if got := send("s-life"); got != "no-route" {
		t.Fatalf("after session.ended: %s, want no-route", got)
	}
	tgt2 := target(t, srv, "emitter", "kimi", "s-gone", `{"accepts":["control.cancel"]}`)
	if got := send("s-gone"); got != "routed" {
		t.Fatalf("claim: %s", got)
	}
	_ = tgt2.c.CloseNow()
	eventually(t, "drop on close", func() bool { return send("s-gone") == "no-route" })
}

func TestRoster(t *testing.T) {
	t.Parallel()
	srv := relaytest.RunServer(t, relay.Config{Token: testToken})
	control := `{"accepts": ["control.cancel"], "ack_window_ms": 5000, "x-vendor": {"a": 1}}`
	target(t, srv, "emitter", "kimi", "s-ros", control)
	target(t, srv, "both", "other", "s-ros", "")
	c := helloWS(t, srv, "consumer", nil, "c")
	c.send(t, map[string]any{"type": "roster", "id": "r-1"})
	f := c.expect(t, func(f wsFrame) bool { return f.str("type") == "roster" })
	var reply struct {
		ID      string `json:"id"`
		Entries []struct {
			Session, Agent, Instance string
			Control                  json.RawMessage
			Emits                    json.RawMessage
		} `json:"entries"`
	}
	if err := json.Unmarshal(f.raw, &reply); err != nil {
		t.Fatal(err)
	}
	if reply.ID != "r-1" || len(reply.Entries) != 2 {
		t.Fatalf("roster %s: want id r-1 and one entry per claim", f.raw)
	}
	var kimi, other = reply.Entries[0], reply.Entries[1]
	if kimi.Agent != "kimi" {
		kimi, other = other, kimi
	}
	if string(kimi.Control) != control || kimi.Instance != "kimi/1" || string(kimi.Emits) != `["session","run"]` {
		t.Fatalf("entry not verbatim: control %s emits %s", kimi.Control, kimi.Emits)
	}
	if other.Control != nil || other.Session != "s-ros" {
		t.Fatalf("an undeclared control block must stay absent: %+v", other)
	}
	e := helloWS(t, srv, "emitter", nil, "e")
	e.send(t, map[string]any{"type": "roster", "id": "r-2"})
	if f := e.next(t); f.str("code") != "unauthorized" || f.str("id") != "r-2" {
		t.Fatalf("emitter roster: %s", f.raw)
	}
	e.send(t, map[string]any{"type": "ping"})
	if f := e.next(t); f.str("type") != "pong" {
		t.Fatalf("socket did not survive the refusal: %s", f.raw)
	}
}

// syncWS waits until the relay has processed everything w sent: frames are
// handled in order, so the pong follows them.
func syncWS(t *testing.T, w *wsClient) {
	t.Helper()
	w.send(t, map[string]any{"type": "ping", "t": "sync"})
	w.expect(t, func(f wsFrame) bool { return f.str("type") == "pong" && f.str("t") == "sync" })
}

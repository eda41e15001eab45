package relay_test

import (
	"bytes"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/aep-kimi/aep-kimi/aep"
	"github.com/aep-kimi/aep-kimi/internal/testkit/relaytest"
	"github.com/aep-kimi/aep-kimi/relay"
)

func TestStreamRefusals(t *testing.T) {
	t.Parallel()
	srv := relaytest.RunServer(t, relay.Config{MaxFrom: 2})
	cases := []struct {
		name   string
		q      url.Values
		hdr    map[string]string
		status int
		code   string
	}{
		{"filter not JSON", url.Values{"filter": {"{nope"}}, nil, 400, "invalid-filter"},
		{"filter illegal key", url.Values{"filter": {`{"seq":1}`}}, nil, 400, "invalid-filter"},
		{"filter bad pattern", url.Values{"filter": {`{"type":"*"}`}}, nil, 400, "invalid-filter"},
		{"capture unknown", url.Values{"capture": {"secret"}}, nil, 400, "invalid-capture"},
		{"from malformed", url.Values{"from": {`{"session":"x"}`}}, nil, 400, "invalid-filter"},
		{"from negative seq", url.Values{"from": {`[{"session":"x","seq":-1}]`}}, nil, 400, "invalid-filter"},
		{"from over MaxFrom", url.Values{"from": {`[{"session":"a","seq":0},{"session":"b","seq":0},{"session":"c","seq":0}]`}}, nil, 400, "limit-exceeded"},
		{"bad Last-Event-ID", nil, map[string]string{"Last-Event-ID": "nocolons"}, 400, "invalid-filter"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, status, body := tryOpenSSE(t, srv, tc.q, tc.hdr)
			if s != nil {
				t.Fatal("stream opened; want a refusal before any header")
			}
			if status != tc.status || !bytes.Contains(body, []byte(`"error":"`+tc.code+`"`)) {
				t.Fatalf("got %d %s, want %d %s", status, body, tc.status, tc.code)
			}
		})
	}
}

// Live SSE delivery: filter applied, id/event/data framing, data byte for
// byte what was posted, agent-scoped events without id.
func TestStreamFramingAndFilter(t *testing.T) {
	t.Parallel()
	srv := relaytest.RunServer(t, relay.Config{})
	s := openSSE(t, srv, url.Values{"filter": {`{"type":["progress.*","agent.*"],"severity":{"gte":"info"}}`}}, nil)
	want := mkEvent("s-frame", 7, withEpoch(2))
	skipped := mkEvent("s-frame", 8, withSeverity("debug"))
	other := mkEvent("s-frame", 9, withType("tool.requested"), withData(`{"tool":{"name":"Bash"}}`))
	hb := agentEvent()
	mustPost(t, srv, skipped, want, other, hb)
	it := s.next(t, false)
	if it.Event != "progress.status" || !it.HasID || it.ID != "s-frame:2:7" {
		t.Fatalf("framing: event %q id %q (has %v)", it.Event, it.ID, it.HasID)
	}
	if it.Data != string(line(t, want)) {
		t.Fatalf("data is not the posted bytes:\n got %s\nwant %s", it.Data, line(t, want))
	}
	it = s.next(t, false)
	if it.Event != "agent.heartbeat" || it.HasID {
		t.Fatalf("agent-scoped event: event %q, id %q (has %v); want no id", it.Event, it.ID, it.HasID)
	}
	s.quiet(t, 100*time.Millisecond)
}

func TestStreamLastEventIDAndExhausted(t *testing.T) {
	t.Parallel()
	srv := relaytest.RunServer(t, relay.Config{Buffer: 5})
	evs := seqEvents("s:colon", 0, 10)
	mustPost(t, srv, evs...)
	// Held: seq 5..9. Resume after 6: exactly 7..9, no marker.
	s := openSSE(t, srv, url.Values{"live": {"0"}}, map[string]string{"Last-Event-ID": "s:colon:0:6"})
	for i, ev := range s.events(t, 3) {
		if *ev.Seq != int64(7+i) {
			t.Fatalf("got seq %d, want %d", *ev.Seq, 7+i)
		}
	}
	if err := <-s.done; err == nil || err.Error() != "EOF" {
		t.Fatalf("live=0 stream should end after the replay, got %v", err)
	}
	// Resume after 1: seq 2..4 were evicted; the marker names 0:5 first.
	s = openSSE(t, srv, url.Values{"from": {`[{"session":"s:colon","epoch":0,"seq":1}]`}, "live": {"0"}}, nil)
	it := s.next(t, true)
	if !it.IsComment || it.Comment != "replay-exhausted s:colon 0:5" {
		t.Fatalf("first item %+v, want the replay-exhausted comment", it)
	}
	if ev := s.events(t, 1)[0]; *ev.Seq != 5 {
		t.Fatalf("delivery after the marker starts at seq %d, want 5", *ev.Seq)
	}
	// from=all never marks exhaustion.
	s = openSSE(t, srv, url.Values{"from": {"all"}, "live": {"0"}}, nil)
	if it := s.next(t, true); it.IsComment {
		t.Fatalf("from=all produced a comment %q before data", it.Comment)
	}
}

func TestStreamCaptureCeiling(t *testing.T) {
	t.Parallel()
	srv := relaytest.RunServer(t, relay.Config{})
	s := openSSE(t, srv, url.Values{"capture": {"metadata"}, "filter": {`{"session":"s-cap"}`}}, nil)
	full := openSSE(t, srv, url.Values{"filter": {`{"session":"s-cap"}`}}, nil)
	ev := mkEvent("s-cap", 0, withType("run.started"), withData(`{"trigger":"user","prompt":"CANARY secret prompt"}`))
	ev.Capture = "redacted"
	ev.Run = "r1"
	mustPost(t, srv, ev)
	got := s.events(t, 1)[0]
	if got.Capture != "metadata" || bytes.Contains(got.Data, []byte("CANARY")) {
		t.Fatalf("ceiling not enforced: capture %q data %s", got.Capture, got.Data)
	}
	if raw := full.next(t, false).Data; raw != string(line(t, ev)) {
		t.Fatalf("a subscriber without a ceiling must get the original bytes, got %s", raw)
	}
}

func TestStreamPingAndDrain(t *testing.T) {
	t.Parallel()
	srv := relaytest.RunServer(t, relay.Config{PingInterval: 20 * time.Millisecond})
	s := openSSE(t, srv, nil, nil)
	pings := 0
	for pings < 2 {
		if it := <-s.items; it.IsComment && it.Comment == "ping" {
			pings++
		}
	}
	if err := srv.Shutdown(); err != nil {
		t.Fatalf("drain: %v", err)
	}
	var comments []string
	for it := range s.items {
		if it.IsComment && it.Comment != "ping" {
			comments = append(comments, it.Comment)
		}
	}
	if len(comments) == 0 || comments[len(comments)-1] != "shutting-down" {
		t.Fatalf("stream ended without the shutting-down comment: %q", comments)
	}
}

// The relay never logs the access_token query parameter, and strips it
// before handlers see the request.
func TestAccessTokenNeverLogged(t *testing.T) {
	t.Parallel()
	const longToken = "aep-3f9c1d7e5b2a4c6e8f0a1b3c5d7e9f2a4c6e8b0d"
	var logs bytes.Buffer
	srv := relaytest.RunServer(t, relay.Config{Token: testToken, Logger: newTestLogger(&logs)})
	u := srv.URL + "/stream?live=0&access_token=" + testToken + "&filter=%7Bbad"
	resp, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	var body bytes.Buffer
	_, _ = body.ReadFrom(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 400 {
		t.Fatalf("HTTP %d", resp.StatusCode)
	}
	// A token in the path (an answer link's, or one pasted where a path
	// goes) is no more logged than one in the query.
	for _, path := range []string{"/nope?access_token=" + testToken, relay.AnswerPath + testToken, "/x/" + longToken + "/y"} {
		resp, err = http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = body.ReadFrom(resp.Body)
		resp.Body.Close()
	}
	if err := srv.Shutdown(); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(logs.String(), testToken) || strings.Contains(body.String(), testToken) || strings.Contains(logs.String(), longToken) {
		t.Fatalf("token leaked:\nlogs: %s\nbodies: %s", logs.String(), body.String())
	}
	if !strings.Contains(logs.String(), "/stream") {
		t.Fatalf("expected debug access logs, got %q", logs.String())
	}
}

// The replay is consistent with concurrent ingest: a subscriber started
// mid-flood sees every event exactly once, replay then live, in order.
func TestStreamReplayLiveHandoff(t *testing.T) {
	t.Parallel()
	const n = 2000
	// A queue that holds the whole flood: this test is about the replay/live
	// handoff, not backpressure (which may shed info events toward a consumer
	// that -race on a loaded machine makes slow).
	srv := relaytest.RunServer(t, relay.Config{QueueSize: 2 * n})
	done, half := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; i < n; i += 50 {
			if i == n/2 {
				close(half)
			}
			var batch []*aep.Event
			for j := i; j < i+50; j++ {
				batch = append(batch, mkEvent("s-handoff", int64(j)))
			}
			mustPost(t, srv, batch...)
		}
	}()
	<-half // the stream opens with history behind it and the flood going on
	s := openSSE(t, srv, url.Values{"from": {"all"}, "filter": {`{"session":"s-handoff"}`}}, nil)
	<-done
	for i, ev := range s.events(t, n) {
		if *ev.Seq != int64(i) {
			t.Fatalf("position %d is seq %d: replay and live overlapped or left a gap", i, *ev.Seq)
		}
	}
	s.quiet(t, 50*time.Millisecond)
}

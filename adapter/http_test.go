package adapter

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aep-kimi/aep-kimi/internal/spool"
	"github.com/aep-kimi/aep-kimi/internal/testkit/fulldisk"
)

// runServer starts an adapter on a real loopback socket and returns its base
// URL; it stops with the test.
func runServer(t *testing.T, s *Server) string {
	t.Helper()
	addr, err := s.Listen()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	select {
	case <-s.Ready():
	case err := <-done:
		t.Fatalf("Run: %v", err)
	}
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	return "http://" + addr.String()
}

func post(t *testing.T, url, token, ctype string, body []byte) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("status %d body is not JSON: %q", resp.StatusCode, b)
	}
	return resp.StatusCode, m
}

func TestHookBadInput(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	s := newTestServer(t, home, nil)
	base := runServer(t, s)
	tok := s.token
	good := []byte(`{"hook_event_name":"SessionStart","session_id":"s-ok","source":"startup"}`)
	cases := []struct {
		name   string
		token  string
		ctype  string
		body   []byte
		status int
		code   string
	}{
		{"no token", "", "application/json", good, 401, "unauthorized"},
		{"wrong token", "nope", "application/json", good, 401, "unauthorized"},
		{"wrong content type", tok, "text/plain", good, 415, "unsupported-media-type"},
		{"not json", tok, "application/json", []byte("hello"), 400, "invalid-payload"},
		{"empty", tok, "application/json", nil, 400, "invalid-payload"},
		{"no hook name", tok, "application/json", []byte(`{"session_id":"s"}`), 400, "invalid-payload"},
		{"array", tok, "application/json", []byte(`[{"hook_event_name":"Stop"}]`), 400, "invalid-payload"},
		{"oversize", tok, "application/json", bytes.Repeat([]byte("x"), 5<<20), 413, "payload-too-large"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			status, body := post(t, base+"/hook", c.token, c.ctype, c.body)
			if status != c.status || body["error"] != c.code {
				t.Fatalf("got %d %v, want %d %s", status, body, c.status, c.code)
			}
		})
	}
	// The daemon is still up and nothing else was disturbed.
	status, body := post(t, base+"/hook", tok, "application/json", good)
	if status != 200 || len(body) != 0 {
		t.Fatalf("good hook after bad ones: %d %v", status, body)
	}
	ev := readLog(t, home, "s-ok")
	if len(ev) != 1 || ev[0].Type != "session.started" {
		t.Fatalf("log: %v", types(ev))
	}
	entries, _ := os.ReadDir(logDir(home))
	if len(entries) != 1 {
		t.Fatalf("bad input created log files: %v", entries)
	}
}

func TestHostileSessionIDs(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	s := newTestServer(t, home, nil)
	base := runServer(t, s)
	for _, id := range []string{"../../etc/passwd", "a/b\\c", "..", ".", "session\x00nul", "日本語のセッション", strings.Repeat("long", 200), "  "} {
		payload, _ := json.Marshal(map[string]any{"hook_event_name": "SessionStart", "session_id": id, "source": "startup"})
		if status, body := post(t, base+"/hook", s.token, "application/json", payload); status != 200 {
			t.Fatalf("%q: %d %v", id, status, body)
		}
		name := LogFileName(id)
		if strings.ContainsAny(name, "/\\\x00") || name == ".jsonl" || strings.HasPrefix(name, ".") || len(name) > 255 {
			t.Fatalf("unsafe file name %q for %q", name, id)
		}
		ev := readLog(t, home, id)
		if len(ev) != 1 || ev[0].Session != id {
			t.Fatalf("%q: log holds %v", id, types(ev))
		}
	}
	// Nothing escaped the log directory.
	err := filepath.Walk(home, func(p string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		if !info.IsDir() && strings.HasSuffix(p, ".jsonl") && filepath.Dir(p) != logDir(home) {
			t.Errorf("log written outside the log dir: %s", p)
		}
		if !info.IsDir() && strings.HasSuffix(p, ".jsonl") && info.Mode().Perm() != 0o600 {
			t.Errorf("log %s has mode %v", p, info.Mode().Perm())
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestLogFileName(t *testing.T) {
	t.Parallel()
	cases := map[string]string{
		"session_8f037309-735d-4f1f": "session_8f037309-735d-4f1f.jsonl",
		"a.b":                        "a.b.jsonl",
		"..":                         "%2E..jsonl",
		"../x":                       "%2E.%2Fx.jsonl",
		"a/b":                        "a%2Fb.jsonl",
		"é":                          "%C3%A9.jsonl",
		"":                           "%00.jsonl",
	}
	for in, want := range cases {
		if got := LogFileName(in); got != want {
			t.Errorf("LogFileName(%q) = %q, want %q", in, got, want)
		}
	}
	long := LogFileName(strings.Repeat("%", 500))
	if len(long) > 220 || !strings.Contains(long, "~") {
		t.Errorf("long name not shortened with a hash: %d %q", len(long), long)
	}
	if LogFileName(strings.Repeat("a", 300)) == LogFileName(strings.Repeat("a", 301)) {
		t.Error("two long sessions share a file")
	}
}

func TestTokenCreatedPrivate(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	s := newTestServer(t, home, nil)
	st, err := os.Stat(TokenPath(home))
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Fatalf("token mode %v", st.Mode().Perm())
	}
	s2 := newTestServer(t, home, nil)
	if s.token != s2.token || len(s.token) < 32 {
		t.Fatal("token not stable across starts")
	}
	if s2.Epoch() <= s.Epoch() {
		t.Fatalf("epoch did not grow: %d then %d", s.Epoch(), s2.Epoch())
	}
}

// Spooled records are ingested at start, in spool order, marked as spooled;
// an unparseable one is quarantined, never silently lost.
func TestSpoolIngestAtStart(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	dir := spool.Dir(home)
	payloads := []string{
		`{"hook_event_name":"SessionStart","session_id":"sp","source":"startup"}`,
		`{"hook_event_name":"UserPromptSubmit","session_id":"sp","prompt":[{"type":"text","text":"hi"}],"is_steer":false}`,
		`not json at all`,
		`{"hook_event_name":"Stop","session_id":"sp","stop_hook_active":false}`,
	}
	for i, p := range payloads {
		at := time.Date(2026, 11, 29, 10, 0, i, 0, time.UTC).Format(time.RFC3339Nano)
		if _, _, err := spool.Append(dir, spool.Header{Delivery: "sp-" + string(rune('a'+i)), At: at, Reason: "unreachable"}, []byte(p)); err != nil {
			t.Fatal(err)
		}
	}
	s := newTestServer(t, home, nil)
	runServer(t, s)
	ev := readLog(t, home, "sp")
	if got := strings.Join(types(ev), ","); got != "session.started,run.started,run.finished" {
		t.Fatalf("spooled stream: %s", got)
	}
	for _, e := range ev {
		if v, ok := e.Ext[ExtSpooled]; !ok || string(v) != "true" {
			t.Errorf("%s not marked spooled", e.Type)
		}
	}
	if ev[0].Time != "2026-11-29T10:00:00.000Z" {
		t.Errorf("spooled event time %s, want the hook's own time", ev[0].Time)
	}
	left, _ := spool.List(dir)
	if len(left) != 0 {
		t.Fatalf("records left in the spool: %v", left)
	}
	q, _ := spool.ListQuarantine(dir)
	if len(q) != 1 {
		t.Fatalf("quarantine holds %d records, want 1", len(q))
	}
	assertValidStream(t, ev)
}

// A delivery taken directly and then again from the spool (kimi-hook timed
// out after the adapter had logged it) yields its events once.
func TestDuplicateDeliveryOnce(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	s := newTestServer(t, home, nil)
	p := []byte(`{"hook_event_name":"SessionStart","session_id":"dup","source":"startup"}`)
	for i := 0; i < 3; i++ {
		if _, _, err := s.ingest(&delivery{id: "same-id", payload: p, at: time.Now()}, i > 0); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(readLog(t, home, "dup")); n != 1 {
		t.Fatalf("%d events, want 1", n)
	}
	// After a restart the new adapter still recognises it from the log.
	s2 := newTestServer(t, home, nil)
	if _, _, err := s2.ingest(&delivery{id: "same-id", payload: p, at: time.Now()}, true); err != nil {
		t.Fatal(err)
	}
	if n := len(readLog(t, home, "dup")); n != 1 {
		t.Fatalf("%d events after restart, want 1", n)
	}
}

// A run open when the adapter stops is closed by its Stop after a restart:
// state comes back from the log, the epoch grows and seq restarts.
func TestRestartRecoversRun(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	caps := loadCapture(t, "basic")
	stop := -1
	for i, c := range caps {
		if c.Event == "Stop" {
			stop = i
		}
	}
	s := newTestServer(t, home, nil)
	var before, after []capture
	for i, c := range caps {
		if i == stop {
			after = append(after, c)
		} else {
			before = append(before, c)
		}
	}
	feed(t, s, before) // everything but the Stop
	s2 := newTestServer(t, home, nil)
	feed(t, s2, after)
	ev := readLog(t, home, sessionOf(t, caps))
	assertValidStream(t, ev)
	last := ev[len(ev)-1]
	if last.Type != "run.finished" || last.Run != byType(ev, "run.started")[0].Run {
		t.Fatalf("the Stop after restart did not close the open run: %s run=%s", last.Type, last.Run)
	}
	if *last.Epoch != s2.Epoch() || *last.Seq != 0 {
		t.Fatalf("after restart: epoch %d seq %d", *last.Epoch, *last.Seq)
	}
}

func TestHealthz(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	s := newTestServer(t, home, nil)
	base := runServer(t, s)
	get := func() Health {
		_, h := healthz(t, base)
		return h
	}
	if h := get(); !h.OK || h.Channel.State != ChannelUnavailable || h.Relay != "none" {
		t.Fatalf("before hooks: %+v", h)
	}
	post(t, base+"/hook", s.token, "application/json", []byte(`{"hook_event_name":"SessionStart","session_id":"h1","source":"startup"}`))
	if h := get(); h.Channel.State != ChannelActive {
		t.Fatalf("after a hook: %+v", h)
	}
	post(t, base+"/hook", s.token, "application/json", []byte(`{"hook_event_name":"SessionEnd","session_id":"h1","reason":"exit"}`))
	if h := get(); h.Channel.State != ChannelStopped {
		t.Fatalf("after the session ended: %+v", h)
	}
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{`aepkimi_adapter_hooks_total{event="SessionStart"} 1`, `aepkimi_adapter_events_total{type="session.ended"} 1`,
		"aepkimi_adapter_hook_roundtrip_seconds_bucket", "aepkimi_adapter_spool_backlog", "aepkimi_adapter_relay_outbox_depth",
		`aepkimi_adapter_channel_state{state="stopped"} 1`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}

func TestChannelStale(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	clock := &testClock{t: time.Now()}
	s := newTestServer(t, home, func(c *Config) { c.Now = clock.now })
	s.ingest(&delivery{payload: []byte(`{"hook_event_name":"SessionStart","session_id":"q","source":"startup"}`), at: clock.t}, false)
	if st := s.Channel().State; st != ChannelActive {
		t.Fatalf("state %s", st)
	}
	clock.t = clock.t.Add(DefaultStaleAfter + time.Second)
	if st := s.Channel().State; st != ChannelStale {
		t.Fatalf("after silence: %s", st)
	}
	s.ingest(&delivery{payload: []byte(`{"hook_event_name":"SessionHeartbeat","session_id":"q","uptime_ms":60001}`), at: clock.t}, false)
	if st := s.Channel().State; st != ChannelActive {
		t.Fatalf("after a heartbeat: %s", st)
	}
}

// A permission request still open when the adapter restarts (or evicts
// the session) comes back from the log: SessionEnd dismisses it before
// session.ended (AEP-0002 §7.2), and a PermissionResult that arrives after
// the restart answers it rather than opening a second request.
func TestRestartKeepsOpenPermissionRequests(t *testing.T) {
	t.Parallel()
	caps := loadCapture(t, "tui")
	at := func(event string) int {
		for i, c := range caps {
			if c.Event == event {
				return i
			}
		}
		t.Fatalf("no %s in the capture", event)
		return -1
	}
	req, end := at("PermissionRequest"), at("SessionEnd")
	session := sessionOf(t, caps)
	for _, tc := range []struct {
		name  string
		after []capture // fed after the restart
	}{
		{"ended", caps[end:]},
		{"answered-then-ended", caps[req+1:]},
	} {
		for _, how := range []string{"restart", "eviction"} {
			t.Run(tc.name+"/"+how, func(t *testing.T) {
				home := t.TempDir()
				s := newTestServer(t, home, func(cfg *Config) { cfg.MaxSessions = 1 })
				feed(t, s, caps[:req+1])
				if how == "restart" {
					s.core.CloseAll()
					s = newTestServer(t, home, nil)
				} else {
					p := []byte(`{"hook_event_name":"SessionStart","session_id":"other","source":"startup"}`)
					if out, _, err := s.ingest(&delivery{payload: p, at: time.Now()}, false); err != nil || out.err != nil {
						t.Fatal(err, out.err)
					}
					if ids := s.SessionIDs(); len(ids) != 1 || ids[0] != "other" {
						t.Fatalf("sessions in memory %v: the first was not evicted", ids)
					}
				}
				feed(t, s, tc.after)
				ev := readLog(t, home, session)
				assertValidStream(t, ev)
				if n := len(byType(ev, "attention.requested")); n != 1 {
					t.Fatalf("%d attention requests for one permission prompt", n)
				}
				if ev[len(ev)-1].Type != "session.ended" {
					t.Fatalf("the log ends with %s", ev[len(ev)-1].Type)
				}
			})
		}
	}
}

// A hook the log refuses (a full disk) changes nothing the log does not
// say: after the permission prompt's answer was refused, the session's end
// still finds the request open, as the log has it, and settles it, so the
// stream stays valid (AEP-0002 §7.2) whether or not the answer ever
// arrives again.
func TestRefusedHookLeavesStateAsLogged(t *testing.T) {
	t.Parallel()
	caps := loadCapture(t, "tui")
	req, end := -1, -1
	for i, c := range caps {
		switch {
		case c.Event == "PermissionRequest" && req < 0:
			req = i
		case c.Event == "SessionEnd":
			end = i
		}
	}
	if req < 0 || end < 0 || caps[req+1].Event == "SessionEnd" {
		t.Fatalf("the capture has no answered permission prompt before its end")
	}
	session := sessionOf(t, caps)
	home := t.TempDir()
	s := newTestServer(t, home, nil)
	feed(t, s, caps[:req+1])
	// The answer finds the log's file system read-only (as after an
	// error), the log still readable.
	s.core.CloseAll()
	restore := fulldisk.ReadOnly(t, logDir(home))
	c := caps[req+1]
	d := &delivery{id: "refused", payload: []byte(c.Raw), at: time.Unix(0, int64(c.Time*1e9))}
	if out, _, err := s.ingest(d, false); err != nil || out.err == nil {
		t.Fatalf("%s onto an unwritable log: %v %v, want not-durable", c.Event, err, out.err)
	}
	restore()
	feed(t, s, caps[end:])
	ev := readLog(t, home, session)
	assertValidStream(t, ev)
	if ev[len(ev)-1].Type != "session.ended" {
		t.Fatalf("the log ends with %s", ev[len(ev)-1].Type)
	}
}

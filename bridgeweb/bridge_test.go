package bridgeweb

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/aep-kimi/aep-kimi/aep"
	"github.com/aep-kimi/aep-kimi/emitter"
	"github.com/aep-kimi/aep-kimi/internal/testkit/emittertest"
	"github.com/aep-kimi/aep-kimi/internal/testkit/poll"
	"github.com/aep-kimi/aep-kimi/internal/testkit/syncbuf"
	"github.com/aep-kimi/aep-kimi/mapping"
)

func typesOf(evs []*aep.Event) []string {
	var out []string
	for _, e := range evs {
		out = append(out, e.Type)
	}
	return out
}

func kapSeq(e *aep.Event) int64 {
	var n int64 = -1
	if raw, ok := e.Ext[ExtKimiSeq]; ok {
		json.Unmarshal(raw, &n)
	}
	return n
}

// fakeKap is a scripted kap-server: real HTTP and WebSocket, the vendor's
// wire shapes, driven by the test.
type fakeKap struct {
	t     *testing.T
	srv   *httptest.Server
	token string

	mu       sync.Mutex
	sessions []string
	healthy  bool
	active   string // running prompt id
	posted   []map[string]any
	aborted  []string
	resolved bool // an approval POST answers resolved:false (40902)
	// asked are the question POSTs (body, plus question_id and tail);
	// qclosed makes them answer 40902, as kap-server does for a question
	// answered or dismissed already.
	asked   []map[string]any
	qclosed bool

	conns chan *kapConn
}

type kapConn struct {
	c  *websocket.Conn
	in chan map[string]any // frames from the bridge (pongs are answered here too)
}

func newFakeKap(t *testing.T, token string, sessions ...string) *fakeKap {
	k := &fakeKap{t: t, token: token, sessions: sessions, healthy: true, conns: make(chan *kapConn, 4)}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/v1/healthz", func(w http.ResponseWriter, r *http.Request) {
		k.mu.Lock()
		ok := k.healthy
		k.mu.Unlock()
		if !ok {
			http.Error(w, "gone", http.StatusServiceUnavailable)
			return
		}
		envelope(w, map[string]any{"ok": true})
	})
	mux.HandleFunc("GET /api/v1/sessions", k.auth(func(w http.ResponseWriter, r *http.Request) {
		k.mu.Lock()
		defer k.mu.Unlock()
		// Pages of two, newest first, continued by before_id.
		start := 0
		if b := r.URL.Query().Get("before_id"); b != "" {
			for i, s := range k.sessions {
				if s == b {
					start = i + 1
				}
			}
		}
		end := min(start+2, len(k.sessions))
		var items []any
		for _, s := range k.sessions[start:end] {
			items = append(items, map[string]any{"id": s, "archived": false})
		}
		envelope(w, map[string]any{"items": items, "has_more": end < len(k.sessions)})
	}))
	mux.HandleFunc("POST /api/v1/sessions/{sid}/approvals/{aid}", k.auth(func(w http.ResponseWriter, r *http.Request) {
		var body map[string]any
		json.NewDecoder(r.Body).Decode(&body)
		body["approval_id"] = r.PathValue("aid")
		k.mu.Lock()
		k.posted = append(k.posted, body)
		already := k.resolved
		k.mu.Unlock()
		if already {
			w.Write([]byte(`{"code":40902,"msg":"approval already resolved","data":{"resolved":false}}`))
			return
		}
		envelope(w, map[string]any{"resolved": true})
	}))
	mux.HandleFunc("POST /api/v1/sessions/{sid}/questions/{tail}", k.auth(func(w http.ResponseWriter, r *http.Request) {
		body := map[string]any{}
		json.NewDecoder(r.Body).Decode(&body)
		id, action, _ := strings.Cut(r.PathValue("tail"), ":")
		body["question_id"], body["action"] = id, action
		k.mu.Lock()
		k.asked = append(k.asked, body)
		closed := k.qclosed
		k.mu.Unlock()
		switch {
		case closed:
			w.Write([]byte(`{"code":40902,"msg":"question ` + id + ` already resolved","data":null}`))
		case action == "dismiss":
			// What kap-server 2.1.0 answers a dismissal that worked.
			w.Write([]byte(`{"code":40909,"msg":"question ` + id + ` dismissed","data":{"dismissed":true,"dismissed_at":"` + now() + `"}}`))
		default:
			envelope(w, map[string]any{"resolved": true, "resolved_at": now()})
		}
	}))
	mux.HandleFunc("GET /api/v1/sessions/{sid}/prompts", k.auth(func(w http.ResponseWriter, r *http.Request) {
		k.mu.Lock()
		defer k.mu.Unlock()
		var active any
		if k.active != "" {
			active = map[string]any{"prompt_id": k.active, "status": "running"}
		}
		envelope(w, map[string]any{"active": active, "queued": []any{}})
	}))
	mux.HandleFunc("POST /api/v1/sessions/{sid}/prompts/{tail}", k.auth(func(w http.ResponseWriter, r *http.Request) {
		k.mu.Lock()
		k.aborted = append(k.aborted, r.PathValue("tail"))
		k.mu.Unlock()
		envelope(w, map[string]any{"aborted": true})
	}))
	mux.HandleFunc("/api/v1/ws", func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Sec-WebSocket-Protocol") != bearerProtocol+k.token {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		c, err := websocket.Accept(w, r, &websocket.AcceptOptions{Subprotocols: []string{bearerProtocol + k.token}})
		if err != nil {
			return
		}
		kc := &kapConn{c: c, in: make(chan map[string]any, 64)}
		kc.send(t, map[string]any{"type": "server_hello", "timestamp": now(), "payload": map[string]any{
			"ws_connection_id": "conn_1", "protocol_version": 2, "heartbeat_ms": 10000, "max_event_buffer_size": 1000}})
		k.conns <- kc
		for {
			_, data, err := c.Read(context.Background())
			if err != nil {
				close(kc.in)
				return
			}
			var f map[string]any
			json.Unmarshal(data, &f)
			kc.in <- f
		}
	})
	k.srv = httptest.NewServer(mux)
	t.Cleanup(k.srv.Close)
	return k
}

func (k *fakeKap) auth(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+k.token {
			w.WriteHeader(http.StatusUnauthorized)
			w.Write([]byte(`{"code":40101,"msg":"Unauthorized","data":null}`))
			return
		}
		h(w, r)
	}
}

func envelope(w http.ResponseWriter, data any) {
	json.NewEncoder(w).Encode(map[string]any{"code": 0, "msg": "success", "data": data, "request_id": "r"})
}

func now() string { return time.Now().UTC().Format(time.RFC3339Nano) }

func (kc *kapConn) send(t *testing.T, f any) {
	t.Helper()
	var b []byte
	switch v := f.(type) {
	case []byte:
		b = v
	case string:
		b = []byte(v)
	default:
		b, _ = json.Marshal(v)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := kc.c.Write(ctx, websocket.MessageText, b); err != nil {
		t.Logf("fake kap: write: %v", err)
	}
}

// next returns the next frame the bridge sent of a type.
func (kc *kapConn) next(t *testing.T, typ string) map[string]any {
	t.Helper()
	timeout := time.After(5 * time.Second)
	for {
		select {
		case f, ok := <-kc.in:
			if !ok {
				t.Fatalf("connection closed waiting for %s", typ)
			}
			if f["type"] == typ {
				return f
			}
		case <-timeout:
			t.Fatalf("no %s from the bridge", typ)
		}
	}
}

// ack answers a subscribe: accepted sessions get the given cursors.
func (kc *kapConn) ack(t *testing.T, sub map[string]any, notFound []string, cursors map[string][2]any) {
	t.Helper()
	pl := sub["payload"].(map[string]any)
	nf := map[string]bool{}
	for _, s := range notFound {
		nf[s] = true
	}
	accepted := []string{}
	for _, s := range pl["session_ids"].([]any) {
		if !nf[s.(string)] {
			accepted = append(accepted, s.(string))
		}
	}
	cur := map[string]any{}
	for s, c := range cursors {
		cur[s] = map[string]any{"seq": c[0], "epoch": c[1]}
	}
	if notFound == nil {
		notFound = []string{}
	}
	kc.send(t, map[string]any{"type": "ack", "id": sub["id"], "code": 0, "msg": "success", "payload": map[string]any{
		"accepted": accepted, "not_found": notFound, "resync_required": []string{}, "cursors": cur}})
}

// frame builds a session event frame.
func frame(sid, epoch string, seq int64, typ string, payload map[string]any) map[string]any {
	pl := map[string]any{"type": typ, "agentId": "main", "sessionId": sid}
	for k, v := range payload {
		pl[k] = v
	}
	return map[string]any{"type": typ, "seq": seq, "session_id": sid, "timestamp": now(), "payload": pl, "epoch": epoch}
}

type testBridge struct {
	*Bridge
	pub      *emittertest.Recorder
	logs     *syncbuf.Buffer
	done     chan error
	stopOnce sync.Once
	cancel   context.CancelFunc
}

// stop ends Run and checks it returned cleanly.
func (tb *testBridge) stop(t *testing.T) {
	tb.stopOnce.Do(func() {
		tb.cancel()
		select {
		case err := <-tb.done:
			if err != nil {
				t.Errorf("Run: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Error("Run did not return")
		}
	})
}

func startBridge(t *testing.T, k *fakeKap, mode mapping.Mode, tokenFile string, edit func(*Config)) *testBridge {
	t.Helper()
	home := t.TempDir()
	if tokenFile == "" {
		tokenFile = filepath.Join(t.TempDir(), "token")
		os.WriteFile(tokenFile, []byte(k.token+"\n"), 0o600)
	}
	tb := &testBridge{pub: &emittertest.Recorder{}, logs: &syncbuf.Buffer{}, done: make(chan error, 1)}
	cfg := Config{
		Config: emitter.Config{Home: home, Host: "test", Posture: mapping.DefaultPosture(), Publisher: tb.pub,
			Logger: slog.New(slog.NewTextHandler(tb.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))},
		Listen: "127.0.0.1:0", Mode: mode, KapURL: k.srv.URL, KapTokenFile: tokenFile,
		DiscoveryPoll: 20 * time.Millisecond, BackoffMin: 10 * time.Millisecond, BackoffMax: 50 * time.Millisecond,
		ProbeInterval: 50 * time.Millisecond, DormantRetry: 100 * time.Millisecond,
	}
	if edit != nil {
		edit(&cfg)
	}
	b, err := NewBridge(cfg)
	if err != nil {
		t.Fatal(err)
	}
	tb.Bridge = b
	ctx, cancel := context.WithCancel(context.Background())
	tb.cancel = cancel
	go func() { tb.done <- b.Run(ctx) }()
	t.Cleanup(func() { tb.stop(t) })
	<-b.Ready()
	return tb
}

func (tb *testBridge) metric(t *testing.T, name string) string {
	t.Helper()
	addr, _ := tb.Listen()
	resp, err := http.Get("http://" + addr.String() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, name) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

func sessionIDs(sub map[string]any) []string {
	var out []string
	for _, s := range sub["payload"].(map[string]any)["session_ids"].([]any) {
		out = append(out, s.(string))
	}
	sort.Strings(out)
	return out
}

func cursorOf(sub map[string]any, sid string) string {
	c, _ := sub["payload"].(map[string]any)["cursors"].(map[string]any)
	if c == nil || c[sid] == nil {
		return "none"
	}
	m := c[sid].(map[string]any)
	return fmt.Sprintf("%v@%v", m["seq"], m["epoch"])
}

// A companion bridge follows a kap-server through its whole protocol:
// paginated listing, subscribe with ack cursors, pong, a session first seen
// in a broadcast, bad frames, a lost connection resumed from the cursors
// with an overlapping replay, and a resync demand that is reported as a gap.
func TestBridgeFollowsResumesAndReportsGaps(t *testing.T) {
	t.Parallel()
	k := newFakeKap(t, "tok-1", "s1", "s0", "s9")
	tb := startBridge(t, k, mapping.Companion, "", nil)
	kc := <-k.conns

	sub := kc.next(t, "subscribe")
	if got := strings.Join(sessionIDs(sub), ","); got != "__global__,s0,s1,s9" {
		t.Fatalf("first subscribe %s (the listing is paginated by twos)", got)
	}
	if cursorOf(sub, "s1") != "none" {
		t.Errorf("a session never seen is asked with cursor %s", cursorOf(sub, "s1"))
	}
	kc.ack(t, sub, []string{"s9"}, map[string][2]any{"s1": {3, "A"}, "s0": {0, "Z"}, "__global__": {7, "G"}})
	kc.send(t, frame("s1", "A", 4, "turn.started", nil))
	kc.send(t, frame("s1", "A", 4, "agent.status.updated", nil)) // volatile twin below
	kc.send(t, map[string]any{"type": "assistant.delta", "seq": 4, "session_id": "s1", "volatile": true, "epoch": "A", "payload": map[string]any{}})
	kc.send(t, frame("s1", "A", 5, "permission.approval.requested", nil))
	kc.send(t, frame("s1", "A", 6, "turn.ended", map[string]any{"reason": "completed"}))
	kc.send(t, map[string]any{"type": "ping", "timestamp": now(), "payload": map[string]any{"nonce": "n-42"}})
	if pong := kc.next(t, "pong"); pong["payload"].(map[string]any)["nonce"] != "n-42" {
		t.Errorf("pong %v", pong)
	}
	// Bad frames: counted and logged, the stream goes on.
	for _, bad := range []string{"not json", "{}", `{"type":`, "[1,2]", ""} {
		kc.send(t, bad)
	}
	// A session created after the listing is broadcast to every client.
	kc.send(t, frame("s2", "B", 1, "event.session.created", nil))
	sub2 := kc.next(t, "subscribe")
	if got := strings.Join(sessionIDs(sub2), ","); got != "s2" || cursorOf(sub2, "s2") != "0@B" {
		t.Fatalf("follow-up subscribe %s cursor %s", got, cursorOf(sub2, "s2"))
	}
	// The replay brings the broadcast frame again, then what followed.
	kc.send(t, frame("s2", "B", 1, "event.session.created", nil))
	kc.send(t, frame("s2", "B", 2, "agent.created", nil))
	kc.ack(t, sub2, nil, map[string][2]any{"s2": {2, "B"}})
	kc.send(t, frame("s2", "B", 3, "session.meta.updated", nil))

	tb.pub.Wait(t, "s2 seq 3", func(evs []*aep.Event) bool {
		for _, e := range evs {
			if e.Session == "s2.web" && kapSeq(e) == 3 {
				return true
			}
		}
		return false
	})

	// The server drops the connection; the bridge comes back with cursors.
	kc.c.Close(websocket.StatusGoingAway, "restart")
	kc = <-k.conns
	sub3 := kc.next(t, "subscribe")
	for sid, want := range map[string]string{"s1": "6@A", "s2": "3@B", "__global__": "7@G", "s9": "none"} {
		if got := cursorOf(sub3, sid); got != want {
			t.Errorf("resume cursor of %s: %s, want %s", sid, got, want)
		}
	}
	// Live frames overtaking the replay, the replay itself, then a resync
	// demand for s2 the server can no longer replay.
	kc.send(t, frame("s1", "A", 8, "prompt.completed", nil))
	kc.send(t, frame("s1", "A", 6, "turn.ended", nil))
	kc.send(t, frame("s1", "A", 7, "event.session.work_changed", nil))
	kc.send(t, frame("s1", "A", 8, "prompt.completed", nil))
	kc.send(t, map[string]any{"type": "resync_required", "timestamp": now(), "payload": map[string]any{
		"session_id": "s2", "reason": "buffer_overflow", "current_seq": 1503, "epoch": "B"}})
	kc.ack(t, sub3, []string{"s9"}, map[string][2]any{"s1": {8, "A"}, "s2": {1503, "B"}, "__global__": {7, "G"}})
	kc.send(t, frame("s2", "B", 1504, "turn.started", nil))
	kc.send(t, frame("s1", "A", 9, "turn.started", nil))

	evs := tb.pub.Wait(t, "s1 seq 9 and s2 seq 1504", func(evs []*aep.Event) bool {
		n := 0
		for _, e := range evs {
			if (e.Session == "s1.web" && kapSeq(e) == 9) || (e.Session == "s2.web" && kapSeq(e) == 1504) {
				n++
			}
		}
		return n == 2
	})

	// Every event is companion-only, names its kap session, and each kap
	// frame was mapped exactly once.
	var sv aep.StreamValidator
	seqs := map[string][]int64{}
	var gaps []*aep.Event
	for _, e := range evs {
		if err := aep.Validate(e); err != nil {
			t.Errorf("%s: %v", e.Type, err)
		}
		for _, v := range sv.Add(e) {
			t.Errorf("stream: %v", v)
		}
		if !strings.HasPrefix(e.Type, "x.kimi-code.web.") {
			t.Errorf("companion emitted %s", e.Type)
		}
		if ks, _ := e.ExtString(ExtKimiSession); ks+".web" != e.Session {
			t.Errorf("%s in %s has kimisession %q", e.Type, e.Session, ks)
		}
		if !strings.HasPrefix(e.Source, "aep://test/agent/kimi-code/web/session/") {
			t.Errorf("source %s", e.Source)
		}
		if e.Type == GapType {
			gaps = append(gaps, e)
			continue
		}
		seqs[e.Session] = append(seqs[e.Session], kapSeq(e))
	}
	if got := fmt.Sprint(seqs["s1.web"]); got != "[4 6 7 8 9]" {
		t.Errorf("s1 kap seqs %s (5 is a bus echo, 4's volatile twins never emit)", got)
	}
	if got := fmt.Sprint(seqs["s2.web"]); got != "[1 2 3 1504]" {
		t.Errorf("s2 kap seqs %s", got)
	}
	if len(gaps) != 1 {
		t.Fatalf("%d gap events, want 1", len(gaps))
	}
	gd, _ := gaps[0].DataMap()
	if gaps[0].Session != "s2.web" || gd["reason"] != "buffer_overflow" || fmt.Sprint(gd["from_seq"], "-", gd["to_seq"]) != "4-1503" {
		t.Errorf("gap %s %v", gaps[0].Session, gd)
	}
	if m := tb.metric(t, "aepkimi_bridgeweb_bad_frames_total"); !strings.Contains(m, `reason="not_json"} 4`) || !strings.Contains(m, `reason="empty"} 1`) {
		t.Errorf("bad frame metric:\n%s", m)
	}
	if !strings.Contains(tb.logs.String(), "bad kap frame ignored") {
		t.Error("no log line for the bad frames")
	}
	if m := tb.metric(t, "aepkimi_bridgeweb_duplicate_frames_total"); !strings.HasSuffix(m, " 3") {
		t.Errorf("duplicates: %s", m)
	}
	h := tb.HealthNow()
	if h.Kap.State != KapConnected || h.SessionsFollowed != 3 || h.SessionsDormant != 1 {
		t.Errorf("health %+v", h)
	}
	// The logs hold the same events, one file per session, 0600.
	for _, s := range []string{"s1.web", "s2.web"} {
		st, err := os.Stat(filepath.Join(LogDir(tb.cfg.Home), s+".jsonl"))
		if err != nil || st.Mode().Perm() != 0o600 {
			t.Errorf("log of %s: %v %v", s, err, st)
		}
	}
}

// TestBridgeCarriesTheContextWindow: a live session's volatile status pulse
// (never an event of its own) says how full the context is, and the step
// and the turn that follow carry it beside the step's token usage; a
// subagent's pulse changes nothing.
func TestBridgeCarriesTheContextWindow(t *testing.T) {
	t.Parallel()
	k := newFakeKap(t, "tok-1", "s1")
	tb := startBridge(t, k, mapping.Companion, "", nil)
	kc := <-k.conns
	sub := kc.next(t, "subscribe")
	kc.ack(t, sub, nil, map[string][2]any{"s1": {0, "A"}, "__global__": {0, "G"}})
	pulse := func(agent string, tokens int) map[string]any {
		f := frame("s1", "A", 1, "agent.status.updated", map[string]any{"agentId": agent, "contextTokens": tokens, "maxContextTokens": 131072})
		f["volatile"] = true
		return f
	}
	kc.send(t, frame("s1", "A", 1, "turn.started", nil))
	kc.send(t, pulse("main", 66))
	kc.send(t, pulse("sub-1", 9999))
	kc.send(t, frame("s1", "A", 2, "turn.step.completed", map[string]any{"usage": map[string]any{"inputOther": 100, "inputCacheRead": 20, "output": 10}}))
	kc.send(t, frame("s1", "A", 3, "turn.ended", map[string]any{"reason": "completed"}))
	evs := tb.pub.Wait(t, "the turn's end", func(evs []*aep.Event) bool {
		for _, e := range evs {
			if kapSeq(e) == 3 {
				return true
			}
		}
		return false
	})
	got := map[string]string{}
	for _, e := range evs {
		d, _ := e.DataMap()
		got[e.Type] = fmt.Sprint(d[mapping.DataContextTokens], "/", d[mapping.DataContextLimit], " ", d[mapping.DataInputTokens], "+", d[mapping.DataOutputTokens])
	}
	for typ, want := range map[string]string{
		"x.kimi-code.web.turn.started":        "<nil>/<nil> <nil>+<nil>",
		"x.kimi-code.web.turn.step.completed": "66/131072 120+10",
		"x.kimi-code.web.turn.ended":          "66/131072 <nil>+<nil>",
	} {
		if got[typ] != want {
			t.Errorf("%s carries context and usage %q, want %q", typ, got[typ], want)
		}
	}
}

// A server that shuts down keeps its WebSocket open while clients stay; the
// bridge notices the listener is gone and lets go.
func TestBridgeLetsGoOfAStoppedServer(t *testing.T) {
	t.Parallel()
	k := newFakeKap(t, "tok-2")
	tb := startBridge(t, k, mapping.Companion, "", nil)
	kc := <-k.conns
	kc.ack(t, kc.next(t, "subscribe"), nil, nil)
	k.mu.Lock()
	k.healthy = false
	k.mu.Unlock()
	select {
	case _, ok := <-kc.in:
		for ok {
			_, ok = <-kc.in
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the bridge kept the connection to a stopped server")
	}
	if !poll.Until(5*time.Second, func() bool {
		return strings.Contains(tb.metric(t, "aepkimi_bridgeweb_kap_connect_errors_total"), `reason="server_gone"`)
	}) {
		t.Fatal("no server_gone metric")
	}
}

// A wrong token: a clear log line, a metric, an unauthorized state; the
// bridge keeps retrying and picks up a corrected token file.
func TestBridgeWrongToken(t *testing.T) {
	t.Parallel()
	k := newFakeKap(t, "right-token")
	tokenFile := filepath.Join(t.TempDir(), "token")
	os.WriteFile(tokenFile, []byte("wrong-token\n"), 0o600)
	tb := startBridge(t, k, mapping.Companion, tokenFile, nil)
	if !poll.Until(5*time.Second, func() bool { return tb.HealthNow().Kap.State == KapUnauthorized }) {
		t.Fatalf("state %+v", tb.HealthNow().Kap)
	}
	if m := tb.metric(t, "aepkimi_bridgeweb_kap_connect_errors_total"); !strings.Contains(m, `reason="unauthorized"`) {
		t.Errorf("metric: %s", m)
	}
	logs := tb.logs.String()
	if !strings.Contains(logs, "HTTP 401") {
		t.Errorf("no clear log line: %s", logs)
	}
	if strings.Contains(logs, "wrong-token") || strings.Contains(logs, "right-token") {
		t.Error("a token reached the log")
	}
	os.WriteFile(tokenFile, []byte("right-token\n"), 0o600)
	kc := <-k.conns
	kc.ack(t, kc.next(t, "subscribe"), nil, nil)
	if !poll.Until(5*time.Second, func() bool { return tb.HealthNow().Kap.State == KapConnected }) {
		t.Fatalf("state %+v", tb.HealthNow().Kap)
	}
}

// The kap-server restarted: sessions it has not loaded are not found, and
// the bridge keeps asking until they are.
func TestBridgeRetriesDormantSessions(t *testing.T) {
	t.Parallel()
	k := newFakeKap(t, "tok-3", "s1")
	tb := startBridge(t, k, mapping.Companion, "", nil)
	kc := <-k.conns
	kc.ack(t, kc.next(t, "subscribe"), []string{"s1", "__global__"}, nil)
	retry := kc.next(t, "subscribe")
	if got := strings.Join(sessionIDs(retry), ","); got != "__global__,s1" {
		t.Fatalf("retry %s", got)
	}
	if h := tb.HealthNow(); h.SessionsDormant != 1 || h.SessionsFollowed != 0 {
		t.Errorf("health while dormant %+v", h)
	}
	kc.ack(t, retry, nil, map[string][2]any{"s1": {10, "A"}})
	kc.send(t, frame("s1", "A", 11, "turn.started", nil))
	tb.pub.Wait(t, "s1 after it woke", func(evs []*aep.Event) bool { return len(evs) == 1 && kapSeq(evs[0]) == 11 })
}

// A bridge restarted resumes each session from the position its own log
// recorded, and an archive on the server-wide stream lands in the session.
func TestBridgeRecoversItsCursorFromTheLog(t *testing.T) {
	t.Parallel()
	k := newFakeKap(t, "tok-4", "s1")
	home := t.TempDir()
	tb := startBridge(t, k, mapping.Primary, "", func(c *Config) { c.Home = home })
	kc := <-k.conns
	kc.ack(t, kc.next(t, "subscribe"), nil, map[string][2]any{"s1": {0, "A"}, "__global__": {0, "G"}})
	kc.send(t, frame("s1", "A", 1, "turn.started", map[string]any{"turnId": 0, "origin": map[string]any{"kind": "user"}}))
	kc.send(t, frame("s1", "A", 2, "tool.call.started", map[string]any{"turnId": 0, "toolCallId": "c1", "name": "Bash", "args": map[string]any{}}))
	tb.pub.Wait(t, "the tool request", func(evs []*aep.Event) bool { return len(evs) == 2 })
	first := tb.pub.All()

	// A second bridge on the same home, the first one stopped.
	tb.stop(t)
	tb2 := startBridge(t, k, mapping.Primary, "", func(c *Config) { c.Home = home })
	kc2 := <-k.conns
	sub := kc2.next(t, "subscribe")
	if got := cursorOf(sub, "s1"); got != "2@A" {
		t.Fatalf("restarted bridge resumes s1 from %s", got)
	}
	kc2.send(t, frame("s1", "A", 3, "tool.result", map[string]any{"turnId": 0, "toolCallId": "c1", "output": "ok"}))
	kc2.send(t, frame("s1", "A", 4, "turn.ended", map[string]any{"turnId": 0, "reason": "completed"}))
	kc2.ack(t, sub, nil, map[string][2]any{"s1": {4, "A"}, "__global__": {0, "G"}})
	kc2.send(t, frame(mapping.GlobalSession, "G", 1, "event.session.archived", map[string]any{"sessionId": "s1"}))
	// It republishes first what the stopped one logged (the relay keeps
	// what it lacks), then goes on.
	evs := tb2.pub.Wait(t, "the result, the run's end and the archive", func(evs []*aep.Event) bool { return len(evs) == len(first)+3 })
	for i, e := range first {
		if evs[i].ID != e.ID {
			t.Fatalf("event %d of the restarted bridge is %s, want the republished %s", i, evs[i].Type, e.Type)
		}
	}
	evs = evs[len(first):]
	if evs[0].Type != "tool.completed" || evs[0].Cause != first[1].ID || evs[0].Run != first[0].Run {
		t.Errorf("recovered pairing: %s cause %s run %s", evs[0].Type, evs[0].Cause, evs[0].Run)
	}
	if evs[1].Type != "run.finished" || evs[1].Cause != first[0].ID {
		t.Errorf("recovered run: %s cause %s", evs[1].Type, evs[1].Cause)
	}
	if evs[2].Type != "x.kimi-code.web.event.session.archived" || evs[2].Session != "s1" || evs[2].Run != "" {
		t.Errorf("archive: %s in %s", evs[2].Type, evs[2].Session)
	}
	if *evs[0].Epoch <= *first[0].Epoch {
		t.Errorf("epoch did not advance: %d then %d", *first[0].Epoch, *evs[0].Epoch)
	}
	if unsub := kc2.next(t, "unsubscribe"); fmt.Sprint(unsub["payload"]) != "map[session_ids:[s1]]" {
		t.Errorf("unsubscribe %v", unsub)
	}
}

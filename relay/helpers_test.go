package relay_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/aep-kimi/aep-kimi/aep"
	"github.com/aep-kimi/aep-kimi/internal/testkit/httpcall"
	"github.com/aep-kimi/aep-kimi/internal/testkit/poll"
	"github.com/aep-kimi/aep-kimi/internal/testkit/relaytest"
	"github.com/aep-kimi/aep-kimi/internal/testkit/syncbuf"
	"github.com/aep-kimi/aep-kimi/mapping"
	"github.com/aep-kimi/aep-kimi/relay"
	"github.com/aep-kimi/aep-kimi/relay/client"
)

const testToken = "s3cret-token"

// waitShort bounds every wait for something that should happen promptly.
const waitShort = 5 * time.Second

// mkEvent builds a valid positioned event (progress.status by default).
func mkEvent(session string, seq int64, mods ...func(*aep.Event)) *aep.Event {
	e := &aep.Event{
		AEP:     aep.Version,
		ID:      aep.NewID(),
		Type:    "progress.status",
		Time:    aep.FormatTime(time.Now()),
		Source:  "aep://test/agent/tester/session/" + session,
		Agent:   "tester",
		Session: session,
		Seq:     aep.Int64(seq),
		Epoch:   aep.Int64(0),
	}
	for _, m := range mods {
		m(e)
	}
	return e
}

// seqEvents builds events from..to-1 of session with mkEvent.
func seqEvents(session string, from, to int64, mods ...func(*aep.Event)) []*aep.Event {
	evs := make([]*aep.Event, 0, to-from)
	for i := from; i < to; i++ {
		evs = append(evs, mkEvent(session, i, mods...))
	}
	return evs
}

func withType(t string) func(*aep.Event) { return func(e *aep.Event) { e.Type = t } }
func withSeverity(s string) func(*aep.Event) {
	return func(e *aep.Event) { e.Severity = s }
}
func withEpoch(n int64) func(*aep.Event) { return func(e *aep.Event) { e.Epoch = aep.Int64(n) } }
func withData(d string) func(*aep.Event) {
	return func(e *aep.Event) { e.Data = json.RawMessage(d) }
}

// command builds a command (no seq) addressed to session.
func command(typ, session string, data string) *aep.Event {
	return &aep.Event{
		AEP: aep.Version, ID: aep.NewID(), Type: typ, Time: aep.FormatTime(time.Now()),
		Source: "aep://test/agent/sender", Agent: "sender", Session: session,
		Capture: "metadata", Data: json.RawMessage(data),
	}
}

func agentEvent() *aep.Event {
	return &aep.Event{
		AEP: aep.Version, ID: aep.NewID(), Type: "agent.heartbeat", Time: aep.FormatTime(time.Now()),
		Source: "aep://test/agent/tester", Agent: "tester",
	}
}

func line(t testing.TB, e *aep.Event) []byte {
	t.Helper()
	b, err := e.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// stamped is cmd's line as the relay routes it for the person named by:
// their name in mapping.ExtBy, replacing any the sender set.
func stamped(t testing.TB, cmd *aep.Event, by string) []byte {
	t.Helper()
	c := cmd.Clone()
	if err := c.SetExt(mapping.ExtBy, by); err != nil {
		t.Fatal(err)
	}
	return line(t, c)
}

func ndjson(t testing.TB, evs ...*aep.Event) []byte {
	var buf bytes.Buffer
	for _, e := range evs {
		buf.Write(line(t, e))
		buf.WriteByte('\n')
	}
	return buf.Bytes()
}

type httpResult struct {
	status int
	header http.Header
	body   []byte
}

func (r httpResult) json(t testing.TB) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.body, &m); err != nil {
		t.Fatalf("body is not JSON (%v): %s", err, r.body)
	}
	return m
}

// do makes a request with the server's token (when it has one) unless a
// header map overrides Authorization.
func do(t testing.TB, srv *relaytest.Server, method, path string, body []byte, hdr map[string]string) httpResult {
	t.Helper()
	r := httpcall.Do(t, httpcall.Request{Method: method, URL: srv.URL + path, Token: srv.Token, Body: body, Header: hdr})
	return httpResult{r.Status, r.Header, r.Body}
}

func post(t testing.TB, srv *relaytest.Server, evs ...*aep.Event) httpResult {
	t.Helper()
	ct := "application/x-ndjson"
	body := ndjson(t, evs...)
	if len(evs) == 1 {
		ct, body = "application/json", line(t, evs[0])
	}
	return do(t, srv, http.MethodPost, "/events", body, map[string]string{"Content-Type": ct, "AEP-Version": "0.1"})
}

func mustPost(t testing.TB, srv *relaytest.Server, evs ...*aep.Event) {
	t.Helper()
	if r := post(t, srv, evs...); r.status != http.StatusAccepted {
		t.Fatalf("POST /events: HTTP %d %s", r.status, r.body)
	}
}

// sseStream is an open /stream response read by a goroutine.
type sseStream struct {
	resp  *http.Response
	items chan client.SSEItem
	done  chan error
}

// openSSE opens a stream; it returns once the relay answered 200, which it
// does only once the stream is subscribed and its credential admitted, so
// whatever is posted after it returns reaches the stream.
func openSSE(t testing.TB, srv *relaytest.Server, q url.Values, hdr map[string]string) *sseStream {
	t.Helper()
	s, status, body := tryOpenSSE(t, srv, q, hdr)
	if s == nil {
		t.Fatalf("GET /stream: HTTP %d %s", status, body)
	}
	return s
}

func tryOpenSSE(t testing.TB, srv *relaytest.Server, q url.Values, hdr map[string]string) (*sseStream, int, []byte) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/stream?"+q.Encode(), nil)
	if srv.Token != "" {
		req.Header.Set("Authorization", "Bearer "+srv.Token)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		cancel()
		return nil, resp.StatusCode, b
	}
	s := &sseStream{resp: resp, items: make(chan client.SSEItem, 1<<16), done: make(chan error, 1)}
	go func() {
		r := client.NewSSEReader(resp.Body, 0)
		for {
			it, err := r.Next()
			if err != nil {
				s.done <- err
				close(s.items)
				return
			}
			s.items <- it
		}
	}()
	t.Cleanup(func() { cancel(); resp.Body.Close() })
	return s, resp.StatusCode, nil
}

// next returns the next message (skipping comments unless wantComments).
func (s *sseStream) next(t testing.TB, wantComments bool) client.SSEItem {
	t.Helper()
	timeout := time.After(waitShort)
	for {
		select {
		case it, ok := <-s.items:
			if !ok {
				t.Fatalf("SSE stream ended while waiting")
			}
			if it.IsComment && (!wantComments || it.Comment == "ping") {
				continue
			}
			return it
		case <-timeout:
			t.Fatalf("no SSE item within %v", waitShort)
		}
	}
}

// events reads n messages and parses them.
func (s *sseStream) events(t testing.TB, n int) []*aep.Event {
	t.Helper()
	out := make([]*aep.Event, 0, n)
	for len(out) < n {
		it := s.next(t, false)
		ev, err := aep.ParseEvent([]byte(it.Data))
		if err != nil {
			t.Fatalf("SSE data is not an event: %v: %s", err, it.Data)
		}
		out = append(out, ev)
	}
	return out
}

// quiet asserts nothing but comments arrives for d.
func (s *sseStream) quiet(t testing.TB, d time.Duration) {
	t.Helper()
	timeout := time.After(d)
	for {
		select {
		case it, ok := <-s.items:
			if !ok {
				return
			}
			if !it.IsComment {
				t.Fatalf("unexpected SSE message: event %s data %s", it.Event, it.Data)
			}
		case <-timeout:
			return
		}
	}
}

// wsClient is a socket with a reader goroutine.
type wsClient struct {
	c      *websocket.Conn
	frames chan wsFrame
	closed chan error
}

type wsFrame struct {
	raw []byte
	m   map[string]any
}

func (f wsFrame) str(k string) string { s, _ := f.m[k].(string); return s }

func dialWS(t testing.TB, srv *relaytest.Server, token string) *wsClient {
	t.Helper()
	h := http.Header{}
	if token != "" {
		h.Set("Authorization", "Bearer "+token)
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitShort)
	defer cancel()
	c, _, err := websocket.Dial(ctx, strings.Replace(srv.URL, "http", "ws", 1)+"/socket", &websocket.DialOptions{HTTPHeader: h})
	if err != nil {
		t.Fatalf("dial socket: %v", err)
	}
	c.SetReadLimit(64 << 20)
	w := &wsClient{c: c, frames: make(chan wsFrame, 1<<16), closed: make(chan error, 1)}
	go func() {
		for {
			_, b, err := c.Read(context.Background())
			if err != nil {
				w.closed <- err
				close(w.frames)
				return
			}
			var m map[string]any
			_ = json.Unmarshal(b, &m)
			w.frames <- wsFrame{raw: b, m: m}
		}
	}()
	t.Cleanup(func() { _ = c.CloseNow() })
	return w
}

// hello opens a socket and completes the hello with role.
func helloWS(t testing.TB, srv *relaytest.Server, role string, caps map[string]any, agent string) *wsClient {
	t.Helper()
	w := dialWS(t, srv, srv.Token)
	w.send(t, map[string]any{
		"type": "hello", "versions": []string{"0.1"}, "role": role,
		"identity":     map[string]any{"agent": agent, "instance": agent + "/1"},
		"capabilities": caps,
	})
	f := w.expect(t, func(f wsFrame) bool { return true })
	if f.str("type") != "hello" {
		t.Fatalf("hello answered with %s", f.raw)
	}
	return w
}

func (w *wsClient) send(t testing.TB, v any) {
	t.Helper()
	var b []byte
	switch x := v.(type) {
	case []byte:
		b = x
	case *aep.Event:
		b = line(t, x)
	default:
		var err error
		if b, err = json.Marshal(v); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitShort)
	defer cancel()
	if err := w.c.Write(ctx, websocket.MessageText, b); err != nil {
		t.Fatalf("socket write: %v", err)
	}
}

// expect returns the first frame matching pred, skipping pings.
func (w *wsClient) expect(t testing.TB, pred func(wsFrame) bool) wsFrame {
	t.Helper()
	timeout := time.After(waitShort)
	for {
		select {
		case f, ok := <-w.frames:
			if !ok {
				t.Fatalf("socket closed while waiting: %v", <-w.closed)
			}
			if f.str("type") == "ping" {
				continue
			}
			if pred(f) {
				return f
			}
		case <-timeout:
			t.Fatalf("no matching frame within %v", waitShort)
		}
	}
}

// next returns the next non-ping frame.
func (w *wsClient) next(t testing.TB) wsFrame {
	t.Helper()
	return w.expect(t, func(wsFrame) bool { return true })
}

// quiet asserts no frame but pings arrives for d.
func (w *wsClient) quiet(t testing.TB, d time.Duration) {
	t.Helper()
	timeout := time.After(d)
	for {
		select {
		case f, ok := <-w.frames:
			if !ok {
				return
			}
			if f.str("type") != "ping" {
				t.Fatalf("unexpected frame: %s", f.raw)
			}
		case <-timeout:
			return
		}
	}
}

// waitClosed waits for the socket to close and returns the close error.
func (w *wsClient) waitClosed(t testing.TB) error {
	t.Helper()
	for {
		select {
		case _, ok := <-w.frames:
			if !ok {
				return <-w.closed
			}
		case <-time.After(waitShort):
			t.Fatal("socket did not close")
		}
	}
}

func subscribeFrame(id string, filter any, extra map[string]any) map[string]any {
	m := map[string]any{"type": "subscribe", "id": id}
	if filter != nil {
		m["filter"] = filter
	}
	for k, v := range extra {
		m[k] = v
	}
	return m
}

// eventFrames collects n event frames (type with a dot).
func (w *wsClient) eventFrames(t testing.TB, n int) []wsFrame {
	t.Helper()
	var out []wsFrame
	for len(out) < n {
		f := w.expect(t, func(f wsFrame) bool { return strings.Contains(f.str("type"), ".") })
		out = append(out, f)
	}
	return out
}

// eventually fails the test unless cond holds within waitShort.
func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	poll.Must(t, waitShort, what, cond)
}

// newTestLogger logs at debug level into w; read w only after the server
// has shut down.
func newTestLogger(w io.Writer) *slog.Logger {
	return slog.New(slog.NewTextHandler(&syncbuf.Writer{W: w}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// storeOpener opens a fresh store holding depth events per session, at most
// sessions sessions and maxBytes wire bytes (zero: the defaults).
type storeOpener func(t testing.TB, depth, sessions int, maxBytes int64) relay.Backend

func openMemory(_ testing.TB, depth, sessions int, maxBytes int64) relay.Backend {
	return relay.NewMemoryBackendWithBudget(depth, sessions, maxBytes)
}

// openJetStream opens an embedded JetStream store in a fresh directory,
// closed when the test ends.
func openJetStream(t testing.TB, depth, sessions int, maxBytes int64) relay.Backend {
	t.Helper()
	return openJetStreamIn(t, t.TempDir(), depth, sessions, maxBytes)
}

func openJetStreamIn(t testing.TB, dir string, depth, sessions int, maxBytes int64) *relay.JetStreamBackend {
	t.Helper()
	b, err := relay.OpenJetStream(context.Background(), relay.JetStreamConfig{
		Dir: dir, Buffer: depth, MaxSessions: sessions, BufferBytes: maxBytes,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := b.Close(); err != nil {
			t.Error(err)
		}
	})
	return b
}

// eachStore runs fn against every store, so the same assertions hold on
// both.
func eachStore(t *testing.T, fn func(t *testing.T, open storeOpener)) {
	for _, st := range []struct {
		name string
		open storeOpener
	}{{relay.StoreMemory, openMemory}, {relay.StoreJetStream, openJetStream}} {
		t.Run(st.name, func(t *testing.T) { fn(t, st.open) })
	}
}

package kimiharness

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/aep-kimi/aep-kimi/internal/testkit/poll"
)

// bearerProtocol prefixes the token in the WebSocket subprotocol kimi web
// authenticates with.
const bearerProtocol = "kimi-code.bearer."

// frameTimeout bounds each wait for a frame while driving a session.
const frameTimeout = Patience

// Frame is one WebSocket frame from kimi web.
type Frame struct {
	Type      string `json:"type"`
	ID        string `json:"id"`
	SessionID string `json:"session_id"`
	Payload   struct {
		SessionID string `json:"sessionId"`
		PromptID  string `json:"promptId"`
		ID        string `json:"id"`
		Nonce     any    `json:"nonce"`
	} `json:"payload"`
	// Raw is the frame as received.
	Raw []byte `json:"-"`
}

// of reports whether f belongs to session sid.
func (f Frame) of(sid string) bool { return f.SessionID == sid || f.Payload.SessionID == sid }

// WS is a WebSocket client of a kimi web server, as the web UI is: it
// answers the server's pings and keeps every frame it receives.
type WS struct {
	conn   *websocket.Conn
	cancel context.CancelFunc
	done   chan struct{}

	mu      sync.Mutex
	frames  []Frame
	changed chan struct{} // closed and replaced on each frame
	err     error
}

// Connect opens /api/v1/ws with the server's token; it closes with the
// test.
func (w *Web) Connect(t testing.TB) *WS {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	dctx, dcancel := context.WithTimeout(ctx, 10*time.Second)
	defer dcancel()
	conn, _, err := websocket.Dial(dctx, strings.Replace(w.Base, "http://", "ws://", 1)+"/api/v1/ws",
		&websocket.DialOptions{Subprotocols: []string{bearerProtocol + w.Token}})
	if err != nil {
		cancel()
		t.Fatalf("kimi web WebSocket: %v", err)
	}
	conn.SetReadLimit(64 << 20)
	c := &WS{conn: conn, cancel: cancel, done: make(chan struct{}), changed: make(chan struct{})}
	go c.read(ctx)
	t.Cleanup(c.Close)
	return c
}

func (c *WS) read(ctx context.Context) {
	defer close(c.done)
	for {
		_, b, err := c.conn.Read(ctx)
		var f Frame
		if err == nil {
			// A frame of another shape is kept as received: a waiter's
			// match sees its type when that much parsed.
			json.Unmarshal(b, &f) //nolint:errcheck // partial is fine
		}
		c.mu.Lock()
		if err != nil {
			c.err = err
			close(c.changed)
			c.changed = make(chan struct{})
			c.mu.Unlock()
			return
		}
		f.Raw = b
		c.frames = append(c.frames, f)
		close(c.changed)
		c.changed = make(chan struct{})
		c.mu.Unlock()
		if f.Type == "ping" {
			pong, _ := json.Marshal(map[string]any{"type": "pong", "payload": map[string]any{"nonce": f.Payload.Nonce}})
			c.conn.Write(ctx, websocket.MessageText, pong) //nolint:errcheck // a failed write ends the read too
		}
	}
}

// Close closes the connection (kimi web only exits once its WebSocket
// clients are gone).
func (c *WS) Close() {
	c.conn.Close(websocket.StatusNormalClosure, "") //nolint:errcheck // closing anyway
	c.cancel()
	<-c.done
}

// Frames returns every frame received so far.
func (c *WS) Frames() []Frame {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]Frame(nil), c.frames...)
}

// Send writes one client message.
func (c *WS) Send(t testing.TB, msg any) {
	t.Helper()
	b, err := json.Marshal(msg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.conn.Write(ctx, websocket.MessageText, b); err != nil {
		t.Fatalf("WebSocket write: %v", err)
	}
}

// Wait returns the first frame, received before or after the call, that
// match accepts; it fails the test after timeout.
func (c *WS) Wait(t testing.TB, what string, timeout time.Duration, match func(Frame) bool) Frame {
	t.Helper()
	deadline := time.After(timeout)
	seen := 0
	for {
		c.mu.Lock()
		frames, changed, err := c.frames[seen:], c.changed, c.err
		seen = len(c.frames)
		c.mu.Unlock()
		for _, f := range frames {
			if match(f) {
				return f
			}
		}
		if err != nil {
			t.Fatalf("waiting for %s: the WebSocket ended: %v", what, err)
		}
		select {
		case <-changed:
		case <-deadline:
			t.Fatalf("waiting for %s: nothing after %v", what, timeout)
		}
	}
}

// Subscribe subscribes to a session's frames and waits for the ack.
func (c *WS) Subscribe(t testing.TB, sid string) {
	t.Helper()
	id := "sub-" + sid
	c.Send(t, map[string]any{"type": "subscribe", "id": id, "payload": map[string]any{"session_ids": []string{sid}}})
	c.Wait(t, "the subscribe ack", frameTimeout, func(f Frame) bool { return f.Type == "ack" && f.ID == id })
}

// WebDrive is what DriveWeb did.
type WebDrive struct {
	Session string
	// Frames is every WebSocket frame received, in order.
	Frames []Frame
}

// DriveWeb drives one session through a running kimi web whose mock serves
// the "web" scenario, over REST and WebSocket as the web UI does:
//
//  1. "run the probe": a Bash call needing approval, approved;
//  2. a manual compaction;
//  3. "slow prompt", "queued prompt" queued behind it, the slow one aborted;
//  4. "reject me": a Bash call needing approval, rejected with feedback;
//  5. a wait until beat reports that Kimi's 60 s SessionHeartbeat hook
//     fired (a hook's own record of it: an adapter's counter, a capture),
//     however long the session took to get there, for at most
//     heartbeatWait;
//  6. the archive, which ends the session.
//
// Together these fire every hook the web client can.
func DriveWeb(t testing.TB, w *Web, beat func() bool) WebDrive {
	t.Helper()
	return driveWeb(t, w, func() {
		t.Helper()
		poll.Must(t, heartbeatWait, "Kimi's SessionHeartbeat hook", beat)
	})
}

// heartbeatWait bounds DriveWeb's wait for Kimi's 60 s heartbeat.
const heartbeatWait = 3 * time.Minute

// driveWeb is DriveWeb; wait runs before the archive.
func driveWeb(t testing.TB, w *Web, wait func()) WebDrive {
	t.Helper()
	sid := w.CreateSession(t)
	ws := w.Connect(t)
	ws.Subscribe(t, sid)
	answered := map[string]bool{}
	approval := func(decision string, body map[string]any) {
		t.Helper()
		f := ws.Wait(t, "an approval request", frameTimeout, func(f Frame) bool {
			return f.Type == "permission.approval.requested" && f.of(sid) && !answered[f.Payload.ID]
		})
		answered[f.Payload.ID] = true
		if pending := w.PendingApprovals(t, sid); len(pending) == 0 {
			t.Fatalf("approval %s is not pending on the server", f.Payload.ID)
		}
		body["decision"] = decision
		w.Decide(t, sid, f.Payload.ID, body)
	}
	completed := func(prompt string) {
		t.Helper()
		ws.Wait(t, "completion of prompt "+prompt, frameTimeout, func(f Frame) bool {
			return f.Type == "prompt.completed" && f.of(sid) && f.Payload.PromptID == prompt
		})
	}

	p := w.Prompt(t, sid, "run the probe")
	approval("approved", map[string]any{})
	completed(p)

	w.Call(t, http.MethodPost, "/api/v1/sessions/"+sid+":compact", map[string]any{}, nil)
	ws.Wait(t, "compaction.completed", frameTimeout, func(f Frame) bool { return f.Type == "compaction.completed" && f.of(sid) })

	slow := w.Prompt(t, sid, "slow prompt")
	// Started, so the next one queues behind it.
	ws.Wait(t, "the slow prompt's start", frameTimeout, func(f Frame) bool {
		return f.Type == "prompt.started" && f.of(sid) && f.Payload.PromptID == slow
	})
	queued := w.Prompt(t, sid, "queued prompt")
	w.Call(t, http.MethodPost, "/api/v1/sessions/"+sid+"/prompts/"+slow+":abort", nil, nil)
	completed(queued)

	p = w.Prompt(t, sid, "reject me")
	approval("rejected", map[string]any{"feedback": "not allowed in this test"})
	completed(p)

	wait()
	w.Call(t, http.MethodPost, "/api/v1/sessions/"+sid+":archive", nil, nil)
	// The archive's frames end with this one; the SessionEnd hook is the
	// caller's to wait for where it reads it.
	ws.Wait(t, "the session's archive", frameTimeout, func(f Frame) bool {
		return f.Type == "event.session.archived" && f.of(sid)
	})
	ws.Close()
	return WebDrive{Session: sid, Frames: ws.Frames()}
}

// WriteFrames writes frames, one raw frame a line, to path.
func WriteFrames(path string, frames []Frame) error {
	var b strings.Builder
	for _, f := range frames {
		b.Write(f.Raw)
		b.WriteByte('\n')
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		return fmt.Errorf("write frames: %w", err)
	}
	return nil
}

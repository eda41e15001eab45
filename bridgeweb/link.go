package bridgeweb

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/coder/websocket"

	"github.com/aep-kimi/aep-kimi/emitter"
	"github.com/aep-kimi/aep-kimi/internal/periodic"
	"github.com/aep-kimi/aep-kimi/mapping"
)

// The kap-server's WebSocket subprotocol prefix: the bearer token rides in
// the subprotocol, the way the web UI sends it.
const bearerProtocol = "kimi-code.bearer."

var (
	errProbe     = errors.New("kap-server stopped answering its liveness probe")
	errSilent    = errors.New("kap-server sent nothing for three heartbeats")
	errHandshake = errors.New("kap-server handshake failed")
	// errInstanceGone ends a follower whose server's record is gone or
	// whose process is dead.
	errInstanceGone = errors.New("kap-server stopped")
)

// subState is where a session's subscription stands on one connection.
type subState uint8

const (
	subNone    subState = iota // never asked on this connection, or let go
	subPending                 // subscribe sent, ack not yet seen
	subLive                    // the server streams it to us
	subDormant                 // the server has not loaded it; asked again periodically
)

// sender writes one frame to the kap-server.
type sender func(ctx context.Context, b []byte) error

// link is one kap WebSocket connection's subscription state and frame path.
// Frames are handled on the reader goroutine; the retry and probe loops only
// send subscribes, under mu.
type link struct {
	b    *Bridge
	f    *follower // the server this connection is to
	send sender

	mu      sync.Mutex
	subs    map[string]subState
	pending map[string][]string // subscribe id -> sessions
	next    int
	// listed is the REST listing at connect: a not-found session outside
	// it is gone for good and is not retried.
	listed map[string]bool

	heartbeat atomic.Int64 // the server's ping period, ms
	lastFrame atomic.Int64 // unix ns
	badLogged atomic.Int64
}

func newLink(f *follower, send sender) *link {
	b := f.b
	l := &link{b: b, f: f, send: send, subs: map[string]subState{}, pending: map[string][]string{}, listed: map[string]bool{}}
	l.heartbeat.Store(10000)
	l.lastFrame.Store(b.cfg.Now().UnixNano())
	return l
}

// connect runs one connection until it fails or ctx ends.
func (f *follower) connect(ctx context.Context, ep endpoint) error {
	b := f.b
	f.setState(KapConnecting, ep.base, nil)
	kc := kapClient{ep: ep, http: b.cfg.HTTPClient}
	dctx, cancel := context.WithTimeout(ctx, b.cfg.HandshakeTimeout)
	defer cancel()
	c, resp, err := websocket.Dial(dctx, ep.ws, &websocket.DialOptions{
		Subprotocols: []string{bearerProtocol + ep.token},
		HTTPClient:   b.cfg.HTTPClient,
	})
	if err != nil {
		if resp != nil && resp.StatusCode == http.StatusUnauthorized {
			return ErrUnauthorized
		}
		if resp != nil {
			return fmt.Errorf("%w: WebSocket upgrade answered HTTP %d", errHandshake, resp.StatusCode)
		}
		return fmt.Errorf("dial %s: %w", ep.ws, err)
	}
	defer c.CloseNow() //nolint:errcheck // best effort
	c.SetReadLimit(b.cfg.ReadLimit)
	l := newLink(f, func(ctx context.Context, msg []byte) error {
		wctx, cancel := context.WithTimeout(ctx, b.cfg.HandshakeTimeout)
		defer cancel()
		return c.Write(wctx, websocket.MessageText, msg)
	})
	// The server speaks first.
	_, hello, err := c.Read(dctx)
	if err != nil {
		return fmt.Errorf("%w: no server_hello: %v", errHandshake, err)
	}
	if f, perr := mapping.ParseFrame(hello); perr != nil || f.Type != "server_hello" {
		return fmt.Errorf("%w: first frame is not server_hello", errHandshake)
	}
	l.handle(ctx, hello)
	// List after the socket is up: a session created in between announces
	// itself on the socket.
	lctx, lcancel := context.WithTimeout(ctx, b.cfg.RESTTimeout)
	ids, err := kc.listSessions(lctx)
	lcancel()
	if err != nil {
		return fmt.Errorf("list sessions: %w", err)
	}
	b.metrics.connects.Inc()
	f.setState(KapConnected, ep.base, nil)
	b.log.Info("kap connected", "kap", ep.base, "sessions", len(ids), "server_pid", ep.instance.PID)
	f.active.Store(&activeLink{l: l, kap: kc})
	defer f.active.Store(nil)

	cctx, ccancel := context.WithCancelCause(ctx)
	defer ccancel(nil)
	l.start(cctx, ids)
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); l.watch(cctx, kc, ccancel) }()
	go func() { defer wg.Done(); l.retryDormant(cctx) }()
	defer wg.Wait()
	defer ccancel(nil)
	for {
		_, data, err := c.Read(cctx)
		if err != nil {
			if ctx.Err() != nil {
				if !errors.Is(context.Cause(ctx), errInstanceGone) {
					// A server that is gone cannot answer a close
					// handshake: the deferred CloseNow drops the socket
					// without waiting for one.
					c.Close(websocket.StatusNormalClosure, "bridge stopping") //nolint:errcheck // best effort
				}
				return nil
			}
			if cause := context.Cause(cctx); cause != nil && !errors.Is(cause, context.Canceled) {
				return cause
			}
			return fmt.Errorf("read: %w", err)
		}
		l.handle(cctx, data)
	}
}

// watch probes the REST listener and the frame flow; either going quiet ends
// the connection (a server told to shut down keeps running while a client
// stays connected, so the bridge is the one that must let go).
func (l *link) watch(ctx context.Context, kc kapClient, stop context.CancelCauseFunc) {
	cfg := l.b.cfg
	t := time.NewTicker(cfg.ProbeInterval)
	defer t.Stop()
	fails := 0
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		pctx, cancel := context.WithTimeout(ctx, cfg.RESTTimeout)
		err := kc.healthz(pctx)
		cancel()
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			fails++
			// A refused connection is a closed listener, not a slow one:
			// a server told to stop closes it at once but exits only when
			// its WebSocket clients leave, and it removes its instance
			// record only then. Letting go at once ends its sessions sooner.
			if fails >= cfg.ProbeFailures || errors.Is(err, syscall.ECONNREFUSED) {
				stop(fmt.Errorf("%w: %v", errProbe, err))
				return
			}
		} else {
			fails = 0
		}
		quiet := cfg.Now().Sub(time.Unix(0, l.lastFrame.Load()))
		if hb := time.Duration(l.heartbeat.Load()) * time.Millisecond; hb > 0 && quiet > 3*hb {
			stop(errSilent)
			return
		}
	}
}

// retryDormant re-subscribes the sessions the server had not loaded.
func (l *link) retryDormant(ctx context.Context) {
	periodic.Every(ctx, l.b.cfg.DormantRetry, func() {
		l.mu.Lock()
		var ids []string
		for sid, st := range l.subs {
			if st == subDormant {
				ids = append(ids, sid)
			}
		}
		l.mu.Unlock()
		if len(ids) > 0 {
			l.subscribe(ctx, ids)
		}
	})
}

// start subscribes what the bridge should follow: every listed session,
// every session it already holds state for (resuming from its cursor), and
// the server-wide stream.
func (l *link) start(ctx context.Context, listed []string) {
	l.mu.Lock()
	for _, id := range listed {
		l.listed[id] = true
	}
	l.mu.Unlock()
	ids := append([]string{mapping.GlobalSession}, listed...)
	seen := map[string]bool{}
	for _, id := range ids {
		seen[id] = true
	}
	for _, id := range l.b.core.Keys() {
		if !seen[id] && !l.b.archived(id) {
			ids = append(ids, id)
		}
	}
	l.subscribe(ctx, ids)
}

// subscribe asks for sessions, each from its cursor when the bridge has one
// (the server replays what followed it) and live from now otherwise.
func (l *link) subscribe(ctx context.Context, ids []string) {
	type pos struct {
		Seq   int64  `json:"seq"`
		Epoch string `json:"epoch,omitempty"`
	}
	cursors := map[string]pos{}
	var asked []string
	l.mu.Lock()
	for _, sid := range ids {
		if st := l.subs[sid]; st == subPending || st == subLive {
			continue
		}
		var seq int64
		var epoch string
		var ok bool
		if sid == mapping.GlobalSession {
			l.f.gmu.Lock()
			seq, epoch, ok = l.f.global.position()
			if ok {
				l.f.global.syncing = true
			}
			l.f.gmu.Unlock()
		} else {
			s := l.b.lock(sid)
			seq, epoch, ok = s.cur.position()
			if ok {
				s.cur.syncing = true
			}
			s.Unlock()
		}
		if ok {
			cursors[sid] = pos{seq, epoch}
		}
		l.subs[sid] = subPending
		asked = append(asked, sid)
	}
	if len(asked) == 0 {
		l.mu.Unlock()
		return
	}
	l.next++
	id := "sub-" + strconv.Itoa(l.next)
	l.pending[id] = asked
	l.mu.Unlock()
	payload := map[string]any{"session_ids": asked}
	if len(cursors) > 0 {
		payload["cursors"] = cursors
	}
	msg, _ := json.Marshal(map[string]any{"type": "subscribe", "id": id, "payload": payload})
	if err := l.send(ctx, msg); err != nil {
		l.b.log.Debug("subscribe not sent", "err", err)
	}
}

// unsubscribe lets a session go (it was archived or deleted).
func (l *link) unsubscribe(ctx context.Context, sid string) {
	l.mu.Lock()
	l.subs[sid] = subNone
	l.next++
	id := "unsub-" + strconv.Itoa(l.next)
	l.mu.Unlock()
	l.publishCounts()
	msg, _ := json.Marshal(map[string]any{"type": "unsubscribe", "id": id, "payload": map[string]any{"session_ids": []string{sid}}})
	if err := l.send(ctx, msg); err != nil {
		l.b.log.Debug("unsubscribe not sent", "err", err)
	}
}

func (l *link) publishCounts() {
	l.mu.Lock()
	var live, dormant int64
	for sid, st := range l.subs {
		if sid == mapping.GlobalSession {
			continue
		}
		switch st {
		case subLive:
			live++
		case subDormant:
			dormant++
		}
	}
	l.mu.Unlock()
	l.f.counts(live, dormant)
}

// handle is the frame path: every message from the kap-server goes through
// here, whatever it holds. Bad frames are counted and logged, never fatal.
func (l *link) handle(ctx context.Context, data []byte) {
	m := l.b.metrics
	l.lastFrame.Store(l.b.cfg.Now().UnixNano())
	f, err := mapping.ParseFrame(data)
	if err != nil {
		reason := "not_json"
		switch {
		case errors.Is(err, mapping.ErrTooLarge):
			reason = "too_large"
		case errors.Is(err, mapping.ErrEmpty):
			reason = "empty"
		}
		m.badFrames.WithLabelValues(reason).Inc()
		level := slog.LevelDebug
		if l.badLogged.Add(1) <= 10 {
			level = slog.LevelWarn
		}
		l.b.log.Log(ctx, level, "bad kap frame ignored", "reason", reason, "bytes", len(data), "err", err)
		return
	}
	switch f.Type {
	case "server_hello":
		m.frames.WithLabelValues(frameHello).Inc()
		if hb, ok := integer(f.Payload, "heartbeat_ms"); ok && hb > 0 {
			l.heartbeat.Store(hb)
		}
	case "ping":
		m.frames.WithLabelValues(framePing).Inc()
		pong, _ := json.Marshal(map[string]any{"type": "pong", "payload": map[string]any{"nonce": f.Payload["nonce"]}})
		if err := l.send(ctx, pong); err != nil {
			l.b.log.Debug("pong not sent", "err", err)
		}
	case "ack":
		m.frames.WithLabelValues(frameAck).Inc()
		l.onAck(ctx, f)
	case "resync_required":
		m.frames.WithLabelValues(frameResync).Inc()
		l.onResync(f)
	case "error":
		m.frames.WithLabelValues(frameError).Inc()
		m.kapErrors.Inc()
		code, _ := integer(f.Payload, "code")
		fatal, _ := f.Payload["fatal"].(bool)
		l.b.log.Warn("kap-server error frame", "code", code, "msg", emitter.Clip(str(f.Payload, "msg")), "fatal", fatal)
	default:
		if !f.HasSeq || f.SessionID == "" {
			m.frames.WithLabelValues(frameOther).Inc()
			return
		}
		l.onEvent(ctx, f)
	}
}

// onEvent takes one session event frame.
func (l *link) onEvent(ctx context.Context, f mapping.Frame) {
	m := l.b.metrics
	if f.Volatile {
		// Status pulses and deltas: do-not-persist by the vendor's own
		// marker, and they reuse the last durable seq. A live session's
		// pulse still says how full its context is.
		m.frames.WithLabelValues(frameVolatile).Inc()
		if _, ok := mapping.WebContext(f); ok && f.SessionID != mapping.GlobalSession {
			l.mu.Lock()
			live := l.subs[f.SessionID] == subLive
			l.mu.Unlock()
			if live {
				s := l.b.lock(f.SessionID)
				s.m.observe(f)
				s.Unlock()
			}
		}
		return
	}
	sid := f.SessionID
	if sid == mapping.GlobalSession {
		m.frames.WithLabelValues(frameGlobal).Inc()
	} else {
		m.frames.WithLabelValues(frameEvent).Inc()
	}
	l.mu.Lock()
	st := l.subs[sid]
	l.mu.Unlock()
	if st != subLive && st != subPending {
		// A server-wide broadcast of a session's event (its creation, a
		// title, a work change) for a session not subscribed here: follow
		// it. The subscribe replays from our cursor, or from just before
		// this frame, so the frame arrives again, in order.
		l.follow(ctx, f)
		return
	}
	if sid == mapping.GlobalSession {
		l.f.gmu.Lock()
		steps, dup := l.f.global.offer(f)
		l.f.gmu.Unlock()
		if dup {
			m.duplicates.Inc()
		}
		l.runGlobal(ctx, steps)
		return
	}
	s := l.b.lock(sid)
	s.owner = l.f
	s.take(f)
	s.Unlock()
}

// follow subscribes a session first seen in a broadcast.
func (l *link) follow(ctx context.Context, f mapping.Frame) {
	sid := f.SessionID
	if sid == mapping.GlobalSession {
		l.f.gmu.Lock()
		if !l.f.global.known {
			l.f.global.set(f.Epoch, f.Seq-1)
		}
		l.f.gmu.Unlock()
	} else {
		s := l.b.lock(sid)
		if !s.cur.known {
			s.cur.set(f.Epoch, f.Seq-1)
		}
		s.Unlock()
	}
	l.subscribe(ctx, []string{sid})
}

// runGlobal maps the server-wide stream: a session's archive or deletion
// lands in that session's stream and ends the subscription; everything else
// (workspaces, config) belongs to no session.
func (l *link) runGlobal(ctx context.Context, steps []step) {
	for _, st := range steps {
		if st.gap != nil {
			g := st.gap
			l.b.metrics.gaps.WithLabelValues(gapLabel(g.reason)).Inc()
			l.b.log.Warn("server-wide kap frames lost", "reason", g.reason, "from_seq", g.from, "to_seq", g.to)
			continue
		}
		f := *st.frame
		target := str(f.Payload, "sessionId")
		if (f.Type != "event.session.archived" && f.Type != "event.session.deleted") || target == "" || target == mapping.GlobalSession {
			l.b.metrics.globalDrops.Inc()
			continue
		}
		s := l.b.lock(target)
		at := s.frameTime(f)
		s.reopen(at)
		for _, ev := range mapping.MapFrame(f, l.b.cfg.Mode, l.b.cfg.Posture).Events {
			// No kap position: the seq is the server-wide stream's, not
			// this session's.
			s.emit(draft{id: l.b.newID(), ev: ev}, at, -1, "")
		}
		s.archived = true
		s.owner = nil
		s.closeLog()
		s.Unlock()
		l.unsubscribe(ctx, target)
	}
}

// onAck settles a subscribe: accepted sessions are live and their replay is
// complete; not-found ones are dormant until the server loads them.
func (l *link) onAck(ctx context.Context, f mapping.Frame) {
	l.mu.Lock()
	asked, ok := l.pending[f.ID]
	delete(l.pending, f.ID)
	l.mu.Unlock()
	if !ok {
		return
	}
	if f.Code != 0 {
		l.b.log.Warn("kap refused a subscribe", "code", f.Code, "sessions", len(asked))
	}
	accepted := strSet(f.Payload["accepted"])
	cursors, _ := f.Payload["cursors"].(map[string]any)
	for _, sid := range asked {
		l.mu.Lock()
		switch {
		case accepted[sid]:
			l.subs[sid] = subLive
		case sid == mapping.GlobalSession || l.listed[sid]:
			// Not loaded by the server (it was restarted, or the session
			// sleeps): ask again until it is.
			l.subs[sid] = subDormant
		default:
			l.subs[sid] = subNone
		}
		live := l.subs[sid] == subLive
		l.mu.Unlock()
		c, _ := cursors[sid].(map[string]any)
		seq, hasSeq := integer(c, "seq")
		epoch := str(c, "epoch")
		if sid == mapping.GlobalSession {
			l.f.gmu.Lock()
			if live && hasSeq && !l.f.global.known {
				l.f.global.set(epoch, seq)
			}
			steps := l.f.global.settle()
			l.f.gmu.Unlock()
			l.runGlobal(ctx, steps)
			continue
		}
		s := l.b.lock(sid)
		if live {
			// Loaded by this server: when it stops, the session ends.
			s.owner = l.f
		}
		if live && hasSeq && !s.cur.known {
			s.cur.set(epoch, seq)
		}
		s.run(s.cur.settle())
		s.Unlock()
	}
	l.publishCounts()
}

// onResync applies the server's demand to rebuild: the frames it can no
// longer replay are reported as a gap, and the stream continues live.
func (l *link) onResync(f mapping.Frame) {
	sid := str(f.Payload, "session_id")
	reason := str(f.Payload, "reason")
	if reason == "" {
		reason = "unknown"
	}
	cur, _ := integer(f.Payload, "current_seq")
	epoch := str(f.Payload, "epoch")
	if sid == "" {
		return
	}
	if sid == mapping.GlobalSession {
		l.f.gmu.Lock()
		g := l.f.global.resync(reason, cur, epoch)
		l.f.gmu.Unlock()
		if g != nil {
			l.b.metrics.gaps.WithLabelValues(gapLabel(reason)).Inc()
			l.b.log.Warn("server-wide kap frames lost", "reason", reason, "from_seq", g.from, "to_seq", g.to)
		}
		return
	}
	s := l.b.lock(sid)
	if g := s.cur.resync(reason, cur, epoch); g != nil {
		s.emitGap(*g)
	}
	s.Unlock()
}

func strSet(v any) map[string]bool {
	out := map[string]bool{}
	arr, _ := v.([]any)
	for _, x := range arr {
		if s, ok := x.(string); ok {
			out[s] = true
		}
	}
	return out
}

package relay

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"

	"github.com/aep-kimi/aep-kimi/aep"
	"github.com/aep-kimi/aep-kimi/internal/httpguard"
	"github.com/aep-kimi/aep-kimi/relay/wire"
)

// wsConn is one socket. Goroutines: the handler goroutine reads and parses
// frames; on a durable store an ingester goroutine acts on them in frame
// order, handing the store each time one batch of all the events that
// arrived while it was busy with the last (so its acknowledgement is
// awaited once per batch, not once per frame), while on the memory store,
// which never waits, the reader acts on each frame itself; a writer goroutine owns every write
// after the hello (replies, deliveries, routed commands) through the
// bounded queue; a keeper goroutine sends pings, enforces liveness and cuts
// off writes stuck past WriteTimeout. The reader ends with the connection;
// the ingester finishes what the reader queued, then ends; the writer and
// keeper end with the connection context.
type wsConn struct {
	srv    *Server
	id     uint64
	c      *websocket.Conn
	cork   *corkConn // the socket under c: lets the writer batch syscalls
	q      *outQueue
	ctx    context.Context
	cancel context.CancelFunc
	adm    *admission // what admitted the socket; nil on a watch-only relay

	// Set by the hello, before anything else can see the socket.
	role       string
	agent      string
	instance   string
	control    json.RawMessage // declared capabilities.control, verbatim
	emits      json.RawMessage // declared capabilities.emits, verbatim
	accepts    map[string]bool
	acceptList []string

	claims map[string]uint64 // guarded by srv.control.mu
	// ended are the sessions the socket ended (session.ended), which it
	// still takes ratings for; guarded by srv.control.mu.
	ended map[string]uint64

	// ingest carries events from the reader to the ingester; nil when the
	// reader hands them over itself (Server.inlineIngest), through one.
	ingest *ingestQueue
	one    [1]*Message

	mu   sync.Mutex
	subs map[string]*subscription

	lastRecv     atomic.Int64 // unix nanos of the last frame received
	writingSince atomic.Int64 // unix nanos a write started; 0 when idle
	readerDone   bool         // set by serve's goroutine only
}

// serveSocket is GET /socket (AEP-0003 §3.5).
func (s *Server) serveSocket(w http.ResponseWriter, r *http.Request) {
	if !s.enterSocket() {
		httpguard.WriteError(w, http.StatusServiceUnavailable, wire.CodeShuttingDown, "relay is shutting down")
		return
	}
	defer s.sockets.Done()
	if !headerHas(r.Header, "Connection", "upgrade") || !headerHas(r.Header, "Upgrade", "websocket") {
		w.Header().Set("Upgrade", "websocket")
		httpguard.WriteError(w, http.StatusUpgradeRequired, "upgrade-required", "GET /socket is the WebSocket binding; use /stream for SSE")
		return
	}
	release, ok := s.takeConn(w, bindingWS)
	if !ok {
		return
	}
	defer release()
	cw := &corkWriter{ResponseWriter: w}
	c, err := websocket.Accept(cw, r, &websocket.AcceptOptions{OriginPatterns: s.cfg.AllowedOrigins})
	if err != nil || cw.conn == nil {
		s.log.Debug("socket upgrade failed", "err", err)
		return
	}
	c.SetReadLimit(s.cfg.MaxBody)
	ctx, cancel := context.WithCancel(context.WithoutCancel(r.Context()))
	conn := &wsConn{
		srv:    s,
		id:     s.connSeq.Add(1),
		c:      c,
		q:      newOutQueue(s.cfg.QueueSize, s.metrics),
		ctx:    ctx,
		cancel: cancel,
		adm:    admissionOf(r),
		cork:   cw.conn,
		claims: make(map[string]uint64),
		ended:  make(map[string]uint64),
		subs:   make(map[string]*subscription),
	}
	s.nWS.Add(1)
	gauge := s.metrics.connections.WithLabelValues(bindingWS)
	gauge.Inc()
	defer func() {
		s.nWS.Add(-1)
		gauge.Dec()
	}()
	conn.serve()
}

// headerHas reports whether a comma-separated header lists token.
func headerHas(h http.Header, name, token string) bool {
	for _, v := range h.Values(name) {
		for _, part := range strings.Split(v, ",") {
			if strings.EqualFold(strings.TrimSpace(part), token) {
				return true
			}
		}
	}
	return false
}

// enterSocket registers a socket handler unless the relay is draining; the
// lock orders it against Drain so the drain wait never misses one.
func (s *Server) enterSocket() bool {
	s.sockMu.Lock()
	defer s.sockMu.Unlock()
	if s.draining() {
		return false
	}
	s.sockets.Add(1)
	return true
}

func (c *wsConn) serve() {
	var wg sync.WaitGroup
	defer func() {
		c.cancel()
		if c.readerDone {
			// The reader only stops once the socket is broken or closing:
			// close the connection under a writer that may still be
			// blocked on it (its writes carry no context).
			_ = c.cork.Close()
		}
		wg.Wait()
		c.srv.control.dropConn(c)
		c.mu.Lock()
		for _, sub := range c.subs {
			sub.cancel()
			c.srv.metrics.subs.Dec()
		}
		c.subs = nil
		c.mu.Unlock()
		_ = c.c.CloseNow()
	}()
	c.lastRecv.Store(time.Now().UnixNano())
	if !c.hello() {
		return
	}
	if c.srv.inlineIngest {
		wg.Add(2)
		go func() { defer wg.Done(); c.writer() }()
		go func() { defer wg.Done(); c.keeper() }()
		c.reader()
		c.readerDone = true
		return
	}
	c.ingest = newIngestQueue(wsIngestBytes)
	ingested := make(chan struct{})
	wg.Add(2)
	go func() { defer wg.Done(); c.writer() }()
	go func() { defer wg.Done(); c.keeper() }()
	go func() { defer close(ingested); c.ingester() }()
	c.reader()
	c.ingest.close()
	<-ingested
	c.readerDone = true
}

// fatal answers a protocol violation with an error frame and closes.
func (c *wsConn) fatal(f *wire.Error, status websocket.StatusCode) {
	ctx, cancel := context.WithTimeout(c.ctx, c.srv.cfg.WriteTimeout)
	defer cancel()
	_ = c.c.Write(ctx, websocket.MessageText, wire.Encode(f))
	_ = c.c.Close(status, f.Code)
}

// hello runs the opening exchange (AEP-0003 §4): the first frame must be a
// hello naming a version this relay speaks; the reply selects exactly one.
func (c *wsConn) hello() bool {
	s := c.srv
	hctx, cancel := context.WithTimeout(c.ctx, s.cfg.HelloTimeout)
	stop := context.AfterFunc(s.drainCtx, cancel)
	if c.adm != nil {
		// A credential ending before the hello cuts the socket: it has
		// been sent nothing yet.
		stopRevoked := c.adm.lease.AfterEnd(cancel)
		defer stopRevoked()
	}
	typ, data, err := c.c.Read(hctx)
	stop()
	cancel()
	if err != nil {
		return false
	}
	c.lastRecv.Store(time.Now().UnixNano())
	var h *wire.Hello
	if typ == websocket.MessageText {
		f, _ := wire.Parse(data)
		h, _ = f.(*wire.Hello)
	}
	if h == nil {
		c.fatal(&wire.Error{Code: wire.CodeHelloRequired, Detail: "the first frame on a socket must be hello (AEP-0003 §3.5.1)"}, websocket.StatusPolicyViolation)
		return false
	}
	if !h.Offers(aep.Version) {
		c.fatal(&wire.Error{Code: wire.CodeVersion, Versions: []string{aep.Version},
			Detail: fmt.Sprintf("no common version: this relay speaks %s", aep.Version)}, websocket.StatusPolicyViolation)
		return false
	}
	if c.adm != nil && c.adm.bind != nil && (h.Auth == nil || !c.adm.bind(h.Auth.Login)) {
		c.fatal(&wire.Error{Code: wire.CodeUnauthorized,
			Detail: "this browser's login cookie came without its login: the page's hello carries it (reload the page, or open the login URL again)"}, websocket.StatusPolicyViolation)
		return false
	}
	c.role, c.agent, c.instance = h.Role, h.Identity.Agent, h.Identity.Instance
	switch {
	case c.role != wire.RoleEmitter && c.role != wire.RoleConsumer && c.role != wire.RoleBoth:
		c.fatal(&wire.Error{Code: wire.CodeInvalidHello, Detail: fmt.Sprintf("role %q is not emitter, consumer or both", c.role)}, websocket.StatusPolicyViolation)
		return false
	case c.role != wire.RoleConsumer && c.agent == "":
		c.fatal(&wire.Error{Code: wire.CodeInvalidHello, Detail: "an emitter's hello must carry identity.agent (AEP-0003 §4 rule 3)"}, websocket.StatusPolicyViolation)
		return false
	}
	// Capabilities are declarations, never a gate (§4 rule 4): the parse
	// kept what it could. control and emits are kept verbatim for the roster.
	if caps := h.Capabilities; caps.Control != nil {
		c.control = caps.RawControl
		c.accepts = make(map[string]bool, len(caps.Control.Accepts))
		for _, t := range caps.Control.Accepts {
			c.accepts[t] = true
		}
		c.acceptList = caps.Control.Accepts
	}
	c.emits = h.Capabilities.RawEmits
	c.q.push(outItem{frame: s.hello})
	s.log.Debug("socket hello", "conn", c.id, "role", c.role, "agent", c.agent, "instance", c.instance)
	return true
}

// reader handles frames after the hello until the socket ends.
func (c *wsConn) reader() {
	for {
		typ, data, err := c.c.Read(c.ctx)
		if err != nil {
			return
		}
		c.lastRecv.Store(time.Now().UnixNano())
		if typ != websocket.MessageText {
			c.fatal(&wire.Error{Code: wire.CodeBinary, Detail: "binary frames are reserved in AEP 0.1 (AEP-0003 §3.5.2)"}, websocket.StatusUnsupportedData)
			return
		}
		c.frame(data)
	}
}

// frame dispatches one text frame: an event when its type has a dot, a
// frame otherwise; unknown frame types are ignored (AEP-0003 §2).
func (c *wsConn) frame(data []byte) {
	if c.adm.ended() != "" {
		return // the credential ended: the writer is closing the socket
	}
	// Most frames are events: one parse reads the kind and the event,
	// into the message that will carry it.
	if in := new(ingested); aep.ParseEventInto(&in.ev, data) == nil && strings.Contains(in.ev.Type, ".") {
		c.event(data, in)
		return
	}
	f, err := wire.Parse(data)
	if err != nil {
		c.sendError(&wire.Error{Code: wire.CodeInvalidFrame, Detail: "a frame is one JSON object with a string type"})
		return
	}
	// Every frame takes effect in the order it was sent: a subscribe sees
	// the events sent before it, and a pong answers only once they are in.
	switch f := f.(type) {
	case wire.Event:
		c.event(data, nil)
	case *wire.Subscribe:
		c.inOrder(len(data), func() { c.subscribe(f) })
	case *wire.Unsubscribe:
		c.inOrder(len(data), func() { c.unsubscribe(f.ID) })
	case *wire.Roster:
		c.inOrder(len(data), func() { c.roster(f.ID) })
	case *wire.Ping:
		c.inOrder(len(data), func() { c.q.push(outItem{frame: wire.PongFor(f)}) })
	}
}

// inOrder queues fn behind the socket's queued events (or, with no ingest
// queue, runs it: everything before it is already in).
func (c *wsConn) inOrder(size int, fn func()) {
	if c.ingest == nil {
		fn()
		return
	}
	c.ingest.push(c.ctx, ingestItem{size: size, fn: fn})
}

func (c *wsConn) sendError(f *wire.Error) {
	c.q.push(outItem{frame: wire.Encode(f)})
}

// subscribe answers a subscribe frame with subscribed, or an in-band error
// from the closed set (AEP-0003 §6.5); the socket survives either way.
func (c *wsConn) subscribe(f *wire.Subscribe) {
	s := c.srv
	refuse := func(code, detail string) {
		c.sendError(&wire.Error{ID: f.ID, Code: code, Detail: detail})
	}
	id := wire.String(f.ID)
	switch {
	case id == "":
		refuse(wire.CodeInvalidFilter, "subscribe needs a non-empty string id")
		return
	case c.role == wire.RoleEmitter:
		refuse(wire.CodeUnauthorized, "an emitter-role socket may not subscribe; say role consumer or both in the hello")
		return
	case len(f.Dialect) > 0 && string(f.Dialect) != "null" && wire.String(f.Dialect) != "attr-match":
		refuse(wire.CodeUnknownDialect, "this relay implements the attr-match dialect only")
		return
	}
	var p streamParams
	var err error
	if len(f.Filter) > 0 && string(f.Filter) != "null" {
		if p.filter, err = aep.ParseFilter(f.Filter); err != nil {
			refuse(wire.CodeInvalidFilter, err.Error())
			return
		}
		p.filterKey = string(f.Filter)
	}
	if p.from, err = wire.ParseFrom(f.From); err != nil {
		refuse(wire.CodeInvalidFilter, "from: "+err.Error())
		return
	}
	if n := len(p.from.Positions); n > s.cfg.MaxFrom {
		refuse(wire.CodeLimitExceeded, fmt.Sprintf("from names %d positions; the limit (AEP_MAX_FROM) is %d", n, s.cfg.MaxFrom))
		return
	}
	if len(f.Capture) > 0 && string(f.Capture) != "null" {
		name := wire.String(f.Capture)
		if p.ceiling, err = aep.ParseCapture(name); err != nil || name == "" {
			refuse(wire.CodeInvalidFilter, fmt.Sprintf("capture %s is not none, metadata, redacted or full", f.Capture))
			return
		}
		p.capped = true
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, dup := c.subs[id]; dup {
		refuse(wire.CodeInvalidFilter, fmt.Sprintf("subscription id %q is already in use on this socket", id))
		return
	}
	if len(c.subs) >= s.cfg.MaxSubscriptions {
		refuse(wire.CodeLimitExceeded, fmt.Sprintf("this socket already has %d subscriptions, the limit", len(c.subs)))
		return
	}
	p.capTo(c.adm)
	sub := newSubscription(id, c.q, c.id, 2*s.cfg.MaxSessions)
	sub.ceiling, sub.capped = p.ceiling, p.capped
	// Start queues subscribed ahead of the replay, once the backend has the
	// subscription: queued here, it could reach the consumer while an
	// event ingested before Subscribe registered passed the subscription
	// by, and a consumer that posts after the ack never saw it.
	sub.ack = wire.Encode(&wire.Subscribed{ID: id})
	cancel, err := s.backend.Subscribe(SubscribeRequest{Filter: p.filter, From: p.from, filterKey: p.filterKey}, sub)
	if err != nil {
		refuse(wire.CodeLimitExceeded, err.Error())
		return
	}
	sub.cancel = cancel
	c.subs[id] = sub
	s.metrics.subs.Inc()
}

func (c *wsConn) unsubscribe(rawID json.RawMessage) {
	id := wire.String(rawID)
	c.mu.Lock()
	if sub := c.subs[id]; sub != nil {
		sub.cancel()
		sub.cancelled.Store(true)
		delete(c.subs, id)
		c.srv.metrics.subs.Dec()
	}
	c.mu.Unlock()
	c.q.push(outItem{frame: wire.Encode(&wire.Unsubscribed{ID: rawID})})
}

// roster answers with every live claim this relay terminates (AEP-0003 §4.1).
func (c *wsConn) roster(rawID json.RawMessage) {
	if len(rawID) == 0 {
		c.sendError(&wire.Error{Code: wire.CodeInvalidFrame, Detail: "roster needs an id"})
		return
	}
	if c.role == wire.RoleEmitter {
		c.sendError(&wire.Error{ID: rawID, Code: wire.CodeUnauthorized, Detail: "roster is watch-class: an emitter-role socket may not ask"})
		return
	}
	c.q.push(outItem{frame: wire.Encode(&wire.Roster{ID: rawID, Entries: c.srv.control.roster()})})
}

// writer owns the socket's writes until it ends.
func (c *wsConn) writer() {
	s := c.srv
	var items []outItem
	for {
		select {
		case <-c.q.wake:
			items = c.q.take(items)
			err := c.drain(items)
			items = release(items)
			switch {
			case err == nil:
			case errors.Is(err, errDraining):
				c.closeWith("shutting-down", websocket.StatusGoingAway)
				return
			case errors.Is(err, errOverflow):
				c.closeWith("slow-consumer", websocket.StatusTryAgainLater)
				return
			case errors.Is(err, errRevoked):
				c.closeWith(c.adm.ended(), websocket.StatusPolicyViolation)
				return
			case errors.Is(err, errClosing):
				return
			default:
				c.cancel()
				return
			}
		case <-c.q.over:
			c.closeWith("slow-consumer", websocket.StatusTryAgainLater)
			return
		case <-s.drainCh:
			c.closeWith("shutting-down", websocket.StatusGoingAway)
			return
		case <-c.adm.done():
			c.closeWith(c.adm.ended(), websocket.StatusPolicyViolation)
			return
		case <-c.ctx.Done():
			return
		}
	}
}

var errClosing = errors.New("socket closed deliberately")

// drain handles items, everything queued since the writer's last wake-up,
// with the socket corked, so a backlog goes out in a few large writes
// instead of one syscall per frame; a lone frame is written at once. A
// close item is written uncorked, after what precedes it, and ends the
// pass.
func (c *wsConn) drain(items []outItem) error {
	defer c.counted(items)
	if len(items) == 1 && (items[0].run == nil || len(items[0].run.msgs) == 1) {
		return c.handle(items[0])
	}
	c.cork.cork()
	for _, it := range items {
		if it.closeCode != 0 {
			if err := c.uncork(); err != nil {
				return err
			}
			return c.handle(it)
		}
		if err := c.handle(it); err != nil {
			_ = c.uncork()
			return err
		}
	}
	return c.uncork()
}

// counted adds a pass's live deliveries to the metrics: the count, and
// the latency of the oldest.
func (c *wsConn) counted(items []outItem) {
	n, oldest := 0, time.Time{}
	for i := range items {
		var first *Message
		switch it := &items[i]; {
		case it.msg != nil:
			n++
			first = it.msg
		case it.run != nil:
			n += len(it.run.msgs)
			first = it.run.msgs[0]
		default:
			continue
		}
		if oldest.IsZero() {
			oldest = first.Ingested
		}
	}
	if n > 0 {
		c.srv.metrics.deliverWS.Add(float64(n))
	}
	if !oldest.IsZero() {
		c.srv.metrics.latency.Observe(time.Since(oldest).Seconds())
	}
}

func (c *wsConn) uncork() error {
	c.writingSince.Store(time.Now().UnixNano())
	err := c.cork.uncork()
	c.writingSince.Store(0)
	return err
}

// write sends one frame. It passes a context that is never done: the
// library would otherwise arm and disarm a timer per frame, a sixth of the
// CPU of a busy fan-out. A stalled write is the keeper's job instead: it
// closes the socket under it.
func (c *wsConn) write(b []byte) error {
	if c.ctx.Err() != nil {
		return c.ctx.Err()
	}
	c.writingSince.Store(time.Now().UnixNano())
	err := c.c.Write(context.Background(), websocket.MessageText, b)
	c.writingSince.Store(0)
	return err
}

func (c *wsConn) handle(it outItem) error {
	if c.adm.ended() != "" {
		return errRevoked // nothing more goes out once the credential ends
	}
	switch {
	case it.replay != nil:
		return c.replay(it.sub, it.replay)
	case it.msg != nil:
		return c.deliver(it.sub, it.msg)
	case it.run != nil:
		for _, m := range it.run.msgs {
			if err := c.deliver(it.sub, m); err != nil {
				return err
			}
		}
		return nil
	case it.closeCode != 0:
		c.closeWith(it.closeReason, websocket.StatusCode(it.closeCode))
		return errClosing
	default:
		return c.write(it.frame)
	}
}

func (c *wsConn) deliver(sub *subscription, m *Message) error {
	if sub.cancelled.Load() {
		return nil
	}
	b, err := sub.wire(m)
	if err != nil {
		c.srv.log.Warn("socket: event withheld: down-level failed", "type", m.Type, "err", err)
		return nil
	}
	if err := c.write(b); err != nil {
		return err
	}
	c.mu.Lock()
	sub.record(m)
	c.mu.Unlock()
	return nil
}

func (c *wsConn) replay(sub *subscription, r Replay) error {
	for _, ex := range r.Exhausted() {
		f := wire.Encode(&wire.ReplayExhausted{Sub: sub.id, Session: ex.Session, Earliest: ex.Earliest})
		if err := c.write(f); err != nil {
			return err
		}
	}
	n := 0
	err := r.Each(c.ctx, func(m *Message) error {
		if n++; n&255 == 0 {
			select {
			case <-c.srv.drainCh:
				return errDraining
			case <-c.q.over:
				return errOverflow
			case <-c.adm.done():
				return errRevoked
			default:
			}
		}
		return c.deliver(sub, m)
	})
	c.srv.metrics.deliverWS.Add(float64(n))
	return err
}

// closeWith sends the closing frame with every subscription's last delivered
// positions (AEP-0003 §3.5.4), then closes.
func (c *wsConn) closeWith(reason string, status websocket.StatusCode) {
	f := &wire.Closing{Reason: reason, Delivered: []wire.Delivered{}}
	c.mu.Lock()
	for _, sub := range c.subs {
		for _, p := range sub.positions() {
			f.Delivered = append(f.Delivered, wire.Delivered{Sub: sub.id, Session: p.Session, Epoch: p.Epoch, Seq: p.Seq})
		}
	}
	c.mu.Unlock()
	ctx, cancel := context.WithTimeout(c.ctx, c.srv.cfg.WriteTimeout)
	defer cancel()
	_ = c.c.Write(ctx, websocket.MessageText, wire.Encode(f))
	_ = c.c.Close(status, reason)
}

// keeper pings, closes a socket silent past LivenessTimeout, and aborts a
// write stuck past WriteTimeout (the consumer stopped reading).
func (c *wsConn) keeper() {
	s := c.srv
	t := time.NewTicker(min(s.cfg.PingInterval, s.cfg.WriteTimeout))
	defer t.Stop()
	lastPing := time.Now()
	for {
		select {
		case <-c.ctx.Done():
			return
		case now := <-t.C:
			if w := c.writingSince.Load(); w != 0 && now.Sub(time.Unix(0, w)) > s.cfg.WriteTimeout {
				s.log.Info("socket write stalled; closing", "conn", c.id)
				c.q.overflow() // cut off for being slow: counted as a disconnect
				c.cancel()
				_ = c.cork.Close() // unblocks a write the context cannot reach
				return
			}
			if now.Sub(time.Unix(0, c.lastRecv.Load())) > s.cfg.LivenessTimeout {
				c.q.push(outItem{closeCode: int(websocket.StatusPolicyViolation), closeReason: "liveness-timeout"})
				return
			}
			if now.Sub(lastPing) >= s.cfg.PingInterval {
				lastPing = now
				c.q.push(outItem{frame: wire.PingAt(now)})
			}
		}
	}
}

// corkWriter hands websocket.Accept a hijacked connection wrapped in a
// corkConn.
type corkWriter struct {
	http.ResponseWriter
	conn *corkConn
}

func (w *corkWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	conn, brw, err := http.NewResponseController(w.ResponseWriter).Hijack()
	if err != nil {
		return nil, nil, err
	}
	w.conn = &corkConn{Conn: conn}
	// The server side of websocket writes through brw.Writer, which the
	// hijack left empty and pointed at the raw connection: repoint it.
	brw.Writer.Reset(w.conn)
	return w.conn, brw, nil
}

// corkMax bounds what a corked connection holds before writing through.
const corkMax = 256 << 10

// corkConn is the socket under a websocket.Conn. The library flushes every
// frame; while corked, those flushes collect here and go out in one write
// at uncork (or once corkMax is reached). Uncorked, writes pass straight
// through, so the library's own frames (pongs, close) are never held.
type corkConn struct {
	net.Conn
	mu     sync.Mutex
	corked bool
	buf    []byte
}

func (c *corkConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.corked && len(c.buf)+len(p) <= corkMax {
		c.buf = append(c.buf, p...)
		return len(p), nil
	}
	if err := c.flushLocked(); err != nil {
		return 0, err
	}
	return c.Conn.Write(p)
}

func (c *corkConn) cork() {
	c.mu.Lock()
	c.corked = true
	c.mu.Unlock()
}

func (c *corkConn) uncork() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.corked = false
	return c.flushLocked()
}

func (c *corkConn) flushLocked() error {
	if len(c.buf) == 0 {
		return nil
	}
	_, err := c.Conn.Write(c.buf)
	if cap(c.buf) > corkMax {
		c.buf = nil
	} else {
		c.buf = c.buf[:0]
	}
	return err
}

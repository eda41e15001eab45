package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/aep-kimi/aep-kimi/aep"
	"github.com/aep-kimi/aep-kimi/internal/backoff"
	"github.com/aep-kimi/aep-kimi/internal/defaults"
	"github.com/aep-kimi/aep-kimi/internal/httpguard"
	"github.com/aep-kimi/aep-kimi/internal/tlsconf"
	"github.com/aep-kimi/aep-kimi/relay/wire"
)

// Publisher defaults.
const (
	// DefaultOutbox bounds the events waiting to be sent: minutes of a busy
	// session while the relay is away.
	DefaultOutbox = 16384
	// DefaultResend is how many recently sent events are re-sent after a
	// reconnect, covering what the relay may not have processed.
	DefaultResend = 1024
	// DefaultLiveSessions bounds the sessions re-claimed after a reconnect.
	DefaultLiveSessions = 1024
	// DefaultBackoffMin and DefaultBackoffMax bound the reconnect backoff
	// of the publisher and the tailer.
	DefaultBackoffMin = backoff.DefaultMin
	DefaultBackoffMax = backoff.DefaultMax
	// DefaultHTTPBatch caps one fallback POST.
	DefaultHTTPBatch = 500
	// DefaultPublisherTimeout bounds a dial, a hello, one write and one POST.
	DefaultPublisherTimeout = 10 * time.Second
	// DefaultPublisherPing paces the publisher's own pings; DefaultPublisherLiveness
	// drops a connection silent for that long.
	DefaultPublisherPing     = 30 * time.Second
	DefaultPublisherLiveness = 90 * time.Second
	// DefaultFlushTimeout bounds the final flush when Run's context ends.
	DefaultFlushTimeout = 2 * time.Second
	// DefaultCommandQueue bounds commands waiting for Run's onCommand.
	DefaultCommandQueue = 64
)

// PublisherState is the publisher's connection state.
type PublisherState string

// Publisher states.
const (
	PublisherDisabled     PublisherState = "disabled"
	PublisherConnecting   PublisherState = "connecting"
	PublisherConnected    PublisherState = "connected"
	PublisherDisconnected PublisherState = "disconnected"
)

// PublisherConfig configures a Publisher. URL "" or "none" disables it.
type PublisherConfig struct {
	// URL is the relay's base URL (http, https, ws or wss); the socket is
	// {URL}/socket and the fallback POST goes to {URL}/events.
	URL string
	// Token is the relay's bearer token.
	Token string
	// Agent and Instance are the hello identity; Agent is required.
	Agent, Instance string
	// Emits and Capture are declared at hello when set.
	Emits, Capture []string
	// Control, when set, declares the commands this publisher accepts for
	// its emitter (Run hands them to onCommand).
	Control *wire.Control

	Outbox, Resend, LiveSessions, HTTPBatch, CommandQueue int
	// BackoffMin and BackoffMax bound the reconnect delay; a connection
	// that stayed up for BackoffMax resets it (see internal/backoff).
	BackoffMin, BackoffMax                        time.Duration
	Timeout, PingInterval, Liveness, FlushTimeout time.Duration
	// HTTPClient makes the dial and the fallback POSTs; nil uses a default.
	HTTPClient *http.Client
	// Logger receives connection logs; nil discards them.
	Logger *slog.Logger
}

// PublisherStats is a snapshot for /healthz and /metrics.
type PublisherStats struct {
	State PublisherState `json:"state"`
	// Fallback is true while events go by HTTP POST because the socket
	// cannot be established.
	Fallback bool `json:"fallback"`
	// Outbox is the number of events waiting.
	Outbox int `json:"outbox"`
	// Dropped counts events lost to a full outbox (debug/info first) or
	// refused by the relay as invalid.
	Dropped    uint64 `json:"dropped"`
	Sent       uint64 `json:"sent"`
	Posted     uint64 `json:"posted"`
	Reconnects uint64 `json:"reconnects"`
	Commands   uint64 `json:"commands"`
	LastError  string `json:"last_error,omitempty"`
}

// pending is one event waiting in the outbox.
type pending struct {
	seq     uint64
	b       []byte
	low     bool // debug or info: dropped first
	session string
	scoped  bool // positioned session event: keeps the session's claim
	ended   bool // session.ended: releases it
}

// Publisher publishes events to a relay over its socket, falling back to HTTP
// POST, and receives the commands routed to it. Publish never blocks.
//
// While disconnected, events wait in a bounded outbox; when it is full,
// debug/info events go first, and notice-or-above only when nothing else is
// left (AEP-0003 §8.4), each counted in Dropped. After every reconnect the
// publisher re-claims its live sessions (it re-sends the latest event of each
// session that has not ended) and re-sends its most recent events; the
// relay's (source, id) admission dedupe absorbs the repeats. Publish order
// is kept on the wire. A nil *Publisher is a disabled one.
type Publisher struct {
	cfg       PublisherConfig
	disabled  bool
	wsURL     string
	eventsURL string
	log       *slog.Logger
	wake      chan struct{}

	mu       sync.Mutex
	seq      uint64
	low      deque[pending]
	high     deque[pending]
	ring     []pending // recently sent on the socket, oldest first
	live     map[string]pending
	fallback bool
	lastErr  string
	// postAfter is when the relay said a POST may come again (its
	// Retry-After on a refused batch); none before it.
	postAfter time.Time

	state      atomic.Value // PublisherState
	dropped    atomic.Uint64
	sent       atomic.Uint64
	posted     atomic.Uint64
	reconnects atomic.Uint64
	commands   atomic.Uint64
}

// NewPublisher validates cfg. A URL of "" or "none" yields a disabled publisher
// whose methods do nothing.
func NewPublisher(cfg PublisherConfig) (*Publisher, error) {
	e := &Publisher{cfg: cfg, wake: make(chan struct{}, 1), live: make(map[string]pending)}
	e.state.Store(PublisherDisabled)
	e.log = cfg.Logger
	if e.log == nil {
		e.log = slog.New(slog.DiscardHandler)
	}
	raw := strings.TrimSpace(cfg.URL)
	if raw == "" || strings.EqualFold(raw, "none") {
		e.disabled = true
		return e, nil
	}
	var err error
	if e.wsURL, e.eventsURL, err = relayEndpoints(raw); err != nil {
		return nil, fmt.Errorf("publisher: %w", err)
	}
	if cfg.Agent == "" {
		return nil, errors.New("publisher: Agent is required (the hello identity)")
	}
	c := &e.cfg
	defaults.SetPositive(&c.Outbox, DefaultOutbox)
	defaults.SetPositive(&c.Resend, DefaultResend)
	defaults.SetPositive(&c.LiveSessions, DefaultLiveSessions)
	defaults.SetPositive(&c.HTTPBatch, DefaultHTTPBatch)
	defaults.SetPositive(&c.CommandQueue, DefaultCommandQueue)
	defaults.SetPositive(&c.BackoffMin, DefaultBackoffMin)
	defaults.SetPositive(&c.BackoffMax, DefaultBackoffMax)
	defaults.SetPositive(&c.Timeout, DefaultPublisherTimeout)
	defaults.SetPositive(&c.PingInterval, DefaultPublisherPing)
	defaults.SetPositive(&c.Liveness, DefaultPublisherLiveness)
	defaults.SetPositive(&c.FlushTimeout, DefaultFlushTimeout)
	if c.HTTPClient == nil {
		c.HTTPClient = &http.Client{}
	}
	e.state.Store(PublisherDisconnected)
	return e, nil
}

// relayEndpoints derives a relay's socket and POST URLs from its base URL
// (http, https, ws or wss, with an optional path prefix).
func relayEndpoints(base string) (wsURL, eventsURL string, err error) {
	u, err := url.Parse(strings.TrimSpace(base))
	if err != nil || u.Host == "" {
		return "", "", fmt.Errorf("relay URL %q is not an absolute URL", base)
	}
	httpScheme, wsScheme, err := relaySchemes(u.Scheme)
	if err != nil {
		return "", "", err
	}
	u.RawQuery, u.Fragment, u.User = "", "", nil
	prefix := strings.TrimSuffix(u.Path, "/")
	u.Scheme, u.Path = wsScheme, prefix+"/socket"
	wsURL = u.String()
	u.Scheme, u.Path = httpScheme, prefix+"/events"
	return wsURL, u.String(), nil
}

// relaySchemes are the HTTP and socket schemes of a relay URL's scheme:
// http and ws name a plain relay, https and wss one serving TLS.
func relaySchemes(scheme string) (httpScheme, wsScheme string, err error) {
	switch strings.ToLower(scheme) {
	case "http", "ws":
		return "http", "ws", nil
	case "https", "wss":
		return "https", "wss", nil
	}
	return "", "", fmt.Errorf("relay URL scheme %q is not http, https, ws or wss", scheme)
}

// httpBase is a relay URL with its HTTP scheme (a ws URL's is http, a
// wss URL's https).
func httpBase(u *url.URL) (string, error) {
	httpScheme, _, err := relaySchemes(u.Scheme)
	if err != nil {
		return "", err
	}
	v := *u
	v.Scheme, v.Fragment = httpScheme, ""
	return v.String(), nil
}

// Publish queues ev for the relay without blocking. The event is serialized
// now, so the caller may reuse it.
func (e *Publisher) Publish(ev *aep.Event) {
	if e == nil || e.disabled {
		return
	}
	b, err := ev.Bytes()
	if err != nil {
		e.dropped.Add(1)
		e.log.Warn("publisher: event dropped: cannot serialize", "type", ev.Type, "err", err)
		return
	}
	if bytes.ContainsAny(b, "\r\n") {
		var buf bytes.Buffer
		if json.Compact(&buf, b) == nil {
			b = buf.Bytes()
		}
	}
	p := pending{
		b:       b,
		low:     ev.SeverityLevel() < aep.SeverityNotice,
		session: ev.Session,
		scoped:  aep.ScopeOf(ev.Type) == aep.ScopeSession && ev.Session != "",
		ended:   ev.Type == "session.ended",
	}
	e.mu.Lock()
	e.seq++
	p.seq = e.seq
	if e.low.len()+e.high.len() >= e.cfg.Outbox {
		switch {
		case e.low.len() > 0:
			e.low.popFront()
		case p.low:
			e.mu.Unlock()
			e.dropped.Add(1)
			return
		default:
			e.high.popFront()
		}
		e.dropped.Add(1)
	}
	if p.low {
		e.low.pushBack(p)
	} else {
		e.high.pushBack(p)
	}
	e.mu.Unlock()
	select {
	case e.wake <- struct{}{}:
	default:
	}
}

// popLocked removes the oldest pending event.
func (e *Publisher) popLocked() (pending, bool) {
	l, lok := e.low.front()
	h, hok := e.high.front()
	switch {
	case lok && (!hok || l.seq < h.seq):
		return e.low.popFront(), true
	case hok:
		return e.high.popFront(), true
	}
	return pending{}, false
}

// requeueLocked puts events back at the front, oldest last in ps order
// reversed, so they go out again first and in order.
func (e *Publisher) requeueLocked(ps []pending) {
	for i := len(ps) - 1; i >= 0; i-- {
		if ps[i].low {
			e.low.pushFront(ps[i])
		} else {
			e.high.pushFront(ps[i])
		}
	}
}

// State reports the connection state.
func (e *Publisher) State() PublisherState {
	if e == nil {
		return PublisherDisabled
	}
	return e.state.Load().(PublisherState)
}

// Stats reports counters and the outbox depth.
func (e *Publisher) Stats() PublisherStats {
	if e == nil {
		return PublisherStats{State: PublisherDisabled}
	}
	e.mu.Lock()
	st := PublisherStats{Outbox: e.low.len() + e.high.len(), Fallback: e.fallback, LastError: e.lastErr}
	e.mu.Unlock()
	st.State = e.State()
	st.Dropped = e.dropped.Load()
	st.Sent = e.sent.Load()
	st.Posted = e.posted.Load()
	st.Reconnects = e.reconnects.Load()
	st.Commands = e.commands.Load()
	return st
}

func (e *Publisher) setErr(err error) {
	e.mu.Lock()
	e.lastErr = err.Error()
	e.mu.Unlock()
}

// Run connects and keeps connecting until ctx is done, then flushes what it
// can within FlushTimeout and closes. The commands the relay routes to the
// emitter this publisher speaks for go to onCommand (nil drops them), one
// at a time on a goroutine of Run's own; it answers each by Publishing its
// ack. A disabled publisher returns at once.
func (e *Publisher) Run(ctx context.Context, onCommand func(context.Context, *aep.Event)) error {
	if e == nil || e.disabled {
		return nil
	}
	cmds := make(chan *aep.Event, e.cfg.CommandQueue)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		dispatch(ctx, cmds, onCommand)
	}()
	defer wg.Wait()

	bo := backoff.Backoff{Min: e.cfg.BackoffMin, Max: e.cfg.BackoffMax}
	reported := false
	for ctx.Err() == nil {
		e.state.Store(PublisherConnecting)
		c, err := e.dial(ctx)
		if err == nil {
			e.mu.Lock()
			e.fallback = false
			e.mu.Unlock()
			e.state.Store(PublisherConnected)
			e.log.Info("publisher connected", "relay", e.wsURL)
			reported = false
			start := time.Now()
			err = e.serveConn(ctx, c, cmds)
			if ctx.Err() != nil {
				e.state.Store(PublisherDisconnected)
				return nil
			}
			bo.Up(time.Since(start))
			e.reconnects.Add(1)
		}
		e.state.Store(PublisherDisconnected)
		e.setErr(err)
		if !reported {
			e.log.Warn("publisher: relay socket unavailable; retrying with backoff", "relay", e.wsURL, "err", err)
			reported = true
		} else {
			e.log.Debug("publisher: relay socket still unavailable", "err", err)
		}
		if !e.waitFallback(ctx, bo.NextAtLeast(backoff.Asked(err))) {
			break
		}
	}
	e.state.Store(PublisherDisconnected)
	return nil
}

// waitFallback waits out a backoff delay, posting the outbox over HTTP
// meanwhile when the socket is down but POST works. It returns false when
// ctx ends.
func (e *Publisher) waitFallback(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	e.flushHTTP(ctx)
	for {
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
			return true
		case <-e.wake:
			e.flushHTTP(ctx)
		}
	}
}

// dispatch hands the queued commands to onCommand in order until ctx ends.
func dispatch(ctx context.Context, cmds <-chan *aep.Event, onCommand func(context.Context, *aep.Event)) {
	for {
		select {
		case <-ctx.Done():
			return
		case ev := <-cmds:
			if onCommand != nil {
				onCommand(ctx, ev)
			}
		}
	}
}

func (e *Publisher) hello() *wire.Hello {
	caps := wire.Capabilities{Emits: e.cfg.Emits, Capture: e.cfg.Capture}
	if e.cfg.Control != nil {
		ctl := *e.cfg.Control
		if ctl.Accepts == nil {
			ctl.Accepts = []string{}
		}
		caps.Control = &ctl
	}
	return wire.NewHello(wire.RoleEmitter, wire.Identity{Agent: e.cfg.Agent, Instance: e.cfg.Instance}, caps)
}

// dial opens the socket and completes the hello exchange.
func (e *Publisher) dial(ctx context.Context) (*websocket.Conn, error) {
	dctx, cancel := context.WithTimeout(ctx, e.cfg.Timeout)
	defer cancel()
	return dial(dctx, e.wsURL, e.cfg.Token, e.cfg.HTTPClient, e.hello())
}

// readLimit caps one frame read from a relay: the relay's own default cap
// on one socket message.
const readLimit = 16 << 20

// dial opens a relay socket at wsURL and completes the hello exchange
// (AEP-0003 §4): hello sent, the relay's hello (or its refusal) read.
// client nil uses the default HTTP client.
func dial(ctx context.Context, wsURL, token string, client *http.Client, hello *wire.Hello) (*websocket.Conn, error) {
	h := http.Header{}
	if token != "" {
		h.Set("Authorization", "Bearer "+token)
	}
	c, resp, err := websocket.Dial(ctx, wsURL, &websocket.DialOptions{HTTPHeader: h, HTTPClient: client})
	if err != nil {
		if resp != nil {
			return nil, backoff.Later(fmt.Errorf("relay refused the socket: HTTP %d", resp.StatusCode), resp.Header)
		}
		if cerr := tlsconf.CertError(err); cerr != nil {
			return nil, fmt.Errorf("relay %s: %w", httpguard.DisplayURL(wsURL), cerr)
		}
		return nil, fmt.Errorf("relay unreachable: %w", err)
	}
	c.SetReadLimit(readLimit)
	if err := c.Write(ctx, websocket.MessageText, wire.Encode(hello)); err != nil {
		_ = c.CloseNow()
		return nil, fmt.Errorf("send hello: %w", err)
	}
	_, data, err := c.Read(ctx)
	if err != nil {
		_ = c.CloseNow()
		return nil, fmt.Errorf("await hello: %w", err)
	}
	switch f, _ := wire.Parse(data); f := f.(type) {
	case *wire.Hello:
		return c, nil
	case *wire.Error:
		_ = c.CloseNow()
		return nil, fmt.Errorf("relay refused the hello: %s: %s", f.Code, f.Detail)
	}
	_ = c.CloseNow()
	return nil, errors.New("relay answered the hello with something else")
}

// serveConn runs one connection: re-claims and re-sends, then writes the
// outbox in order while a reader goroutine answers pings and takes
// commands. It returns when the connection fails or ctx ends.
func (e *Publisher) serveConn(ctx context.Context, c *websocket.Conn, cmds chan<- *aep.Event) error {
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	defer wg.Wait()
	defer func() { _ = c.CloseNow() }()
	readErr := make(chan error, 1)
	lastRecv := &atomic.Int64{}
	lastRecv.Store(time.Now().UnixNano())
	wg.Add(1)
	go func() {
		defer wg.Done()
		readErr <- e.readLoop(cctx, c, cmds, lastRecv)
		cancel()
	}()

	write := func(b []byte) error {
		wctx, wcancel := context.WithTimeout(cctx, e.cfg.Timeout)
		defer wcancel()
		return c.Write(wctx, websocket.MessageText, b)
	}
	for _, b := range e.reclaimFrames() {
		if err := write(b); err != nil {
			return fmt.Errorf("re-send: %w", err)
		}
	}
	ping := time.NewTicker(e.cfg.PingInterval)
	defer ping.Stop()
	for {
		if err := e.drainOutbox(write); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("write: %w", err)
		}
		select {
		case <-e.wake:
		case now := <-ping.C:
			if now.Sub(time.Unix(0, lastRecv.Load())) > e.cfg.Liveness {
				return errors.New("relay silent past the liveness timeout")
			}
			if err := write(wire.PingAt(now)); err != nil {
				return fmt.Errorf("ping: %w", err)
			}
		case err := <-readErr:
			return err
		case <-ctx.Done():
			e.closeGracefully(c)
			return nil
		}
	}
}

// drainOutbox writes the outbox's events in order until it is empty. An
// event write fails on goes back to the outbox, and the error is returned.
func (e *Publisher) drainOutbox(write func([]byte) error) error {
	for {
		e.mu.Lock()
		p, ok := e.popLocked()
		e.mu.Unlock()
		if !ok {
			return nil
		}
		if err := write(p.b); err != nil {
			e.mu.Lock()
			e.requeueLocked([]pending{p})
			e.mu.Unlock()
			return err
		}
		e.sent.Add(1)
		e.recordSent(p, true)
	}
}

// closeGracefully flushes the outbox within FlushTimeout, then closes 1001.
func (e *Publisher) closeGracefully(c *websocket.Conn) {
	fctx, cancel := context.WithTimeout(context.Background(), e.cfg.FlushTimeout)
	defer cancel()
	if e.drainOutbox(func(b []byte) error { return c.Write(fctx, websocket.MessageText, b) }) != nil {
		return
	}
	_ = c.Write(fctx, websocket.MessageText, wire.Encode(&wire.Closing{Reason: "emitter stopping", Delivered: []wire.Delivered{}}))
	_ = c.Close(websocket.StatusGoingAway, "emitter stopping")
}

// recordSent remembers p for re-sending (socket sends only) and as its
// session's latest event.
func (e *Publisher) recordSent(p pending, socket bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if socket {
		if len(e.ring) >= e.cfg.Resend {
			copy(e.ring, e.ring[1:])
			e.ring = e.ring[:len(e.ring)-1]
		}
		e.ring = append(e.ring, p)
	}
	if !p.scoped {
		return
	}
	if p.ended {
		delete(e.live, p.session)
		return
	}
	if _, ok := e.live[p.session]; !ok && len(e.live) >= e.cfg.LiveSessions {
		oldest, min := "", ^uint64(0)
		for s, q := range e.live {
			if q.seq < min {
				oldest, min = s, q.seq
			}
		}
		delete(e.live, oldest)
	}
	e.live[p.session] = p
}

// reclaimFrames lists what a fresh connection re-sends: the latest event of
// every live session that is not among the recent events, oldest first,
// then the recent events in order. Everything is older than the outbox.
func (e *Publisher) reclaimFrames() [][]byte {
	e.mu.Lock()
	defer e.mu.Unlock()
	inRing := make(map[uint64]bool, len(e.ring))
	for _, p := range e.ring {
		inRing[p.seq] = true
	}
	var claims []pending
	for _, p := range e.live {
		if !inRing[p.seq] {
			claims = append(claims, p)
		}
	}
	sortPending(claims)
	out := make([][]byte, 0, len(claims)+len(e.ring))
	for _, p := range claims {
		out = append(out, p.b)
	}
	for _, p := range e.ring {
		out = append(out, p.b)
	}
	return out
}

func sortPending(ps []pending) {
	for i := 1; i < len(ps); i++ {
		for j := i; j > 0 && ps[j].seq < ps[j-1].seq; j-- {
			ps[j], ps[j-1] = ps[j-1], ps[j]
		}
	}
}

// readLoop reads the relay's frames: pings are answered, routed commands go
// to the dispatcher, error frames are logged and counted.
func (e *Publisher) readLoop(ctx context.Context, c *websocket.Conn, cmds chan<- *aep.Event, lastRecv *atomic.Int64) error {
	for {
		_, data, err := c.Read(ctx)
		if err != nil {
			return fmt.Errorf("read: %w", err)
		}
		lastRecv.Store(time.Now().UnixNano())
		f, err := wire.Parse(data)
		if err != nil {
			continue
		}
		switch f := f.(type) {
		case *wire.Ping:
			wctx, cancel := context.WithTimeout(ctx, e.cfg.Timeout)
			err := c.Write(wctx, websocket.MessageText, wire.PongFor(f))
			cancel()
			if err != nil {
				return fmt.Errorf("pong: %w", err)
			}
		case *wire.Error:
			if f.Code == wire.CodeInvalidEvent {
				e.dropped.Add(1)
			}
			e.log.Warn("publisher: relay error frame", "code", f.Code, "cause", f.Cause, "detail", f.Detail)
		case *wire.Closing:
			e.log.Info("publisher: relay is closing the socket", "reason", f.Reason)
		case wire.Event:
			if !aep.IsCommand(f.Type) {
				continue
			}
			ev, err := aep.ParseEvent(data)
			if err != nil {
				e.log.Warn("publisher: unparseable command ignored", "err", err)
				continue
			}
			e.commands.Add(1)
			select {
			case cmds <- ev:
			default:
				// The sender's retry recovers a dropped command (AEP-0004 §2.3).
				e.log.Warn("publisher: command queue full; command dropped", "type", ev.Type, "id", ev.ID)
			}
		}
	}
}

// flushHTTP posts the outbox as NDJSON batches while POST works. It is the
// fallback for when the socket cannot be established.
func (e *Publisher) flushHTTP(ctx context.Context) {
	batch := e.cfg.HTTPBatch
	for ctx.Err() == nil {
		e.mu.Lock()
		if time.Now().Before(e.postAfter) {
			e.mu.Unlock()
			return
		}
		var ps []pending
		for len(ps) < batch {
			p, ok := e.popLocked()
			if !ok {
				break
			}
			ps = append(ps, p)
		}
		e.mu.Unlock()
		if len(ps) == 0 {
			return
		}
		status, line, after, err := e.post(ctx, ps)
		switch {
		case err == nil && (status == http.StatusAccepted || status == http.StatusOK):
			e.posted.Add(uint64(len(ps)))
			e.mu.Lock()
			e.fallback = true
			e.mu.Unlock()
			for _, p := range ps {
				e.recordSent(p, false)
			}
			continue
		case status == http.StatusBadRequest && line >= 1 && line <= len(ps):
			// One invalid event would block the outbox forever: drop it,
			// keep the rest.
			e.dropped.Add(1)
			e.log.Warn("publisher: relay rejected an event as invalid; dropped", "line", line)
			ps = append(ps[:line-1], ps[line:]...)
			e.mu.Lock()
			e.requeueLocked(ps)
			e.mu.Unlock()
			continue
		case status == http.StatusRequestEntityTooLarge && len(ps) > 1:
			batch = max(1, len(ps)/2)
		case status == http.StatusRequestEntityTooLarge:
			e.dropped.Add(1)
			e.log.Warn("publisher: event larger than the relay accepts; dropped")
			continue
		}
		e.mu.Lock()
		e.requeueLocked(ps)
		if after > 0 {
			e.postAfter = time.Now().Add(min(after, e.cfg.BackoffMax))
		}
		e.mu.Unlock()
		if status != http.StatusRequestEntityTooLarge {
			if err == nil {
				err = fmt.Errorf("POST /events: HTTP %d", status)
			}
			e.setErr(err)
			return
		}
	}
}

// post sends one NDJSON batch; it returns the status, on a 400 the failing
// line the relay named, and the relay's Retry-After.
func (e *Publisher) post(ctx context.Context, ps []pending) (status, line int, after time.Duration, err error) {
	var body bytes.Buffer
	for _, p := range ps {
		body.Write(p.b)
		body.WriteByte('\n')
	}
	pctx, cancel := context.WithTimeout(ctx, e.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(pctx, http.MethodPost, e.eventsURL, &body)
	if err != nil {
		return 0, 0, 0, err
	}
	req.Header.Set("Content-Type", "application/x-ndjson")
	req.Header.Set("AEP-Version", aep.Version)
	if e.cfg.Token != "" {
		req.Header.Set("Authorization", "Bearer "+e.cfg.Token)
	}
	resp, err := e.cfg.HTTPClient.Do(req)
	if err != nil {
		return 0, 0, 0, fmt.Errorf("POST /events: %w", err)
	}
	defer resp.Body.Close()
	var reply struct {
		Line int `json:"line"`
	}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	_ = json.Unmarshal(b, &reply)
	return resp.StatusCode, reply.Line, backoff.RetryAfter(resp.Header.Get("Retry-After"), time.Now()), nil
}

// Collector exposes the publisher's stats as Prometheus metrics named
// {namespace}_emitter_*, for the daemons' own registries: named for the
// role the publisher speaks for at hello, and kept so dashboards go on.
func (e *Publisher) Collector(namespace string) prometheus.Collector {
	return &publisherCollector{e: e, ns: namespace}
}

type publisherCollector struct {
	e  *Publisher
	ns string
}

func (c *publisherCollector) desc(name, help string, labels ...string) *prometheus.Desc {
	return prometheus.NewDesc(c.ns+"_emitter_"+name, help, labels, nil)
}

func (c *publisherCollector) descs() []*prometheus.Desc {
	return []*prometheus.Desc{
		c.desc("state", "1 for the publisher's current connection state.", "state"),
		c.desc("outbox_events", "Events waiting to be sent."),
		c.desc("dropped_total", "Events dropped: full outbox (debug/info first) or refused as invalid."),
		c.desc("sent_total", "Events written to the relay socket."),
		c.desc("posted_total", "Events posted over the HTTP fallback."),
		c.desc("reconnects_total", "Socket connections lost and re-established."),
		c.desc("commands_total", "Commands received from the relay."),
	}
}

func (c *publisherCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.descs() {
		ch <- d
	}
}

func (c *publisherCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.e.Stats()
	d := c.descs()
	for _, s := range []PublisherState{PublisherDisabled, PublisherConnecting, PublisherConnected, PublisherDisconnected} {
		v := 0.0
		if st.State == s {
			v = 1
		}
		ch <- prometheus.MustNewConstMetric(d[0], prometheus.GaugeValue, v, string(s))
	}
	ch <- prometheus.MustNewConstMetric(d[1], prometheus.GaugeValue, float64(st.Outbox))
	ch <- prometheus.MustNewConstMetric(d[2], prometheus.CounterValue, float64(st.Dropped))
	ch <- prometheus.MustNewConstMetric(d[3], prometheus.CounterValue, float64(st.Sent))
	ch <- prometheus.MustNewConstMetric(d[4], prometheus.CounterValue, float64(st.Posted))
	ch <- prometheus.MustNewConstMetric(d[5], prometheus.CounterValue, float64(st.Reconnects))
	ch <- prometheus.MustNewConstMetric(d[6], prometheus.CounterValue, float64(st.Commands))
}

// deque is a FIFO with cheap pushes and pops at the front.
type deque[T any] struct {
	buf  []T
	head int
	n    int
}

func (d *deque[T]) len() int { return d.n }

func (d *deque[T]) grow() {
	size := max(16, 2*len(d.buf))
	nb := make([]T, size)
	for i := 0; i < d.n; i++ {
		nb[i] = d.buf[(d.head+i)%len(d.buf)]
	}
	d.buf, d.head = nb, 0
}

func (d *deque[T]) pushBack(v T) {
	if d.n == len(d.buf) {
		d.grow()
	}
	d.buf[(d.head+d.n)%len(d.buf)] = v
	d.n++
}

func (d *deque[T]) pushFront(v T) {
	if d.n == len(d.buf) {
		d.grow()
	}
	d.head = (d.head - 1 + len(d.buf)) % len(d.buf)
	d.buf[d.head] = v
	d.n++
}

func (d *deque[T]) front() (T, bool) {
	var zero T
	if d.n == 0 {
		return zero, false
	}
	return d.buf[d.head], true
}

func (d *deque[T]) popFront() T {
	var zero T
	v := d.buf[d.head]
	d.buf[d.head] = zero
	d.head = (d.head + 1) % len(d.buf)
	d.n--
	return v
}

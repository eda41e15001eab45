package relay

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/aep-kimi/aep-kimi/aep"
	"github.com/aep-kimi/aep-kimi/relay/wire"
)

// Commands between relays on a shared stream. A relay whose sockets claim a
// session subscribes to that session's route subjects (in one queue group); a relay holding a
// command for a session none of its sockets claims sends it to the route
// subject that ends in its own identity, as a core NATS request, and gets
// the claimant relay's outcome back. Nobody subscribed is an immediate
// no-route. A relay the NATS authenticated takes routed commands only from
// relays it authenticated too: the sender is the identity in the subject,
// which the NATS let only the sender's credentials publish to. The routing relay then stores the
// command like any other; the claimant relay, admitting it from the stream,
// skips the claimant's own subscriptions, which already have it.

// routeReply is a claimant relay's answer to a routed command.
type routeReply struct {
	Code   string `json:"code,omitempty"`
	Detail string `json:"detail,omitempty"`
}

// jsRoutes is the JetStreamBackend's part in routing commands.
type jsRoutes struct {
	handler atomic.Pointer[func(*Message) (string, string, uint64)]

	subs map[string]*nats.Subscription // claimed sessions' route subjects; the claims goroutine's

	// Claim changes wait here for the claims goroutine (see Claimed): the
	// latest state per session, so the wait stays bounded by the sessions
	// claimed, however long NATS stalls.
	mu      sync.Mutex
	pending map[string]bool
	wake    chan struct{}

	// delivered remembers which socket took a command routed here, by its
	// Nats-Msg-Id, until the command arrives from the stream.
	deliveredMu sync.Mutex
	delivered   map[string]uint64
	order       []string
}

// routeQueue is the queue group of every relay's route subscriptions.
const routeQueue = "claimants"

// maxRoutedPending bounds the commands routed here whose stored copy has not
// arrived yet (a routing relay whose store failed never sends it).
const maxRoutedPending = 4096

// routeSubject is the prefix of a session's route subjects; the sender's
// identity follows it.
func (b *JetStreamBackend) routeSubject(session string) string {
	return "aep." + b.name + ".route." + base64.RawURLEncoding.EncodeToString([]byte(session))
}

// ServeRoutes implements RemoteRouter.
func (b *JetStreamBackend) ServeRoutes(fn func(m *Message) (code, detail string, conn uint64)) {
	b.routes.handler.Store(&fn)
}

// Claimed implements RemoteRouter. It runs under the relay's claim lock, so
// it only records the change: the claims goroutine subscribes to or leaves
// the session's route subject, however long NATS takes. A
// private store has no other relays.
func (b *JetStreamBackend) Claimed(session string, claimed bool) {
	if b.private {
		return
	}
	r := &b.routes
	r.mu.Lock()
	if r.pending == nil {
		r.pending = make(map[string]bool)
	}
	r.pending[session] = claimed
	r.mu.Unlock()
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// applyClaims is the claims goroutine: it applies queued claim changes until
// ctx ends.
func (b *JetStreamBackend) applyClaims(ctx context.Context) error {
	r := &b.routes
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-r.wake:
		}
		r.mu.Lock()
		pending := r.pending
		r.pending = nil
		r.mu.Unlock()
		for session, claimed := range pending {
			b.applyClaim(session, claimed)
		}
	}
}

func (b *JetStreamBackend) applyClaim(session string, claimed bool) {
	r := &b.routes
	if r.subs == nil {
		r.subs = make(map[string]*nats.Subscription)
	}
	sub := r.subs[session]
	switch {
	case !claimed && sub != nil:
		// Drained, not unsubscribed: a command the NATS sent before it
		// heard the unsubscribe is still answered (no-route, as no socket
		// here claims the session now), where the client would have
		// dropped it and left the routing relay to wait out
		// DefaultRouteTimeout.
		_ = sub.Drain()
		delete(r.subs, session)
	case claimed && sub == nil:
		// One queue group: were sockets on two relays to claim one session
		// (an emitter fault), one of them gets each command, never both.
		sub, err := b.nc.QueueSubscribe(b.routeSubject(session)+".*", routeQueue, b.onRoute)
		if err != nil {
			b.log.Warn("jetstream store: commands for a claimed session cannot reach it from other relays", "session", session, "err", err)
			return
		}
		r.subs[session] = sub
	}
}

// onRoute delivers a command another relay routed here and answers it.
func (b *JetStreamBackend) onRoute(nm *nats.Msg) {
	reply := func(code, detail string) {
		data, _ := json.Marshal(routeReply{Code: code, Detail: detail})
		_ = nm.Respond(data)
	}
	if sender := lastToken(nm.Subject); b.credentialed && sender == anonymousIdentity {
		b.log.Warn("jetstream store: a command routed by a relay without NATS credentials refused", "subject", nm.Subject)
		reply(wire.CodeUnauthorized, "this relay takes routed commands only from relays with NATS credentials")
		return
	}
	ev, err := aep.ParseEvent(nm.Data)
	if err != nil || !aep.IsCommand(ev.Type) {
		reply(wire.CodeInvalidEvent, "a routed message must be a command")
		return
	}
	m, err := NewMessage(ev, time.Now())
	if err != nil {
		reply(wire.CodeInvalidEvent, err.Error())
		return
	}
	fn := b.routes.handler.Load()
	if fn == nil {
		reply(wire.CodeNoRoute, fmt.Sprintf("no connected emitter claims session %q", m.Session))
		return
	}
	code, detail, conn := (*fn)(m)
	if code == "" && conn != 0 {
		b.routes.remember(msgID(m.Session, m.Source, m.ID), conn)
	}
	reply(code, detail)
}

// RouteRemote implements RemoteRouter.
func (b *JetStreamBackend) RouteRemote(m *Message) (code, detail string) {
	noRoute := fmt.Sprintf("no connected emitter claims session %q", m.Session)
	if b.private {
		return wire.CodeNoRoute, noRoute
	}
	resp, err := b.nc.Request(b.routeSubject(m.Session)+"."+b.identity, m.Raw, DefaultRouteTimeout)
	switch {
	case errors.Is(err, nats.ErrNoResponders):
		return wire.CodeNoRoute, noRoute + " on any relay"
	case err != nil:
		b.log.Warn("jetstream store: a command routed to the relay whose socket claims its session went unanswered", "session", m.Session, "id", m.ID, "err", err)
		return wire.CodeNoRoute, fmt.Sprintf("the relay whose emitter claims session %q did not answer: %v", m.Session, err)
	}
	var r routeReply
	if err := json.Unmarshal(resp.Data, &r); err != nil {
		return wire.CodeNoRoute, fmt.Sprintf("the relay whose emitter claims session %q answered nonsense", m.Session)
	}
	return r.Code, r.Detail
}

func (r *jsRoutes) remember(id string, conn uint64) {
	r.deliveredMu.Lock()
	defer r.deliveredMu.Unlock()
	if r.delivered == nil {
		r.delivered = make(map[string]uint64)
	}
	if len(r.order) >= maxRoutedPending {
		delete(r.delivered, r.order[0])
		r.order = r.order[1:]
	}
	r.delivered[id] = conn
	r.order = append(r.order, id)
}

// deliveredTo returns, once, the socket a routed command was delivered to.
func (r *jsRoutes) deliveredTo(id string) uint64 {
	r.deliveredMu.Lock()
	defer r.deliveredMu.Unlock()
	conn, ok := r.delivered[id]
	if ok {
		delete(r.delivered, id)
	}
	return conn
}

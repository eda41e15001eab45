package relay

import (
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/aep-kimi/aep-kimi/access"
	"github.com/aep-kimi/aep-kimi/aep"
	"github.com/aep-kimi/aep-kimi/mapping"
	"github.com/aep-kimi/aep-kimi/relay/wire"
)

// Routing a command: a command from a socket (routeCommand), an answer
// from a link or a phone (Respond, respond.go) or a rule's answer
// (deliverRuleCommand, rules.go) is stamped with who sent it, delivered by
// route to its session's one claimant and only then stored:
//
//	route        deliverHere: the socket of this relay that claims the
//	             session (controlRouter, below), else
//	             RemoteRouter.RouteRemote: the relay that has it, on a
//	             shared store (jsroute.go, the JetStream side)
//	routeHere    a command another relay routed here, delivered the same way
//
// The claims the routing reads are kept below: a socket claims a session by
// sending a positioned event for it (ingest.go, wsConn.event).

// routeCommand delivers a command from sender to the session's one live
// claimant, byte-identically, then holds it in the session history and fans
// it out to watchers (AEP-0004 §4.4). On a store shared by several relays a
// session no socket here claims is routed through the relay that has its
// claimant. Refusals answer the sender with a cause-linked error frame and
// touch no history (§4.2, §8).
func (s *Server) routeCommand(sender *wsConn, m *Message) {
	refuse := func(code, detail string) {
		s.metrics.commands.WithLabelValues(code).Inc()
		sender.sendError(&wire.Error{Cause: m.ID, Code: code, Detail: detail})
	}
	if s.cfg.Token == "" {
		refuse(wire.CodeUnauthorized, watchOnlyDetail)
		return
	}
	m, err := stampBy(m, sender.adm.who)
	if err != nil {
		refuse(wire.CodeInvalidEvent, err.Error())
		return
	}
	if code, detail := s.route(m); code != "" {
		refuse(code, detail)
		return
	}
	s.metrics.commands.WithLabelValues(resultRouted).Inc()
	s.metrics.ingest.WithLabelValues(bindingWS, resultRouted).Inc()
	s.backend.Ingest([]*Message{m})
}

// watchOnlyDetail explains refusing a command on a relay without a token.
const watchOnlyDetail = "this relay is watch-only (no AEP_TOKEN): control commands flow only on authenticated bindings (AEP-0004 §4.1)"

// stampBy is the command m carrying who sent it (stampWho), replacing
// what the sender set: the emitter writes it as the answer's by. Only
// extension attributes change; a command is no sequenced event, so its
// bytes are the relay's to re-serialize.
func stampBy(m *Message, who access.Principal) (*Message, error) {
	ev, err := m.Envelope()
	if err != nil {
		return nil, err
	}
	stamped := ev.Clone()
	if err := stampWho(stamped, who); err != nil {
		return nil, err
	}
	return NewMessage(stamped, m.Ingested)
}

// stampWho writes who sent cmd: their name in mapping.ExtBy, and the ID of
// their token in mapping.ExtByToken, or none for the owner (whatever the
// sender put in either is gone).
func stampWho(cmd *aep.Event, who access.Principal) error {
	delete(cmd.Ext, mapping.ExtByToken)
	if id := who.Token.ID(); id != "" {
		if err := cmd.SetExt(mapping.ExtByToken, id); err != nil {
			return err
		}
	}
	return cmd.SetExt(mapping.ExtBy, who.Name)
}

// route delivers a command to its session's claimant, here or through the
// relay that has it, and marks the socket it went to; "" when delivered,
// else the refusal.
func (s *Server) route(m *Message) (code, detail string) {
	code, detail, conn := s.deliverHere(m)
	if code == wire.CodeNoRoute && conn == 0 && s.remote != nil {
		code, detail = s.remote.RouteRemote(m)
	}
	if code == "" {
		m.RoutedTo = conn
	}
	return code, detail
}

// deliverHere hands m to the one socket of this relay claiming its session.
// It returns "" and that socket's id, or a refusal; a no-route with a
// non-zero conn means the claimant exists but cannot take it.
func (s *Server) deliverHere(m *Message) (code, detail string, conn uint64) {
	target, code := s.control.target(m.Session)
	if code == wire.CodeNoRoute && m.Type == mapping.TypeRate {
		// A finished session's runs are rated too: through the socket
		// that ended it, while it stays connected.
		if c := s.control.ender(m.Session); c != nil {
			target, code = c, ""
		}
	}
	switch code {
	case wire.CodeNoRoute:
		return code, fmt.Sprintf("no connected emitter claims session %q", m.Session), 0
	case wire.CodeAmbiguous:
		return code, fmt.Sprintf("more than one connected emitter claims session %q; refusing to guess (AEP-0004 §4.5)", m.Session), 0
	}
	if !target.accepts[m.Type] {
		declared := "declares no control block"
		if len(target.acceptList) > 0 {
			declared = "accepts " + strings.Join(target.acceptList, ", ")
		}
		return wire.CodeUnsupported, fmt.Sprintf("the claimant of session %q %s, not %s", m.Session, declared, m.Type), target.id
	}
	if !target.q.push(outItem{frame: m.Raw}) {
		return wire.CodeNoRoute, fmt.Sprintf("the claimant of session %q is not keeping up and is being disconnected", m.Session), target.id
	}
	return "", "", target.id
}

// routeHere delivers a command another relay routed to this one; the
// routing relay stores it and answers its sender.
func (s *Server) routeHere(m *Message) (code, detail string, conn uint64) {
	if s.cfg.Token == "" {
		return wire.CodeUnauthorized, watchOnlyDetail, 0
	}
	code, detail, conn = s.deliverHere(m)
	if code == "" {
		s.metrics.commands.WithLabelValues(resultRoutedHere).Inc()
	}
	return code, detail, conn
}

// controlRouter tracks which sockets claim which sessions. A socket claims a
// session by sending a positioned event for it (HTTP POSTs claim nothing),
// and releases it by sending that session's session.ended or by closing.
// Commands route to the single live claimant (AEP-0004 §4.5); the roster
// frame reports every claim (AEP-0003 §4.1).
type controlRouter struct {
	maxPerConn int
	// notify, when set, hears each session this relay's sockets begin or
	// cease to claim, in order (see RemoteRouter.Claimed). It is called
	// with mu held and must not block.
	notify func(session string, claimed bool)

	mu     sync.Mutex
	serial uint64
	byName map[string]map[*wsConn]struct{}
	// endedBy is the socket that ended each session no socket claims now:
	// a rating of one of its runs still goes to the session's owner, the
	// one party that may write into it (AEP-0001 §5.2).
	endedBy map[string]*wsConn
}

func newControlRouter(maxPerConn int) *controlRouter {
	return &controlRouter{maxPerConn: maxPerConn, byName: make(map[string]map[*wsConn]struct{}), endedBy: make(map[string]*wsConn)}
}

// claim records that c owns session. A socket holding more than maxPerConn
// claims loses its oldest, so a long-lived emitter that never ends its
// sessions stays bounded.
func (r *controlRouter) claim(c *wsConn, session string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.serial++
	if _, ok := c.claims[session]; ok {
		c.claims[session] = r.serial
		return
	}
	if len(c.claims) >= r.maxPerConn {
		oldest, min := "", ^uint64(0)
		for name, at := range c.claims {
			if at < min {
				oldest, min = name, at
			}
		}
		r.releaseLocked(c, oldest)
	}
	c.claims[session] = r.serial
	r.forgetEndLocked(session) // it lives again (a new chapter)
	set := r.byName[session]
	if set == nil {
		set = make(map[*wsConn]struct{}, 1)
		r.byName[session] = set
		if r.notify != nil {
			r.notify(session, true)
		}
	}
	set[c] = struct{}{}
}

func (r *controlRouter) releaseLocked(c *wsConn, session string) {
	delete(c.claims, session)
	if set := r.byName[session]; set != nil {
		delete(set, c)
		if len(set) == 0 {
			delete(r.byName, session)
			if r.notify != nil {
				r.notify(session, false)
			}
		}
	}
}

// end releases c's claim of a session it ended, and remembers that c did
// (bounded like its claims: the oldest end is forgotten first).
func (r *controlRouter) end(c *wsConn, session string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.releaseLocked(c, session)
	r.serial++
	if _, ok := c.ended[session]; !ok && len(c.ended) >= r.maxPerConn {
		oldest, min := "", ^uint64(0)
		for name, at := range c.ended {
			if at < min {
				oldest, min = name, at
			}
		}
		r.forgetEndLocked(oldest)
	}
	r.forgetEndLocked(session)
	c.ended[session] = r.serial
	r.endedBy[session] = c
}

func (r *controlRouter) forgetEndLocked(session string) {
	if c := r.endedBy[session]; c != nil {
		delete(c.ended, session)
		delete(r.endedBy, session)
	}
}

// ender is the socket that ended session, which no socket claims now, or
// nil.
func (r *controlRouter) ender(session string) *wsConn {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.endedBy[session]
}

// dropConn releases every claim of a closing socket, and forgets the
// sessions it ended.
func (r *controlRouter) dropConn(c *wsConn) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for session := range c.claims {
		r.releaseLocked(c, session)
	}
	for session := range c.ended {
		r.forgetEndLocked(session)
	}
}

// target returns the one socket claiming session, or the refusal code.
func (r *controlRouter) target(session string) (*wsConn, string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	set := r.byName[session]
	switch len(set) {
	case 0:
		return nil, wire.CodeNoRoute
	case 1:
		for c := range set {
			return c, ""
		}
	}
	return nil, wire.CodeAmbiguous
}

// roster returns one entry per live (socket, claimed session), sorted.
func (r *controlRouter) roster() []wire.RosterEntry {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]wire.RosterEntry, 0, len(r.byName))
	for session, set := range r.byName {
		for c := range set {
			out = append(out, wire.RosterEntry{
				Session:  session,
				Agent:    c.agent,
				Instance: c.instance,
				Control:  c.control,
				Emits:    c.emits,
			})
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Session != out[j].Session {
			return out[i].Session < out[j].Session
		}
		return out[i].Instance < out[j].Instance
	})
	return out
}

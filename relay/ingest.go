package relay

import (
	"bytes"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/aep-kimi/aep-kimi/access"
	"github.com/aep-kimi/aep-kimi/aep"
	"github.com/aep-kimi/aep-kimi/internal/httpguard"
	"github.com/aep-kimi/aep-kimi/relay/wire"
)

// Ingest: every event the relay takes from an emitter, POST and socket
// alike, goes one way and ends in Server.admit:
//
//	POST /events  serveIngest -> parseBody -> admitWaking (the writers the
//	              batch feeds are woken once the sender has its answer)
//	socket        wsConn.event -> ingestQueue (ingestq.go) -> wsConn.ingester
//	              -> wsConn.store -> admit
//	admit         applyRules (rules.go) -> Backend.Ingest -> assessed
//
// A command sent on a socket leaves this way at wsConn.event for
// routeCommand (route.go): it is delivered to its session's claimant first
// and stored only then.

// admit hands an emitter's batch to the store, with the rules' answers
// admitted right behind the requests they decide: every binding that takes
// events from emitters admits them here.
func (s *Server) admit(msgs []*Message) IngestResult {
	return s.admitWaking(msgs, nil)
}

// admitWaking is admit with the wake-ups of the writers the batch feeds
// left in wake, when the backend can defer them and wake is not nil.
func (s *Server) admitWaking(msgs []*Message, wake *wakeList) IngestResult {
	msgs = s.applyRules(msgs)
	var res IngestResult
	if d, ok := s.backend.(wakeDeferrer); ok && wake != nil {
		res = d.ingestWaking(msgs, wake)
	} else {
		res = s.backend.Ingest(msgs)
	}
	if res.Err == nil {
		s.assessed.admitted(msgs)
	}
	return res
}

// event ingests one event sent on the socket, routes a command, and keeps
// the socket's session claims current.
// in, when not nil, holds data already parsed.
func (c *wsConn) event(data []byte, in *ingested) {
	s := c.srv
	if detail := s.checkEventSize(data); detail != "" {
		s.metrics.ingest.WithLabelValues(bindingWS, resultRejected).Inc()
		c.sendError(&wire.Error{Code: wire.CodePayloadTooLarge, Detail: detail})
		return
	}
	if in == nil {
		in = new(ingested)
		if err := aep.ParseEventInto(&in.ev, data); err != nil {
			s.metrics.ingest.WithLabelValues(bindingWS, resultRejected).Inc()
			c.sendError(&wire.Error{Code: wire.CodeInvalidEvent, Detail: err.Error()})
			return
		}
	}
	ev := &in.ev
	if err := aep.CheckEnvelope(ev); err != nil { // the envelope only: a relay never parses data
		s.metrics.ingest.WithLabelValues(bindingWS, resultRejected).Inc()
		c.sendError(&wire.Error{Cause: ev.ID, Code: wire.CodeInvalidEvent, Detail: err.Error()})
		return
	}
	m := &in.m
	if err := m.init(ev, time.Now()); err != nil {
		s.metrics.ingest.WithLabelValues(bindingWS, resultRejected).Inc()
		c.sendError(&wire.Error{Cause: ev.ID, Code: wire.CodeInvalidEvent, Detail: err.Error()})
		return
	}
	if detail := ruleAgentRefusal(ev); detail != "" {
		s.metrics.ingest.WithLabelValues(bindingWS, resultRejected).Inc()
		c.sendError(&wire.Error{Cause: ev.ID, Code: wire.CodeForbidden, Detail: detail})
		return
	}
	if aep.IsCommand(ev.Type) {
		if role := commandRole(ev.Type); !c.adm.can(role) {
			s.metrics.commands.WithLabelValues(wire.CodeUnauthorized).Inc()
			c.sendError(&wire.Error{Cause: ev.ID, Code: wire.CodeUnauthorized, Detail: refusal(c.adm, role, ev.Type)})
			return
		}
		c.inOrder(len(m.Raw), func() { s.routeCommand(c, m) })
		return
	}
	if !c.adm.can(access.RoleAdmin) {
		s.metrics.ingest.WithLabelValues(bindingWS, resultRejected).Inc()
		c.sendError(&wire.Error{Cause: ev.ID, Code: wire.CodeUnauthorized, Detail: refusal(c.adm, access.RoleAdmin, "emitting events")})
		return
	}
	if m.Kind != KindForeign && c.role == wire.RoleConsumer {
		s.metrics.ingest.WithLabelValues(bindingWS, resultRejected).Inc()
		c.sendError(&wire.Error{Cause: ev.ID, Code: wire.CodeUnauthorized,
			Detail: "a consumer-role socket may send commands and attention.routed only; say role emitter or both in the hello"})
		return
	}
	if m.Kind == KindSession {
		if ev.Type == "session.ended" {
			s.control.end(c, m.Session)
		} else {
			s.control.claim(c, m.Session)
		}
	}
	if c.ingest == nil {
		c.one[0] = m
		c.store(c.one[:])
		c.one[0] = nil
		return
	}
	c.ingest.push(c.ctx, ingestItem{msg: m, size: len(m.Raw)})
}

// ingester hands the reader's events to the store in frame order: each
// batch is every event queued since the last, up to a frame of another
// kind (a command, a subscribe, a ping), which is handled alone in its
// place.
func (c *wsConn) ingester() {
	for {
		items, ok := c.ingest.take(wsMaxIngestBatch)
		if !ok {
			return
		}
		if c.adm.ended() != "" {
			// Read before the credential ended, acted on after: a
			// command or event from a credential that no longer stands
			// goes nowhere.
			c.ingest.done(items)
			continue
		}
		if fn := items[0].fn; fn != nil {
			fn()
			c.ingest.done(items)
			continue
		}
		msgs := make([]*Message, len(items))
		for i, it := range items {
			msgs[i] = it.msg
		}
		c.store(msgs)
		c.ingest.done(items)
	}
}

// store hands msgs to the store and answers each one it refused.
func (c *wsConn) store(msgs []*Message) {
	s := c.srv
	res := s.admit(msgs)
	if res.Err != nil {
		s.metrics.ingest.WithLabelValues(bindingWS, resultRejected).Add(float64(len(msgs)))
		detail := "the store did not take the event; resend it"
		if errors.Is(res.Err, errStoreUnavailable) {
			// Known already, and logged once when it became so.
			detail = "the store cannot make events durable now; resend it later"
		} else {
			s.log.Warn("store refused events", "events", len(msgs), "err", res.Err)
		}
		for _, m := range msgs {
			c.sendError(&wire.Error{Cause: m.ID, Code: wire.CodeStoreUnavailable, Detail: detail})
		}
		return
	}
	s.metrics.countIngest(bindingWS, res)
}

// serveIngest is POST /events (AEP-0003 §3.2): one event as application/json
// or a batch as application/x-ndjson, order kept. A batch is all or nothing:
// the first invalid line rejects it whole and nothing is ingested.
func (s *Server) serveIngest(w http.ResponseWriter, r *http.Request) {
	if s.draining() {
		httpguard.WriteError(w, http.StatusServiceUnavailable, wire.CodeShuttingDown, "relay is shutting down")
		return
	}
	if !allow(w, r, access.RoleAdmin, "emitting events (POST /events)") {
		return
	}
	if v := strings.TrimSpace(r.Header.Get("AEP-Version")); v != aep.Version {
		detail := "AEP-Version header is required; this relay speaks " + aep.Version
		if v != "" {
			detail = fmt.Sprintf("AEP-Version %q is not supported; this relay speaks %s", v, aep.Version)
		}
		httpguard.WriteJSON(w, http.StatusUpgradeRequired, wire.HTTPError{Error: wire.CodeVersion, Detail: detail, Versions: []string{aep.Version}})
		return
	}
	batch, ok := ingestMediaType(r.Header.Get("Content-Type"))
	if !ok {
		httpguard.WriteError(w, http.StatusUnsupportedMediaType, wire.CodeUnsupportedMedia,
			"Content-Type must be application/json (one event) or application/x-ndjson (a batch)")
		return
	}
	if r.ContentLength > s.cfg.MaxBody {
		// Answer before reading: the emitter learns why instead of seeing a
		// reset mid-upload.
		w.Header().Set("Connection", "close")
		httpguard.WriteError(w, http.StatusRequestEntityTooLarge, wire.CodePayloadTooLarge,
			fmt.Sprintf("body of %d bytes exceeds the %d byte limit", r.ContentLength, s.cfg.MaxBody))
		return
	}
	body, err := s.bodies.Read(w, r, s.cfg.MaxBody, s.cfg.BodyTimeout)
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			httpguard.WriteError(w, http.StatusRequestEntityTooLarge, wire.CodePayloadTooLarge,
				fmt.Sprintf("body exceeds the %d byte limit", s.cfg.MaxBody))
			return
		}
		if errors.Is(err, httpguard.ErrBodyTimeout) {
			httpguard.WriteError(w, http.StatusRequestTimeout, wire.CodeBodyTimeout, err.Error())
			return
		}
		httpguard.WriteError(w, http.StatusBadRequest, wire.CodeInvalidEvent, "could not read the request body")
		return
	}
	msgs, herr := s.parseBody(body, batch)
	if herr != nil {
		s.metrics.ingest.WithLabelValues(bindingHTTP, resultRejected).Inc()
		httpguard.WriteJSON(w, herr.status, herr.body)
		return
	}
	// The streams this batch feeds are woken once the sender has its
	// answer, not before: the deferred fire runs after the reply is sent.
	wake, _ := s.wakes.Get().(*wakeList)
	if wake == nil {
		wake = new(wakeList)
	}
	defer func() { wake.fire(); s.wakes.Put(wake) }()
	res := s.admitWaking(msgs, wake)
	if res.Err != nil {
		s.metrics.ingest.WithLabelValues(bindingHTTP, resultRejected).Add(float64(len(msgs)))
		detail := "the store did not take the batch; nothing was accepted, retry"
		if errors.Is(res.Err, errStoreUnavailable) {
			// Known already, and logged once when it became so.
			detail = "the store cannot make events durable now (see /healthz); nothing was accepted, retry"
		} else {
			s.log.Warn("store refused a batch", "events", len(msgs), "err", res.Err)
		}
		w.Header().Set("Retry-After", strconv.Itoa(storeRetryAfter))
		httpguard.WriteError(w, http.StatusServiceUnavailable, wire.CodeStoreUnavailable, detail)
		return
	}
	s.metrics.countIngest(bindingHTTP, res)
	writeAccepted(w, len(msgs), res)
	_ = http.NewResponseController(w).Flush()
}

// writeAccepted answers an admitted batch with what httpguard.WriteJSON
// makes of {"accepted", "buffered", "duplicates"}, byte for byte, formatted
// without a map or reflection: at 10,000 events/s in batches of 10 this
// answer is written a thousand times a second.
func writeAccepted(w http.ResponseWriter, accepted int, res IngestResult) {
	var buf [80]byte
	b := append(buf[:0], `{"accepted":`...)
	b = strconv.AppendInt(b, int64(accepted), 10)
	b = append(b, `,"buffered":`...)
	b = strconv.AppendInt(b, int64(res.Buffered), 10)
	b = append(b, `,"duplicates":`...)
	b = strconv.AppendInt(b, int64(res.Duplicates), 10)
	b = append(b, "}\n"...)
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	h.Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(http.StatusAccepted)
	_, _ = w.Write(b)
}

func ingestMediaType(ct string) (batch, ok bool) {
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil {
		return false, false
	}
	switch mt {
	case "application/json":
		return false, true
	case "application/x-ndjson", "application/ndjson", "application/jsonl", "application/x-jsonlines":
		return true, true
	}
	return false, false
}

type ingestError struct {
	status int
	body   wire.HTTPError
}

// parseBody splits, parses and validates a POST body into messages. Lines
// are numbered from 1 as they appear; blank lines are skipped.
func (s *Server) parseBody(body []byte, batch bool) ([]*Message, *ingestError) {
	now := time.Now()
	if !batch {
		if len(bytes.TrimSpace(body)) == 0 {
			return nil, &ingestError{http.StatusBadRequest, wire.HTTPError{Error: wire.CodeInvalidEvent, Detail: "empty body"}}
		}
		m, err := s.parseOne(body, now)
		if err != nil {
			return nil, &ingestError{err.status, wire.HTTPError{Error: err.code, Detail: err.detail}}
		}
		return []*Message{m}, nil
	}
	// The line count (one vectorized pass) bounds the events; only a body
	// past the limit by that bound has its blank lines told apart.
	n := bytes.Count(body, []byte{'\n'}) + 1
	if n > s.cfg.MaxBatch {
		n = countLines(body)
	}
	if n > s.cfg.MaxBatch {
		return nil, &ingestError{http.StatusRequestEntityTooLarge, wire.HTTPError{Error: wire.CodeTooManyEvents,
			Detail: fmt.Sprintf("batch of %d events exceeds the %d event limit; nothing was ingested", n, s.cfg.MaxBatch)}}
	}
	msgs := make([]*Message, 0, n)
	line := 0
	for rest := body; len(rest) > 0; {
		var l []byte
		l, rest, _ = bytes.Cut(rest, []byte{'\n'})
		line++
		if len(bytes.TrimSpace(l)) == 0 {
			continue
		}
		m, err := s.parseOne(l, now)
		if err != nil {
			return nil, &ingestError{err.status, wire.HTTPError{Error: err.code, Line: line,
				Detail: fmt.Sprintf("line %d: %s; nothing was ingested", line, err.detail)}}
		}
		msgs = append(msgs, m)
	}
	if len(msgs) == 0 {
		return nil, &ingestError{http.StatusBadRequest, wire.HTTPError{Error: wire.CodeInvalidEvent, Detail: "empty batch"}}
	}
	return msgs, nil
}

type eventError struct {
	status int
	code   string
	detail string
}

func (s *Server) parseOne(b []byte, now time.Time) (*Message, *eventError) {
	if err := s.checkEventSize(b); err != "" {
		return nil, &eventError{http.StatusRequestEntityTooLarge, wire.CodePayloadTooLarge, err}
	}
	// The message and its event are one allocation: this runs for every
	// event a relay takes.
	in := new(ingested)
	ev := &in.ev
	if err := aep.ParseEventInto(ev, b); err != nil {
		return nil, &eventError{http.StatusBadRequest, wire.CodeInvalidEvent, err.Error()}
	}
	if err := aep.CheckEnvelope(ev); err != nil { // the envelope only: a relay never parses data
		return nil, &eventError{http.StatusBadRequest, wire.CodeInvalidEvent, err.Error()}
	}
	if detail := ruleAgentRefusal(ev); detail != "" {
		return nil, &eventError{http.StatusForbidden, wire.CodeForbidden, detail}
	}
	if aep.IsCommand(ev.Type) {
		return nil, &eventError{http.StatusForbidden, wire.CodeControlSocket,
			fmt.Sprintf("%s is a control command: commands flow only on the authenticated WebSocket binding (AEP-0004 §4.1)", ev.Type)}
	}
	if err := in.m.init(ev, now); err != nil {
		return nil, &eventError{http.StatusBadRequest, wire.CodeInvalidEvent, err.Error()}
	}
	return &in.m, nil
}

// ingested is a message with the event it carries.
type ingested struct {
	m  Message
	ev aep.Event
}

// checkEventSize describes why b is too large to take as one event; empty
// when it is not.
func (s *Server) checkEventSize(b []byte) string {
	if int64(len(b)) <= s.maxEvent {
		return ""
	}
	return fmt.Sprintf("event of %d bytes exceeds the %d byte limit of this relay's store", len(b), s.maxEvent)
}

func countLines(b []byte) int {
	n := 0
	for rest := b; len(rest) > 0; {
		var l []byte
		l, rest, _ = bytes.Cut(rest, []byte{'\n'})
		if len(bytes.TrimSpace(l)) > 0 {
			n++
		}
	}
	return n
}

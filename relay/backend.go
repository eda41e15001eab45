package relay

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aep-kimi/aep-kimi/aep"
	"github.com/aep-kimi/aep-kimi/relay/wire"
)

// Backend is the storage and fan-out seam between the bindings (HTTP POST,
// SSE, WebSocket) and wherever events live. The bindings parse and validate,
// then hand the backend Messages; the backend owns everything after that:
//
//   - Admission: each session keeps a bounded replay history. An event is
//     admitted unless the session already holds one with the same
//     (source, id) (AEP-0001 §7.4); admitted events are kept in (epoch, seq)
//     order, and the oldest are trimmed past the per-session depth. Sessions
//     past the session cap are evicted least-recently-written first. A byte
//     budget over all sessions trims the oldest admitted events first.
//   - Positions are (epoch, seq) pairs within one session (AEP-0001 §7).
//     Foreign-emitter events (commands, attention.routed) carry no seq: they
//     are held right after the session's latest positioned event at arrival,
//     are replayed in that place, and are never resume positions themselves.
//     Agent-scoped events (agent.*) are live-only and never held.
//   - Fan-out: every ingested message, admitted or a redelivered duplicate,
//     is offered in ingest order to each live subscriber whose filter
//     matches (AEP-0003 §5: the relay is not a terminal consumer).
//   - Subscribe-with-replay is atomic: the replay a subscriber is started
//     with and the live messages offered to it afterwards neither overlap
//     nor leave a gap.
//
// JetStreamBackend maps onto this with one stream, a subject per session
// (on a shared stream, history trimmed by MaxMsgsPerSubject and dedupe by a
// Nats-Msg-Id of session, source and id; a private one is trimmed and
// deduplicated by its index) and an in-memory index rebuilt from the stream
// on start.
// Implementations must be safe for concurrent use.
type Backend interface {
	// Ingest admits msgs in order and offers each to the matching live
	// subscribers. Every message must carry its parsed Event.
	Ingest(msgs []*Message) IngestResult
	// Subscribe selects the replay req asks for, calls sub.Start with it and
	// then registers sub for live delivery, atomically with respect to
	// Ingest. Start is called before Subscribe returns. The returned cancel
	// stops live delivery; it is idempotent.
	Subscribe(req SubscribeRequest, sub Subscriber) (cancel func(), err error)
	// Sessions lists the held sessions, least recently written first.
	Sessions() []SessionInfo
	// Stats reports the backend's size.
	Stats() BackendStats
}

// wakeDeferrer is a Backend that can leave waking the writers a batch feeds
// to its caller (wakeList), which answers the sender first.
type wakeDeferrer interface {
	ingestWaking(msgs []*Message, wake *wakeList) IngestResult
}

// EventLimiter is a Backend that carries events up to a size of its own
// (a NATS server's payload limit). The bindings refuse larger events with
// payload-too-large instead of accepting what the store cannot keep.
type EventLimiter interface {
	MaxEventBytes() int64
}

// Subscriber receives one subscription's messages.
type Subscriber interface {
	// Start hands over the replay, exactly once, before the first Offer,
	// and only once the subscription is registered: every message ingested
	// after Start begins is offered. It must not block: the backend may
	// hold a lock.
	Start(r Replay)
	// Offer hands over one live message that matched the filter. It must
	// not block; it may keep m, which is never modified after ingest.
	Offer(m *Message)
}

// SubscribeRequest selects what a subscriber receives.
type SubscribeRequest struct {
	// Filter selects events for replay and live delivery; nil matches all.
	Filter *aep.Filter
	// From selects the replay; empty means live only.
	From wire.From
	// filterKey, when set, is Filter's text as the consumer sent it:
	// subscriptions with the same key share one match per message.
	filterKey string
}

// Replay is the history a subscription starts with.
type Replay interface {
	// Exhausted lists the requested positions that predate what is held,
	// with the earliest held position of each such session.
	Exhausted() []Exhausted
	// Each calls fn for every replayed message that matches the filter, in
	// order: session by session, each in (epoch, seq) order. The Message is
	// only valid during the call. Each stops at the first error from fn or
	// ctx and returns it.
	Each(ctx context.Context, fn func(*Message) error) error
}

// Exhausted reports that a resume position predates a session's buffer
// (AEP-0003 §5): what follows Requested may have been evicted, and delivery
// resumes at Earliest.
type Exhausted struct {
	Session   string
	Requested wire.Position
	Earliest  wire.Position
}

// IngestResult counts what Ingest did.
type IngestResult struct {
	// Buffered were admitted to a session history.
	Buffered int
	// Duplicates repeated a held (source, id) and were only fanned out.
	Duplicates int
	// LiveOnly were agent-scoped and never held.
	LiveOnly int
	// Err, when set, means the batch was not made durable and nothing of it
	// was admitted: the sender must not be told it was accepted.
	Err error
}

// SessionInfo describes one held session.
type SessionInfo struct {
	Session   string
	Events    int
	Bytes     int64
	Earliest  wire.Position
	Latest    wire.Position
	LastWrite time.Time
}

// BackendStats reports the size of a backend.
type BackendStats struct {
	Sessions    int
	Events      int
	Bytes       int64
	Subscribers int
	// Evictions counts sessions evicted by the session cap.
	Evictions uint64
	// MaxBytes is the byte budget over all sessions (0: none reported).
	MaxBytes int64
	// BudgetTrims counts events trimmed to stay within MaxBytes.
	BudgetTrims uint64
}

// Kind is how an event relates to session history.
type Kind uint8

const (
	// KindSession events carry (epoch, seq) and are resume positions.
	KindSession Kind = iota
	// KindForeign events (commands, attention.routed) are held in session
	// history without a position of their own.
	KindForeign
	// KindAgent events (agent.*) are live-only.
	KindAgent
)

// Message is one event as the relay moves it: parsed once at ingest,
// forwarded as its original bytes. A Message is never modified after ingest
// and may be shared by any number of consumers.
type Message struct {
	// Raw is the event's wire form, forwarded unchanged.
	Raw []byte
	// Event is the parsed envelope. Replayed messages carry it only when the
	// filter needed it; Envelope parses on demand.
	Event *aep.Event
	// Type, Session, Source and ID are copied from the envelope. A replayed
	// message leaves ID empty unless its envelope was parsed.
	Type, Session, Source, ID string
	// Pos is the event's position; meaningful only for KindSession.
	Pos      wire.Position
	Kind     Kind
	Severity aep.Severity
	Capture  aep.Capture
	// RoutedTo is the socket a command was routed to (0: none). That
	// socket's own subscriptions skip the message: it already has it.
	RoutedTo uint64
	// Ingested is when the relay accepted the message, for latency metrics.
	Ingested time.Time
	// StoreSeq is the durable store's sequence for the message (the
	// JetStream stream sequence), 0 when the store keeps none. It is the
	// store's arrival order, which is not (epoch, seq) order.
	StoreSeq uint64
	// down holds the message down-leveled to the ceilings below its own
	// capture, each made once for every subscriber at that ceiling; nil
	// until a subscriber below the message's capture reads it.
	// (An atomic.Value, not an atomic.Pointer: copies of a Message, made
	// before any subscriber reads it, stay plain struct copies.)
	down atomic.Value // *downlevels
}

// downlevels is a message at each ceiling below full.
type downlevels struct {
	mu sync.Mutex
	at [aep.CaptureFull]struct {
		done bool
		b    []byte
		err  error
	}
}

// downleveled is m's bytes down-leveled to ceiling (AEP-0001 §8.2), made
// on the first call for that ceiling and shared by every later one.
func (m *Message) downleveled(ceiling aep.Capture) ([]byte, error) {
	ceiling = max(aep.CaptureNone, min(ceiling, aep.CaptureFull))
	if ceiling == aep.CaptureFull {
		return m.Raw, nil
	}
	d, _ := m.down.Load().(*downlevels)
	if d == nil {
		d = new(downlevels)
		if !m.down.CompareAndSwap(nil, d) {
			d = m.down.Load().(*downlevels)
		}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	slot := &d.at[ceiling]
	if !slot.done {
		slot.b, slot.err = m.downlevel(ceiling)
		slot.done = true
	}
	return slot.b, slot.err
}

func (m *Message) downlevel(ceiling aep.Capture) ([]byte, error) {
	ev, err := m.Envelope()
	if err != nil {
		return nil, err
	}
	dl, err := aep.Downlevel(ev, ceiling)
	if err != nil {
		return nil, err
	}
	if dl == ev {
		return m.Raw, nil
	}
	return dl.MarshalJSON()
}

// Envelope returns the parsed event, parsing Raw if needed. It caches the
// result, so it must not be called concurrently on a message that has no
// Event yet (live messages always have one).
func (m *Message) Envelope() (*aep.Event, error) {
	if m.Event != nil {
		return m.Event, nil
	}
	ev, err := aep.ParseEvent(m.Raw)
	if err != nil {
		return nil, err
	}
	m.Event = ev
	return ev, nil
}

// NewMessage wraps a parsed, validated event. Its wire bytes are the parsed
// bytes, compacted onto one line if they span several (a pretty-printed
// single POST), since every binding frames one event per line.
func NewMessage(ev *aep.Event, now time.Time) (*Message, error) {
	m := new(Message)
	if err := m.init(ev, now); err != nil {
		return nil, err
	}
	return m, nil
}

// init is NewMessage into m, a zero Message.
func (m *Message) init(ev *aep.Event, now time.Time) error {
	raw, err := ev.Bytes()
	if err != nil {
		return fmt.Errorf("serialize event: %w", err)
	}
	// An event with Raw knows whether it holds a line break; one built in
	// code is searched (twice IndexByte, not ContainsAny).
	if ev.Multiline() || ev.Raw() == nil && (bytes.IndexByte(raw, '\n') >= 0 || bytes.IndexByte(raw, '\r') >= 0) {
		var buf bytes.Buffer
		if err := json.Compact(&buf, raw); err != nil {
			return fmt.Errorf("compact event: %w", err)
		}
		raw = buf.Bytes()
	}
	m.Raw = raw
	m.Event = ev
	m.Type, m.Session, m.Source, m.ID = ev.Type, ev.Session, ev.Source, ev.ID
	m.Severity = ev.SeverityLevel()
	m.Capture = ev.CaptureLevel()
	m.Ingested = now
	switch aep.ScopeOf(ev.Type) {
	case aep.ScopeAgent:
		m.Kind = KindAgent
	case aep.ScopeForeign:
		m.Kind = KindForeign
	default:
		m.Kind = KindSession
		if ev.Seq != nil {
			m.Pos = wire.Position{Epoch: ev.EpochOrZero(), Seq: *ev.Seq}
		}
	}
	return nil
}

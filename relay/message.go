package relay

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aep-kimi/aep-kimi/aep"
	"github.com/aep-kimi/aep-kimi/relay/wire"
)

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

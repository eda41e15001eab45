package relay

import (
	"sort"
	"sync"
	"sync/atomic"

	"github.com/aep-kimi/aep-kimi/aep"
	"github.com/aep-kimi/aep-kimi/relay/wire"
)

// outItem is one thing a consumer's writer sends: a live delivery (msg and
// sub), a replay to run for a subscription before its live deliveries
// (replay and sub), or a pre-encoded frame, optionally followed by closing
// the socket.
type outItem struct {
	msg    *Message
	sub    *subscription
	replay Replay
	frame  []byte
	// closeCode, when non-zero, closes the socket after frame is written.
	closeCode   int
	closeReason string
}

// outQueue is one consumer's bounded, non-blocking queue. Producers (ingest,
// the socket reader) never wait on it: a consumer that falls behind first
// loses debug/info events, once the queue is three quarters full, which
// keeps room for notice-and-above; when even those cannot be queued the
// queue overflows and the consumer is disconnected with its positions
// (AEP-0003 §8.4: deliver or disconnect, never drop notice+ silently).
type outQueue struct {
	ch       chan outItem
	lowWater int
	over     chan struct{} // closed on overflow
	overOnce sync.Once
	dropLow  func()
	dropDisc func()
}

func newOutQueue(size int, m *metrics) *outQueue {
	return &outQueue{
		ch:       make(chan outItem, size),
		lowWater: size * 3 / 4,
		over:     make(chan struct{}),
		dropLow:  m.dropLow.Inc,
		dropDisc: m.dropDisc.Inc,
	}
}

// push queues an item that must not be dropped; a full queue overflows.
func (q *outQueue) push(it outItem) bool {
	select {
	case q.ch <- it:
		return true
	default:
		q.overflow()
		return false
	}
}

// offer queues a live delivery under the severity policy.
func (q *outQueue) offer(it outItem) {
	low := it.msg.Severity < aep.SeverityNotice
	if low && len(q.ch) >= q.lowWater {
		q.dropLow()
		return
	}
	select {
	case q.ch <- it:
	default:
		if low {
			q.dropLow()
			return
		}
		q.overflow()
	}
}

func (q *outQueue) overflow() {
	q.overOnce.Do(func() {
		q.dropDisc()
		close(q.over)
	})
}

// overflowed reports whether the queue has overflowed.
func (q *outQueue) overflowed() bool {
	select {
	case <-q.over:
		return true
	default:
		return false
	}
}

// subscription is one consumer subscription, the Subscriber a backend feeds.
// Its queue may be shared with the other subscriptions of a socket.
type subscription struct {
	id      string // the subscribe frame's id; empty for SSE
	q       *outQueue
	conn    uint64 // owning socket, 0 for SSE
	ceiling aep.Capture
	// capped is whether a capture ceiling was requested.
	capped    bool
	cancelled atomic.Bool
	cancel    func()
	// delivered holds the last position written per session; only the
	// writer touches it.
	// delivered is nil when positions are not tracked (SSE: the consumer
	// reads them from the id: lines).
	delivered map[string]trackedPos
	serial    uint64
	maxTrack  int
}

type trackedPos struct {
	wire.Position
	serial uint64 // delivery order, for eviction and a stable closing frame
}

// newSubscription makes a subscription feeding q. track > 0 records the
// last delivered position of up to track sessions for the closing frame.
func newSubscription(id string, q *outQueue, conn uint64, track int) *subscription {
	s := &subscription{id: id, q: q, conn: conn, maxTrack: track}
	if track > 0 {
		s.delivered = make(map[string]trackedPos)
	}
	return s
}

// Start implements Subscriber: the replay goes through the queue so it is
// written before any live delivery queued after it.
func (s *subscription) Start(r Replay) {
	s.q.push(outItem{sub: s, replay: r})
}

// Offer implements Subscriber.
func (s *subscription) Offer(m *Message) {
	if m.RoutedTo != 0 && m.RoutedTo == s.conn {
		return // the command's target already received it directly
	}
	s.q.offer(outItem{msg: m, sub: s})
}

// wire returns the bytes to deliver for m under the subscription's ceiling:
// the original bytes, or the down-leveled event re-serialized.
func (s *subscription) wire(m *Message) ([]byte, error) {
	if !s.capped || m.Capture <= s.ceiling {
		return m.Raw, nil
	}
	return m.downleveled(s.ceiling)
}

// record notes a delivered position. Past maxTrack sessions the least
// recently delivered one is forgotten.
func (s *subscription) record(m *Message) {
	if m.Kind != KindSession || s.delivered == nil {
		return
	}
	if _, ok := s.delivered[m.Session]; !ok && len(s.delivered) >= s.maxTrack {
		oldest, min := "", ^uint64(0)
		for k, v := range s.delivered {
			if v.serial < min {
				oldest, min = k, v.serial
			}
		}
		delete(s.delivered, oldest)
	}
	s.serial++
	s.delivered[m.Session] = trackedPos{Position: m.Pos, serial: s.serial}
}

// positions lists the tracked positions in delivery order.
func (s *subscription) positions() []wire.Resume {
	out := make([]wire.Resume, 0, len(s.delivered))
	for k, v := range s.delivered {
		out = append(out, wire.Resume{Session: k, Position: v.Position})
	}
	sort.Slice(out, func(i, j int) bool {
		return s.delivered[out[i].Session].serial < s.delivered[out[j].Session].serial
	})
	return out
}

package relay

import (
	"sort"
	"sync"
	"sync/atomic"

	"github.com/aep-kimi/aep-kimi/aep"
	"github.com/aep-kimi/aep-kimi/relay/wire"
)

// outItem is one thing a consumer's writer sends: a live delivery (msg or
// run, and sub), a replay to run for a subscription before its live deliveries
// (replay and sub), or a pre-encoded frame, optionally followed by closing
// the socket.
type outItem struct {
	msg *Message
	// run, instead of msg, is a batch's messages for sub, in order.
	run    *msgRun
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
//
// The writer takes everything queued at once (take) and is woken once per
// batch a producer queues, not once per item: a 100-event ingest batch is
// one wake-up, one coalesced write and one flush per consumer.
type outQueue struct {
	size     int
	lowWater int
	mu       sync.Mutex
	items    []outItem
	n        int // what items hold, a run counting its messages
	// wake holds a token when something was queued since the writer last
	// took: capacity one, so any number of producers' signals coalesce.
	wake     chan struct{}
	over     chan struct{} // closed on overflow
	overOnce sync.Once
	dropLow  func()
	dropDisc func()
}

func newOutQueue(size int, m *metrics) *outQueue {
	return &outQueue{
		size:     size,
		lowWater: size * 3 / 4,
		wake:     make(chan struct{}, 1),
		over:     make(chan struct{}),
		dropLow:  m.dropLow.Inc,
		dropDisc: m.dropDisc.Inc,
	}
}

// push queues an item that must not be dropped and wakes the writer; a
// full queue overflows.
func (q *outQueue) push(it outItem) bool {
	q.mu.Lock()
	if q.n >= q.size {
		q.mu.Unlock()
		q.overflow()
		return false
	}
	q.items = append(q.items, it)
	q.n++
	q.mu.Unlock()
	q.signal()
	return true
}

// offerLocked queues a live delivery under the severity policy and reports
// whether it was queued. The caller holds mu and signals once it is done.
func (q *outQueue) offerLocked(it outItem) bool {
	low := it.msg.Severity < aep.SeverityNotice
	switch {
	case low && q.n >= q.lowWater:
		q.dropLow()
		return false
	case q.n < q.size:
		q.items = append(q.items, it)
		q.n++
		return true
	case low:
		q.dropLow()
		return false
	default:
		q.overflow()
		return false
	}
}

// offer queues one live delivery under the severity policy and wakes the
// writer.
func (q *outQueue) offer(it outItem) {
	q.mu.Lock()
	ok := q.offerLocked(it)
	q.mu.Unlock()
	if ok {
		q.signal()
	}
}

// signal wakes the writer unless a wake-up is already pending.
func (q *outQueue) signal() {
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// wake signals q now, or on fire when the list is in use.
func (w *wakeList) wake(q *outQueue) {
	if w == nil {
		q.signal()
		return
	}
	w.qs = append(w.qs, q)
}

// fire wakes every writer held and empties the list.
func (w *wakeList) fire() {
	for i, q := range w.qs {
		q.signal()
		w.qs[i] = nil
	}
	w.qs = w.qs[:0]
}

// take hands the writer everything queued, in order, and gives the queue
// spare (emptied) to fill next, so a steady stream allocates no slices.
func (q *outQueue) take(spare []outItem) []outItem {
	q.mu.Lock()
	out := q.items
	q.items = spare[:0]
	q.n = 0
	q.mu.Unlock()
	return out
}

// release empties a slice take returned, so it keeps nothing alive, and
// returns it for the next take.
func release(items []outItem) []outItem {
	clear(items)
	return items[:0]
}

// queued reports how many items wait for the writer.
func (q *outQueue) queued() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.n
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
	// ack, when set, is the frame that tells the consumer the
	// subscription is in effect. Start queues it: the backend calls Start
	// once the subscription is registered, so nothing ingested after the
	// consumer reads ack can pass the subscription by.
	ack []byte
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

// Start implements Subscriber: the ack, then the replay, go through the
// queue so they are written before any live delivery queued after them.
func (s *subscription) Start(r Replay) {
	if s.ack != nil {
		s.q.push(outItem{frame: s.ack})
	}
	s.q.push(outItem{sub: s, replay: r})
}

// Offer implements Subscriber.
func (s *subscription) Offer(m *Message) {
	if m.RoutedTo != 0 && m.RoutedTo == s.conn {
		return // the command's target already received it directly
	}
	s.q.offer(outItem{msg: m, sub: s})
}

// offerRun implements batchSubscriber: the run goes into the queue as one
// item when the severity policy would have queued each of its messages
// (below the low-water mark, or below the bound when none is debug or
// info) and none was routed to this socket; otherwise message by message
// under the policy. Either way the writer is woken once, through wake.
func (s *subscription) offerRun(r *msgRun, wake *wakeList) {
	q := s.q
	limit := q.size
	if r.low {
		limit = q.lowWater
	}
	if s.conn == 0 && (!s.capped || r.capture <= s.ceiling) {
		// Framed on the ingest path, before any stream can see the run:
		// framed by the first stream's writer instead, it held every other
		// writer of the run waiting on it (r.once), the relay's extra p99
		// over the raw forwarder at 100 streams.
		r.sseFrames()
	}
	q.mu.Lock()
	if q.n+len(r.msgs) > limit || s.conn != 0 && r.routedTo(s.conn) {
		q.mu.Unlock()
		s.offerMsgs(r.msgs, wake)
		return
	}
	q.items = append(q.items, outItem{run: r, sub: s})
	q.n += len(r.msgs)
	q.mu.Unlock()
	wake.wake(q)
}

// offerMsgs implements batchSubscriber: msgs go into the queue one by one
// under the severity policy, under one lock, and the writer is woken once,
// through wake.
func (s *subscription) offerMsgs(msgs []*Message, wake *wakeList) {
	n := 0
	s.q.mu.Lock()
	for _, m := range msgs {
		if m.RoutedTo != 0 && m.RoutedTo == s.conn {
			continue
		}
		if s.q.offerLocked(outItem{msg: m, sub: s}) {
			n++
		}
	}
	s.q.mu.Unlock()
	if n > 0 {
		wake.wake(s.q)
	}
}

// routedTo reports whether a message of the run was routed to conn.
func (r *msgRun) routedTo(conn uint64) bool {
	for _, m := range r.msgs {
		if m.RoutedTo == conn {
			return true
		}
	}
	return false
}

// sseFrames is the run framed as SSE messages, made by the first stream
// that writes it.
func (r *msgRun) sseFrames() []byte {
	r.once.Do(func() {
		size := 0
		for _, m := range r.msgs {
			size += len(m.Raw) + len(m.Session) + len(m.Type) + sseOverhead
		}
		b := make([]byte, 0, size)
		for _, m := range r.msgs {
			b = appendSSE(b, m, m.Raw)
		}
		r.sse = b
	})
	return r.sse
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

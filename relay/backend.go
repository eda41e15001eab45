package relay

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/aep-kimi/aep-kimi/aep"
	"github.com/aep-kimi/aep-kimi/relay/wire"
	"github.com/prometheus/client_golang/prometheus"
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

// Fan-out in batches. A store offers each ingested batch to a subscriber
// that is a batchSubscriber (the bindings' subscriptions are) in one call
// and, when its caller is a wakeDeferrer's, leaves the writers' wake-ups to
// the caller. These types are the seam's, not any store's: both stores use
// them as written here and nothing else of the bindings.

// batchSubscriber is a Subscriber that takes one ingested batch's matches
// at once and acts on them at once (one wake-up of its writer per batch). A
// store offers it, instead of calling Offer per message, either
//
//   - offerRun: one msgRun shared with every other batchSubscriber of the
//     same filter (SubscribeRequest.filterKey), or
//   - offerMsgs: alone with its filter, the messages themselves (it must
//     not keep msgs: the store reuses the slice),
//
// under the same guarantees as Offer (ingest order, no gap or overlap with
// the replay, no blocking), passing on the wakeList it was given.
type batchSubscriber interface {
	offerRun(r *msgRun, wake *wakeList)
	offerMsgs(msgs []*Message, wake *wakeList)
}

// msgRun is one ingested batch's messages that one filter matched, in
// ingest order: a store makes it (newMsgRun) once for every batchSubscriber
// of that filter, and nobody modifies it after. The bindings queue it as a
// single item and frame it for SSE once for all its readers (sseFrames).
type msgRun struct {
	msgs []*Message
	// low is whether any message is below notice; capture is the highest
	// capture among them.
	low     bool
	capture aep.Capture
	once    sync.Once
	sse     []byte
}

func newMsgRun(msgs []*Message) *msgRun {
	r := &msgRun{msgs: msgs}
	for _, m := range msgs {
		r.low = r.low || m.Severity < aep.SeverityNotice
		r.capture = max(r.capture, m.Capture)
	}
	return r
}

// wakeList is the writers one ingest fed, to be woken together once the
// sender has its answer: woken first, a hundred writers are queued to run
// ahead of the reply, which then waits for them all (Server.serveIngest).
// A store never looks inside: it passes the list it was given (nil from
// Ingest: each writer is woken at once) to every batchSubscriber it offers
// to; the bindings add to it (wake) and fire it (queue.go).
type wakeList struct{ qs []*outQueue }

// wakeDeferrer is a Backend that takes the wakeList of the batch's sender
// (Server.admitWaking): it ingests as Ingest does, but leaves waking the
// writers it fed to wake.
type wakeDeferrer interface {
	ingestWaking(msgs []*Message, wake *wakeList) IngestResult
}

// What a store may add. The server looks for these on its Backend; a store
// without them is a memory store as far as the bindings can tell.

// EventLimiter is a Backend that carries events up to a size of its own
// (a NATS server's payload limit). The bindings refuse larger events with
// payload-too-large instead of accepting what the store cannot keep.
type EventLimiter interface {
	MaxEventBytes() int64
}

// RemoteRouter is a Backend shared by several relay processes that carries
// commands between them: a command for a session no socket of this relay
// claims is delivered through the relay whose socket does (AEP-0004 §4.4
// holds across the relays: one claimant, byte-identical delivery).
type RemoteRouter interface {
	// Claimed tells the other relays that this relay's sockets now claim
	// session, or no longer do. It must not block.
	Claimed(session string, claimed bool)
	// RouteRemote offers m to the relay claiming its session and returns
	// its answer: "" when it delivered m, else a refusal code and detail
	// (no-route when no relay claims the session).
	RouteRemote(m *Message) (code, detail string)
	// ServeRoutes sets the handler for commands other relays route here.
	// It returns the outcome and, when delivered, the receiving socket.
	ServeRoutes(fn func(m *Message) (code, detail string, conn uint64))
}

// storeReporter is a Backend that can be unable to make events durable
// (a full disk, a NATS cluster without a leader).
type storeReporter interface {
	storeStatus() storeStatus
}

// errStoreUnavailable refuses a batch while the store is known unable to
// store it, without trying.
var errStoreUnavailable = errors.New("the store cannot make events durable")

// storeStatus is what /healthz says of the store.
type storeStatus struct {
	OK    bool      `json:"ok"`
	Error string    `json:"error,omitempty"`
	Since time.Time `json:"since,omitzero"`
}

// storeCollector is a backend with figures of its own for /metrics.
type storeCollector interface {
	storeCollectors() []prometheus.Collector
}

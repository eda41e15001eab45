package relay

import (
	"slices"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/aep-kimi/aep-kimi/aep"
	"github.com/aep-kimi/aep-kimi/relay/wire"
)

// The queue sheds debug/info once three quarters full, keeps the rest for
// notice and above, and overflows (never drops) when notice+ cannot fit.
func TestOutQueuePolicy(t *testing.T) {
	t.Parallel()
	m := newMetrics(NewMemoryBackend(0, 0))
	q := newOutQueue(8, m)
	info := &Message{Severity: aep.SeverityInfo}
	debug := &Message{Severity: aep.SeverityDebug}
	notice := &Message{Severity: aep.SeverityNotice}
	steps := []struct {
		msg      *Message
		queued   int
		dropped  float64
		overflow bool
	}{
		{info, 1, 0, false},
		{info, 2, 0, false},
		{info, 3, 0, false},
		{debug, 4, 0, false},
		{info, 5, 0, false},
		{info, 6, 0, false},
		{info, 6, 1, false}, // at the low-water mark: shed
		{debug, 6, 2, false},
		{notice, 7, 2, false}, // headroom kept for notice+
		{notice, 8, 2, false},
		{info, 8, 3, false},
		{notice, 8, 3, true}, // cannot fit: disconnect, never a silent drop
	}
	for i, s := range steps {
		q.offer(outItem{msg: s.msg})
		if got := q.queued(); got != s.queued {
			t.Fatalf("step %d: %d queued, want %d", i, got, s.queued)
		}
		if got := counterValue(m.dropLow); got != s.dropped {
			t.Fatalf("step %d: %v low-severity drops, want %v", i, got, s.dropped)
		}
		if q.overflowed() != s.overflow {
			t.Fatalf("step %d: overflowed %v, want %v", i, q.overflowed(), s.overflow)
		}
	}
	if got := counterValue(m.dropDisc); got != 1 {
		t.Fatalf("%v disconnects counted, want 1", got)
	}
	// Overflow is reported once however often it recurs.
	q.offer(outItem{msg: notice})
	if got := counterValue(m.dropDisc); got != 1 {
		t.Fatalf("%v disconnects counted after a repeat, want 1", got)
	}
}

func TestSubscriptionRecordBounded(t *testing.T) {
	t.Parallel()
	s := newSubscription("a", nil, 0, 2)
	for i, sess := range []string{"x", "y", "x", "z"} {
		s.record(&Message{Kind: KindSession, Session: sess, Pos: wire.Position{Seq: int64(i)}})
	}
	got := s.positions()
	want := []wire.Resume{{Session: "x", Position: wire.Position{Seq: 2}}, {Session: "z", Position: wire.Position{Seq: 3}}}
	if len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("positions %v, want %v (the least recently delivered session is forgotten)", got, want)
	}
	s.record(&Message{Kind: KindForeign, Session: "w"})
	if len(s.positions()) != 2 {
		t.Fatal("a foreign event is not a position")
	}
}

func counterValue(c prometheus.Counter) float64 {
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		return -1
	}
	return m.GetCounter().GetValue()
}

// A batch ingested into the memory store reaches a stream's queue in one
// piece, for one take by its writer: in order, only what its filter
// matches, never a command routed to the socket itself; a batch with
// nothing for the stream does not wake its writer.
func TestOfferBatchWakesOnce(t *testing.T) {
	t.Parallel()
	b := NewMemoryBackend(0, 0)
	q := newOutQueue(256, newMetrics(b))
	sub := newSubscription("", q, 7, 0)
	f, err := aep.ParseFilter([]byte(`{"session":"s"}`))
	if err != nil {
		t.Fatal(err)
	}
	cancel, err := b.Subscribe(SubscribeRequest{Filter: f}, sub)
	if err != nil {
		t.Fatal(err)
	}
	defer cancel()
	<-q.wake
	if items := q.take(nil); len(items) != 1 || items[0].replay == nil {
		t.Fatalf("the queue starts with %d items, want the replay alone", len(items))
	}
	var msgs []*Message
	for i := range 100 {
		session := "s"
		if i%10 == 9 {
			session = "other"
		}
		msgs = append(msgs, benchEvent(t, session, int64(i)))
	}
	msgs[5].RoutedTo = 7 // a command this socket was handed directly
	b.Ingest(msgs)
	if len(q.wake) != 1 {
		t.Fatalf("%d wake-ups pending after one batch, want 1", len(q.wake))
	}
	<-q.wake
	items := q.take(nil)
	var got []int64
	for _, it := range items {
		if it.run == nil {
			got = append(got, it.msg.Pos.Seq)
			continue
		}
		for _, m := range it.run.msgs {
			got = append(got, m.Pos.Seq)
		}
	}
	var want []int64
	for i := range int64(100) {
		if i%10 != 9 && i != 5 {
			want = append(want, i)
		}
	}
	if !slices.Equal(got, want) {
		t.Fatalf("queued %v, want %v", got, want)
	}
	b.Ingest(msgs[:0])
	if len(q.wake) != 0 {
		t.Fatal("an empty batch woke the writer")
	}
}

// A run is queued whole only where the severity policy would have queued
// each of its messages; otherwise message by message under the policy, so
// batching never changes what a slow consumer loses or when it is cut off.
func TestOfferRunKeepsThePolicy(t *testing.T) {
	t.Parallel()
	m := newMetrics(NewMemoryBackend(0, 0))
	q := newOutQueue(8, m) // low-water mark 6
	sub := newSubscription("", q, 0, 0)
	info := func() *Message { return &Message{Severity: aep.SeverityInfo} }
	notice := func() *Message { return &Message{Severity: aep.SeverityNotice} }
	sub.offerRun(newMsgRun([]*Message{info(), info(), info(), info()}), nil)
	if q.queued() != 4 || len(q.items) != 1 {
		t.Fatalf("a run that fits: %d queued in %d items, want 4 in 1", q.queued(), len(q.items))
	}
	// Two of these infos fit under the low-water mark; the notice after
	// them still fits under the bound.
	sub.offerRun(newMsgRun([]*Message{info(), info(), info(), notice()}), nil)
	if q.queued() != 7 || counterValue(m.dropLow) != 1 {
		t.Fatalf("past the low-water mark: %d queued, %v dropped; want 7 and 1", q.queued(), counterValue(m.dropLow))
	}
	if q.overflowed() {
		t.Fatal("overflowed with room for notice")
	}
	sub.offerRun(newMsgRun([]*Message{notice(), notice()}), nil)
	if q.queued() != 8 || !q.overflowed() {
		t.Fatalf("notice past the bound: %d queued, overflowed %v; want 8 and true", q.queued(), q.overflowed())
	}
}

// Streams that share a filter share the batch: one run, framed once, the
// same piece for each.
func TestSharedFilterSharesOneRun(t *testing.T) {
	t.Parallel()
	b := NewMemoryBackend(0, 0)
	f, err := aep.ParseFilter([]byte(`{"session":"s"}`))
	if err != nil {
		t.Fatal(err)
	}
	var qs []*outQueue
	for range 2 {
		qs = append(qs, liveQueue(t, b, newMetrics(b), SubscribeRequest{Filter: f, filterKey: `{"session":"s"}`}))
	}
	b.Ingest([]*Message{benchEvent(t, "s", 1), benchEvent(t, "other", 2), benchEvent(t, "s", 3)})
	var runs []*msgRun
	for _, q := range qs {
		items := q.take(nil)
		if len(items) != 1 || items[0].run == nil || len(items[0].run.msgs) != 2 {
			t.Fatalf("queued %+v, want one run of the two matching events", items)
		}
		runs = append(runs, items[0].run)
	}
	if runs[0] != runs[1] {
		t.Fatal("two streams of one filter got two runs")
	}
	if runs[0].sse == nil {
		t.Fatal("the run reached the streams unframed: their writers would wait on the first to frame it")
	}
	if a, b := runs[0].sseFrames(), runs[1].sseFrames(); &a[0] != &b[0] {
		t.Fatal("the run was framed twice")
	}
}

// A run only sockets read is never framed for SSE: the framing is paid
// where a stream will write it.
func TestSocketRunNotFramed(t *testing.T) {
	t.Parallel()
	q := newOutQueue(8, newMetrics(NewMemoryBackend(0, 0)))
	r := newMsgRun([]*Message{{Severity: aep.SeverityNotice, Raw: []byte(`{}`)}})
	newSubscription("", q, 7, 0).offerRun(r, nil)
	if len(q.items) != 1 || r.sse != nil {
		t.Fatalf("%d items queued, framed %q; want 1 and unframed", len(q.items), r.sse)
	}
}

// liveQueue subscribes a stream's queue to b with req and takes its replay.
func liveQueue(t *testing.T, b Backend, m *metrics, req SubscribeRequest) *outQueue {
	t.Helper()
	q := newOutQueue(256, m)
	cancel, err := b.Subscribe(req, newSubscription("", q, 0, 0))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cancel)
	<-q.wake
	q.take(nil) // the replay
	return q
}

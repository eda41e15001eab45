package relay

import (
	"context"
	"sync"
)

// ingestItem is one frame a socket's reader queued for its ingester: an
// event to store (msg), or anything else to do in its place (fn).
type ingestItem struct {
	msg  *Message
	fn   func()
	size int // the frame's bytes, for the queue's bound
}

// ingestQueue carries one socket's events from its reader to its ingester,
// bounded in bytes: a reader that gets ahead of the store stops reading,
// and the socket's own flow control holds the sender back. An event larger
// than the whole bound is let through alone.
type ingestQueue struct {
	limit int64

	mu     sync.Mutex
	cond   *sync.Cond
	items  []ingestItem
	bytes  int64 // queued or being ingested
	closed bool
}

func newIngestQueue(limit int64) *ingestQueue {
	q := &ingestQueue{limit: limit}
	q.cond = sync.NewCond(&q.mu)
	return q
}

// push queues it, waiting while the queue is over its bound; it gives up
// (dropping it, as the socket is going away) when ctx ends.
func (q *ingestQueue) push(ctx context.Context, it ingestItem) {
	n := int64(it.size)
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.full(n) {
		stop := context.AfterFunc(ctx, func() {
			q.mu.Lock()
			defer q.mu.Unlock()
			q.cond.Broadcast()
		})
		defer stop()
		for q.full(n) && ctx.Err() == nil && !q.closed {
			q.cond.Wait()
		}
	}
	if ctx.Err() != nil || q.closed {
		return
	}
	q.items = append(q.items, it)
	q.bytes += n
	q.cond.Broadcast()
}

// full reports whether n more bytes must wait. The caller holds mu.
func (q *ingestQueue) full(n int64) bool { return q.bytes > 0 && q.bytes+n > q.limit }

// take waits for queued items and returns them in order: either one fn
// item, or up to max consecutive events. ok is false once the queue is
// closed and empty.
func (q *ingestQueue) take(max int) ([]ingestItem, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for len(q.items) == 0 && !q.closed {
		q.cond.Wait()
	}
	if len(q.items) == 0 {
		return nil, false
	}
	n := 1
	if q.items[0].fn == nil {
		for n < len(q.items) && n < max && q.items[n].fn == nil {
			n++
		}
	}
	out := make([]ingestItem, n)
	copy(out, q.items)
	q.items = append(q.items[:0], q.items[n:]...)
	return out, true
}

// done releases the bytes of items the ingester has handed on.
func (q *ingestQueue) done(items []ingestItem) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, it := range items {
		q.bytes -= int64(it.size)
	}
	q.cond.Broadcast()
}

// close ends the queue: take drains what is queued, then reports !ok.
func (q *ingestQueue) close() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.closed = true
	q.cond.Broadcast()
}

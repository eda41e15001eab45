package relay

import (
	"context"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// A private store dedupes without the stream's message ids. Its only
// publisher is this relay, which sees every copy it stores: the index
// answers a redelivery of what it holds (Ingest's heldAlready), a batch
// publishes an event it repeats once, and a stored copy nobody admits (a
// refused batch's, whose acknowledgement came too late or whose sync
// failed, or the second of two batches in flight at once with one event)
// is deleted from the stream. So a retried publish is stored once, as the
// stream's own dedupe did, without its cost: NATS reloads the message ids
// of its whole duplicate window when it starts, which straight after a
// million writes was most of a restart.

// privateDuplicateWindow is a private stream's duplicate window: the least
// NATS takes (zero would mean its default of two minutes). Its messages
// carry no ids, so the window holds nothing.
const privateDuplicateWindow = 100 * time.Millisecond

// strayQueue bounds the refused batches waiting for their stored copies to
// be deleted. One that does not fit leaves its copies: the index never
// holds them, and a rebuild holds each event once.
const strayQueue = 256

// stray is what a refused batch (or a duplicate) left in the stream: the
// sequences of copies stored, and the acknowledgements still to come.
type stray struct {
	seqs []uint64
	late []jetstream.PubAckFuture
}

// discard queues for deletion what a refused batch stored: the copies of
// held[:consumed] whose acks arrived, and whatever futs[consumed:] store.
func (b *JetStreamBackend) discard(held []*Message, futs []jetstream.PubAckFuture, consumed int) {
	var s stray
	for _, m := range held[:min(consumed, len(held))] {
		if m.StoreSeq != 0 {
			s.seqs = append(s.seqs, m.StoreSeq)
		}
	}
	s.late = futs[min(consumed, len(futs)):]
	b.queueStray(s)
}

// dropStoredDuplicates marks the events of msgs that the index came to hold
// after Ingest asked it (another batch in flight had them) as duplicates,
// and queues their own stored copies for deletion. The caller holds admitMu
// in its turn, so nothing else changes the index meanwhile.
func (b *JetStreamBackend) dropStoredDuplicates(msgs []*Message, already []bool) {
	now := b.mem.heldAlready(msgs)
	var s stray
	for i, m := range msgs {
		if now[i] && !already[i] {
			already[i] = true
			if m.StoreSeq != 0 {
				s.seqs = append(s.seqs, m.StoreSeq)
			}
		}
	}
	b.queueStray(s)
}

func (b *JetStreamBackend) queueStray(s stray) {
	if len(s.seqs) == 0 && len(s.late) == 0 {
		return
	}
	select {
	case b.strays <- s:
	default:
		b.log.Warn("jetstream store: stored copies of a refused batch kept in the stream (the index does not hold them)",
			"copies", len(s.seqs)+len(s.late))
	}
}

// deleteStrays deletes s's copies, waiting for the late acknowledgements
// as long as a publish may take, and each deletion as long again: one bound
// for them all, run out on a loaded machine, would leave the rest in the
// stream for good. Closing does not cut it short: the snapshot written at
// close then describes the stream it leaves.
func (b *JetStreamBackend) deleteStrays(ctx context.Context, s stray) {
	base := context.WithoutCancel(ctx)
	if len(s.late) > 0 {
		actx, cancel := context.WithTimeout(base, b.strayTimeout)
		defer cancel()
		for _, f := range s.late {
			select {
			case ack := <-f.Ok():
				s.seqs = append(s.seqs, ack.Sequence)
			case <-f.Err():
			case <-actx.Done():
				b.log.Warn("jetstream store: a refused batch's late copies kept in the stream", "copies", len(s.late))
				return
			}
		}
	}
	del := b.deleteMsg
	if del == nil {
		del = b.stream.DeleteMsg
	}
	for _, seq := range s.seqs {
		b.deleteStray(base, del, seq)
	}
}

// deleteStray deletes one stored copy within its own bound.
func (b *JetStreamBackend) deleteStray(base context.Context, del func(context.Context, uint64) error, seq uint64) {
	dctx, cancel := context.WithTimeout(base, b.strayTimeout)
	defer cancel()
	// A copy purged meanwhile (its session trimmed) is gone already.
	if err := del(dctx, seq); err != nil && b.stored(dctx, seq) {
		b.log.Warn("jetstream store: a stored copy nobody admitted was not deleted", "seq", seq, "err", err)
	}
}

// drainStrays deletes what is queued when the store closes.
func (b *JetStreamBackend) drainStrays(ctx context.Context) {
	for {
		select {
		case s := <-b.strays:
			b.deleteStrays(ctx, s)
		default:
			return
		}
	}
}

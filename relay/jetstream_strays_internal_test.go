package relay

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/aep-kimi/aep-kimi/aep"
	"github.com/aep-kimi/aep-kimi/internal/testkit/netaddr"
	"github.com/aep-kimi/aep-kimi/internal/testkit/poll"
)

// streamMsgs is how many messages the stream holds now (not the metrics'
// cached state).
func streamMsgs(t *testing.T, js *JetStreamBackend) uint64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	info, err := js.stream.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return info.State.Msgs
}

// waitStreamMsgs waits until the stream holds want messages. It gives up
// once the count has not moved for 10 s: deleting a thousand strays one
// request at a time takes longer than that on a loaded machine under
// -race, but never stops midway.
func waitStreamMsgs(t *testing.T, js *JetStreamBackend, want uint64) {
	t.Helper()
	got := streamMsgs(t, js)
	for got != want {
		last := got
		poll.Until(10*time.Second, func() bool { got = streamMsgs(t, js); return got == want || got != last })
		if got == last {
			t.Fatalf("the stream holds %d messages, want %d", got, want)
		}
	}
}

// reopenHolds closes js and opens its store twice, from the snapshot and
// then with a full rebuild, and fails unless each holds want events and
// the stream want messages.
func reopenHolds(t *testing.T, js *JetStreamBackend, cfg JetStreamConfig, want int) {
	t.Helper()
	if err := js.Close(); err != nil {
		t.Fatal(err)
	}
	for _, snapshot := range []bool{true, false} {
		if !snapshot {
			if err := os.Remove(filepath.Join(cfg.Dir, snapshotName)); err != nil {
				t.Fatal(err)
			}
		}
		again, err := OpenJetStream(context.Background(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		if (again.fromSnapshot != 0) != snapshot {
			t.Errorf("restored from the snapshot: %v, want %v", again.fromSnapshot != 0, snapshot)
		}
		if got := again.Stats().Events; got != want {
			t.Errorf("reopened (snapshot %v) holding %d events, want %d", snapshot, got, want)
		}
		if got := streamMsgs(t, again); got != uint64(want) {
			t.Errorf("reopened (snapshot %v) over %d stream messages, want %d", snapshot, got, want)
		}
		if err := again.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// A private store sends no message ids and keeps NATS's least duplicate
// window (a restart reloads the ids of the whole window); a store others
// reach keeps both, for two relays handed one event.
func TestPrivateStoreWithoutStreamDedupe(t *testing.T) {
	t.Parallel()
	for _, listen := range []bool{false, true} {
		cfg := JetStreamConfig{Dir: t.TempDir()}
		if listen {
			// A free port, not port 0: the embedded server reads 0 as
			// NATS's default 4222, which another test may hold.
			cfg.Listen = netaddr.FreeAddr(t)
		}
		js, err := OpenJetStream(context.Background(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		if res := js.Ingest([]*Message{benchEvent(t, "s", 0)}); res.Err != nil {
			t.Fatal(res.Err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		info, err := js.stream.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		sm, err := js.stream.GetMsg(ctx, info.State.LastSeq)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		id := sm.Header.Get(jetstream.MsgIDHeader)
		if listen {
			if info.Config.Duplicates != DefaultDuplicateWindow || id == "" {
				t.Errorf("a listening store: window %v, message id %q; want %v and an id", info.Config.Duplicates, id, DefaultDuplicateWindow)
			}
		} else if info.Config.Duplicates != privateDuplicateWindow || id != "" {
			t.Errorf("a private store: window %v, message id %q; want %v and none", info.Config.Duplicates, id, privateDuplicateWindow)
		}
		js.Close()
	}
}

// A batch refused because its acknowledgements came too late is retried:
// the stream ends up holding each event once (the late copies are deleted),
// the index holds each once, and so do a restart from the snapshot and a
// full rebuild.
func TestPrivateStoreRetryAfterTimeoutStoredOnce(t *testing.T) {
	t.Parallel()
	cfg := JetStreamConfig{Dir: t.TempDir()}
	js, err := OpenJetStream(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	batch := benchBatches(t, storeBatch)[0]
	js.timeout = time.Nanosecond // every wait for an ack times out
	if res := js.Ingest(batch); res.Err == nil || !strings.Contains(res.Err.Error(), "timed out") {
		t.Fatalf("a batch whose acks came too late: %+v", res)
	}
	js.timeout = DefaultPublishTimeout
	if st := js.Stats(); st.Events != 0 {
		t.Fatalf("a refused batch was admitted: %d events", st.Events)
	}
	if res := js.Ingest(batch); res.Err != nil || res.Buffered != storeBatch {
		t.Fatalf("retry: %+v", res)
	}
	waitStreamMsgs(t, js, storeBatch)
	reopenHolds(t, js, cfg, storeBatch)
}

// A batch refused because its sync failed under --store-sync always is
// retried: the copies the stream took first are deleted, the retry's are
// kept, once each. The retry comes while those deletions run, or once they
// are done (the block that held the copies is gone then, and the store
// has moved on to a new one).
func TestPrivateStoreRetryAfterFailedSyncStoredOnce(t *testing.T) {
	t.Parallel()
	for _, settled := range []bool{false, true} {
		t.Run(fmt.Sprintf("settled=%v", settled), func(t *testing.T) {
			t.Parallel()
			var fail atomic.Bool
			d := &blockDisk{}
			syncer := func(f *os.File) error {
				if fail.Load() {
					return errors.New("EIO")
				}
				return d.sync(f)
			}
			cfg := JetStreamConfig{Dir: t.TempDir(), SyncAlways: true, Syncer: syncer}
			js, err := OpenJetStream(context.Background(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			batch := benchBatches(t, storeBatch)[0]
			fail.Store(true)
			if res := js.Ingest(batch); res.Err == nil {
				t.Fatalf("a batch whose sync failed was accepted: %+v", res)
			}
			fail.Store(false)
			if settled {
				waitStreamMsgs(t, js, 0)
			}
			if res := js.Ingest(batch); res.Err != nil || res.Buffered != storeBatch {
				t.Fatalf("retry: %+v", res)
			}
			waitStreamMsgs(t, js, storeBatch)
			reopenHolds(t, js, cfg, storeBatch)
		})
	}
}

// An event a batch carries twice, or that two batches in flight at once
// both carry, is stored once and held once; the repeats are duplicates.
func TestPrivateStoreDuplicatesInFlightStoredOnce(t *testing.T) {
	t.Parallel()
	cfg := JetStreamConfig{Dir: t.TempDir()}
	js, err := OpenJetStream(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	a, b := benchEvent(t, "s", 0), benchEvent(t, "s", 1)
	if res := js.Ingest([]*Message{a, b, resent(t, a)}); res.Err != nil || res.Buffered != 2 || res.Duplicates != 1 {
		t.Fatalf("a batch repeating an event: %+v", res)
	}
	// Two batches with one event, both published before either is
	// admitted: admission waits on admitMu, held here.
	c, d, e := benchEvent(t, "s", 2), benchEvent(t, "s", 3), benchEvent(t, "s", 4)
	js.admitMu.Lock()
	results := make(chan IngestResult, 2)
	go func() { results <- js.Ingest([]*Message{c, d}) }()
	waitTickets(t, js, 2)
	go func() { results <- js.Ingest([]*Message{e, resent(t, c)}) }()
	waitTickets(t, js, 3)
	js.admitMu.Unlock()
	var buffered, dups int
	for range 2 {
		res := <-results
		if res.Err != nil {
			t.Fatal(res.Err)
		}
		buffered, dups = buffered+res.Buffered, dups+res.Duplicates
	}
	if buffered != 3 || dups != 1 {
		t.Fatalf("two batches sharing an event: %d buffered, %d duplicates; want 3 and 1", buffered, dups)
	}
	waitStreamMsgs(t, js, 5)
	reopenHolds(t, js, cfg, 5)
}

// resent is m as a second delivery of it parses: another Message.
func resent(t *testing.T, m *Message) *Message { return messageFrom(t, m.Raw) }

// messageFrom parses raw into a Message, as ingest does.
func messageFrom(t testing.TB, raw []byte) *Message {
	t.Helper()
	ev, err := aep.ParseEvent(raw)
	if err != nil {
		t.Fatal(err)
	}
	m, err := NewMessage(ev, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// waitTickets waits until n batches have been published.
func waitTickets(t *testing.T, js *JetStreamBackend, n uint64) {
	t.Helper()
	poll.Must(t, 10*time.Second, fmt.Sprintf("%d batches published", n), func() bool {
		js.pubMu.Lock()
		defer js.pubMu.Unlock()
		return js.nextTicket >= n
	})
}

// Emitters resending one history at once, each batch racing the others'
// admissions: the stream ends up holding each event once, as the index
// does.
func TestPrivateStoreConcurrentResendsStoredOnce(t *testing.T) {
	t.Parallel()
	// Its warnings say which copies were kept, should the count be off.
	log := slog.New(slog.NewTextHandler(t.Output(), nil))
	js, err := OpenJetStream(context.Background(), JetStreamConfig{Dir: t.TempDir(), Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	defer js.Close()
	const events, emitters = 400, 4
	history := benchBatchesFor(t, events, "r")
	copies := make([][][]*Message, emitters)
	for e := range copies {
		for _, batch := range history {
			again := make([]*Message, len(batch))
			for i, m := range batch {
				again[i] = resent(t, m)
			}
			copies[e] = append(copies[e], again)
		}
	}
	if err := ingestEach(js, copies); err != nil {
		t.Fatal(err)
	}
	if got := js.Stats().Events; got != events {
		t.Fatalf("the index holds %d events, want %d", got, events)
	}
	waitStreamMsgs(t, js, events)
}

// A refused batch's copies are deleted each within its own bound: one
// deletion that takes its whole bound (a loaded machine, a slow disk)
// leaves none of the others in the stream for good.
func TestStrayDeletionsEachHaveTheirBound(t *testing.T) {
	t.Parallel()
	js, err := OpenJetStream(context.Background(), JetStreamConfig{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer js.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var seqs []uint64
	for i := range 8 {
		ack, err := js.js.Publish(ctx, js.storedSubject("s"), []byte(fmt.Sprintf(`{"n":%d}`, i)))
		if err != nil {
			t.Fatal(err)
		}
		seqs = append(seqs, ack.Sequence)
	}
	js.strayTimeout = 200 * time.Millisecond
	slow := true
	js.deleteMsg = func(ctx context.Context, seq uint64) error {
		if slow {
			slow = false
			<-ctx.Done() // the first deletion takes its whole bound, then succeeds
			return js.stream.DeleteMsg(context.Background(), seq)
		}
		return js.stream.DeleteMsg(ctx, seq)
	}
	js.queueStray(stray{seqs: seqs})
	waitStreamMsgs(t, js, 0)
}

package relay

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/aep-kimi/aep-kimi/aep"
	"github.com/aep-kimi/aep-kimi/internal/testkit/netaddr"
	"github.com/aep-kimi/aep-kimi/internal/testkit/poll"
)

// A redelivery the index holds is answered from the index: the stream gets
// one message however often an emitter resends, even past its duplicate
// window.
func TestJetStreamRedeliveryNotRewritten(t *testing.T) {
	t.Parallel()
	js, err := OpenJetStream(context.Background(), JetStreamConfig{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer js.Close()
	m := benchEvent(t, "s", 0)
	for range 3 {
		if res := js.Ingest([]*Message{m}); res.Err != nil {
			t.Fatal(res.Err)
		}
	}
	if got := js.redeliveries.Load(); got != 2 {
		t.Fatalf("%d redeliveries answered from the index, want 2", got)
	}
	if st := js.streamState(); st.Msgs != 1 {
		t.Fatalf("stream holds %d messages, want 1", st.Msgs)
	}
}

// A private store's stream stays near the index's depth per session: the
// index reports each session's floor and the store purges below it.
func TestJetStreamPurgesBelowFloor(t *testing.T) {
	t.Parallel()
	js, err := OpenJetStream(context.Background(), JetStreamConfig{Dir: t.TempDir(), Buffer: 20})
	if err != nil {
		t.Fatal(err)
	}
	defer js.Close()
	const n = 20 + 4*floorEvery
	for i := 0; i < n; i += 8 {
		var batch []*Message
		for j := i; j < min(i+8, n); j++ {
			batch = append(batch, benchEvent(t, "s", int64(j)))
		}
		if res := js.Ingest(batch); res.Err != nil {
			t.Fatal(res.Err)
		}
	}
	poll.Until(10*time.Second, func() bool { return js.purged.Load() >= 4 })
	if got := js.purged.Load(); got != 4 {
		t.Fatalf("%d purges after %d trims, want 4", got, n-20)
	}
	js.stateTime = time.Time{}
	if st := js.streamState(); st.Msgs != 20 {
		t.Fatalf("stream holds %d messages of one session with depth 20, want 20", st.Msgs)
	}
}

// smallEvent is a positioned event of about 180 bytes: small enough that a
// stream message's subject and headers outweigh it.
func smallEvent(t testing.TB, session string, seq int64) *Message {
	t.Helper()
	return messageFrom(t, []byte(`{"aep":"0.1","id":"`+aep.NewID()+`","type":"progress.status","time":"2026-11-30T12:00:00Z","source":"aep://h/s/`+session+`","agent":"k","session":"`+session+`","seq":`+strconv.FormatInt(seq, 10)+`,"epoch":0}`))
}

func heldIDs(b *MemoryBackend) map[string]int {
	out := map[string]int{}
	for _, s := range b.Sessions() {
		out[s.Session] = s.Events
	}
	return out
}

// With small events the byte budget, not the depth, trims: a reopened
// private store still holds every event the index held (the stream has no
// byte limit of its own that would discard them first), and the stream is
// purged as the budget trims.
func TestJetStreamSmallEventsUnderBudgetReopen(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := JetStreamConfig{Dir: dir, BufferBytes: 100_000}
	js, err := OpenJetStream(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3000 {
		if res := js.Ingest([]*Message{smallEvent(t, "s"+strconv.Itoa(i%5), int64(i/5))}); res.Err != nil {
			t.Fatal(res.Err)
		}
	}
	if !purgedOnce(js) {
		t.Fatal("the byte budget trimmed 2,400 events and nothing was purged from the stream")
	}
	reopenSame(t, js, cfg)
}

// purgedOnce waits (briefly) for the store's first purge.
func purgedOnce(js *JetStreamBackend) bool {
	return poll.Until(10*time.Second, func() bool { return js.purged.Load() > 0 })
}

// reopenSame closes js, opens its store again and fails unless the index
// holds what it held; it returns the reopened store.
func reopenSame(t *testing.T, js *JetStreamBackend, cfg JetStreamConfig) *JetStreamBackend {
	t.Helper()
	want := heldIDs(js.mem)
	if err := js.Close(); err != nil {
		t.Fatal(err)
	}
	again, err := OpenJetStream(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { again.Close() })
	if got := heldIDs(again.mem); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("reopened with %v, held %v", got, want)
	}
	return again
}

// A batch the stream stored but the relay refused (its acks came too late)
// is resent after the stream purged that copy: the resend is stored again, so
// what the relay then acknowledges survives a reopen.
func TestJetStreamResendAfterPurgedCopy(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := JetStreamConfig{Dir: dir, Buffer: 20}
	js, err := OpenJetStream(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	// What a refused batch leaves behind: the stream stored the event (its
	// ack came too late), the index never admitted it.
	late := benchEvent(t, "s", 1_000_000)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := js.js.PublishMsg(ctx, js.storedMsg(late)); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 20+floorEvery; i += 8 {
		var batch []*Message
		for j := i; j < i+8; j++ {
			batch = append(batch, benchEvent(t, "s", int64(j)))
		}
		if res := js.Ingest(batch); res.Err != nil {
			t.Fatal(res.Err)
		}
	}
	if !purgedOnce(js) {
		t.Fatal("nothing was purged below the session's floor")
	}
	if res := js.Ingest([]*Message{late}); res.Err != nil || res.Buffered != 1 {
		t.Fatalf("resend: %+v", res)
	}
	again := reopenSame(t, js, cfg)
	if l := again.mem.Sessions()[0].Latest; l.Seq != 1_000_000 {
		t.Fatalf("reopened without the resent event: latest %v", l)
	}
}

// A stream whose last message was deleted (by hand, or a purge) reopens:
// the rebuild reads until nothing is pending, not up to a sequence that is
// gone.
func TestJetStreamReopenAfterLastMessageDeleted(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	js, err := OpenJetStream(context.Background(), JetStreamConfig{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	js.Ingest([]*Message{benchEvent(t, "a", 0), benchEvent(t, "b", 0)})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := js.stream.DeleteMsg(ctx, 2); err != nil {
		t.Fatal(err)
	}
	if err := js.Close(); err != nil {
		t.Fatal(err)
	}
	// Nothing but the relay reaches a private store: the index it keeps
	// across a restart is its own. The rebuild is what reads the stream.
	if err := os.Remove(filepath.Join(dir, snapshotName)); err != nil {
		t.Fatal(err)
	}
	again, err := OpenJetStream(ctx, JetStreamConfig{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	if got := heldIDs(again.mem); len(got) != 1 || got["a"] != 1 {
		t.Fatalf("reopened with %v", got)
	}
}

// A redelivery marked held when its batch was published is a duplicate for
// good: were its session evicted meanwhile, it is not admitted again (with
// no stored copy), and an eviction never purges a whole subject.
func TestMemoryIngestMarkedDuplicates(t *testing.T) {
	t.Parallel()
	b := NewMemoryBackend(0, 0)
	m := benchEvent(t, "s", 0)
	if res := b.ingest([]*Message{m}, []bool{true}, nil); res.Duplicates != 1 || res.Buffered != 0 {
		t.Fatalf("marked duplicate: %+v", res)
	}
	if st := b.Stats(); st.Events != 0 || st.Sessions != 0 {
		t.Fatalf("a marked duplicate was admitted: %+v", st)
	}
	js := &JetStreamBackend{purges: make(chan purge, 1)}
	js.queuePurge("s", 0)
	if len(js.purges) != 0 {
		t.Fatal("a purge below sequence 0 (the whole subject) was queued")
	}
}

// A shared stream's evictions are the evicting relay's alone: its index
// evicts (the session cap holds) but queues no purge of the stream, which
// the other relays still read. (TestSharedStreamEvictionIsLocal shows the
// others keep the session; this shows no purge is on its way to it.)
func TestJetStreamSharedEvictionQueuesNoPurge(t *testing.T) {
	t.Parallel()
	js, err := OpenJetStream(context.Background(), JetStreamConfig{Dir: t.TempDir(), Listen: netaddr.FreeAddr(t), MaxSessions: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer js.Close()
	if js.private {
		t.Fatal("a store that listens is private")
	}
	for _, s := range []string{"s1", "s2", "s3"} {
		if res := js.Ingest([]*Message{benchEvent(t, s, 0), benchEvent(t, s, 1)}); res.Err != nil {
			t.Fatal(res.Err)
		}
	}
	if st := js.Stats(); st.Sessions != 2 {
		t.Fatalf("the index holds %d sessions, want its cap of 2", st.Sessions)
	}
	if js.mem.evicted != nil || js.mem.trimmed != nil || len(js.purges) != 0 {
		t.Fatal("a shared store wires its index's evictions to purges of the stream")
	}
}

package relay

import (
	"context"
	"testing"
	"time"
)

// A redelivery the index holds is answered from the index: the stream gets
// one message however often an emitter resends, even past its duplicate
// window.
func TestJetStreamRedeliveryNotRewritten(t *testing.T) {
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
	deadline := time.Now().Add(10 * time.Second)
	for js.purged.Load() < 4 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if got := js.purged.Load(); got != 4 {
		t.Fatalf("%d purges after %d trims, want 4", got, n-20)
	}
	js.stateTime = time.Time{}
	if st := js.streamState(); st.Msgs != 20 {
		t.Fatalf("stream holds %d messages of one session with depth 20, want 20", st.Msgs)
	}
}

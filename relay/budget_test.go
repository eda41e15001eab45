package relay_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/aep-kimi/aep-kimi/relay"
	"github.com/aep-kimi/aep-kimi/relay/wire"
)

// subscribeFrom subscribes with one resume position and returns the replay.
func subscribeFrom(t *testing.T, b relay.Backend, session string, p wire.Position) ([]relay.Exhausted, []replayed) {
	t.Helper()
	c := &collector{}
	cancel, err := b.Subscribe(relay.SubscribeRequest{From: wire.From{Positions: []wire.Resume{{Session: session, Position: p}}}}, c)
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	return c.replay.Exhausted(), drain(t, c.replay)
}

// The byte budget holds the whole buffer under its bytes, trimming the
// oldest admitted events first across sessions, and a consumer resuming from
// a trimmed position is told replay-exhausted, also for a session trimmed to
// nothing.
func TestStoreByteBudget(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, open storeOpener) {
		pad := fmt.Sprintf(`{"pad":%q}`, strings.Repeat("x", 1000))
		size := int64(len(line(t, mkEvent("a", 0, withData(pad)))))
		budget := 10*size + 50 // seq digits vary the size by a few bytes
		b := open(t, 1000, 10, budget)

		// a gets 4 events, then b 8: the budget (10) trims a's two oldest.
		for i := range 4 {
			b.Ingest([]*relay.Message{msg(t, mkEvent("a", int64(i), withData(pad)))})
		}
		for i := range 8 {
			b.Ingest([]*relay.Message{msg(t, mkEvent("b", int64(i), withData(pad)))})
		}
		st := b.Stats()
		if st.Bytes > budget || st.Events != 10 || st.BudgetTrims != 2 || st.MaxBytes != budget {
			t.Fatalf("stats %+v, budget %d (event %d bytes)", st, budget, size)
		}
		ex, got := subscribeFrom(t, b, "a", wire.Position{Seq: 0})
		if len(ex) != 1 || ex[0].Earliest != (wire.Position{Seq: 2}) || !slicesEqual(seqs(got), []int64{2, 3}) {
			t.Fatalf("a from 0: exhausted %+v, replay %v", ex, seqs(got))
		}
		if ex, got := subscribeFrom(t, b, "a", wire.Position{Seq: 1}); len(ex) != 0 || !slicesEqual(seqs(got), []int64{2, 3}) {
			t.Fatalf("a from 1 (nothing after it trimmed): exhausted %+v, replay %v", ex, seqs(got))
		}

		// Four more on b trim the rest of a, then b's own oldest two.
		for i := 8; i < 12; i++ {
			b.Ingest([]*relay.Message{msg(t, mkEvent("b", int64(i), withData(pad)))})
		}
		if st := b.Stats(); st.Bytes > budget || st.Events != 10 || st.Sessions != 2 {
			t.Fatalf("stats %+v", st)
		}
		ex, got = subscribeFrom(t, b, "a", wire.Position{Seq: 2})
		if len(ex) != 1 || ex[0].Session != "a" || len(got) != 0 {
			t.Fatalf("a trimmed to nothing: exhausted %+v, replay %v", ex, seqs(got))
		}
		if ex, _ := subscribeFrom(t, b, "a", wire.Position{Seq: 3}); len(ex) != 0 {
			t.Fatalf("a from its last trimmed position: exhausted %+v", ex)
		}
		ex, got = subscribeFrom(t, b, "b", wire.Position{Seq: 0})
		if len(ex) != 1 || ex[0].Earliest != (wire.Position{Seq: 2}) || len(got) != 10 {
			t.Fatalf("b from 0: exhausted %+v, replay %v", ex, seqs(got))
		}
	})
}

func slicesEqual(a, b []int64) bool { return fmt.Sprint(a) == fmt.Sprint(b) }

// A byte budget that cannot hold one largest event is a configuration error.
func TestConfigBufferBytesHoldsOneEvent(t *testing.T) {
	t.Parallel()
	if _, err := relay.NewServer(relay.Config{MaxBody: 1 << 20, BufferBytes: 1 << 10}); err == nil {
		t.Fatal("BufferBytes below MaxBody accepted")
	}
	if _, err := relay.NewServer(relay.Config{BufferBytes: -1}); err == nil {
		t.Fatal("negative BufferBytes accepted")
	}
}

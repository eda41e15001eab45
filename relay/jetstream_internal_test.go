package relay

import (
	"context"
	"testing"
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

package relay_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/aep-kimi/aep-kimi/relay"
)

// Reopening a JetStream store rebuilds the index as it was: (epoch, seq)
// order whatever the arrival order, commands in their place, the session
// cap applied, and admission dedupe still in force.
func TestJetStreamReopen(t *testing.T) {
	dir := t.TempDir()
	first := openJetStreamIn(t, dir, 5, 3, 0)
	cmd := command("control.pause", "s", `{}`)
	late := mkEvent("s", 1)
	batch := []*relay.Message{msg(t, mkEvent("s", 0)), msg(t, mkEvent("s", 3)), msg(t, mkEvent("s", 2)), msg(t, cmd), msg(t, late)}
	for _, name := range []string{"a", "b", "c"} {
		batch = append(batch, msg(t, mkEvent(name, 7)))
	}
	first.Ingest(batch) // four sessions: s is evicted by c
	six := mkEvent("s", 6)
	first.Ingest([]*relay.Message{msg(t, mkEvent("s", 4)), msg(t, six), msg(t, mkEvent("s", 5))})
	want := replayAll(t, first, "")
	wantSessions := sessionNames(first)
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}

	again := openJetStreamIn(t, dir, 5, 3, 0)
	if got := replayAll(t, again, ""); !slices.Equal(got, want) {
		t.Fatalf("after reopening:\n got %+v\nwant %+v", got, want)
	}
	if got := sessionNames(again); !slices.Equal(got, wantSessions) {
		t.Fatalf("sessions after reopening %v, want %v", got, wantSessions)
	}
	if res := again.Ingest([]*relay.Message{msg(t, six)}); res.Duplicates != 1 || res.Buffered != 0 {
		t.Fatalf("ingest after reopening: %+v", res)
	}
}

func sessionNames(b relay.Backend) []string {
	var out []string
	for _, s := range b.Sessions() {
		out = append(out, s.Session)
	}
	return out
}

// Two relays never open one embedded store: the second is refused with a
// clear error, and can open it once the first has closed.
func TestJetStreamStoreLocked(t *testing.T) {
	dir := t.TempDir()
	first := openJetStreamIn(t, dir, 0, 0, 0)
	if _, err := relay.OpenJetStream(context.Background(), relay.JetStreamConfig{Dir: dir}); err == nil || !strings.Contains(err.Error(), "another relay is using") {
		t.Fatalf("second open of one store: %v", err)
	}
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	openJetStreamIn(t, dir, 0, 0, 0)
}

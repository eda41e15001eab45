package relay_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"golang.org/x/sync/errgroup"

	"github.com/aep-kimi/aep-kimi/aep"
	"github.com/aep-kimi/aep-kimi/internal/testkit/relaytest"
	"github.com/aep-kimi/aep-kimi/relay"
)

// Reopening a JetStream store rebuilds the index as it was: (epoch, seq)
// order whatever the arrival order, commands in their place, the session
// cap applied, and admission dedupe still in force.
func TestJetStreamReopen(t *testing.T) {
	t.Parallel()
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
	t.Parallel()
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

// Batches ingested at once by several emitters are admitted in the order
// the stream stored them, so a reopened store rebuilds exactly the history
// the live one served: also for events whose strings no index header can
// carry (parsed on rebuild) and out-of-order positions.
func TestJetStreamConcurrentIngestReopens(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	first := openJetStreamIn(t, dir, 50, 20, 0)
	var g errgroup.Group
	for w := range 4 {
		g.Go(func() error {
			rng := rand.New(rand.NewPCG(uint64(w), 7))
			for i := range 40 {
				var batch []*relay.Message
				for range 1 + rng.IntN(16) {
					session := fmt.Sprintf("w%d-%d", w, rng.IntN(3))
					if rng.IntN(4) == 0 {
						session = "shared"
					}
					e := mkEvent(session, int64(rng.IntN(80)))
					switch rng.IntN(8) {
					case 0:
						e.ID = "an id with spaces " + aep.NewID()
					case 1:
						e.Source = "aep://hôte/agent/tester/session/" + session
					case 2:
						e = command("control.pause", session, `{}`)
					}
					m, err := relay.NewMessage(e, time.Now())
					if err != nil {
						return err
					}
					batch = append(batch, m)
				}
				if res := first.Ingest(batch); res.Err != nil {
					return fmt.Errorf("worker %d batch %d: %w", w, i, res.Err)
				}
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
	want := replayAll(t, first, "")
	if len(want) < 100 {
		t.Fatalf("only %d events held", len(want))
	}
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	again := openJetStreamIn(t, dir, 50, 20, 0)
	if got := replayAll(t, again, ""); !slices.Equal(got, want) {
		for i := range min(len(got), len(want)) {
			if got[i] != want[i] {
				t.Logf("first difference at %d: got %+v want %+v", i, got[max(i-1, 0):min(i+3, len(got))], want[max(i-1, 0):min(i+3, len(want))])
				break
			}
		}
		t.Fatalf("after reopening %d events, want %d", len(got), len(want))
	}
}

// The store refuses a body limit above what a stream message carries, and
// a relay on a NATS that takes smaller messages than AEP_MAX_BODY refuses
// larger events with payload-too-large on both bindings instead of
// accepting what the store cannot keep; smaller ones pass.
func TestJetStreamEventLimit(t *testing.T) {
	t.Parallel()
	if _, err := relay.OpenJetStream(context.Background(), relay.JetStreamConfig{Dir: t.TempDir(), MaxBody: relay.MaxJetStreamEvent + 1}); err == nil || !strings.Contains(err.Error(), "AEP_MAX_BODY") {
		t.Fatalf("open with a body limit above the store's: %v", err)
	}
	ns := runNATSWith(t, "small", func(o *server.Options) { o.MaxPayload = 256 << 10 })
	b, err := relay.OpenJetStream(context.Background(), relay.JetStreamConfig{URL: ns.ClientURL()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	if got := b.MaxEventBytes(); got <= 0 || got >= 256<<10 {
		t.Fatalf("MaxEventBytes %d on a server taking 256 KiB", got)
	}
	srv := relaytest.RunServer(t, relay.Config{Token: testToken, Backend: b})
	big := mkEvent("s", 1, withData(`{"blob":"`+strings.Repeat("x", 300<<10)+`"}`))
	small := mkEvent("s", 2, withData(`{"blob":"`+strings.Repeat("x", 100<<10)+`"}`))
	if r := post(t, srv, big); r.status != http.StatusRequestEntityTooLarge || r.json(t)["error"] != "payload-too-large" {
		t.Fatalf("POST of a 300 KiB event: %d %s", r.status, r.body)
	}
	if r := post(t, srv, small, mkEvent("s", 3), big); r.status != http.StatusRequestEntityTooLarge {
		t.Fatalf("POST of a batch with a 300 KiB event: %d %s", r.status, r.body)
	}
	mustPost(t, srv, small)
	w := helloWS(t, srv, "emitter", nil, "tester")
	w.send(t, big)
	if f := w.next(t); f.str("type") != "error" || f.str("code") != "payload-too-large" {
		t.Fatalf("socket frame of a 300 KiB event answered %s", f.raw)
	}
	if st := b.Stats(); st.Events != 1 {
		t.Fatalf("store holds %d events, want only the small one", st.Events)
	}
}

// A session far past its depth whose events arrive out of order comes back
// from a reopen with the very window it had: the stream keeps everything
// from the session's lowest held event on, whatever order the held events
// arrived in.
func TestJetStreamOutOfOrderPastDepthReopens(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	first := openJetStreamIn(t, dir, 50, 0, 0)
	rng := rand.New(rand.NewPCG(3, 4))
	const n = 3000
	order := make([]int64, n)
	for i := range order {
		order[i] = int64(i)
	}
	for lo := 0; lo < n; lo += 200 { // shuffled within windows of 200
		w := order[lo:min(lo+200, n)]
		rng.Shuffle(len(w), func(i, j int) { w[i], w[j] = w[j], w[i] })
	}
	for lo := 0; lo < n; lo += 10 {
		var batch []*relay.Message
		for _, seq := range order[lo:min(lo+10, n)] {
			batch = append(batch, msg(t, mkEvent("s", seq)))
		}
		if res := first.Ingest(batch); res.Err != nil {
			t.Fatal(res.Err)
		}
	}
	want := replayAll(t, first, "")
	if len(want) != 50 || want[0].pos.Seq != n-50 {
		t.Fatalf("held %d events from seq %d, want the last 50", len(want), want[0].pos.Seq)
	}
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	again := openJetStreamIn(t, dir, 50, 0, 0)
	if got := replayAll(t, again, ""); !slices.Equal(got, want) {
		t.Fatalf("after reopening:\n got %+v\nwant %+v", got, want)
	}
}

// /metrics of a JetStream relay carries the store's figures: the stream's
// size, what the last open rebuilt, and the routing and purge counters.
func TestJetStreamMetrics(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	first := openJetStreamIn(t, dir, 0, 0, 0)
	first.Ingest([]*relay.Message{msg(t, mkEvent("s", 0)), msg(t, mkEvent("s", 1)), msg(t, mkEvent("s", 2))})
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	srv := relaytest.RunServer(t, relay.Config{Token: testToken, Backend: openJetStreamIn(t, dir, 0, 0, 0)})
	mustPost(t, srv, mkEvent("s", 3))
	body := string(do(t, srv, http.MethodGet, "/metrics", nil, nil).body)
	for _, want := range []string{
		"aepkimi_relay_store_stream_messages 4",
		"aepkimi_relay_store_rebuild_events 3",
		"aepkimi_relay_store_publish_errors_total 0",
		"aepkimi_relay_store_purges_total 0",
		"aepkimi_relay_store_stream_last_sequence 4",
	} {
		if !strings.Contains(body, want+"\n") {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}

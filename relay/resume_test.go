package relay_test

import (
	"fmt"
	"math/rand/v2"
	"net/url"
	"strconv"
	"testing"

	"github.com/aep-kimi/aep-kimi/aep"
	"github.com/aep-kimi/aep-kimi/internal/testkit/relaytest"
	"github.com/aep-kimi/aep-kimi/relay"
	"github.com/aep-kimi/aep-kimi/relay/wire"
)

// The resume property (AEP-0003 §5, §7): a consumer that disconnects after
// seeing k events and resumes from its last position receives exactly the
// later events still held, in order, and a replay-exhausted marker exactly
// when events after its position were evicted. Checked over random buffer
// depths and traffic, on both consuming bindings.
func TestResumeProperty(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(7, 11))
	// Under -short only the first round of each kind (binding, marker or
	// not) runs; CI runs all 40.
	kinds := map[[2]bool]bool{}
	for iter := range 40 {
		depth := 1 + rng.IntN(12)
		before := 1 + rng.IntN(25)
		seen := 1 + rng.IntN(before)
		after := rng.IntN(25)
		epoch := int64(rng.IntN(3))
		viaWS := iter%2 == 1
		kind := [2]bool{viaWS, before+after-depth > seen}
		if testing.Short() && kinds[kind] {
			continue
		}
		kinds[kind] = true
		name := fmt.Sprintf("depth=%d before=%d seen=%d after=%d ws=%v", depth, before, seen, after, viaWS)
		t.Run(name, func(t *testing.T) {
			srv := relaytest.RunServer(t, relay.Config{Buffer: depth})
			session := "s-prop-" + strconv.Itoa(iter)
			evs := seqEvents(session, 0, int64(before+after), withEpoch(epoch))
			// The consumer is live for the first events and stops after seen.
			live := openSSE(t, srv, url.Values{"filter": {`{"session":"` + session + `"}`}}, nil)
			mustPost(t, srv, evs[:before]...)
			got := live.events(t, seen)
			last := got[len(got)-1]
			mustPost(t, srv, evs[before:]...)

			total := before + after
			firstHeld := max(0, total-depth)
			lastSeq := *last.Seq
			var want []int64
			for s := max(lastSeq+1, int64(firstHeld)); s < int64(total); s++ {
				want = append(want, s)
			}
			wantMarker := int64(firstHeld) > lastSeq+1

			var marker string
			var replay []int64
			if viaWS {
				w := helloWS(t, srv, "consumer", nil, "c")
				w.send(t, subscribeFrame("r", map[string]any{"session": session}, map[string]any{
					"from": []any{map[string]any{"session": session, "epoch": epoch, "seq": lastSeq}}}))
				w.expect(t, func(f wsFrame) bool { return f.str("type") == "subscribed" })
				if wantMarker {
					f := w.next(t)
					e, _ := f.m["earliest"].(map[string]any)
					marker = fmt.Sprintf("%s %v:%v", f.str("session"), e["epoch"], e["seq"])
				}
				for _, f := range w.eventFrames(t, len(want)) {
					ev, _ := aep.ParseEvent(f.raw)
					replay = append(replay, *ev.Seq)
				}
				w.quiet(t, 30e6)
			} else {
				s := openSSE(t, srv, url.Values{"live": {"0"}},
					map[string]string{"Last-Event-ID": wire.EventID(session, wire.Position{Epoch: epoch, Seq: lastSeq})})
				for it := range s.items {
					if it.IsComment {
						if len(it.Comment) > 17 && it.Comment[:17] == "replay-exhausted " {
							marker = it.Comment[17:]
						}
						continue
					}
					ev, _ := aep.ParseEvent([]byte(it.Data))
					replay = append(replay, *ev.Seq)
				}
			}
			if fmt.Sprint(replay) != fmt.Sprint(want) {
				t.Fatalf("resume after seq %d replayed %v, want %v", lastSeq, replay, want)
			}
			wantText := ""
			if wantMarker {
				wantText = fmt.Sprintf("%s %d:%d", session, epoch, firstHeld)
			}
			if marker != wantText {
				t.Fatalf("marker %q, want %q", marker, wantText)
			}
		})
	}
}

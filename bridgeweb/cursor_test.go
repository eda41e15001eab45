package bridgeweb

import (
	"fmt"
	"strings"
	"testing"

	"github.com/aep-kimi/aep-kimi/mapping"
)

func fr(epoch string, seq int64) mapping.Frame {
	return mapping.Frame{Type: "x", SessionID: "s", Epoch: epoch, Seq: seq, HasSeq: true}
}

// render writes steps as "A3" for a frame and "gap(reason 4-5)" for a gap.
func render(steps []step) string {
	var out []string
	for _, s := range steps {
		if s.gap != nil {
			g := s.gap
			out = append(out, fmt.Sprintf("gap(%s %d-%d %s>%s@%d)", g.reason, g.from, g.to, g.epoch, g.nextEpoch, g.at))
			continue
		}
		out = append(out, fmt.Sprintf("%s%d", s.frame.Epoch, s.frame.Seq))
	}
	return strings.Join(out, " ")
}

func TestCursor(t *testing.T) {
	t.Parallel()
	type op struct {
		offer  *mapping.Frame
		settle bool
		sync   bool
		resync *struct {
			reason string
			seq    int64
			epoch  string
		}
		want string // rendered steps, or "dup"
	}
	offer := func(epoch string, seq int64, want string) op {
		f := fr(epoch, seq)
		return op{offer: &f, want: want}
	}
	resync := func(reason string, seq int64, epoch, want string) op {
		return op{resync: &struct {
			reason string
			seq    int64
			epoch  string
		}{reason, seq, epoch}, want: want}
	}
	cases := []struct {
		name  string
		start *mapping.Frame // set the cursor here first
		ops   []op
	}{
		{name: "first sight is taken, then in order", ops: []op{
			offer("A", 7, "A7"), offer("A", 8, "A8"), offer("A", 9, "A9"),
		}},
		{name: "duplicates are dropped", ops: []op{
			offer("A", 1, "A1"), offer("A", 2, "A2"), offer("A", 2, "dup"), offer("A", 1, "dup"), offer("A", 3, "A3"),
		}},
		{name: "a replay after reconnect overlaps the live stream", start: ptr(fr("A", 4)), ops: []op{
			{sync: true},
			// Live frames dispatched while the replay was being computed
			// arrive first; they wait for the hole to fill.
			offer("A", 7, ""), offer("A", 8, ""),
			// The replay: 5..8, the last two already held.
			offer("A", 5, "A5"), offer("A", 6, "A6 A7 A8"), offer("A", 7, "dup"), offer("A", 8, "dup"),
			{settle: true, want: ""},
			offer("A", 9, "A9"),
		}},
		{name: "a hole the replay did not fill is a gap at settle", start: ptr(fr("A", 4)), ops: []op{
			{sync: true},
			offer("A", 5, "A5"), offer("A", 8, ""), offer("A", 9, ""),
			{settle: true, want: "gap(seq_jump 6-7 A>A@7) A8 A9"},
			offer("A", 10, "A10"),
		}},
		{name: "a hole while live is final at once", start: ptr(fr("A", 4)), ops: []op{
			offer("A", 5, "A5"), offer("A", 9, "gap(seq_jump 6-8 A>A@8) A9"), offer("A", 6, "dup"),
		}},
		{name: "a rotated journal (new epoch) is a gap of unknown extent", start: ptr(fr("A", 40)), ops: []op{
			offer("B", 1, "gap(epoch_changed 41--1 A>B@0) B1"), offer("B", 2, "B2"), offer("A", 41, "gap(epoch_changed 3--1 B>A@40) A41"),
		}},
		{name: "resync buffer_overflow: live from the server's position", start: ptr(fr("A", 10)), ops: []op{
			{sync: true},
			resync("buffer_overflow", 2500, "A", "gap(buffer_overflow 11-2500 A>A@2500)"),
			{settle: true, want: ""},
			offer("A", 2500, "dup"), offer("A", 2501, "A2501"),
		}},
		{name: "resync epoch_changed", start: ptr(fr("A", 10)), ops: []op{
			resync("epoch_changed", 3, "B", "gap(epoch_changed 11--1 A>B@3)"),
			offer("B", 4, "B4"),
		}},
		{name: "resync at our own position is no gap", start: ptr(fr("A", 10)), ops: []op{
			resync("buffer_overflow", 10, "A", ""), offer("A", 11, "A11"),
		}},
		{name: "held frames past a resync position come out at settle", start: ptr(fr("A", 10)), ops: []op{
			{sync: true},
			offer("A", 3000, ""),
			resync("buffer_overflow", 2999, "A", "gap(buffer_overflow 11-2999 A>A@2999)"),
			{settle: true, want: "A3000"},
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var cur cursor
			if c.start != nil {
				cur.set(c.start.Epoch, c.start.Seq)
			}
			for i, o := range c.ops {
				var got string
				switch {
				case o.sync:
					cur.syncing = true
					continue
				case o.settle:
					got = render(cur.settle())
				case o.resync != nil:
					if g := cur.resync(o.resync.reason, o.resync.seq, o.resync.epoch); g != nil {
						got = render([]step{{gap: g}})
					}
				default:
					steps, dup := cur.offer(*o.offer)
					got = render(steps)
					if dup {
						got = "dup"
					}
				}
				if got != o.want {
					t.Fatalf("op %d: got %q, want %q", i, got, o.want)
				}
			}
		})
	}
}

func TestCursorHoldIsBounded(t *testing.T) {
	t.Parallel()
	var cur cursor
	cur.set("A", 0)
	cur.syncing = true
	for i := int64(2); i < maxHeld+2; i++ {
		if steps, _ := cur.offer(fr("A", i)); len(steps) != 0 {
			t.Fatalf("frame %d released early", i)
		}
	}
	// The hold is full: the hole is final, and nothing held is lost.
	steps, _ := cur.offer(fr("A", maxHeld+5))
	frames, gaps := 0, 0
	for _, s := range steps {
		if s.gap != nil {
			gaps++
		} else {
			frames++
		}
	}
	if frames != maxHeld+1 || gaps != 2 || steps[0].gap == nil || steps[0].gap.from != 1 || steps[0].gap.to != 1 {
		t.Fatalf("a full hold released %d frames and %d gaps (first %s)", frames, gaps, render(steps[:1]))
	}
	if cur.seq != maxHeld+5 || len(cur.held) != 0 {
		t.Errorf("cursor at %d with %d held", cur.seq, len(cur.held))
	}
}

func ptr[T any](v T) *T { return &v }

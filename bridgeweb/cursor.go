package bridgeweb

import (
	"sort"

	"github.com/aep-kimi/aep-kimi/mapping"
)

// Gap reasons (data.reason of x.kimi-code.web.gap). The first three are the
// kap-server's own resync_required reasons.
const (
	GapBufferOverflow   = "buffer_overflow"
	GapSessionRecreated = "session_recreated"
	GapEpochChanged     = "epoch_changed"
	// GapSeqJump: a frame arrived past a hole no replay filled.
	GapSeqJump = "seq_jump"
)

// maxHeld bounds the frames parked ahead of a hole while a replay runs: twice
// the kap-server's own replay buffer (1000).
const maxHeld = 2000

// gap is a range of kap frames the bridge will never see.
type gap struct {
	reason string
	// from and to are the missing seqs, inclusive; from > to means the
	// extent is unknown (a journal rotated under us).
	from, to int64
	// epoch is the journal epoch the missing frames belonged to.
	epoch string
	// nextEpoch is the journal epoch the stream continues in.
	nextEpoch string
	// at is the position once the gap is passed: the bridge records it so
	// a restart resumes after the gap, not before it.
	at int64
}

// cursor is one kap stream's position: its journal epoch and the last
// durable seq taken, with the frames that arrived past a hole while a replay
// may still fill it. It dedupes on (epoch, seq) so a reconnect, a replay and
// the live stream overlapping never map a frame twice, and it reports every
// hole it cannot fill as a gap instead of pretending. Pure: no I/O.
type cursor struct {
	epoch string
	seq   int64
	known bool
	// syncing is set while a subscribe with this cursor awaits its ack: the
	// replay it asked for may still deliver what is missing.
	syncing bool
	held    []mapping.Frame
}

// position returns the cursor for a subscribe, ok false when unknown.
func (c *cursor) position() (seq int64, epoch string, ok bool) {
	return c.seq, c.epoch, c.known
}

// set makes the cursor known at (epoch, seq) without reporting anything:
// the bridge has decided to start there.
func (c *cursor) set(epoch string, seq int64) {
	c.epoch, c.seq, c.known = epoch, seq, true
	c.dropHeldThrough(seq)
}

// step is one thing the cursor hands on, in order: a frame ready to map, or
// a gap the bridge must report before the frames after it.
type step struct {
	frame *mapping.Frame
	gap   *gap
}

// offer takes one durable frame and returns, in order, the frames now ready
// to map and any gap found on the way. dup reports a frame already taken.
func (c *cursor) offer(f mapping.Frame) (steps []step, dup bool) {
	switch {
	case !c.known:
		c.epoch, c.seq, c.known = f.Epoch, f.Seq, true
		return []step{{frame: &f}}, false
	case f.Epoch != c.epoch:
		// The journal rotated: what followed our position in the old
		// epoch, and what preceded this frame in the new one, is gone.
		g := gap{reason: GapEpochChanged, from: c.seq + 1, to: -1, epoch: c.epoch, nextEpoch: f.Epoch, at: f.Seq - 1}
		c.epoch, c.seq, c.held = f.Epoch, f.Seq, nil
		return []step{{gap: &g}, {frame: &f}}, false
	case f.Seq <= c.seq:
		return nil, true
	case f.Seq == c.seq+1:
		c.seq = f.Seq
		return c.drain([]step{{frame: &f}}), false
	}
	// A hole before this frame: while a replay is on its way it may fill
	// it, so park the frame; otherwise the hole is final.
	if c.syncing && len(c.held) < maxHeld {
		if c.isHeld(f.Seq) {
			return nil, true
		}
		c.held = append(c.held, f)
		sort.Slice(c.held, func(i, j int) bool { return c.held[i].Seq < c.held[j].Seq })
		return nil, false
	}
	// The hole is final. Frames parked earlier (a full hold) go first.
	steps = c.flushHeld()
	if f.Seq <= c.seq {
		return steps, len(steps) == 0
	}
	if f.Seq > c.seq+1 {
		steps = append(steps, step{gap: &gap{reason: GapSeqJump, from: c.seq + 1, to: f.Seq - 1, epoch: c.epoch, nextEpoch: c.epoch, at: f.Seq - 1}})
	}
	c.seq = f.Seq
	return append(steps, step{frame: &f}), false
}

// settle ends a replay: the subscribe was acknowledged, so whatever it was
// going to deliver has arrived. Held frames past holes that are still open
// come out after the gaps they cross.
func (c *cursor) settle() []step {
	c.syncing = false
	return c.flushHeld()
}

// flushHeld releases every held frame in order, with a gap before each one
// that follows a hole.
func (c *cursor) flushHeld() []step {
	var steps []step
	for len(c.held) > 0 {
		f := c.held[0]
		c.held = c.held[1:]
		if f.Seq <= c.seq {
			continue
		}
		if f.Seq > c.seq+1 {
			steps = append(steps, step{gap: &gap{reason: GapSeqJump, from: c.seq + 1, to: f.Seq - 1, epoch: c.epoch, nextEpoch: c.epoch, at: f.Seq - 1}})
		}
		c.seq = f.Seq
		steps = append(steps, step{frame: &f})
	}
	return steps
}

// resync applies a kap resync demand: the frames between our position and
// currentSeq cannot be replayed, the stream continues live from currentSeq.
func (c *cursor) resync(reason string, currentSeq int64, epoch string) *gap {
	if epoch == "" {
		epoch = c.epoch
	}
	var g *gap
	switch {
	case !c.known:
	case epoch != c.epoch:
		g = &gap{reason: reason, from: c.seq + 1, to: -1, epoch: c.epoch, nextEpoch: epoch, at: max(currentSeq, 0)}
	case currentSeq > c.seq:
		g = &gap{reason: reason, from: c.seq + 1, to: currentSeq, epoch: c.epoch, nextEpoch: epoch, at: currentSeq}
	}
	if epoch != c.epoch {
		c.held = nil
	}
	c.epoch, c.seq, c.known = epoch, max(currentSeq, 0), true
	c.dropHeldThrough(c.seq)
	return g
}

func (c *cursor) drain(steps []step) []step {
	for len(c.held) > 0 && c.held[0].Seq <= c.seq+1 {
		f := c.held[0]
		c.held = c.held[1:]
		if f.Seq == c.seq+1 {
			c.seq = f.Seq
			steps = append(steps, step{frame: &f})
		}
	}
	return steps
}

func (c *cursor) isHeld(seq int64) bool {
	for _, h := range c.held {
		if h.Seq == seq {
			return true
		}
	}
	return false
}

func (c *cursor) dropHeldThrough(seq int64) {
	i := 0
	for i < len(c.held) && c.held[i].Seq <= seq {
		i++
	}
	c.held = c.held[i:]
}

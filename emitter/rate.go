package emitter

import (
	"fmt"

	"github.com/aep-kimi/aep-kimi/aep"
	"github.com/aep-kimi/aep-kimi/internal/journal"
	"github.com/aep-kimi/aep-kimi/mapping"
)

// RatedRunTail bounds how much of a session's log is read to find the run
// a rating names: a run further back is not rated.
const RatedRunTail = 16 << 20

// decideRate judges a person's rating of a run (mapping.TypeRate), the
// same for every source: the run must be one of the session's and have
// ended, which only its log says for sure (a session recovered after a
// restart knows little else). Accepted, the feedback follows the ack in
// the session, caused by the run's terminal (AEP-0009 §2), naming the
// person the relay stamped on the command, written with the ack: a rating
// is acknowledged only once its feedback is on the disk. Callers hold s's
// lock.
func (c *Core[S]) decideRate(s S, cmd *aep.Event) Verdict {
	r, err := mapping.RatingOf(cmd)
	if err != nil {
		return Reject("invalid", err.Error())
	}
	if cmd.Run == "" {
		return Reject("invalid", "a rating names the run it rates (the command's run)")
	}
	var terminal *aep.Event
	seen := false
	if _, err := journal.Replay(s.Core().Stream().Log().Path(), RatedRunTail, func(ev *aep.Event) {
		if ev.Run != cmd.Run {
			return
		}
		seen = true
		if terminal == nil && aep.IsRunTerminal(ev.Type) {
			terminal = ev
		}
	}); err != nil {
		c.log.Warn("rating: the session log could not be read", "session", Clip(cmd.Session), "err", err)
		return Reject("refused", "the session's log could not be read to find the run")
	}
	switch {
	case !seen:
		return Reject("invalid", fmt.Sprintf("run %q is not one of this session's recent runs", Clip(cmd.Run)))
	case terminal == nil:
		return Reject("invalid", fmt.Sprintf("run %q has not finished", Clip(cmd.Run)))
	}
	by, surface := mapping.CommandSender(cmd)
	ev := mapping.FeedbackReceived(r, by, surface, c.cfg.Posture)
	return Verdict{Record: []journal.Entry{{Event: ev, Run: cmd.Run, Cause: terminal.ID}}}
}

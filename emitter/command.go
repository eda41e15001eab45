package emitter

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/aep-kimi/aep-kimi/aep"
	"github.com/aep-kimi/aep-kimi/internal/journal"
	"github.com/aep-kimi/aep-kimi/internal/ledger"
	"github.com/aep-kimi/aep-kimi/mapping"
)

// agent is the agent every source speaks for.
const agent = mapping.Agent

// Verdict is a source's decision on one command: accepted (no Reason), or
// rejected with an AEP-0004 reason and a detail.
type Verdict struct {
	Reason, Detail string
	// Apply carries out an accepted command once its ack is on the stream,
	// under the session's lock, at the ack's time: the command's outcome
	// always follows its ack. Nil when there is nothing left to do.
	Apply func(at time.Time)
	// Record are events that go on the stream right after the ack, in one
	// durable write with it: both are on the disk, or neither is and the
	// command is not acknowledged (a rating's feedback). Their At is the
	// ack's.
	Record []journal.Entry
}

// Accept is an accepted command, apply (maybe nil) to run after the ack.
func Accept(apply func(at time.Time)) Verdict { return Verdict{Apply: apply} }

// Reject is a command rejected with reason and detail.
func Reject(reason, detail string) Verdict { return Verdict{Reason: reason, Detail: detail} }

// HandleCommand takes one control command routed by the relay. Every
// command gets exactly one ack (control.accepted, or control.rejected with
// its reason) in the command's session, caused by the command; a
// redelivered one is answered with the recorded ack, byte-identical, and
// never decided twice.
//
// The order is the protocol:
//
//  1. Claim the command in the ledger, before anything else. A claim is
//     atomic: of two racing deliveries exactly one goes on, and a
//     duplicate costs a ledger lookup, never a session (looking one up
//     builds it and reads its log on first touch, and past MaxSessions
//     evicts another). Looking the session up first and claiming after
//     lets racing deliveries all do that work.
//  2. Look the session up. A session this source does not publish gets no
//     ack (it is not this source's to write into), and the claim is
//     released: kept pending, it would swallow every later delivery of the
//     command as a redelivery, with nothing ever answering any of them.
//  3. Decide, emit the ack and record it, then apply, all under the
//     session's lock, so the command's outcome follows its ack on the
//     stream. An ack the log cannot take (a full disk) is not published
//     and nothing is applied: the claim is released for a redelivery.
func (c *Core[S]) HandleCommand(ctx context.Context, cmd *aep.Event) {
	if cmd == nil || cmd.Session == "" {
		return // no session to answer in
	}
	label := c.commandLabel(cmd.Type)
	key := ledger.KeyOf(cmd)
	if !c.cmds.Claim(key) {
		// Redelivered: the recorded ack again (same event, same
		// position); while the decision is pending, the one ack to come
		// answers every delivery.
		if ack, _ := c.cmds.Get(key); ack != nil && c.cfg.Publisher != nil {
			c.cfg.Publisher.Publish(ack)
		}
		c.metrics.commands.WithLabelValues(label, "redelivered").Inc()
		return
	}
	sk, ok := c.src.Key(cmd.Session)
	if !ok {
		c.cmds.Release(key)
		c.log.Warn("command for a session this "+c.spec.Name+" does not publish", "type", Clip(cmd.Type), "session", Clip(cmd.Session))
		return
	}
	s := c.Lock(sk)
	defer s.Core().Unlock()
	at := c.cfg.Now()
	v := c.decide(ctx, s, cmd)
	m := mapping.ControlAccepted(c.cfg.Posture)
	outcome := "accepted"
	if v.Reason != "" {
		m = mapping.ControlRejected(v.Reason, v.Detail, c.cfg.Posture)
		outcome = "rejected_" + v.Reason
	}
	ack := c.ack(s, journal.Entry{Event: m, At: at, Cause: cmd.ID, Durable: true}, v)
	if ack == nil {
		// Not on the disk (a full disk), so not acknowledged and not
		// carried out: a redelivery decides again.
		c.cmds.Release(key)
		c.metrics.commands.WithLabelValues(label, "not_durable").Inc()
		c.log.Warn("control command not acknowledged: its ack could not be made durable", "type", label, "id", Clip(cmd.ID), "session", Clip(cmd.Session))
		return
	}
	c.cmds.Put(key, ack)
	c.metrics.commands.WithLabelValues(label, outcome).Inc()
	c.log.Info("control command", "type", label, "id", Clip(cmd.ID), "session", Clip(cmd.Session), "outcome", outcome)
	if v.Reason == "" && v.Apply != nil {
		v.Apply(at)
	}
}

// ack puts a command's ack on s's stream, durable, with what an accepted
// verdict records alongside in the same write. Nil when it is not on the
// disk; then none of it is published. Callers hold s's lock.
func (c *Core[S]) ack(s S, e journal.Entry, v Verdict) *aep.Event {
	if v.Reason != "" || len(v.Record) == 0 {
		return c.src.Ack(s, e)
	}
	st := s.Core().Stream()
	st.Begin()
	ack := c.src.Ack(s, e)
	for _, r := range v.Record {
		r.At, r.Durable = e.At, true
		if ack != nil && c.src.Ack(s, r) == nil {
			ack = nil
		}
	}
	if ack == nil {
		st.Abort()
		return nil
	}
	if err := st.Commit(); err != nil {
		return nil
	}
	return ack
}

// decide runs the checks every source makes, in AEP-0004's order (the
// binding, the declared types, the command's own validity), then the
// source's own; a rating is every source's alike, the core's to judge.
func (c *Core[S]) decide(ctx context.Context, s S, cmd *aep.Event) Verdict {
	switch {
	case !c.spec.Authenticated:
		return Reject("unauthorized", "control needs an authenticated relay binding (AEP_TOKEN)")
	case !slices.Contains(c.spec.Accepts, cmd.Type):
		return Reject("unsupported", c.spec.Unsupported(cmd.Type))
	}
	if err := aep.Validate(cmd); err != nil {
		return Reject("invalid", err.Error())
	}
	if cmd.Type == mapping.TypeRate {
		return c.decideRate(s, cmd)
	}
	return c.src.Decide(ctx, s, cmd)
}

// commandLabel keeps the type label of the commands metric to the types the
// source knows.
func (c *Core[S]) commandLabel(t string) string {
	if slices.Contains(c.spec.Commands, t) {
		return t
	}
	return "other"
}

// Clip keeps a string from outside (a sender's, a vendor's) short and
// printable in a log line.
func Clip(s string) string {
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return strings.Map(func(r rune) rune {
		if r < 0x20 {
			return '?'
		}
		return r
	}, s)
}

package adapter

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/aep-kimi/aep-kimi/aep"
	"github.com/aep-kimi/aep-kimi/emitter"
	"github.com/aep-kimi/aep-kimi/mapping"
)

// Command types this adapter can accept (AEP-0004 §5 and the vendor-scoped
// steering verb).
const (
	CmdRespond  = "control.attention.respond"
	CmdInstruct = "x.kimi-code.control.instruct"
)

// Gate options: the vendor's own four-way choice (allow once, allow for the
// session, deny, cancel). On the hook surface an allow is only "no objection":
// Kimi's own permission flow still runs. A fresh list each call.
func gateOptions() []aep.Option {
	return []aep.Option{
		{ID: "allow", Label: "Allow"},
		{ID: "allow_session", Label: "Allow for this session"},
		{ID: "deny", Label: "Deny"},
		{ID: "cancel", Label: "Cancel"},
	}
}

// AcceptsFor lists the command types a control configuration accepts, for
// the hello an emitter declares before the adapter exists: ratings on any
// authenticated binding, the gate's answers and instructions as enabled.
func AcceptsFor(c Control) []string {
	if !c.Authenticated {
		return nil
	}
	var out []string
	if c.Gate {
		out = append(out, CmdRespond)
	}
	if c.Instruct {
		out = append(out, CmdInstruct)
	}
	// A rating changes nothing Kimi does: it is taken whenever commands
	// can be trusted at all.
	return append(out, mapping.TypeRate)
}

func (s *Server) gateOn() bool {
	c := s.cfg.Control
	return c.Gate && c.Authenticated && s.cfg.Publisher != nil
}

// sessionControl is a session's control state, guarded by the session's
// lock.
type sessionControl struct {
	holds        map[string]*hold // by attention.requested id
	instructions []*instruction
}

func (c *sessionControl) busy() bool { return len(c.holds) > 0 || len(c.instructions) > 0 }

// hold is one PreToolUse parked at the gate.
type hold struct {
	attnID, toolReqID, run, tool, callID string
	at                                   time.Time
	reply                                chan outcome
	timer                                *time.Timer
}

type instruction struct {
	text  string
	cmdID string
	at    time.Time
}

// gate holds a PreToolUse for an answer when the gate is on for this tool.
// The hold ends with an answer, at its deadline (the gate then applies its
// on-timeout choice), or when the hook's connection ends first (Kimi stopped
// waiting and proceeds): each end is on the stream at once. Callers hold the
// session's lock.
func (s *hookSession) gate(d *delivery, r *mapping.HookResult, rec *toolRec) outcome {
	srv := s.srv
	if d.spooled || !srv.gateOn() || !gatedTool(srv.cfg.Control.GateTools, r.Facts.ToolName) {
		return outcome{reply: emptyReply()}
	}
	select {
	case <-srv.stopping:
		return outcome{reply: emptyReply()}
	default:
	}
	longest, _ := srv.cfg.Control.Hold()
	deadline := gateDeadline(d.at, d.arrived, longest, d.wait)
	onExpiry := srv.cfg.Control.OnTimeout
	m := mapping.GateRequest(r, srv.cfg.Posture, aep.FormatTime(deadline), onExpiry, gateOptions())
	ev := s.emit(d, m, emitOpts{cause: rec.id})
	if ev == nil {
		return outcome{reply: emptyReply()}
	}
	// The tool request and its attention must be on disk before the hook
	// is held: a hold for an event that is not durable would be answered by
	// a command nobody can see.
	if err := s.Stream().Commit(); err != nil {
		return s.notDurable(d, err)
	}
	h := &hold{attnID: ev.ID, toolReqID: rec.id, run: ev.Run, tool: r.Facts.ToolName, callID: r.Facts.ToolCallID,
		at: d.at, reply: make(chan outcome, 1)}
	if s.control.holds == nil {
		s.control.holds = map[string]*hold{}
	}
	s.control.holds[h.attnID] = h
	srv.metrics.holds.Inc()
	h.timer = time.AfterFunc(max(deadline.Sub(srv.cfg.Now()), 0), func() {
		s.Lock()
		defer s.Unlock()
		s.expire(h, mapping.TimeoutDeadline, onExpiry)
	})
	gone := func() {
		s.Lock()
		defer s.Unlock()
		s.expire(h, mapping.TimeoutHookEnded, mapping.OnExpiryAllow)
	}
	return outcome{wait: h.reply, gone: gone}
}

// expire ends a hold nobody answered: attention.timeout says why and what
// was applied; a deny adds tool.denied by policy and tells the model why.
// Callers hold the session's lock.
func (s *hookSession) expire(h *hold, why, onExpiry string) {
	if s.control.holds[h.attnID] != h {
		return // answered, or released already
	}
	srv := s.srv
	p := srv.cfg.Posture
	now := &delivery{at: srv.cfg.Now()}
	after := now.at.Sub(h.at)
	o := emitOpts{subject: h.attnID, cause: h.attnID, run: h.run, noRun: h.run == ""}
	timedOut := s.emit(now, mapping.AttentionTimeout(after.Milliseconds(), why, onExpiry, p), o)
	srv.metrics.expired.WithLabelValues(why, onExpiry).Inc()
	if onExpiry != mapping.OnExpiryDeny || timedOut == nil {
		s.release(h, emptyReply()) // Kimi proceeds without an answer
		return
	}
	cause := emitOpts{cause: timedOut.ID, run: h.run, noRun: h.run == ""}
	s.emit(now, mapping.ToolDenied(h.tool, h.callID, mapping.DeniedByPolicy, p), cause)
	reason := fmt.Sprintf("No answer within %s: denied by the aep-kimi gate (AEP_KIMI_ON_TIMEOUT=deny).", after.Round(time.Second))
	s.release(h, denyReply(reason))
}

// proceededWithout closes the hold of a tool call whose result arrived
// while it was still held: Kimi stopped waiting and ran it (its SIGTERM to
// the hook and the hook's end can trail the tool's own hooks), so the
// request expires before the result is recorded. Callers hold the session's
// lock.
func (s *hookSession) proceededWithout(callID string) {
	if callID == "" {
		return
	}
	for _, h := range s.control.holds {
		if h.callID == callID {
			s.expire(h, mapping.TimeoutHookEnded, mapping.OnExpiryAllow)
			return
		}
	}
}

// denyReply is the PreToolUse reply that blocks the call, with the reason
// the model is shown.
func denyReply(reason string) []byte {
	reply, _ := json.Marshal(map[string]any{"hookSpecificOutput": map[string]any{
		"permissionDecision": "deny", "permissionDecisionReason": reason,
	}})
	return reply
}

func gatedTool(tools []string, name string) bool {
	if len(tools) == 0 {
		return true
	}
	for _, t := range tools {
		if strings.EqualFold(strings.TrimSpace(t), name) {
			return true
		}
	}
	return false
}

// release frees a held hook with reply. Callers hold the session's lock.
func (s *hookSession) release(h *hold, reply []byte) {
	if s.control.holds[h.attnID] != h {
		return
	}
	delete(s.control.holds, h.attnID)
	if h.timer != nil {
		h.timer.Stop()
	}
	s.srv.metrics.holds.Dec()
	// Kimi acts on the reply: what the session log says of the answer (or
	// of its absence) is on the disk first, whatever the sync mode.
	h.reply <- outcome{reply: reply, sync: s.Stream().Mark().Forced()}
}

// releaseHolds frees every held hook with no objection and dismisses its
// attention, for a session ending or the adapter stopping.
func (s *hookSession) releaseHolds(d *delivery, why string) {
	p := s.srv.cfg.Posture
	for _, h := range s.control.holds {
		resolved := mapping.AttentionResolved(mapping.ResolutionDismissed, d.at.Sub(h.at).Milliseconds(), why, p)
		s.emit(d, resolved, emitOpts{subject: h.attnID, cause: h.attnID, run: h.run, noRun: h.run == ""})
		s.release(h, emptyReply())
	}
}

// releaseAllHolds frees every held hook on shutdown.
func (s *Server) releaseAllHolds() {
	s.core.Each(func(sess *hookSession) {
		if len(sess.control.holds) > 0 {
			sess.releaseHolds(&delivery{at: s.cfg.Now()}, "adapter-stopping")
		}
	})
}

// instructReply delivers queued instructions on a UserPromptSubmit reply as
// {"message": TEXT}, Kimi's one context-accepting reply surface (it adds the
// text as a separate user message before the prompt). Callers hold the
// session's lock.
func (s *hookSession) instructReply(d *delivery) outcome {
	if len(s.control.instructions) == 0 || d.spooled {
		return outcome{reply: emptyReply()}
	}
	texts := make([]string, len(s.control.instructions))
	p := s.srv.cfg.Posture
	for i, in := range s.control.instructions {
		texts[i] = in.text
		s.emit(d, mapping.InstructionDelivered(d.at.Sub(in.at).Milliseconds(), p), emitOpts{cause: in.cmdID})
	}
	s.control.instructions = nil
	reply, _ := json.Marshal(map[string]string{"message": strings.Join(texts, "\n\n")})
	return outcome{reply: reply}
}

// dropInstructions records every undelivered instruction as dropped.
func (s *hookSession) dropInstructions(d *delivery) {
	p := s.srv.cfg.Posture
	for _, in := range s.control.instructions {
		s.emit(d, mapping.InstructionDropped("session-ended", p), emitOpts{cause: in.cmdID, noRun: true})
	}
	s.control.instructions = nil
}

// Decide judges a command the core found authenticated, accepted and
// valid (emitter.Source.Decide). Callers hold the session's lock.
func (source) Decide(_ context.Context, s *hookSession, cmd *aep.Event) emitter.Verdict {
	data, _ := cmd.DataMap()
	switch cmd.Type {
	case CmdRespond:
		return s.decideRespond(cmd, data)
	case CmdInstruct:
		return s.decideInstruct(cmd, data)
	}
	return emitter.Reject("unsupported", "")
}

// decideRespond answers a held gate (AEP-0008 text rules: text naming an
// option's id or label is that option; other text never allows, it denies
// with the text as the reason).
func (s *hookSession) decideRespond(cmd *aep.Event, data map[string]any) emitter.Verdict {
	h := s.control.holds[cmd.Subject]
	if h == nil {
		if s.perms[cmd.Subject] != nil || s.isObserved(cmd.Subject) {
			return emitter.Reject("refused", "this request is answered in Kimi's own UI (respond_via oob)")
		}
		return emitter.Reject("invalid", "no held request with this subject (it may have timed out or never existed)")
	}
	answer, _ := data["answer"].(map[string]any)
	option, _ := answer["option"].(string)
	text, _ := answer["text"].(string)
	if option == "" && text == "" {
		return emitter.Reject("invalid", "answer needs an option or text")
	}
	if option != "" && !validOption(option) {
		return emitter.Reject("invalid", fmt.Sprintf("unknown option %q (allow, allow_session, deny, cancel)", option))
	}
	if option == "" {
		if id, ok := aep.MatchOption(gateOptions(), text); ok {
			option = id
			text = "" // the word was the decision itself
		} else {
			option = "deny" // unmatched text never allows a permission
		}
	}
	by, surface := mapping.CommandSender(cmd)
	return emitter.Accept(func(at time.Time) { s.answer(&delivery{at: at}, h, cmd, option, text, by, surface) })
}

func (s *hookSession) isObserved(id string) bool {
	for _, p := range s.perms {
		if p.id == id {
			return true
		}
	}
	return false
}

func validOption(o string) bool {
	for _, g := range gateOptions() {
		if g.ID == o {
			return true
		}
	}
	return false
}

// answer applies a decision to a held hook: answered, resolved, and for a
// refusal tool.denied by policy; then the hook is released.
func (s *hookSession) answer(d *delivery, h *hold, cmd *aep.Event, option, text, by, surface string) {
	p := s.srv.cfg.Posture
	o := emitOpts{subject: h.attnID, cause: cmd.ID, run: h.run, noRun: h.run == ""}
	answered := s.emit(d, mapping.WithSurface(mapping.AttentionAnsweredByControl(option, text, by, p), surface), o)
	if answered == nil {
		s.release(h, emptyReply())
		return
	}
	resolved := mapping.AttentionResolved(mapping.ResolutionAnswered, d.at.Sub(h.at).Milliseconds(), "", p)
	s.emit(d, resolved, emitOpts{subject: h.attnID, cause: answered.ID, run: h.run, noRun: h.run == ""})
	if option == "allow" || option == "allow_session" {
		s.release(h, emptyReply())
		return
	}
	denied := mapping.DeniedByRule(mapping.ToolDenied(h.tool, h.callID, mapping.DeniedByPolicy, p), by)
	s.emit(d, denied, emitOpts{cause: answered.ID, run: h.run, noRun: h.run == ""})
	reason := strings.TrimSpace(text)
	if reason == "" {
		verb := "Denied"
		if option == "cancel" {
			verb = "Cancelled"
		}
		reason = fmt.Sprintf("%s by %s through aep-kimi.", verb, firstNonEmpty(mapping.SenderWords(by, surface), "an operator"))
	}
	s.release(h, denyReply(reason))
}

func firstNonEmpty(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// decideInstruct queues a steering instruction for the next prompt.
func (s *hookSession) decideInstruct(cmd *aep.Event, data map[string]any) emitter.Verdict {
	text, _ := data["text"].(string)
	text = strings.TrimSpace(text)
	switch {
	case text == "":
		return emitter.Reject("invalid", "instruct needs a non-empty text")
	case len([]rune(text)) > MaxInstructionChars:
		return emitter.Reject("invalid", fmt.Sprintf("instruction longer than %d characters", MaxInstructionChars))
	case len(s.control.instructions) >= MaxInstructions:
		return emitter.Reject("invalid", fmt.Sprintf("instruction queue full (%d queued)", MaxInstructions))
	case s.ended:
		return emitter.Reject("refused", "the session has ended")
	}
	return emitter.Accept(func(at time.Time) {
		s.control.instructions = append(s.control.instructions, &instruction{text: text, cmdID: cmd.ID, at: at})
	})
}

package adapter

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/aep-kimi/aep-kimi/aep"
	"github.com/aep-kimi/aep-kimi/internal/ledger"
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

// Accepts lists the command types this adapter declares at hello: exactly the
// legs switched on, and none without an authenticated binding.
func (s *Server) Accepts() []string { return s.accepts() }

func (s *Server) accepts() []string { return AcceptsFor(s.cfg.Control) }

// AcceptsFor lists the command types a control configuration accepts, for
// the hello an emitter declares before the adapter exists.
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
	return out
}

// AckWindow is the ack window declared at hello.
func (s *Server) AckWindow() time.Duration { return s.cfg.Control.AckWindow }

func (s *Server) gateOn() bool {
	c := s.cfg.Control
	return c.Gate && c.Authenticated && s.cfg.Publisher != nil
}

// sessionControl is a session's control state, guarded by session.mu.
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
// Callers hold s.mu.
func (s *session) gate(d *delivery, r *mapping.HookResult, rec *toolRec) outcome {
	srv := s.srv
	if d.spooled || !srv.gateOn() || !gatedTool(srv.cfg.Control.GateTools, r.Facts.ToolName) {
		return outcome{reply: emptyReply()}
	}
	select {
	case <-srv.stopping:
		return outcome{reply: emptyReply()}
	default:
	}
	timeout := srv.cfg.Control.HoldTimeout
	m := mapping.GateRequest(r, srv.cfg.Posture, aep.FormatTime(d.at.Add(timeout)), gateOptions())
	ev := s.emit(d, m, emitOpts{cause: rec.id})
	if ev == nil {
		return outcome{reply: emptyReply()}
	}
	// The tool request and its attention must be on disk before the hook
	// is held: a hold for an event that is not durable would be answered by
	// a command nobody can see.
	if err := s.stream.Commit(); err != nil {
		return s.notDurable(d, err)
	}
	h := &hold{attnID: ev.ID, toolReqID: rec.id, run: ev.Run, tool: r.Facts.ToolName, callID: r.Facts.ToolCallID,
		at: d.at, reply: make(chan outcome, 1)}
	if s.control.holds == nil {
		s.control.holds = map[string]*hold{}
	}
	s.control.holds[h.attnID] = h
	srv.metrics.holds.Inc()
	h.timer = time.AfterFunc(timeout, func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.control.holds[h.attnID] != h {
			return
		}
		now := &delivery{at: srv.cfg.Now()}
		to := mapping.AttentionTimeout(timeout.Milliseconds(), srv.cfg.Posture)
		s.emit(now, to, emitOpts{subject: h.attnID, cause: h.attnID, run: h.run, noRun: h.run == ""})
		s.release(h, emptyReply()) // fail-open
	})
	return outcome{wait: h.reply}
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

// release frees a held hook with reply. Callers hold s.mu.
func (s *session) release(h *hold, reply []byte) {
	if s.control.holds[h.attnID] != h {
		return
	}
	delete(s.control.holds, h.attnID)
	if h.timer != nil {
		h.timer.Stop()
	}
	s.srv.metrics.holds.Dec()
	h.reply <- outcome{reply: reply}
}

// releaseHolds frees every held hook with no objection and dismisses its
// attention, for a session ending or the adapter stopping.
func (s *session) releaseHolds(d *delivery, why string) {
	p := s.srv.cfg.Posture
	for _, h := range s.control.holds {
		resolved := mapping.AttentionResolved(mapping.ResolutionDismissed, d.at.Sub(h.at).Milliseconds(), why, p)
		s.emit(d, resolved, emitOpts{subject: h.attnID, cause: h.attnID, run: h.run, noRun: h.run == ""})
		s.release(h, emptyReply())
	}
}

// releaseAllHolds frees every held hook on shutdown.
func (s *Server) releaseAllHolds() {
	s.mu.Lock()
	sessions := make([]*session, 0, len(s.sessions))
	for _, sess := range s.sessions {
		sessions = append(sessions, sess)
	}
	s.mu.Unlock()
	for _, sess := range sessions {
		sess.mu.Lock()
		if len(sess.control.holds) > 0 {
			sess.releaseHolds(&delivery{at: s.cfg.Now()}, "adapter-stopping")
		}
		sess.mu.Unlock()
	}
}

// instructReply delivers queued instructions on a UserPromptSubmit reply as
// {"message": TEXT}, Kimi's one context-accepting reply surface (it adds the
// text as a separate user message before the prompt). Callers hold s.mu.
func (s *session) instructReply(d *delivery) outcome {
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
func (s *session) dropInstructions(d *delivery) {
	p := s.srv.cfg.Posture
	for _, in := range s.control.instructions {
		s.emit(d, mapping.InstructionDropped("session-ended", p), emitOpts{cause: in.cmdID, noRun: true})
	}
	s.control.instructions = nil
}

// HandleCommand takes one control command routed by the relay. It answers
// every command with one ack (control.accepted or control.rejected{reason})
// in the command's session, dedupes on (source, id) and re-publishes the
// recorded ack byte-identically on redelivery.
func (s *Server) HandleCommand(_ context.Context, cmd *aep.Event) {
	if cmd == nil || cmd.Session == "" {
		return
	}
	key := ledger.KeyOf(cmd)
	if !s.cmds.Claim(key) {
		// Redelivered: answer with the recorded ack (same event, same
		// position); while the decision is pending the one forthcoming ack
		// answers every delivery.
		if ack, _ := s.cmds.Get(key); ack != nil && s.cfg.Publisher != nil {
			s.cfg.Publisher.Publish(ack)
		}
		s.metrics.commands.WithLabelValues(cmdLabel(cmd.Type), "redelivered").Inc()
		return
	}
	sess, err := s.lockSession(cmd.Session)
	if err != nil {
		s.log.Error("command for a session whose log cannot open", "session", sanitizeForLog(cmd.Session), "err", err)
		return
	}
	defer sess.mu.Unlock()
	d := &delivery{at: s.cfg.Now()}
	reason, detail, apply := s.decide(sess, cmd)
	m := mapping.ControlAccepted(s.cfg.Posture)
	if reason != "" {
		m = mapping.ControlRejected(reason, detail, s.cfg.Posture)
	}
	ack := sess.emit(d, m, emitOpts{cause: cmd.ID, noRun: true})
	s.cmds.Put(key, ack)
	outcomeLabel := "accepted"
	if reason != "" {
		outcomeLabel = "rejected_" + reason
	}
	s.metrics.commands.WithLabelValues(cmdLabel(cmd.Type), outcomeLabel).Inc()
	if apply != nil {
		apply(d)
	}
}

func cmdLabel(t string) string {
	switch t {
	case CmdRespond, CmdInstruct:
		return t
	}
	return "other"
}

// decide validates a command and returns the rejection reason (empty to
// accept) with a detail, and the action to run after the ack. Callers hold
// sess.mu.
func (s *Server) decide(sess *session, cmd *aep.Event) (reason, detail string, apply func(*delivery)) {
	if !s.cfg.Control.Authenticated {
		return "unauthorized", "control needs an authenticated relay binding (AEP_TOKEN)", nil
	}
	declared := false
	for _, t := range s.accepts() {
		if t == cmd.Type {
			declared = true
		}
	}
	if !declared {
		return "unsupported", fmt.Sprintf("%s is not in this adapter's control.accepts", cmd.Type), nil
	}
	if err := aep.Validate(cmd); err != nil {
		return "invalid", err.Error(), nil
	}
	data, _ := cmd.DataMap()
	switch cmd.Type {
	case CmdRespond:
		return sess.decideRespond(cmd, data)
	case CmdInstruct:
		return sess.decideInstruct(cmd, data)
	}
	return "unsupported", "", nil
}

// decideRespond answers a held gate (AEP-0008 text rules: text naming an
// option's id or label is that option; other text never allows, it denies
// with the text as the reason).
func (s *session) decideRespond(cmd *aep.Event, data map[string]any) (string, string, func(*delivery)) {
	h := s.control.holds[cmd.Subject]
	if h == nil {
		if s.perms[cmd.Subject] != nil || s.isObserved(cmd.Subject) {
			return "refused", "this request is answered in Kimi's own UI (respond_via oob)", nil
		}
		return "invalid", "no held request with this subject (it may have timed out or never existed)", nil
	}
	answer, _ := data["answer"].(map[string]any)
	option, _ := answer["option"].(string)
	text, _ := answer["text"].(string)
	if option == "" && text == "" {
		return "invalid", "answer needs an option or text", nil
	}
	if option != "" && !validOption(option) {
		return "invalid", fmt.Sprintf("unknown option %q (allow, allow_session, deny, cancel)", option), nil
	}
	if option == "" {
		if id, ok := aep.MatchOption(gateOptions(), text); ok {
			option = id
			text = "" // the word was the decision itself
		} else {
			option = "deny" // unmatched text never allows a permission
		}
	}
	by := cmd.Agent
	return "", "", func(d *delivery) { s.answer(d, h, cmd, option, text, by) }
}

func (s *session) isObserved(id string) bool {
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
func (s *session) answer(d *delivery, h *hold, cmd *aep.Event, option, text, by string) {
	p := s.srv.cfg.Posture
	o := emitOpts{subject: h.attnID, cause: cmd.ID, run: h.run, noRun: h.run == ""}
	answered := s.emit(d, mapping.AttentionAnsweredByControl(option, text, by, p), o)
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
	denied := mapping.ToolDenied(h.tool, h.callID, mapping.DeniedByPolicy, p)
	s.emit(d, denied, emitOpts{cause: answered.ID, run: h.run, noRun: h.run == ""})
	reason := strings.TrimSpace(text)
	if reason == "" {
		verb := "Denied"
		if option == "cancel" {
			verb = "Cancelled"
		}
		reason = fmt.Sprintf("%s by %s through aep-kimi.", verb, firstNonEmpty(by, "an operator"))
	}
	reply, _ := json.Marshal(map[string]any{"hookSpecificOutput": map[string]any{
		"permissionDecision": "deny", "permissionDecisionReason": reason,
	}})
	s.release(h, reply)
}

func firstNonEmpty(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// decideInstruct queues a steering instruction for the next prompt.
func (s *session) decideInstruct(cmd *aep.Event, data map[string]any) (string, string, func(*delivery)) {
	text, _ := data["text"].(string)
	text = strings.TrimSpace(text)
	switch {
	case text == "":
		return "invalid", "instruct needs a non-empty text", nil
	case len([]rune(text)) > MaxInstructionChars:
		return "invalid", fmt.Sprintf("instruction longer than %d characters", MaxInstructionChars), nil
	case len(s.control.instructions) >= MaxInstructions:
		return "invalid", fmt.Sprintf("instruction queue full (%d queued)", MaxInstructions), nil
	case s.ended:
		return "refused", "the session has ended", nil
	}
	return "", "", func(d *delivery) {
		s.control.instructions = append(s.control.instructions, &instruction{text: text, cmdID: cmd.ID, at: d.at})
	}
}

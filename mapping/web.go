package mapping

import (
	"fmt"
	"strings"

	"github.com/aep-kimi/aep-kimi/aep"
)

// Mode is how the bridge maps the kap-server stream.
type Mode uint8

const (
	// Companion (the default) emits only the channel-visible
	// x.kimi-code.web.* family: the hook adapter observes the same kap-hosted
	// sessions and is the sole core-type authority.
	Companion Mode = iota
	// Primary maps the wire to core types, for deployments with no hooks.
	Primary
)

// ParseMode parses "companion" or "primary".
func ParseMode(s string) (Mode, error) {
	switch s {
	case "", "companion":
		return Companion, nil
	case "primary":
		return Primary, nil
	}
	return Companion, fmt.Errorf("unknown mode %q (want companion or primary)", s)
}

func (m Mode) String() string {
	if m == Primary {
		return "primary"
	}
	return "companion"
}

// GlobalSession is the kap-server's pseudo-session for server-wide events.
const GlobalSession = "__global__"

// MainAgentID is the kap agent id of a session's main agent (its frames'
// agentId; subagents have their own).
const MainAgentID = "main"

// Frame is the decoded envelope of one kap-server WebSocket message.
type Frame struct {
	Type      string
	Seq       int64
	HasSeq    bool
	SessionID string
	Epoch     string
	Timestamp string
	Volatile  bool
	// ID and Code are set on control frames (ack, error).
	ID      string
	Code    int64
	Payload map[string]any
}

// WebFacts are what the bridge needs next to the mapped events.
type WebFacts struct {
	Frame
	// Event reports whether this is a session event frame (it has a seq)
	// rather than a connection frame (server_hello, ack, ping, resync_required).
	Event      bool
	TurnID     string
	ToolCallID string
	ToolName   string
	ApprovalID string
	QuestionID string
	Decision   string
	Reason     string // turn.ended reason
	IsError    bool   // tool.result
	PromptID   string
}

// WebResult is one frame mapped.
type WebResult struct {
	Facts  WebFacts
	Events []Event
}

// ParseFrame decodes a kap-server frame without mapping it.
func ParseFrame(b []byte) (Frame, error) {
	m, err := decodeObject(b)
	if err != nil {
		return Frame{}, err
	}
	f := Frame{
		Type:      str(m, "type"),
		SessionID: str(m, "session_id"),
		Epoch:     str(m, "epoch"),
		Timestamp: str(m, "timestamp"),
		Volatile:  boolean(m, "volatile"),
		ID:        str(m, "id"),
		Payload:   obj(m, "payload"),
	}
	if f.Type == "" {
		return Frame{}, fmt.Errorf("%w: frame has no type", ErrNotJSON)
	}
	f.Seq, f.HasSeq = integer(m, "seq")
	f.Code, _ = integer(m, "code")
	if f.Payload == nil {
		f.Payload = map[string]any{}
	}
	return f, nil
}

// Web maps one kap-server frame in mode at posture p. Connection frames,
// volatile frames and the internal bus echoes map to no event. In primary
// mode a tool.result maps to nothing here: it names no tool, so the bridge
// pairs it by call id and calls WebToolResult with the recorded name.
func Web(b []byte, mode Mode, p Posture) (*WebResult, error) {
	f, err := ParseFrame(b)
	if err != nil {
		return nil, err
	}
	return MapFrame(f, mode, p), nil
}

// MapFrame maps an already parsed frame.
func MapFrame(f Frame, mode Mode, p Posture) *WebResult {
	r := &WebResult{Facts: webFacts(f)}
	if !r.Facts.Event || f.Volatile || isBusEcho(f.Type) {
		return r
	}
	if mode == Companion {
		r.Events = []Event{webEvent(f, p)}
		return r
	}
	if fn := primaryMapper(f.Type); fn != nil {
		r.Events = fn(f, p)
		return r
	}
	r.Events = []Event{webEvent(f, p)}
	return r
}

// webEvent is a frame's x.kimi-code.web.* event, with the structural
// figures a few frames carry: a step's token usage (the gen_ai.usage.*
// members AEP-0002 §5.2 names, additive: each step's own), a compaction's
// counts.
func webEvent(f Frame, p Posture) Event {
	e := newEvent(p, xType("web."+f.Type), aep.SeverityInfo)
	switch f.Type {
	case "turn.step.completed":
		putWebUsage(e.Data, obj(f.Payload, "usage"))
	case "compaction.completed":
		putCompactionCounts(e.Data, obj(f.Payload, "result"))
	}
	return e
}

// putWebUsage copies a kap usage object as OpenTelemetry GenAI counts:
// input is every input token, cached or not (the convention counts cache
// reads and writes as input), output the generated ones.
func putWebUsage(dst, u map[string]any) {
	var in int64
	seen := false
	for _, k := range []string{"inputOther", "inputCacheRead", "inputCacheCreation"} {
		if n, ok := integer(u, k); ok && n >= 0 {
			in += n
			seen = true
		}
	}
	if seen {
		dst[DataInputTokens] = in
	}
	if n, ok := integer(u, "output"); ok && n >= 0 {
		dst[DataOutputTokens] = n
	}
}

// putCompactionCounts copies a kap compaction result's structural counts:
// the context's size after it and how many items it dropped (never its
// summary).
func putCompactionCounts(dst, res map[string]any) {
	if n, ok := integer(res, "tokensAfter"); ok && n >= 0 {
		dst["estimated_token_count"] = n
	}
	if n, ok := integer(res, "compactedCount"); ok && n >= 0 {
		dst["forgotten"] = n
	}
}

// ContextWindow is how full an agent's context is: Tokens in it, of Limit
// (0: not known).
type ContextWindow struct{ Tokens, Limit int64 }

// WebContext reads the main agent's context window from a frame that says
// it: a status pulse (agent.status.updated, volatile: contextTokens of
// maxContextTokens) or a compaction's result (its size after, no limit).
func WebContext(f Frame) (ContextWindow, bool) {
	if a := str(f.Payload, "agentId"); a != "" && a != MainAgentID {
		return ContextWindow{}, false
	}
	var c ContextWindow
	var ok bool
	switch f.Type {
	case "agent.status.updated":
		c.Tokens, ok = integer(f.Payload, "contextTokens")
		if n, lok := integer(f.Payload, "maxContextTokens"); lok && n > 0 {
			c.Limit = n
		}
	case "compaction.completed":
		c.Tokens, ok = integer(obj(f.Payload, "result"), "tokensAfter")
	}
	if !ok || c.Tokens < 0 {
		return ContextWindow{}, false
	}
	return c, true
}

func webFacts(f Frame) WebFacts {
	pl := f.Payload
	w := WebFacts{
		Frame:      f,
		Event:      f.HasSeq && f.SessionID != "",
		TurnID:     str(pl, "turnId"),
		ToolCallID: firstStr(pl, "toolCallId", "tool_call_id"),
		ToolName:   firstStr(pl, "name", "toolName", "tool_name"),
		ApprovalID: firstStr(pl, "approval_id", "id"),
		QuestionID: str(pl, "question_id"),
		Decision:   str(pl, "decision"),
		Reason:     str(pl, "reason"),
		IsError:    boolean(pl, "isError"),
		PromptID:   str(pl, "promptId"),
	}
	if w.TurnID == "" {
		w.TurnID = str(pl, "turn_id")
	}
	return w
}

func firstStr(m map[string]any, keys ...string) string {
	for _, k := range keys {
		if s := str(m, k); s != "" {
			return s
		}
	}
	return ""
}

// isBusEcho reports the internal permission bus frames, deduped in favour of
// their event.approval.* wire twins: one moment, one carrier.
func isBusEcho(t string) bool {
	return strings.HasPrefix(t, "permission.approval.")
}

type frameMapper func(f Frame, p Posture) []Event

// primaryMapper is the frame -> event table of the primary mode: the
// mapper of a frame type it maps, nil for any other.
func primaryMapper(frameType string) frameMapper {
	switch frameType {
	case "turn.started":
		return mapTurnStartedFrame
	case "turn.ended":
		return mapTurnEndedFrame
	case "tool.call.started":
		return mapToolCallStartedFrame
	case "tool.result":
		return noEvents
	case "event.approval.requested":
		return mapApprovalRequestedFrame
	case "event.approval.resolved":
		return mapApprovalResolvedFrame
	case "event.question.requested":
		return mapQuestionRequestedFrame
	case "event.question.answered":
		return mapQuestionAnsweredFrame
	case "event.question.dismissed":
		return mapQuestionDismissedFrame
	case "event.session.work_changed":
		return mapWorkChangedFrame
	case "compaction.completed":
		return mapCompactionCompletedFrame
	}
	return nil
}

// noEvents maps a frame to no event of its own.
func noEvents(Frame, Posture) []Event { return nil }

// mapTurnStartedFrame: the vendor's real turn boundary carries the run. A
// user turn is triggered by the user; a system or task turn by the agent.
func mapTurnStartedFrame(f Frame, p Posture) []Event {
	e := newEvent(p, "run.started", aep.SeverityInfo)
	kind := str(obj(f.Payload, "origin"), "kind")
	switch kind {
	case "user", "":
		e.Data["trigger"] = "user"
	default:
		e.Data["trigger"] = "agent"
	}
	if s, ok := p.text(e.Capture, str(f.Payload, "prompt")); ok {
		e.Data["prompt"] = s
	}
	return []Event{e}
}

// mapTurnEndedFrame: completed -> run.finished; cancelled -> run.cancelled
// with no by claim (the channel does not know who); anything else ->
// run.failed with the vendor word as the reason.
func mapTurnEndedFrame(f Frame, p Posture) []Event {
	switch reason := str(f.Payload, "reason"); reason {
	case "completed":
		return []Event{newEvent(p, "run.finished", aep.SeverityInfo)}
	case "cancelled":
		return []Event{newEvent(p, "run.cancelled", aep.SeverityInfo)}
	default:
		e := newEvent(p, "run.failed", aep.SeverityError)
		if reason == "" {
			reason = "error"
		}
		e.Data["reason"] = snakeCase(reason)
		if em := obj(f.Payload, "error"); em != nil {
			if info := e.errorData(p, firstStr(em, "name", "code"), str(em, "message")); len(info) > 0 {
				e.Data["error"] = info
			}
		}
		return []Event{e}
	}
}

// mapToolCallStartedFrame: tool.requested, opening the pair by call id.
func mapToolCallStartedFrame(f Frame, p Posture) []Event {
	name := str(f.Payload, "name")
	if name == "" {
		name = "unknown"
	}
	e := toolEvent(p, "tool.requested", aep.SeverityInfo, name, str(f.Payload, "toolCallId"))
	e.putArgs(p, f.Payload["args"])
	return []Event{e}
}

// WebToolResult maps a tool.result frame once the bridge has paired it with
// its tool.call.started: tool.completed, or tool.failed when isError.
func WebToolResult(f Frame, toolName string, p Posture) Event {
	callID := str(f.Payload, "toolCallId")
	out := f.Payload["output"]
	if boolean(f.Payload, "isError") {
		e := toolEvent(p, "tool.failed", aep.SeverityWarning, toolName, callID)
		msg, _ := out.(string)
		e.Data["error"] = e.errorData(p, "", msg)
		return e
	}
	e := toolEvent(p, "tool.completed", aep.SeverityInfo, toolName, callID)
	e.putResult(p, out)
	return e
}

// WebUnpairedToolResult is the honest degrade for a tool.result whose call
// was never seen: channel visibility only, no invented tool name.
func WebUnpairedToolResult(f Frame, p Posture) Event {
	return newEvent(p, xType("web."+f.Type), aep.SeverityInfo)
}

// mapApprovalRequestedFrame: every ask is an attention request; the read-only
// channel sheds options and respond_via (the bridge decorates them when its
// opt-in control can honour an answer). Subject is the approval id.
func mapApprovalRequestedFrame(f Frame, p Posture) []Event {
	e := newEvent(p, "attention.requested", aep.SeverityNotice)
	e.Subject = str(f.Payload, "approval_id")
	e.Data["kind"] = "permission"
	tool := firstStr(f.Payload, "tool_name", "toolName")
	if s, ok := p.text(e.Capture, str(f.Payload, "action")); ok {
		e.Data["prompt"] = s
	} else {
		subject := tool
		if subject == "" {
			subject = e.Subject
		}
		e.Data["prompt"] = aep.SynthesizePrompt(Agent, "permission", subject)
	}
	return []Event{e}
}

// mapApprovalResolvedFrame: a decision -> attention.answered via oob (the
// bridge adds the resolved companion); no decision -> resolved dismissed.
func mapApprovalResolvedFrame(f Frame, p Posture) []Event {
	id := str(f.Payload, "approval_id")
	d := str(f.Payload, "decision")
	if d == "" || d == "cancelled" {
		e := newEvent(p, "attention.resolved", aep.SeverityNotice)
		e.Subject = id
		e.Data["resolution"] = "dismissed"
		return []Event{e}
	}
	e := newEvent(p, "attention.answered", aep.SeverityNotice)
	e.Subject = id
	answer := map[string]any{"option": d}
	if s, ok := p.text(e.Capture, str(f.Payload, "feedback")); ok {
		answer["text"] = s
	}
	e.Data["answer"] = answer
	e.Data["via"] = "oob"
	return []Event{e}
}

// mapQuestionRequestedFrame: a kind form request on the AEP-0002 field_spec
// shape, every question a select (allow_other -> other, vendor option ids
// kept). Labels and the prompt follow the [metadata*] rule.
func mapQuestionRequestedFrame(f Frame, p Posture) []Event {
	e := newEvent(p, "attention.requested", aep.SeverityNotice)
	e.Subject = str(f.Payload, "question_id")
	e.Data["kind"] = "form"
	qs := WebQuestions(f.Payload)
	var prompts []string
	for _, q := range qs {
		if s, ok := p.text(e.Capture, q.Text); ok {
			prompts = append(prompts, s)
		}
	}
	if len(prompts) > 0 {
		e.Data["prompt"] = strings.Join(prompts, " / ")
	} else {
		e.Data["prompt"] = aep.SynthesizePrompt(Agent, "form", e.Subject)
	}
	e.Data["fields"] = QuestionFields(qs, e.Capture, p)
	return []Event{e}
}

// mapQuestionAnsweredFrame: an answer given in Kimi's own UI, on its own.
// kap keys it by question text, which only the request tells apart, so the
// frame alone keeps the vendor's answers as they came, at redacted+ only
// (the AEP Kimi mapping pins this); the bridge, holding the request, records
// form values instead (WebQuestionValues, QuestionAnswered).
func mapQuestionAnsweredFrame(f Frame, p Posture) []Event {
	e := newEvent(p, "attention.answered", aep.SeverityNotice)
	e.Subject = str(f.Payload, "question_id")
	answer := map[string]any{}
	if vals := obj(f.Payload, "answers"); vals != nil {
		if v, ok := p.value(e.Capture, vals); ok {
			answer["values"] = v
		}
	}
	e.Data["answer"] = answer
	e.Data["via"] = "oob"
	return []Event{e}
}

func mapQuestionDismissedFrame(f Frame, p Posture) []Event {
	e := newEvent(p, "attention.resolved", aep.SeverityNotice)
	e.Subject = str(f.Payload, "question_id")
	e.Data["resolution"] = "dismissed"
	return []Event{e}
}

// mapWorkChangedFrame keeps the structural busy/pending facts.
func mapWorkChangedFrame(f Frame, p Posture) []Event {
	e := newEvent(p, xType("web."+f.Type), aep.SeverityInfo)
	putBool(e.Data, f.Payload, "busy")
	putStr(e.Data, f.Payload, "pending_interaction")
	return []Event{e}
}

// mapCompactionCompletedFrame: the post moment carries session.compacted,
// with the structural counts of the vendor result (never its summary).
func mapCompactionCompletedFrame(f Frame, p Posture) []Event {
	e := newEvent(p, "session.compacted", aep.SeverityInfo)
	putCompactionCounts(e.Data, obj(f.Payload, "result"))
	if t := str(f.Payload, "trigger"); t != "" {
		e.Data["trigger"] = t
	}
	return []Event{e}
}

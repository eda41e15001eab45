package mapping

import (
	"strings"

	"github.com/aep-kimi/aep-kimi/aep"
)

// The events below come from an emitter's own state rather than from one
// payload or frame: a run it closes, an attention it resolves, a command it
// answers. The adapter and the bridge decide when; these decide what. Every
// measured fact (a latency, a duration) comes in as an argument.

// Extension types the emitters synthesize.
const (
	TypePromptSubmitted      = "x." + Vendor + ".run.prompt_submitted"
	TypeSubagentTurnEnded    = "x." + Vendor + ".run.subagent_turn_ended"
	TypeInstructionDelivered = "x." + Vendor + ".instruction.delivered"
	TypeInstructionDropped   = "x." + Vendor + ".instruction.dropped"
)

// WebGapType and WebUnrecognizedType are the bridge's extension types for
// lost frames and for a frame whose name cannot be made a legal AEP type.
const (
	WebGapType          = "x." + Vendor + ".web.gap"
	WebUnrecognizedType = "x." + Vendor + ".web.unrecognized"
)

// Run.started triggers (AEP-0002): the user asked, or the agent began a turn
// of its own (a background task's completion).
const (
	TriggerUser  = "user"
	TriggerAgent = "agent"
)

// RunStarted opens a run no prompt payload carried: a turn the adapter saw
// start with no prompt of its own.
func RunStarted(trigger string, p Posture) Event {
	e := newEvent(p, "run.started", aep.SeverityInfo)
	e.Data["trigger"] = trigger
	return e
}

// RunDrained closes a run left open at a boundary (a session's end, a turn
// that never ended) as cancelled, with no claim about who cancelled it.
func RunDrained(p Posture) Event {
	return newEvent(p, "run.cancelled", aep.SeverityInfo)
}

// PromptQueued records a prompt Kimi accepted while a turn was running: it
// belongs to no run yet, its turn opens one later.
func PromptQueued(p Posture) Event {
	e := newEvent(p, TypePromptSubmitted, aep.SeverityInfo)
	e.Data["queued"] = true
	return e
}

// SubagentTurnEnded is a subagent's own Stop (or StopFailure: failed): it
// ends the subagent's turn inside the parent's run, never the run.
func SubagentTurnEnded(failed bool, p Posture) Event {
	e := newEvent(p, TypeSubagentTurnEnded, aep.SeverityInfo)
	if failed {
		e.Data["failed"] = true
	}
	return e
}

// Attention resolutions (AEP-0002 §7).
const (
	ResolutionAnswered  = "answered"
	ResolutionDismissed = "dismissed"
)

// AttentionResolved closes an attention request: answered, or dismissed (a
// session ending, an emitter stopping: reason says which when known).
// latencyMs is measured from the request; a negative one reads as 0.
func AttentionResolved(resolution string, latencyMs int64, reason string, p Posture) Event {
	e := newEvent(p, "attention.resolved", aep.SeverityNotice)
	e.Data["resolution"] = resolution
	e.Data["latency_ms"] = max(latencyMs, 0)
	if reason != "" {
		e.Data["reason"] = reason
	}
	return e
}

// DataOnExpiry names the vendor field (AEP-0002 payloads are open; AEP has
// no field for a request's default outcome) saying what an answerable
// request turns into when nobody answers it: on attention.requested, what
// happens at expires_at; on attention.timeout, what was applied. Its value
// is the option applied: OnExpiryAllow (Kimi proceeds, its own permission
// flow still applies) or OnExpiryDeny.
const DataOnExpiry = "x-kimi-code-on-expiry"

// Token figures in event data. The usage members are AEP-0002 §5.2's
// (OpenTelemetry GenAI's names), each event's own count, so a consumer sums
// them. AEP has no field for how full a context is: DataContextTokens and
// DataContextLimit are vendor fields (the payloads are open), the size of
// the main agent's context in tokens and the most it holds.
const (
	DataInputTokens   = "gen_ai.usage.input_tokens"
	DataOutputTokens  = "gen_ai.usage.output_tokens"
	DataContextTokens = "x-" + Vendor + "-context-tokens"
	DataContextLimit  = "x-" + Vendor + "-context-limit"
)

// WithContext adds how full the context is, as far as c knows it.
func WithContext(e Event, c ContextWindow) Event {
	if c.Tokens < 0 {
		return e
	}
	e = e.with(DataContextTokens, c.Tokens)
	if c.Limit > 0 {
		e = e.with(DataContextLimit, c.Limit)
	}
	return e
}

// What a held request turns into when nobody answers it (DataOnExpiry).
const (
	OnExpiryAllow = "allow"
	OnExpiryDeny  = "deny"
)

// Why a held request expired unanswered (attention.timeout's reason).
const (
	// TimeoutDeadline: the gate's own deadline passed; it applied its
	// on-expiry choice just before Kimi would have stopped waiting.
	TimeoutDeadline = "deadline"
	// TimeoutHookEnded: Kimi stopped waiting first (its hook timeout killed
	// the hook, or the turn was interrupted): it proceeds without an answer.
	TimeoutHookEnded = "hook-ended"
)

// AttentionTimeout says a held request expired unanswered after afterMs
// (AEP-0002: the terminal for a request nobody answered in time): reason
// says whose clock ran out, onExpiry what was applied ("" leaves both out).
func AttentionTimeout(afterMs int64, reason, onExpiry string, p Posture) Event {
	e := newEvent(p, "attention.timeout", aep.SeverityNotice)
	e.Data["after_ms"] = max(afterMs, 0)
	if reason != "" {
		e.Data["reason"] = reason
	}
	if onExpiry != "" {
		e.Data[DataOnExpiry] = onExpiry
	}
	return e
}

// AttentionAnsweredByControl is an answer that came as a command: the option
// applied, the sender's text (through the redaction pipeline at redacted and
// above, at every such level: it is an operator's free text) and who sent it.
func AttentionAnsweredByControl(option, text, by string, p Posture) Event {
	e := newEvent(p, "attention.answered", aep.SeverityNotice)
	answer := map[string]any{"option": option}
	if text != "" && e.Capture >= aep.CaptureRedacted {
		answer["text"] = p.redactor().Text(text)
	}
	e.Data["answer"] = answer
	e.Data["via"] = "control"
	if by != "" {
		e.Data["by"] = by
	}
	return e
}

// Who denied a tool (AEP-0002): the runtime's own permission flow, or a
// policy answered through control.
const (
	DeniedByRuntime = "runtime"
	DeniedByPolicy  = "policy"
)

// ToolDenied says a tool call will not run: subject the tool (unknown when
// its name was never seen), call id when known.
func ToolDenied(tool, callID, by string, p Posture) Event {
	if tool == "" {
		tool = "unknown"
	}
	e := toolEvent(p, "tool.denied", aep.SeverityNotice, tool, callID)
	e.Data["by"] = by
	return e
}

// ExtBy is the extension attribute a relay stamps on every command it
// routes: the name of the person whose credential sent it, or a rule's
// "rule:<id>" (AEP-0001 §4.2 lets a relay add extension attributes).
const ExtBy = "aepkimiby"

// ExtByToken is the extension attribute a relay stamps beside ExtBy on a
// person's command: the ID of the token it came with (access.Ref.ID), so
// the record tells apart two tokens one name held in turn. The owner's
// commands and a rule's carry none.
const ExtByToken = "aepkimibytoken"

// DataSurface is the vendor field of an answer that names the surface the
// answering command came through ("page", "cli", "push", "link"), beside
// by, which names the person (AEP has no field for it).
const DataSurface = "x-kimi-code-surface"

// The agents of the commands aep-kimi's own senders send: the fleet page,
// the terminal tools, a phone's notification action and an answer link.
const (
	AgentPage = "aep-kimi-page"
	AgentCLI  = "aep-kimi-cli"
	AgentPush = "aep-kimi-push"
	AgentLink = "aep-kimi-link"
)

// surfaces names the surfaces of aep-kimi's own senders, by the agent of
// the commands they send.
var surfaces = map[string]string{
	AgentPage: "page",
	AgentCLI:  "cli",
	AgentPush: "push",
	AgentLink: "link",
}

// SurfaceOf is the surface a command's agent names, when it is one of
// aep-kimi's own.
func SurfaceOf(agent string) (string, bool) {
	s, ok := surfaces[agent]
	return s, ok
}

// CommandSender says who sent a command, as its answer's by records them,
// and through what: the person the relay stamped (ExtBy) with the surface
// the command's agent names (the agent itself for a sender aep-kimi does
// not know), a rule alone, or, on a command no relay stamped, its agent.
func CommandSender(cmd *aep.Event) (by, surface string) {
	stamped, _ := cmd.ExtString(ExtBy)
	switch {
	case stamped == "":
		return cmd.Agent, ""
	case strings.HasPrefix(stamped, RuleAgentPrefix):
		return stamped, ""
	}
	if s, ok := SurfaceOf(cmd.Agent); ok {
		return stamped, s
	}
	return stamped, cmd.Agent
}

// CommandRule is the rule that sent cmd, when the relay says a rule did:
// only its stamp (ExtBy "rule:<id>") counts, never the command's agent,
// which its sender chose.
func CommandRule(cmd *aep.Event) (string, bool) {
	stamped, _ := cmd.ExtString(ExtBy)
	id, ok := strings.CutPrefix(stamped, RuleAgentPrefix)
	return id, ok && id != ""
}

// SenderWords names who sent a command in a sentence: "alice (page)", or
// by alone.
func SenderWords(by, surface string) string {
	if surface == "" {
		return by
	}
	return by + " (" + surface + ")"
}

// WithSurface records the surface an answer came through (DataSurface);
// "" leaves e as it is.
func WithSurface(e Event, surface string) Event {
	if surface == "" {
		return e
	}
	return e.with(DataSurface, surface)
}

// RuleAgentPrefix starts the agent of a command a relay's rule sent
// ("rule:<id>"): the answer's by, which names the rule.
const RuleAgentPrefix = "rule:"

// DeniedByRule names, on a tool.denied by policy, the rule that refused the
// call when the answer came from one (by is the answering command's agent);
// any other by leaves e as it is.
func DeniedByRule(e Event, by string) Event {
	if id, ok := strings.CutPrefix(by, RuleAgentPrefix); ok && id != "" {
		return e.with("rule", id)
	}
	return e
}

// ControlAccepted acknowledges a command the emitter will carry out.
func ControlAccepted(p Posture) Event {
	return newEvent(p, "control.accepted", aep.SeverityInfo)
}

// ControlRejected answers a command the emitter will not carry out: reason
// from AEP-0004's set, and a detail for people, through the redaction
// pipeline at redacted and above (it can quote the command).
func ControlRejected(reason, detail string, p Posture) Event {
	e := newEvent(p, "control.rejected", aep.SeverityNotice)
	e.Data["reason"] = reason
	if detail != "" && e.Capture >= aep.CaptureRedacted {
		e.Data["detail"] = p.redactor().Text(detail)
	}
	return e
}

// InstructionDelivered says a queued instruction reached the agent, after
// waiting queuedMs (a negative one reads as 0).
func InstructionDelivered(queuedMs int64, p Posture) Event {
	e := newEvent(p, TypeInstructionDelivered, aep.SeverityInfo)
	e.Data["queued_ms"] = max(queuedMs, 0)
	return e
}

// InstructionDropped says a queued instruction will never be delivered.
func InstructionDropped(reason string, p Posture) Event {
	e := newEvent(p, TypeInstructionDropped, aep.SeverityInfo)
	e.Data["reason"] = reason
	return e
}

// WebGap reports kap frames the bridge will never see: from fromSeq to toSeq
// (toSeq < fromSeq: extent unknown) in kapEpoch, the stream continuing in
// nextKapEpoch.
func WebGap(reason string, fromSeq, toSeq int64, kapEpoch, nextKapEpoch string, p Posture) Event {
	e := newEvent(p, WebGapType, aep.SeverityWarning)
	e.Data["reason"] = reason
	e.Data["from_seq"] = fromSeq
	if toSeq >= fromSeq {
		e.Data["to_seq"] = toSeq
		e.Data["missed"] = toSeq - fromSeq + 1
	}
	if kapEpoch != "" {
		e.Data["kap_epoch"] = kapEpoch
	}
	if nextKapEpoch != "" && nextKapEpoch != kapEpoch {
		e.Data["next_kap_epoch"] = nextKapEpoch
	}
	return e
}

// WebUnrecognized stands in for a kap frame whose name the mapping could not
// force into the type grammar: the moment stays visible, under a legal name.
func WebUnrecognized(p Posture) Event {
	return newEvent(p, WebUnrecognizedType, aep.SeverityInfo)
}

// The decorators below add what an emitter measured or decided to an event
// mapping already shaped. Each returns a copy: the event passed in, and any
// map inside it, is never changed.

// WithDuration adds duration_ms, how long what the event ends took; a
// negative one (a clock step) is left out.
func WithDuration(e Event, ms int64) Event {
	if ms < 0 {
		return e
	}
	return e.with("duration_ms", ms)
}

// WithLatency adds latency_ms, how long an attention request waited; a
// negative one reads as 0.
func WithLatency(e Event, ms int64) Event {
	return e.with("latency_ms", max(ms, 0))
}

// WithSessionSummary adds what a session's end knows of it: how long it
// lasted (a negative one reads as 0) and how many runs it had.
func WithSessionSummary(e Event, durationMs int64, runs int) Event {
	return e.with("duration_ms", max(durationMs, 0)).with("runs", runs)
}

// CancelledByControl marks a run's cancellation as the outcome of a
// control.cancel the emitter carried out.
func CancelledByControl(e Event) Event {
	return e.with("by", "control")
}

// Offered says how a kimi web approval can be answered: through control
// with these options, or, when options is nil, only in the vendor's own UI
// (respond_via oob, AEP-0008). It has no deadline: kap-server 2.1.0's
// expires_at (its creation plus a fixed 24 h) is a display value nothing
// acts on. The approval waits until it is answered, its turn is aborted or
// its session closes, and is still answered past that time; as AEP's
// expires_at it would have consumers drop a request Kimi still waits on.
func Offered(e Event, options []aep.Option) Event {
	if options == nil {
		return e.with("respond_via", []any{"oob"})
	}
	return e.with("options", aep.OptionsData(options, e.Capture)).with("respond_via", []any{"control"})
}

// ToolAsked makes an approval the bridge offers for control readable the
// way the hook gate's request is: the tool in data.tool (structural) and, at
// redacted and above, the prompt as ToolPrompt over the frame's display of
// the tool's input, in place of Kimi's own action line, so a rule (and a
// person) reads the same text on both surfaces. A frame without a tool name
// leaves e as it is; one without a display keeps the prompt.
func ToolAsked(e Event, f Frame, p Posture) Event {
	tool := firstStr(f.Payload, "tool_name", "toolName")
	if tool == "" {
		return e
	}
	e = e.with("tool", toolRef(tool, firstStr(f.Payload, "tool_call_id", "toolCallId")))
	if args := ArgsSummary(f.Payload["tool_input_display"]); args != "" {
		if s, ok := p.argsText(e.Capture, ToolPrompt(tool, args)); ok {
			e = e.with("prompt", s)
		}
	}
	return e
}

// ViaControl marks an answer as the outcome of a command: via control, the
// sender as by (when known) and the declared option the command applied
// (none: "", for an answer of values).
func ViaControl(e Event, option, by string) Event {
	e = e.with("via", "control")
	if option != "" {
		e = WithAnswerOption(e, option)
	}
	if by != "" {
		e = e.with("by", by)
	}
	return e
}

// WithAnswerOption records the answer under a declared option id (a vendor
// decision word narrowed to the option it means); an event without an
// answer is returned as is.
func WithAnswerOption(e Event, option string) Event {
	answer, ok := e.Data["answer"].(map[string]any)
	if !ok {
		return e
	}
	out := make(map[string]any, len(answer)+1)
	for k, v := range answer {
		out[k] = v
	}
	out["option"] = option
	return e.with("answer", out)
}

// with returns e with data key set, on a copy of its data.
func (e Event) with(key string, v any) Event {
	data := make(map[string]any, len(e.Data)+1)
	for k, x := range e.Data {
		data[k] = x
	}
	data[key] = v
	e.Data = data
	return e
}

// WebEndedType is the bridge's extension terminal for a kap session whose
// server stopped, in companion mode: the hook adapter owns the core
// lifecycle there, so the bridge's own stream ends in its own family.
const WebEndedType = "x." + Vendor + ".web.ended"

// WebEnded says a kap session's server stopped: reason EndNormal (no kap
// turn was open) or EndKilled (one was cut off).
func WebEnded(reason string, p Posture) Event {
	e := newEvent(p, WebEndedType, aep.SeverityNotice)
	e.Data["reason"] = reason
	return e
}

package mapping

import (
	"errors"
	"fmt"

	"github.com/aep-kimi/aep-kimi/aep"
)

// Hook event names. The first sixteen are the surface the upstream fixture
// pins (Kimi Code 0.28.1); the last four first appear in 0.32.0 and are what
// the running 2.1.0 binary adds.
const (
	HookSessionStart       = "SessionStart"
	HookSessionEnd         = "SessionEnd"
	HookUserPromptSubmit   = "UserPromptSubmit"
	HookStop               = "Stop"
	HookStopFailure        = "StopFailure"
	HookInterrupt          = "Interrupt"
	HookPreToolUse         = "PreToolUse"
	HookPostToolUse        = "PostToolUse"
	HookPostToolUseFailure = "PostToolUseFailure"
	HookPermissionRequest  = "PermissionRequest"
	HookPermissionResult   = "PermissionResult"
	HookSubagentStart      = "SubagentStart"
	HookSubagentStop       = "SubagentStop"
	HookPreCompact         = "PreCompact"
	HookPostCompact        = "PostCompact"
	HookNotification       = "Notification"

	HookTurnStarted      = "TurnStarted"
	HookUserPromptQueued = "UserPromptQueued"
	HookSessionHeartbeat = "SessionHeartbeat"
	HookTaskStarted      = "TaskStarted"
)

// HooksKimi0_28 returns the hook surface of Kimi 0.28.1 (16 events); a fresh
// slice on each call, so no caller can change the table for another.
func HooksKimi0_28() []string {
	return []string{
		HookSessionStart, HookSessionEnd, HookUserPromptSubmit, HookStop, HookStopFailure,
		HookInterrupt, HookPreToolUse, HookPostToolUse, HookPostToolUseFailure,
		HookPermissionRequest, HookPermissionResult, HookSubagentStart, HookSubagentStop,
		HookPreCompact, HookPostCompact, HookNotification,
	}
}

// HooksKimi0_32 returns the hook surface of 0.32.0 and later (20 events), in
// 2.1.0's own enum order; a fresh slice on each call.
func HooksKimi0_32() []string {
	return []string{
		HookPreToolUse, HookPostToolUse, HookPostToolUseFailure, HookPermissionRequest,
		HookPermissionResult, HookUserPromptSubmit, HookUserPromptQueued, HookTurnStarted,
		HookStop, HookStopFailure, HookInterrupt, HookSessionStart, HookSessionEnd,
		HookSessionHeartbeat, HookSubagentStart, HookSubagentStop, HookTaskStarted,
		HookPreCompact, HookPostCompact, HookNotification,
	}
}

// KnownHook reports whether name is a hook of a Kimi surface this mapping
// knows (0.32.0 and later include every 0.28.1 hook).
func KnownHook(name string) bool { return hookMapperFor(name) != nil }

// HookExtensionTypes returns every x.kimi-code.* type the mapping and the
// adapter produce for known hooks (their own extension types and each known
// hook's fallback form): with the AEP registry, the closed set a metric may
// label an event type with. A fresh slice on each call.
func HookExtensionTypes() []string {
	out := []string{
		xType("run.steer_submitted"), xType("session.pre_compact"), xType("run.turn_started"),
		xType("run.prompt_queued"), xType("session.heartbeat"), xType("progress.task_started"),
		TypePromptSubmitted, TypeSubagentTurnEnded, TypeInstructionDelivered, TypeInstructionDropped,
	}
	for _, h := range HooksKimi0_32() {
		out = append(out, xType("session."+snakeCase(h)))
	}
	return out
}

// SessionHeartbeatInterval is Kimi's SessionHeartbeat cadence in
// milliseconds (seen with 2.1.0: the first fires at uptime_ms ≈ 60001).
const SessionHeartbeatInterval = 60_000

// Facts are what the adapter needs next to the mapped events to pair tools
// and permissions, synthesize runs and track scopes. None of it is content:
// prompts are represented only by a digest.
type Facts struct {
	Hook       string // hook_event_name as sent
	Session    string // session_id; empty when absent (the adapter uses "unknown")
	ToolName   string
	ToolCallID string
	// ApprovalID is the permission object's id (2.1.0 "id"); PairKey falls
	// back to the tool call id for surfaces that send none.
	ApprovalID string
	Decision   string // PermissionResult decision
	Steer      bool   // UserPromptSubmit is_steer
	TurnID     string // PermissionRequest/Result, Interrupt, TurnStarted
	OriginKind string // TurnStarted: user, system_trigger, task
	OriginName string // TurnStarted: subagent, ...
	AgentName  string // SubagentStart/Stop
	PromptID   string // UserPromptQueued
	TaskID     string // TaskStarted; Notification about a background task
	Reason     string // SessionEnd, Interrupt
	// PromptDigest is the digest of the joined prompt text (UserPromptSubmit,
	// UserPromptQueued, TurnStarted), so a queued prompt can be matched to the
	// turn that later runs it without keeping its text.
	PromptDigest string
	// UptimeMs is SessionHeartbeat's uptime.
	UptimeMs int64
	// Known reports whether the hook name is one this table maps; unknown
	// hooks take the extension fallback.
	Known bool
}

// PermissionKey is the key a PermissionRequest and its PermissionResult share.
func (f Facts) PermissionKey() string {
	if f.ApprovalID != "" {
		return f.ApprovalID
	}
	return f.ToolCallID
}

// HookResult is one hook payload mapped.
type HookResult struct {
	Facts  Facts
	Events []Event

	payload map[string]any
}

// ErrNoHookName is returned for a payload without hook_event_name.
var ErrNoHookName = errors.New("payload has no hook_event_name")

// Hook maps one hook payload (the exact stdin JSON Kimi wrote) at posture p.
// It returns ErrEmpty, ErrNotJSON, ErrTooLarge or ErrNoHookName (wrapped) for
// bad input; every well-formed payload maps to at least one event: unknown
// hooks degrade to x.kimi-code.session.{snake_case}, never drop.
func Hook(payload []byte, p Posture) (*HookResult, error) {
	m, err := decodeObject(payload)
	if err != nil {
		return nil, err
	}
	name, ok := m["hook_event_name"].(string)
	if !ok || name == "" {
		return nil, ErrNoHookName
	}
	r := &HookResult{payload: m}
	r.Facts = hookFacts(name, m)
	mapper := hookMapperFor(name)
	r.Facts.Known = mapper != nil
	if mapper == nil {
		mapper = mapFallback
	}
	r.Events = mapper(m, p)
	return r, nil
}

func hookFacts(name string, m map[string]any) Facts {
	f := Facts{
		Hook:       name,
		Session:    str(m, "session_id"),
		ToolName:   str(m, "tool_name"),
		ToolCallID: str(m, "tool_call_id"),
		TurnID:     str(m, "turn_id"),
		AgentName:  str(m, "agent_name"),
		Reason:     str(m, "reason"),
	}
	switch name {
	case HookPermissionRequest, HookPermissionResult:
		f.ApprovalID = str(m, "id")
		f.Decision = str(m, "decision")
	case HookUserPromptSubmit, HookUserPromptQueued, HookTurnStarted:
		f.Steer = boolean(m, "is_steer")
		f.PromptID = str(m, "prompt_id")
		f.OriginKind = str(m, "origin_kind")
		f.OriginName = str(m, "origin_name")
		if text := joinTextParts(m["prompt"]); text != "" {
			f.PromptDigest, _ = aep.Digest(text)
		}
	case HookTaskStarted:
		f.TaskID = str(m, "task_id")
	case HookNotification:
		if str(m, "source_kind") == "background_task" {
			f.TaskID = str(m, "source_id")
		}
	case HookSessionHeartbeat:
		f.UptimeMs, _ = integer(m, "uptime_ms")
	}
	return f
}

type hookMapper func(m map[string]any, p Posture) []Event

// hookMapperFor is the hook -> event table: the mapper of a known hook, nil
// for any other. Each mapper's comment records the decision where the
// design record or the running binary needed one.
func hookMapperFor(name string) hookMapper {
	switch name {
	case HookSessionStart:
		return mapSessionStart
	case HookSessionEnd:
		return mapSessionEnd
	case HookUserPromptSubmit:
		return mapUserPromptSubmit
	case HookStop:
		return mapStop
	case HookStopFailure:
		return mapStopFailure
	case HookInterrupt:
		return mapInterrupt
	case HookPreToolUse:
		return mapPreToolUse
	case HookPostToolUse:
		return mapPostToolUse
	case HookPostToolUseFailure:
		return mapPostToolUseFailure
	case HookPermissionRequest:
		return mapPermissionRequest
	case HookPermissionResult:
		return mapPermissionResult
	case HookSubagentStart:
		return mapSubagentStart
	case HookSubagentStop:
		return mapSubagentStop
	case HookPreCompact:
		return mapPreCompact
	case HookPostCompact:
		return mapPostCompact
	case HookNotification:
		return mapNotification
	case HookTurnStarted:
		return mapTurnStarted
	case HookUserPromptQueued:
		return mapUserPromptQueued
	case HookSessionHeartbeat:
		return mapSessionHeartbeat
	case HookTaskStarted:
		return mapTaskStarted
	}
	return nil
}

// mapSessionStart: session.started with the vendor's source as trigger. The
// 2.1.0 payload adds client_type and model, carried as client.name and
// gen_ai.request.model (structural). cwd is a workstation path: content, so
// it rides at redacted (through the pipeline) and full, as the registry
// gates it; the relay's rules read a session's project from it. Its last
// element, once the path has been through the pipeline (a home directory is
// "~", never its user's name), is the project's name: an identifier like a
// file name in subject, so it rides at metadata (DataProject).
func mapSessionStart(m map[string]any, p Posture) []Event {
	e := newEvent(p, "session.started", aep.SeverityNotice)
	if s := str(m, "source"); s != "" {
		e.Data["trigger"] = s
	}
	if c := str(m, "client_type"); c != "" {
		e.Data["client"] = map[string]any{"name": c}
	}
	if model := str(m, "model"); model != "" {
		e.Data["gen_ai.request.model"] = model
	}
	if label, ok := p.text(e.Capture, str(m, "session_title")); ok {
		e.Data["label"] = label
	}
	if cwd, ok := p.text(e.Capture, str(m, "cwd")); ok {
		e.Data["cwd"] = cwd
	}
	dir, _ := p.text(aep.CaptureRedacted, str(m, "cwd"))
	if name := ProjectName(dir); name != "" && e.Capture >= aep.CaptureMetadata {
		e.Data[DataProject] = name
	}
	return []Event{e}
}

// mapSessionEnd: session.ended. The schema's closed reason set has no vendor
// words: "exit" (the TUI) and "archive" (kimi web) are both a normal end; any
// other vendor reason keeps "normal" out and rides as vendor_reason.
func mapSessionEnd(m map[string]any, p Posture) []Event {
	e := newEvent(p, "session.ended", aep.SeverityNotice)
	switch r := str(m, "reason"); r {
	case "exit", "":
		if r != "" {
			e.Data["reason"] = "normal"
		}
	case "archive":
		e.Data["reason"] = "normal"
		e.Data["vendor_reason"] = r
	default:
		e.Data["vendor_reason"] = snakeCase(r)
	}
	return []Event{e}
}

// mapUserPromptSubmit: run.started, the prompt's text parts joined at
// redacted+. A steer (is_steer) rides the running turn and never opens a run,
// so it lands in the extension namespace.
func mapUserPromptSubmit(m map[string]any, p Posture) []Event {
	if boolean(m, "is_steer") {
		return []Event{newEvent(p, xType("run.steer_submitted"), aep.SeverityInfo)}
	}
	e := newEvent(p, "run.started", aep.SeverityInfo)
	e.Data["trigger"] = "user"
	if text, ok := p.text(e.Capture, joinTextParts(m["prompt"])); ok {
		e.Data["prompt"] = text
	}
	return []Event{e}
}

// mapStop: run.finished; stop_hook_active is loop plumbing, never forwarded.
func mapStop(_ map[string]any, p Posture) []Event {
	return []Event{newEvent(p, "run.finished", aep.SeverityInfo)}
}

// mapStopFailure: run.failed; error_type is both the required reason and
// error.type, error_message rides at redacted+.
func mapStopFailure(m map[string]any, p Posture) []Event {
	e := newEvent(p, "run.failed", aep.SeverityError)
	typ := str(m, "error_type")
	reason := typ
	if reason == "" {
		reason = "error"
	}
	e.Data["reason"] = reason
	if info := e.errorData(p, typ, str(m, "error_message")); len(info) > 0 {
		e.Data["error"] = info
	}
	return []Event{e}
}

// mapInterrupt: run.cancelled by the user; Kimi fires it only for the user's
// own cancellation. turn_id never becomes the run id (one id authority).
func mapInterrupt(_ map[string]any, p Posture) []Event {
	e := newEvent(p, "run.cancelled", aep.SeverityInfo)
	e.Data["by"] = "user"
	return []Event{e}
}

func toolName(m map[string]any) string {
	if n := str(m, "tool_name"); n != "" {
		return n
	}
	return "unknown"
}

// mapPreToolUse: tool.requested with the digest of the original arguments;
// the arguments themselves at redacted (through the pipeline) and full.
func mapPreToolUse(m map[string]any, p Posture) []Event {
	e := toolEvent(p, "tool.requested", aep.SeverityInfo, toolName(m), str(m, "tool_call_id"))
	e.putArgs(p, m["tool_input"])
	return []Event{e}
}

// mapPostToolUse: tool.completed with the result digest; Kimi already slices
// tool_output to 2000 characters.
func mapPostToolUse(m map[string]any, p Posture) []Event {
	e := toolEvent(p, "tool.completed", aep.SeverityInfo, toolName(m), str(m, "tool_call_id"))
	e.putResult(p, m["tool_output"])
	return []Event{e}
}

// mapPostToolUseFailure: tool.failed. 0.28.1 sends error {name, message};
// 2.1.0 sends {code, message, retryable}: the name, else the code, is the
// structural error.type; the message rides at redacted+.
func mapPostToolUseFailure(m map[string]any, p Posture) []Event {
	e := toolEvent(p, "tool.failed", aep.SeverityWarning, toolName(m), str(m, "tool_call_id"))
	var typ, msg string
	switch v := m["error"].(type) {
	case map[string]any:
		typ, msg = firstStr(v, "name", "code"), str(v, "message")
	case string:
		msg = v
	}
	e.Data["error"] = e.errorData(p, typ, msg)
	return []Event{e}
}

// mapPermissionRequest: attention.requested, kind permission, observed: the
// vendor's own UI owns the choice, so no options are claimed and respond_via
// says oob. The prompt is the vendor's display text (0.28.1 sends a string;
// 2.1.0 sends a display object and an "action" line) at redacted+, and a
// synthesized structural line at metadata.
func mapPermissionRequest(m map[string]any, p Posture) []Event {
	e := newEvent(p, "attention.requested", aep.SeverityNotice)
	e.Subject = toolName(m)
	e.Data["kind"] = "permission"
	e.Data["prompt"] = permissionPrompt(m, p, e.Capture, e.Subject)
	e.Data["respond_via"] = []any{"oob"}
	return []Event{e}
}

func permissionPrompt(m map[string]any, p Posture, level aep.Capture, subject string) string {
	text := str(m, "display")
	if text == "" {
		text = str(m, "action")
	}
	if s, ok := p.text(level, text); ok {
		return s
	}
	return aep.SynthesizePrompt(Agent, "permission", subject)
}

// GateRequest builds the answerable attention.requested for a PreToolUse
// held at the adapter's opt-in control gate: kind permission, respond_via
// control, expiring at expiresAt, when onExpiry (DataOnExpiry) is applied
// unless someone answers first; the tool named in subject and data.tool
// (structural). At metadata the prompt is synthesized from structure; at
// redacted+ it is ToolPrompt: the tool and its argument text, through the
// pipeline. options are the answers the caller can honour.
func GateRequest(r *HookResult, p Posture, expiresAt, onExpiry string, options []aep.Option) Event {
	tool := toolName(r.payload)
	e := toolEvent(p, "attention.requested", aep.SeverityNotice, tool, str(r.payload, "tool_call_id"))
	e.Data["kind"] = "permission"
	e.Data["prompt"] = aep.SynthesizePrompt(Agent, "permission", tool)
	if s, ok := p.argsText(e.Capture, ToolPrompt(tool, ArgsSummary(r.payload["tool_input"]))); ok {
		e.Data["prompt"] = s
	}
	e.Data["respond_via"] = []any{"control"}
	if expiresAt != "" {
		e.Data["expires_at"] = expiresAt
		if onExpiry != "" {
			e.Data[DataOnExpiry] = onExpiry
		}
	}
	e.Data["options"] = aep.OptionsData(options, e.Capture)
	return e
}

// mapPermissionResult: the observed answer. approved/rejected ->
// attention.answered via oob (decision as the option, feedback as text at
// redacted+, the vendor's selected label at redacted+); cancelled ->
// attention.resolved dismissed; anything else (e.g. "error", an internal gate
// failure rather than an answer) degrades to the fallback. The adapter adds
// the resolved companion and, for a rejection, tool.denied by runtime.
func mapPermissionResult(m map[string]any, p Posture) []Event {
	switch d := str(m, "decision"); d {
	case "approved", "rejected":
		e := newEvent(p, "attention.answered", aep.SeverityNotice)
		answer := map[string]any{"option": d}
		if s, ok := p.text(e.Capture, str(m, "feedback")); ok {
			answer["text"] = s
		}
		e.Data["answer"] = answer
		e.Data["via"] = "oob"
		if s, ok := p.text(e.Capture, str(m, "selected_label")); ok {
			e.Data["label"] = s
		}
		if sc := str(m, "scope"); sc != "" {
			e.Data["scope"] = snakeCase(sc)
		}
		return []Event{e}
	case "cancelled":
		e := newEvent(p, "attention.resolved", aep.SeverityNotice)
		e.Data["resolution"] = "dismissed"
		return []Event{e}
	}
	return mapFallback(m, p)
}

// mapSubagentStart / mapSubagentStop: the delegation pair, subject the agent
// name. Kimi 2.1.0 sends the parent's session_id on both; the prompt and
// response are content and do not ride.
func mapSubagentStart(m map[string]any, p Posture) []Event {
	e := newEvent(p, "delegation.subagent.started", aep.SeverityInfo)
	e.Subject = str(m, "agent_name")
	return []Event{e}
}

func mapSubagentStop(m map[string]any, p Posture) []Event {
	e := newEvent(p, "delegation.subagent.stopped", aep.SeverityInfo)
	e.Subject = str(m, "agent_name")
	return []Event{e}
}

// mapPreCompact: the pre moment degrades to the extension namespace; the post
// moment is the truthful carrier of session.compacted.
func mapPreCompact(m map[string]any, p Posture) []Event {
	e := newEvent(p, xType("session.pre_compact"), aep.SeverityInfo)
	putStr(e.Data, m, "trigger")
	putCount(e.Data, m, "token_count")
	return []Event{e}
}

func mapPostCompact(m map[string]any, p Posture) []Event {
	e := newEvent(p, "session.compacted", aep.SeverityInfo)
	putStr(e.Data, m, "trigger")
	putCount(e.Data, m, "estimated_token_count")
	return []Event{e}
}

// mapNotification: background-task status, never an attention loop; subject
// the notification type. The title rides as the status message at redacted+.
func mapNotification(m map[string]any, p Posture) []Event {
	e := newEvent(p, "progress.status", aep.SeverityInfo)
	e.Subject = str(m, "notification_type")
	if s := str(m, "severity"); s != "" {
		e.Data["severity"] = snakeCase(s)
	}
	if s, ok := p.text(e.Capture, str(m, "title")); ok {
		e.Data["message"] = s
	}
	// A background task's completion names the task, so a consumer can
	// close what x.kimi-code.progress.task_started opened.
	if str(m, "source_kind") == "background_task" {
		if id := str(m, "source_id"); id != "" {
			e.Data["task_id"] = id
		}
	}
	return []Event{e}
}

// mapTurnStarted (0.32.0+): x.kimi-code.run.turn_started with the turn's
// structural facts. Decision: a turn is not a run on this surface — the run
// opens at the user's prompt and a subagent's turn (origin system_trigger)
// rides inside its parent's run — so the core run.started belongs to the
// adapter's run machine, which uses this hook to open an honest run for a
// turn no prompt started (origin task) and to start a queued prompt's run.
func mapTurnStarted(m map[string]any, p Posture) []Event {
	e := newEvent(p, xType("run.turn_started"), aep.SeverityInfo)
	putCount(e.Data, m, "turn_id")
	if k := str(m, "origin_kind"); k != "" {
		e.Data["origin_kind"] = snakeCase(k)
	}
	if n := str(m, "origin_name"); n != "" {
		e.Data["origin_name"] = snakeCase(n)
	}
	return []Event{e}
}

// mapUserPromptQueued (0.32.0+): a prompt submitted while a turn runs waits
// in Kimi's queue; it is not a run yet. x.kimi-code.run.prompt_queued with
// the queue facts; the adapter opens its run when its turn starts.
func mapUserPromptQueued(m map[string]any, p Posture) []Event {
	e := newEvent(p, xType("run.prompt_queued"), aep.SeverityInfo)
	putStr(e.Data, m, "prompt_id")
	putCount(e.Data, m, "queue_length")
	return []Event{e}
}

// mapSessionHeartbeat (0.32.0+): a liveness tick for a loaded session. Not
// agent.heartbeat, which is agent-scoped and would lose the session; it rides
// the extension namespace at debug (droppable under backpressure) and feeds
// the adapter's hook-channel health.
func mapSessionHeartbeat(m map[string]any, p Posture) []Event {
	e := newEvent(p, xType("session.heartbeat"), aep.SeverityDebug)
	putCount(e.Data, m, "uptime_ms")
	e.Data["interval_ms"] = int64(SessionHeartbeatInterval)
	return []Event{e}
}

// mapTaskStarted (0.32.0+): a background task (bash run_in_background, a
// background agent) began. Not progress.task.planned, which is a plan item;
// the extension carries its structural facts, subject the task id. Its
// completion arrives as Notification (progress.status).
func mapTaskStarted(m map[string]any, p Posture) []Event {
	e := newEvent(p, xType("progress.task_started"), aep.SeverityInfo)
	e.Subject = str(m, "task_id")
	putStr(e.Data, m, "task_id", "kind", "status")
	putBool(e.Data, m, "detached")
	return []Event{e}
}

// mapFallback: the AEP-0001 §6 mechanical vendor-extension fallback.
func mapFallback(m map[string]any, p Posture) []Event {
	name, _ := m["hook_event_name"].(string)
	return []Event{Fallback(name, p)}
}

// Fallback is the extension form of a hook, x.kimi-code.session.{snake_case}:
// what an unknown hook maps to, and what the adapter emits when a known hook
// cannot take its core meaning (a Stop with no run, a second SessionEnd).
func Fallback(hook string, p Posture) Event {
	return newEvent(p, xType("session."+snakeCase(hook)), aep.SeverityInfo)
}

// PermissionRequestFrom maps a PermissionResult as the PermissionRequest it
// answers. Kimi sends the same approval object on both hooks, so when the
// request never arrives (fire-and-forget hooks race), the adapter can still
// open the attention honestly from the result. It returns nil for any other
// hook.
func PermissionRequestFrom(r *HookResult, p Posture) *HookResult {
	if r == nil || r.Facts.Hook != HookPermissionResult || r.payload == nil {
		return nil
	}
	req := make(map[string]any, len(r.payload))
	for k, v := range r.payload {
		switch k {
		case "decision", "feedback", "scope", "selected_label":
		default:
			req[k] = v
		}
	}
	req["hook_event_name"] = HookPermissionRequest
	out := &HookResult{payload: req, Facts: hookFacts(HookPermissionRequest, req)}
	out.Facts.Known = true
	out.Events = mapPermissionRequest(req, p)
	return out
}

// putStr copies string members (vendor tokens: structural by construction);
// a number or boolean reads as its JSON text, anything else is left out.
func putStr(dst, src map[string]any, keys ...string) {
	for _, k := range keys {
		if v := str(src, k); v != "" {
			dst[k] = v
		}
	}
}

// putCount copies non-negative integer members (counts, sizes, durations);
// anything else is left out, so a vendor type change never yields an invalid
// event.
func putCount(dst, src map[string]any, keys ...string) {
	for _, k := range keys {
		if n, ok := integer(src, k); ok && n >= 0 {
			dst[k] = n
		}
	}
}

// putBool copies boolean members.
func putBool(dst, src map[string]any, keys ...string) {
	for _, k := range keys {
		if v, ok := src[k].(bool); ok {
			dst[k] = v
		}
	}
}

// String renders a hook result for debugging.
func (r *HookResult) String() string {
	return fmt.Sprintf("%s -> %d event(s)", r.Facts.Hook, len(r.Events))
}

package bridgeweb

import (
	"encoding/json"
	"sort"
	"strings"
	"time"

	"github.com/aep-kimi/aep-kimi/aep"
	"github.com/aep-kimi/aep-kimi/mapping"
)

// Extension attributes the bridge sets (AEP-0001 §5.4).
const (
	// ExtKimiSession is the kap session id, on every companion event, so a
	// consumer can correlate {sid}.web with the hook adapter's {sid}.
	ExtKimiSession = mapping.ExtKimiSession
	// ExtKimiSeq and ExtKimiEpoch name the kap frame an event came from (its
	// journal seq and epoch): the bridge's resume position, recovered from
	// its own log after a restart.
	ExtKimiSeq   = "kimiseq"
	ExtKimiEpoch = "kimiepoch"
	// ExtKimiTurn is "{agent}/{turn}" on run.started: which kap turn the
	// run is, so a restarted bridge can still close it.
	ExtKimiTurn = "kimiturn"
)

// CompanionSuffix makes a companion-mode session name: {kap id}.web.
const CompanionSuffix = ".web"

// MainAgent is the kap agent id of a session's main agent.
const MainAgent = mapping.MainAgentID

// GapType is the extension event saying frames were lost (mapping.WebGap).
const GapType = mapping.WebGapType

// UnrecognizedType stands in for a frame whose name cannot be made a legal
// AEP type (mapping.WebUnrecognized).
const UnrecognizedType = mapping.WebUnrecognizedType

// Approval option ids the bridge offers when its control can honour them:
// the vendor's own decision words, so an answer decided in Kimi's UI names a
// declared option too.
const (
	OptApprove        = "approved"
	OptApproveSession = "approved_session"
	OptReject         = "rejected"
)

// approvalOptions are the answers an approval offers, a fresh list each
// call.
func approvalOptions() []aep.Option {
	return []aep.Option{
		{ID: OptApprove, Label: "Approve"},
		{ID: OptApproveSession, Label: "Approve for this session"},
		{ID: OptReject, Label: "Reject"},
	}
}

// draft is one event the machine wants emitted: the mapped event plus the
// identity facts only the machine's state knows. Its id is assigned here so
// later drafts can cite it as a cause.
type draft struct {
	id      string
	ev      mapping.Event
	run     string
	cause   string
	subject string // overrides ev.Subject when set
	turn    string // ExtKimiTurn, on run.started
	// observed marks an event of an end seen from the server's process
	// (mapping.ExtObserved).
	observed bool
	// durable is journal.Entry's Durable (a control ack).
	durable bool
}

type runRec struct {
	id, startID, agent, turn string
	at                       time.Time
	// cancel is the control.cancel that aborted this run's prompt.
	cancel *pendingCmd
}

type toolRec struct {
	id, run, name string
	at            time.Time
}

type askRec struct {
	vendorID, reqID, run string
	question             bool
	// questions are a question request's questions, to read answers with.
	questions []mapping.Question
	// options is set when the request declared the control options.
	options bool
	at      time.Time
	// decision is the control.attention.respond the bridge posted for it.
	decision *pendingCmd
}

// pendingCmd is a command the bridge carried out on the kap-server, waiting
// for the broadcast that shows its outcome.
type pendingCmd struct {
	cmdID, by string
	// surface is the surface the command came through ("" unknown).
	surface string
	// option is the declared option applied; decision the vendor word posted
	// (for a question: questionAnswered or questionDismissed).
	option, decision string
	// values are the AEP-0006 values a question's answer applied.
	values map[string]any
}

// What the bridge posted for a question (pendingCmd.decision).
const (
	questionAnswered  = "answered"
	questionDismissed = "dismissed"
)

// maxClosed bounds the questions a session remembers the end of, to refuse
// a late answer with what happened to it.
const maxClosed = 64

// machine is the per-session mapping state: runs from the kap turn
// boundaries, tool pairs by call id, asks by vendor id. It is pure: frames in,
// drafts out, no I/O and no clock (times come with the frames).
type machine struct {
	mode    mapping.Mode
	posture mapping.Posture
	// control is set when the bridge can honour answers (primary mode,
	// AEP_KIMI_WEB_CONTROL on, an authenticated relay binding).
	control bool
	newID   func() string

	runs  map[string]*runRec  // by kap agent id
	tools map[string]*toolRec // by tool call id
	asks  map[string]*askRec  // by approval or question id
	byReq map[string]*askRec  // by attention.requested event id
	// closed says how each recently closed question ended ("answered in
	// Kimi's own UI"), by its request's event id; closedOrder is their
	// order, oldest first, at most maxClosed.
	closed      map[string]string
	closedOrder []string
	// stale counts runs dropped without a terminal: a gap swallowed the
	// turn's end, so the bridge has no honest boundary to emit.
	stale int
	// openTurns counts the kap turns started and not ended, in companion
	// mode (which keeps no runs): whether a stop cut one off.
	openTurns int
	// context is the main agent's context window as the frames last said
	// it (known: any said it), carried on the events that close a step, a
	// turn or a compaction.
	context      mapping.ContextWindow
	contextKnown bool
}

func newMachine(mode mapping.Mode, p mapping.Posture, control bool, newID func() string) *machine {
	if newID == nil {
		newID = aep.NewID
	}
	return &machine{mode: mode, posture: p, control: control && mode == mapping.Primary, newID: newID,
		runs: map[string]*runRec{}, tools: map[string]*toolRec{}, asks: map[string]*askRec{}, byReq: map[string]*askRec{},
		closed: map[string]string{}}
}

// closeQuestion remembers how a question request ended, forgetting the
// oldest past maxClosed.
func (m *machine) closeQuestion(reqID, how string) {
	if _, ok := m.closed[reqID]; !ok {
		m.closedOrder = append(m.closedOrder, reqID)
	}
	m.closed[reqID] = how
	for len(m.closedOrder) > maxClosed {
		delete(m.closed, m.closedOrder[0])
		m.closedOrder = m.closedOrder[1:]
	}
}

// closedWords says how a question ended for a refusal: "answered in Kimi's
// own UI", "dismissed by alice (cli)".
func closedWords(how, by, surface string) string {
	if by == "" {
		return how + " in Kimi's own UI"
	}
	return how + " by " + mapping.SenderWords(by, surface)
}

// observe takes what a frame says of the context window, a volatile
// status pulse's included; a figure without a limit keeps the one known.
func (m *machine) observe(f mapping.Frame) {
	c, ok := mapping.WebContext(f)
	if !ok {
		return
	}
	if c.Limit == 0 {
		c.Limit = m.context.Limit
	}
	m.context, m.contextKnown = c, true
}

// contextFrames are the frames whose events carry the context window: the
// moments it settles (a model step, a turn, a compaction).
var contextFrames = map[string]bool{"turn.step.completed": true, "turn.ended": true, "compaction.completed": true}

// apply maps one durable session frame at time at.
func (m *machine) apply(f mapping.Frame, at time.Time) []draft {
	if f.Volatile || !f.HasSeq || f.SessionID == "" {
		return nil
	}
	m.observe(f)
	out := m.applyFrame(f, at)
	if a := str(f.Payload, "agentId"); m.contextKnown && contextFrames[f.Type] && (a == "" || a == MainAgent) {
		for i := range out {
			out[i].ev = mapping.WithContext(out[i].ev, m.context)
		}
	}
	return out
}

// applyFrame maps one durable session frame with the machine's state.
func (m *machine) applyFrame(f mapping.Frame, at time.Time) []draft {
	r := mapping.MapFrame(f, m.mode, m.posture)
	if m.mode == mapping.Companion {
		m.countTurn(f.Type)
		return m.plain(r.Events, "")
	}
	agent := str(f.Payload, "agentId")
	if agent == "" {
		agent = MainAgent
	}
	switch f.Type {
	case "turn.started":
		return m.turnStarted(r, agent, at)
	case "turn.ended":
		return m.turnEnded(f, r, agent, at)
	case "tool.call.started":
		return m.toolStarted(r, agent, at)
	case "tool.result":
		return m.toolResult(f, r, agent, at)
	case "event.approval.requested", "event.question.requested":
		return m.askRequested(f, r, agent, at)
	case "event.approval.resolved", "event.question.answered", "event.question.dismissed":
		return m.askResolved(f, r, at)
	}
	return m.plain(r.Events, m.runFor(agent))
}

// plain wraps mapped events with no state of their own.
func (m *machine) plain(evs []mapping.Event, run string) []draft {
	out := make([]draft, 0, len(evs))
	for _, ev := range evs {
		out = append(out, draft{id: m.newID(), ev: ev, run: run})
	}
	return out
}

// degrade is the honest fallback for a frame whose pairing state is missing
// (the bridge started, or a gap opened, in the middle): channel visibility
// only, the companion form of the same frame.
func (m *machine) degrade(f mapping.Frame, run string) []draft {
	return m.plain(mapping.MapFrame(f, mapping.Companion, m.posture).Events, run)
}

// runFor is the run an agent's events belong to: its own open turn, else the
// main agent's (a subagent works inside its parent's run).
func (m *machine) runFor(agent string) string {
	if r := m.runs[agent]; r != nil {
		return r.id
	}
	if r := m.runs[MainAgent]; r != nil {
		return r.id
	}
	return ""
}

// mainRun is the main agent's open run, nil when idle.
func (m *machine) mainRun() *runRec { return m.runs[MainAgent] }

func (m *machine) turnStarted(r *mapping.WebResult, agent string, at time.Time) []draft {
	if len(r.Events) == 0 {
		return nil
	}
	if m.runs[agent] != nil {
		m.stale++
	}
	rec := &runRec{id: m.newID(), startID: m.newID(), agent: agent, turn: r.Facts.TurnID, at: at}
	m.runs[agent] = rec
	return []draft{{id: rec.startID, ev: r.Events[0], run: rec.id, turn: agent + "/" + rec.turn}}
}

func (m *machine) turnEnded(f mapping.Frame, r *mapping.WebResult, agent string, at time.Time) []draft {
	rec := m.runs[agent]
	if rec == nil || len(r.Events) == 0 || (r.Facts.TurnID != "" && rec.turn != "" && rec.turn != r.Facts.TurnID) {
		return m.degrade(f, m.runFor(agent))
	}
	delete(m.runs, agent)
	ms, ok := integer(f.Payload, "durationMs")
	if !ok || ms < 0 {
		ms = max(at.Sub(rec.at).Milliseconds(), 0)
	}
	ev := mapping.WithDuration(r.Events[0], ms)
	cause := rec.startID
	if ev.Type == "run.cancelled" && rec.cancel != nil {
		// The abort the bridge posted: the outcome of that command.
		cause = rec.cancel.cmdID
		ev = mapping.CancelledByControl(ev)
	}
	return []draft{{id: m.newID(), ev: ev, run: rec.id, cause: cause}}
}

func (m *machine) toolStarted(r *mapping.WebResult, agent string, at time.Time) []draft {
	if len(r.Events) == 0 {
		return nil
	}
	d := draft{id: m.newID(), ev: r.Events[0], run: m.runFor(agent)}
	if call := r.Facts.ToolCallID; call != "" {
		m.tools[call] = &toolRec{id: d.id, run: d.run, name: d.ev.Subject, at: at}
	}
	return []draft{d}
}

// toolResult pairs the result with its call: the wire result names no tool,
// so the name recorded at tool.call.started is re-attached.
func (m *machine) toolResult(f mapping.Frame, r *mapping.WebResult, agent string, at time.Time) []draft {
	call := r.Facts.ToolCallID
	rec := m.tools[call]
	if call == "" || rec == nil {
		return []draft{{id: m.newID(), ev: mapping.WebUnpairedToolResult(f, m.posture), run: m.runFor(agent)}}
	}
	delete(m.tools, call)
	ev := mapping.WithDuration(mapping.WebToolResult(f, rec.name, m.posture), max(at.Sub(rec.at).Milliseconds(), 0))
	return []draft{{id: m.newID(), ev: ev, run: rec.run, cause: rec.id}}
}

// askRequested opens an attention request and decorates it for the mode:
// with control on, an approval offers the options the bridge can post and
// says respond_via control; otherwise the answer belongs to Kimi's own UI and
// the request says so (respond_via oob, AEP-0008).
func (m *machine) askRequested(f mapping.Frame, r *mapping.WebResult, agent string, at time.Time) []draft {
	if len(r.Events) == 0 {
		return nil
	}
	ev := r.Events[0]
	question := f.Type == "event.question.requested"
	d := draft{id: m.newID(), run: m.runFor(agent)}
	rec := &askRec{vendorID: ev.Subject, reqID: d.id, run: d.run, question: question, at: at}
	var options []aep.Option
	switch {
	case question:
		rec.questions = mapping.WebQuestions(f.Payload)
		rec.options = m.control && rec.vendorID != ""
		d.ev = mapping.OfferedQuestion(ev, rec.options)
	case m.control && rec.vendorID != "":
		options = approvalOptions()
		rec.options = true
	}
	if !question {
		d.ev = mapping.Offered(ev, options)
	}
	if rec.options && !question {
		// Offered for control: made readable by the relay's rules.
		d.ev = mapping.ToolAsked(d.ev, f, m.posture)
	}
	if rec.vendorID != "" {
		m.asks[rec.vendorID] = rec
		m.byReq[rec.reqID] = rec
	}
	return []draft{d}
}

// askResolved closes an attention request: answered then resolved{answered},
// or resolved{dismissed}; every lifecycle event's subject is the request's
// event id. A decision the bridge posted is marked via control and caused by
// the command; one made in Kimi's UI is via oob.
func (m *machine) askResolved(f mapping.Frame, r *mapping.WebResult, at time.Time) []draft {
	if len(r.Events) == 0 {
		return nil
	}
	ev := r.Events[0]
	rec := m.asks[ev.Subject]
	if ev.Subject == "" || rec == nil {
		return m.degrade(f, "")
	}
	delete(m.asks, rec.vendorID)
	delete(m.byReq, rec.reqID)
	latency := max(at.Sub(rec.at).Milliseconds(), 0)
	if rec.question {
		return m.questionResolved(f, rec, latency)
	}
	if ev.Type == "attention.resolved" {
		ev = mapping.WithLatency(ev, latency)
		return []draft{{id: m.newID(), ev: ev, run: rec.run, cause: rec.reqID, subject: rec.reqID}}
	}
	answered := draft{id: m.newID(), run: rec.run, cause: rec.reqID, subject: rec.reqID}
	resolvedCause := answered.id
	decision := str(f.Payload, "decision")
	if pc := rec.decision; pc != nil && pc.decision == decision {
		ev = mapping.WithSurface(mapping.ViaControl(ev, pc.option, pc.by), pc.surface)
		answered.cause, resolvedCause = pc.cmdID, pc.cmdID
	} else if rec.options && decision == OptApprove && str(f.Payload, "scope") == "session" {
		// Keep the recorded answer inside the declared option ids.
		ev = mapping.WithAnswerOption(ev, OptApproveSession)
	}
	answered.ev = ev
	resolved := mapping.AttentionResolved(mapping.ResolutionAnswered, latency, "", m.posture)
	return []draft{answered, {id: m.newID(), ev: resolved, run: rec.run, cause: resolvedCause, subject: rec.reqID}}
}

// questionResolved closes a question request: answered (then resolved
// answered) or dismissed. The answer the bridge posted is the one kap-server
// applied (it takes one answer per question) and is recorded as sent, via
// control, caused by the command; one given in Kimi's own UI is read from
// the frame, via oob. A dismissal of a question offered for control is an
// answer too (the dismiss option, from whoever gave it), then resolved
// dismissed; one the bridge's own cancel brought about, or of a question
// only Kimi's UI could answer, is resolved dismissed alone.
func (m *machine) questionResolved(f mapping.Frame, rec *askRec, latency int64) []draft {
	pc := rec.decision
	var ev mapping.Event
	resolution := mapping.ResolutionAnswered
	by, surface := "", ""
	ours := false
	switch {
	case f.Type == "event.question.answered":
		ours = pc != nil && pc.decision == questionAnswered
		values, via := mapping.WebQuestionValues(f.Payload, rec.questions), "oob"
		if ours {
			values, via = pc.values, "control"
		}
		ev = mapping.QuestionAnswered(values, rec.questions, via, m.posture)
		m.closeQuestion(rec.reqID, "answered in Kimi's own UI")
	default:
		resolution = mapping.ResolutionDismissed
		ours = pc != nil && pc.decision == questionDismissed
		if cancel := m.cancelOf(rec.run); !ours && (cancel != nil || !rec.options) {
			cause, how := rec.reqID, "dismissed in Kimi's own UI"
			if cancel != nil {
				cause, how = cancel.cmdID, "dismissed: its turn was cancelled by "+mapping.SenderWords(cancel.by, cancel.surface)
			}
			m.closeQuestion(rec.reqID, how)
			ev := mapping.AttentionResolved(mapping.ResolutionDismissed, latency, "", m.posture)
			return []draft{{id: m.newID(), ev: ev, run: rec.run, cause: cause, subject: rec.reqID}}
		}
		via := "oob"
		if ours {
			via = "control"
		}
		ev = mapping.QuestionDismissed(via, m.posture)
		m.closeQuestion(rec.reqID, "dismissed in Kimi's own UI")
	}
	answered := draft{id: m.newID(), run: rec.run, cause: rec.reqID, subject: rec.reqID}
	resolvedCause := answered.id
	if ours {
		by, surface = pc.by, pc.surface
		ev = mapping.WithSurface(mapping.ViaControl(ev, "", by), surface)
		answered.cause, resolvedCause = pc.cmdID, pc.cmdID
		m.closeQuestion(rec.reqID, closedWords(pc.decision, by, surface))
	}
	answered.ev = ev
	resolved := mapping.AttentionResolved(resolution, latency, "", m.posture)
	return []draft{answered, {id: m.newID(), ev: resolved, run: rec.run, cause: resolvedCause, subject: rec.reqID}}
}

// cancelOf is the control.cancel under way on run, nil when none is.
func (m *machine) cancelOf(run string) *pendingCmd {
	for _, r := range m.runs {
		if r.id == run && run != "" {
			return r.cancel
		}
	}
	return nil
}

// fold replays one event of the bridge's own log into the state, so a
// restarted bridge still pairs what was open when it stopped.
func (m *machine) fold(ev *aep.Event) {
	if m.mode == mapping.Companion {
		if t, ok := strings.CutPrefix(ev.Type, webPrefix); ok {
			m.countTurn(t)
		} else if ev.Type == mapping.WebEndedType {
			m.openTurns = 0
		}
		return
	}
	at, _ := time.Parse(time.RFC3339Nano, ev.Time)
	data, _ := ev.DataMap()
	switch ev.Type {
	case "run.started":
		turn, _ := ev.ExtString(ExtKimiTurn)
		agent, t, ok := strings.Cut(turn, "/")
		if ok && ev.Run != "" {
			m.runs[agent] = &runRec{id: ev.Run, startID: ev.ID, agent: agent, turn: t, at: at}
		}
	case "run.finished", "run.failed", "run.cancelled":
		for a, r := range m.runs {
			if r.id == ev.Run {
				delete(m.runs, a)
			}
		}
	case "tool.requested":
		tool, _ := data["tool"].(map[string]any)
		if call, _ := tool["call_id"].(string); call != "" {
			name, _ := tool["name"].(string)
			m.tools[call] = &toolRec{id: ev.ID, run: ev.Run, name: name, at: at}
		}
	case "tool.completed", "tool.failed":
		tool, _ := data["tool"].(map[string]any)
		if call, _ := tool["call_id"].(string); call != "" {
			delete(m.tools, call)
		}
	case "attention.requested":
		if ev.Subject == "" {
			return
		}
		_, opts := data["options"]
		rec := &askRec{vendorID: ev.Subject, reqID: ev.ID, run: ev.Run, question: data["kind"] == "form", options: opts, at: at}
		if rec.question {
			fields, _ := data["fields"].([]any)
			rec.questions = mapping.FormQuestions(fields)
		}
		m.asks[rec.vendorID] = rec
		m.byReq[rec.reqID] = rec
	case "attention.answered":
		if rec := m.byReq[ev.Subject]; rec != nil && rec.question {
			how := questionAnswered
			if ans, _ := data["answer"].(map[string]any); ans["option"] == mapping.OptionDismiss {
				how = questionDismissed
			}
			by, _ := data["by"].(string)
			surface, _ := data[mapping.DataSurface].(string)
			m.closeQuestion(rec.reqID, closedWords(how, by, surface))
		}
	case "attention.resolved":
		if rec := m.byReq[ev.Subject]; rec != nil {
			if _, told := m.closed[rec.reqID]; rec.question && !told {
				m.closeQuestion(rec.reqID, "dismissed before anyone answered it")
			}
			delete(m.byReq, rec.reqID)
			delete(m.asks, rec.vendorID)
		}
	}
}

// webPrefix starts every companion event type: x.kimi-code.web.{frame type}.
const webPrefix = "x." + mapping.Vendor + ".web."

// countTurn follows the companion turn count through a kap frame type.
func (m *machine) countTurn(frameType string) {
	switch frameType {
	case "turn.started":
		m.openTurns++
	case "turn.ended":
		m.openTurns = max(m.openTurns-1, 0)
	}
}

// drain closes what the session left open when its server stopped: each
// open attention request is dismissed (AEP-0002 §7.2: none may outlive the
// session), then each open run is drained, innermost (latest) first. runOpen
// says whether a run (in companion mode, a kap turn) was open. The state is
// empty afterwards.
func (m *machine) drain(at time.Time) (out []draft, runOpen bool) {
	if m.mode == mapping.Companion {
		runOpen = m.openTurns > 0
		m.openTurns = 0
		return nil, runOpen
	}
	asks := make([]*askRec, 0, len(m.asks))
	for _, a := range m.asks {
		asks = append(asks, a)
	}
	sort.Slice(asks, func(i, j int) bool {
		return asks[i].at.Before(asks[j].at) || (asks[i].at.Equal(asks[j].at) && asks[i].reqID < asks[j].reqID)
	})
	for _, a := range asks {
		ev := mapping.AttentionResolved(mapping.ResolutionDismissed, at.Sub(a.at).Milliseconds(), "", m.posture)
		out = append(out, draft{id: m.newID(), ev: ev, run: a.run, cause: a.reqID, subject: a.reqID})
	}
	runs := make([]*runRec, 0, len(m.runs))
	for _, r := range m.runs {
		runs = append(runs, r)
	}
	sort.Slice(runs, func(i, j int) bool {
		return runs[i].at.After(runs[j].at) || (runs[i].at.Equal(runs[j].at) && runs[i].id > runs[j].id)
	})
	for _, r := range runs {
		ev := mapping.WithDuration(mapping.RunDrained(m.posture), max(at.Sub(r.at).Milliseconds(), 0))
		out = append(out, draft{id: m.newID(), ev: ev, run: r.id, cause: r.startID})
	}
	runOpen = len(runs) > 0
	clear(m.runs)
	clear(m.tools)
	clear(m.asks)
	clear(m.byReq)
	return out, runOpen
}

// str reads a string member of a frame payload.
func str(m map[string]any, key string) string {
	s, _ := m[key].(string)
	return s
}

// integer reads an integer member of a frame payload (numbers are kept as
// json.Number by mapping.ParseFrame).
func integer(m map[string]any, key string) (int64, bool) {
	switch v := m[key].(type) {
	case json.Number:
		n, err := v.Int64()
		return n, err == nil
	case float64:
		return int64(v), v == float64(int64(v))
	}
	return 0, false
}

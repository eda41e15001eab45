package adapter

import (
	"encoding/json"
	"slices"
	"strings"
	"time"

	"github.com/aep-kimi/aep-kimi/aep"
	"github.com/aep-kimi/aep-kimi/emitter"
	"github.com/aep-kimi/aep-kimi/internal/journal"
	"github.com/aep-kimi/aep-kimi/mapping"
)

// Extension attributes this adapter sets (AEP-0001 §5.4).
const (
	// ExtDelivery names the kimi-hook invocation an event came from: it is
	// how a spooled copy of a payload already taken is recognised.
	ExtDelivery = "kimidelivery"
	// ExtSpooled marks events that travelled through the spool.
	ExtSpooled = "kimispooled"
)

// delivery is one hook payload on its way in.
type delivery struct {
	id      string
	payload []byte
	at      time.Time
	spooled bool
	// proc is the local Kimi process the hook served (zero: unknown).
	proc procRef
	// arrived is when the delivery reached the adapter, and wait how long
	// its kimi-hook waits for a reply from then on (0: not declared).
	arrived time.Time
	wait    time.Duration
}

// hookSession is one Kimi session as its hooks tell it: order, runs,
// scopes, pairs. Every field is guarded by the embedded emitter.Session's lock, which the core hands it
// out with; its last sign of life (Touch) is its last hook.
type hookSession struct {
	emitter.Session
	srv *Server

	startedAt  time.Time
	runs       int
	ended      bool
	heartbeats bool

	cur *run
	// closed is the run that closed last, while no run has opened since:
	// a prompt's TurnStarted delivered after its Stop belongs to it.
	closed   *run
	turnRuns map[string]string // Kimi turn id -> run id
	pending  []*queuedPrompt
	scopes   []*scope
	tools    map[string]*toolRec
	perms    map[string]*permRec
	parked   []*parked
	seen     *recent // delivery ids already taken

	control sessionControl
	life    sessionLife
}

type run struct {
	id, startID string
	at          time.Time
	turn        string
	fromPrompt  bool
}

// queuedPrompt is a prompt Kimi accepted while a turn was running; its run
// opens when its turn starts.
type queuedPrompt struct {
	started mapping.Event
	at      time.Time
	digest  string
}

// scope is a subagent running inside the parent's session (2.1.0 sends the
// parent's session_id on every subagent hook).
type scope struct {
	agent       string
	startID     string
	at          time.Time
	started     bool // SubagentStart seen
	turnStarted bool // TurnStarted(system_trigger, subagent) seen
	turnEnded   bool // its own Stop seen
}

type toolRec struct {
	id, run, name string
	at            time.Time
	// unanswered is set once the session ended with no result for the
	// call, counted then (noteUnanswered).
	unanswered bool
}

type permRec struct {
	id, run, tool, callID string
	at                    time.Time
	closed                bool
}

// parked is a hook waiting for the event it depends on.
type parked struct {
	d        *delivery
	r        *mapping.HookResult
	deadline time.Time
	ready    func() bool
	out      chan outcome
}

// outcome is the reply for a hook: now, or later when wait is non-nil. err
// is set when the hook's events could not be made durable: the reply then
// says so and kimi-hook keeps the payload in its spool.
type outcome struct {
	reply []byte
	wait  <-chan outcome
	err   error
	// sync is what must be on the disk before the reply is sent: the
	// session log up to the hook's events (journal.Stream.Mark).
	sync journal.Mark
	// gone is called when the hook's connection ends while waiting: its
	// kimi-hook was killed or gave up, so no answer can reach Kimi any more.
	gone func()
}

// emptyReply is the reply that changes nothing for Kimi; fresh each time,
// since the caller owns the bytes it is handed.
func emptyReply() []byte { return []byte("{}") }

// recent is a bounded set of recently seen ids.
type recent struct {
	order []string
	set   map[string]bool
	max   int
}

func newRecent(max int) *recent { return &recent{set: map[string]bool{}, max: max} }

func (r *recent) has(id string) bool { return r.set[id] }

// forget drops id, so the delivery is taken again when it comes back.
func (r *recent) forget(id string) {
	if !r.set[id] {
		return
	}
	delete(r.set, id)
	for i, o := range r.order {
		if o == id {
			r.order = append(r.order[:i], r.order[i+1:]...)
			break
		}
	}
}

func (r *recent) add(id string) {
	if id == "" || r.set[id] {
		return
	}
	if len(r.order) >= r.max {
		delete(r.set, r.order[0])
		r.order = r.order[1:]
	}
	r.order = append(r.order, id)
	r.set[id] = true
}

const recentDeliveries = 2048

// fold takes one event of the session's log back into its state (the core
// folds the log's tail on first touch), so a restarted adapter closes the
// run that was open, pairs the tools that were in flight and recognises
// deliveries it already logged. Callers hold the session's lock.
func (s *hookSession) fold(ev *aep.Event) {
	if d, ok := ev.ExtString(ExtDelivery); ok {
		s.seen.add(d)
	}
	t, _ := time.Parse(time.RFC3339Nano, ev.Time)
	data, _ := ev.DataMap()
	switch ev.Type {
	case "session.started":
		s.startedAt, s.ended, s.runs = t, false, 0
		s.life.observed = ""
		s.life.proc = procOfEvent(ev)
	case "session.ended":
		s.ended, s.cur = true, nil
		clear(s.perms) // what an ended session left open is no later chapter's
		s.life.observed, _ = ev.ExtString(ExtObserved)
	case "run.started":
		s.cur = &run{id: ev.Run, startID: ev.ID, at: t}
		s.runs++
	case "run.finished", "run.failed", "run.cancelled":
		if s.cur != nil && s.cur.id == ev.Run {
			s.cur = nil
		}
	case "x.kimi-code.run.turn_started":
		if data["origin_kind"] == "user" && s.cur != nil && ev.Run == s.cur.id {
			if n, ok := data["turn_id"].(json.Number); ok {
				s.cur.turn = n.String()
				s.turnRuns[s.cur.turn] = s.cur.id
			}
		}
	case "tool.requested":
		if tool, ok := data["tool"].(map[string]any); ok {
			if id, _ := tool["call_id"].(string); id != "" {
				name, _ := tool["name"].(string)
				s.tools[id] = &toolRec{id: ev.ID, run: ev.Run, name: name, at: t}
			}
		}
	case "tool.completed", "tool.failed", "tool.denied":
		if tool, ok := data["tool"].(map[string]any); ok {
			if id, _ := tool["call_id"].(string); id != "" {
				delete(s.tools, id)
			}
		}
	case "attention.requested":
		// Still open at the log's end, it is dismissed when the session
		// ends (AEP-0002 §7.2), or answered by its PermissionResult (matched
		// by tool call: the approval id is not in the event).
		rec := &permRec{id: ev.ID, run: ev.Run, at: t}
		for callID, tr := range s.tools {
			if tr.id == ev.Cause {
				rec.callID, rec.tool = callID, tr.name
			}
		}
		if tool, ok := data["tool"].(map[string]any); ok {
			if id, _ := tool["call_id"].(string); id != "" {
				rec.callID = id
			}
		}
		s.perms[restoredKey(ev.ID)] = rec
	case "attention.resolved", "attention.timeout":
		delete(s.perms, restoredKey(ev.Subject))
	}
}

// restoredKey is the perms key of a request folded back from the log: its
// event id, marked so no hook's key (an approval or tool call id) meets it.
func restoredKey(requestID string) string { return "\x00log:" + requestID }

// restored finds the open request folded back from the log that the tool
// call callID waits on, or nil.
func (s *hookSession) restored(callID string) *permRec {
	if callID == "" {
		return nil
	}
	for key, rec := range s.perms {
		if !rec.closed && rec.callID == callID && strings.HasPrefix(key, restoredKey("")) {
			return rec
		}
	}
	return nil
}

// emitOpts adjusts one emitted event's identity.
type emitOpts struct {
	cause   string
	subject string
	// run overrides the run attribute; noRun leaves it out.
	run   string
	noRun bool
	ext   []journal.Ext
}

// emit puts one event on the session's stream, with the identity the
// session's state decides. Callers hold the session's lock.
func (s *hookSession) emit(d *delivery, m mapping.Event, o emitOpts) *aep.Event {
	e := journal.Entry{Event: m, At: d.at, Cause: o.cause, Subject: o.subject}
	switch {
	case o.noRun:
	case o.run != "":
		e.Run = o.run
	case s.cur != nil:
		e.Run = s.cur.id
	}
	if d.id != "" {
		e.Ext = append(e.Ext, journal.Ext{Name: ExtDelivery, Value: d.id})
	}
	if d.spooled {
		e.Ext = append(e.Ext, journal.Ext{Name: ExtSpooled, Value: true})
	}
	e.Ext = append(e.Ext, o.ext...)
	return s.Stream().Emit(e)
}

// handle applies one mapped hook to the session. Callers hold the session's lock.
func (s *hookSession) handle(d *delivery, r *mapping.HookResult) outcome {
	s.Touch(s.srv.cfg.Now())
	if d.id != "" {
		if s.seen.has(d.id) {
			s.srv.metrics.duplicates.Inc()
			return outcome{reply: emptyReply()}
		}
		s.seen.add(d.id)
	}
	if p := s.parkIfEarly(d, r); p != nil {
		return outcome{wait: replyOf(p.out)}
	}
	out := s.apply(d, r, false)
	s.drainParked(false)
	return out
}

// replyOf flattens a parked hook's outcome, which may itself be a hold.
func replyOf(ch <-chan outcome) <-chan outcome {
	reply := make(chan outcome, 1)
	go func() {
		o := <-ch
		if o.wait != nil {
			o = <-o.wait
		}
		reply <- o
	}()
	return reply
}

// parkIfEarly parks a hook that depends on an event not seen yet.
func (s *hookSession) parkIfEarly(d *delivery, r *mapping.HookResult) *parked {
	ready := s.readiness(r)
	if ready == nil || ready() {
		return nil
	}
	p := &parked{d: d, r: r, deadline: s.srv.cfg.Now().Add(s.srv.cfg.ReorderWindow), ready: ready, out: make(chan outcome, 1)}
	s.parked = append(s.parked, p)
	s.srv.metrics.parked.Inc()
	time.AfterFunc(s.srv.cfg.ReorderWindow, func() {
		s.Lock()
		defer s.Unlock()
		s.drainParked(true)
	})
	return p
}

// readiness returns the condition a hook waits for, or nil when it never
// waits. Each case is an arrival-order trap seen with the real Kimi: it
// dispatches hooks concurrently, so arrival order is not dispatch order.
func (s *hookSession) readiness(r *mapping.HookResult) func() bool {
	f := r.Facts
	switch f.Hook {
	case mapping.HookPermissionResult:
		// PermissionResult has arrived before PermissionRequest.
		key := f.PermissionKey()
		if key == "" {
			return nil
		}
		return func() bool { return s.perms[key] != nil || s.restored(f.ToolCallID) != nil }
	case mapping.HookPostToolUse, mapping.HookPostToolUseFailure:
		// Only possible through the spool: the request is awaited.
		if f.ToolCallID == "" {
			return nil
		}
		return func() bool { return s.tools[f.ToolCallID] != nil }
	case mapping.HookTurnStarted:
		if f.OriginKind != "user" {
			return nil
		}
		// A user turn starting while another turn is still open in our
		// view: its Stop or Interrupt is on the way.
		return func() bool { return s.cur == nil || s.cur.turn == "" || s.cur.turn == f.TurnID }
	case mapping.HookStop, mapping.HookStopFailure:
		// A task turn's Stop can overtake its TurnStarted.
		if !s.srv.turnHooks.Load() {
			return nil
		}
		return func() bool { return s.cur != nil || s.subagentTurn() != nil }
	case mapping.HookInterrupt:
		if !s.srv.turnHooks.Load() || f.TurnID == "" {
			return nil
		}
		return func() bool {
			_, known := s.turnRuns[f.TurnID]
			return known || s.cur == nil || s.cur.turn == "" || s.cur.turn == f.TurnID
		}
	}
	return nil
}

// drainParked applies parked hooks that became ready and, when expired is
// set, those whose window has passed (they proceed honestly without the
// event they waited for). Callers hold the session's lock.
func (s *hookSession) drainParked(expired bool) {
	for progress := true; progress; {
		progress = false
		now := s.srv.cfg.Now()
		for i, p := range s.parked {
			late := expired && !now.Before(p.deadline)
			if !p.ready() && !late {
				continue
			}
			s.parked = append(s.parked[:i], s.parked[i+1:]...)
			if late && !p.ready() {
				s.srv.metrics.parkExpired.Inc()
			}
			p.out <- s.apply(p.d, p.r, late)
			progress = true
			break
		}
	}
}

// apply maps one hook onto state and events, as one batch on the stream:
// the hook's events reach the log in one append, whole or not at all. late
// is set when a parked hook proceeds without the event it waited for.
func (s *hookSession) apply(d *delivery, r *mapping.HookResult, late bool) outcome {
	s.Stream().Begin()
	var perms map[string]*permRec
	if h := r.Facts.Hook; h == mapping.HookPermissionRequest || h == mapping.HookPermissionResult {
		perms = s.copyPerms()
	}
	out := s.applyHook(d, r, late)
	if err := s.Stream().Commit(); err != nil {
		if perms != nil {
			// The log does not say the request was opened or answered:
			// neither does the session, so its end still settles it.
			s.perms = perms
		}
		return s.notDurable(d, err)
	}
	if out.wait == nil {
		out.sync = s.Stream().Mark()
	}
	return out
}

// copyPerms copies the permission requests the session holds, each
// record by value: what a hook the log refuses is undone to. Callers hold
// the session's lock.
func (s *hookSession) copyPerms() map[string]*permRec {
	c := make(map[string]*permRec, len(s.perms))
	for k, rec := range s.perms {
		cp := *rec
		c[k] = &cp
	}
	return c
}

// durable waits, outside the session's lock, until what o acknowledges is
// on the disk as the log's mode promises; a sync that failed makes it
// not-durable.
func (o outcome) durable() outcome {
	if err := o.sync.Wait(); err != nil && o.err == nil {
		o.err = err
	}
	return o
}

// notDurable answers a hook whose events did not reach the log. Nothing of
// it was logged or published, so its delivery id is forgotten: kimi-hook
// spools the payload on this answer and the spooled copy is taken again, as
// a new hook against the session's state at that time. Callers hold the session's lock.
func (s *hookSession) notDurable(d *delivery, err error) outcome {
	s.seen.forget(d.id)
	return outcome{err: err}
}

func (s *hookSession) applyHook(d *delivery, r *mapping.HookResult, late bool) outcome {
	f := r.Facts
	s.chapterFor(d, r)
	s.trackTask(f)
	switch f.Hook {
	case mapping.HookSessionStart:
		s.startedAt, s.ended, s.runs = d.at, false, 0
		s.emit(d, r.Events[0], emitOpts{noRun: true, ext: procExt(d.proc)})
	case mapping.HookSessionEnd:
		s.endSession(d, r)
	case mapping.HookUserPromptSubmit:
		return s.promptSubmitted(d, r)
	case mapping.HookTurnStarted:
		s.turnStarted(d, r, late)
	case mapping.HookStop, mapping.HookStopFailure:
		s.turnEnded(d, r)
	case mapping.HookInterrupt:
		s.interrupted(d, r)
	case mapping.HookSubagentStart:
		s.subagentStarted(d, r)
	case mapping.HookSubagentStop:
		s.subagentStopped(d, r)
	case mapping.HookPreToolUse:
		return s.toolRequested(d, r)
	case mapping.HookPostToolUse, mapping.HookPostToolUseFailure:
		s.proceededWithout(r.Facts.ToolCallID)
		s.toolFinished(d, r)
	case mapping.HookPermissionRequest:
		s.permissionRequested(d, r, nil)
	case mapping.HookPermissionResult:
		s.permissionResult(d, r)
	case mapping.HookSessionHeartbeat:
		s.heartbeats = true
		s.emitAll(d, r, emitOpts{})
	case mapping.HookUserPromptQueued:
		// A queued prompt belongs to no run yet: its turn opens one later.
		s.emitAll(d, r, emitOpts{noRun: true})
	default:
		s.emitAll(d, r, emitOpts{})
	}
	return outcome{reply: emptyReply()}
}

// emitAll emits each of a hook's events with the same options.
func (s *hookSession) emitAll(d *delivery, r *mapping.HookResult, o emitOpts) {
	for _, m := range r.Events {
		s.emit(d, m, o)
	}
}

// openRun starts a run with the given run.started event.
func (s *hookSession) openRun(d *delivery, started mapping.Event, fromPrompt bool) {
	id := aep.NewID()
	s.cur = &run{id: id, at: d.at, fromPrompt: fromPrompt}
	s.closed = nil
	if ev := s.emit(d, started, emitOpts{run: id}); ev != nil {
		s.cur.startID = ev.ID
	}
	s.runs++
}

// closeRun emits the run's terminal and forgets it.
func (s *hookSession) closeRun(d *delivery, terminal mapping.Event) {
	r := s.cur
	if r == nil {
		return
	}
	terminal = mapping.WithDuration(terminal, d.at.Sub(r.at).Milliseconds())
	s.emit(d, terminal, emitOpts{run: r.id, cause: r.startID})
	if r.turn != "" {
		s.turnRuns[r.turn] = r.id
	}
	s.cur, s.closed = nil, r
}

// drainRun closes a run left open at a boundary as cancelled, with no claim
// about who cancelled it.
func (s *hookSession) drainRun(d *delivery) {
	if s.cur == nil {
		return
	}
	s.closeRun(d, mapping.RunDrained(s.srv.cfg.Posture))
}

// promptSubmitted: one run per prompt that is not a steer. On a surface with
// TurnStarted (0.32.0+), a prompt submitted while a run is open (or while
// earlier prompts wait) is queued by Kimi: its run opens when its turn starts.
// Without TurnStarted, the open run is stale and drains first.
func (s *hookSession) promptSubmitted(d *delivery, r *mapping.HookResult) outcome {
	m := r.Events[0]
	if r.Facts.Steer {
		s.emit(d, m, emitOpts{})
		return s.instructReply(d)
	}
	switch {
	case s.cur == nil && len(s.pending) == 0:
		s.openRun(d, m, true)
	case s.srv.turnHooks.Load():
		s.pending = append(s.pending, &queuedPrompt{started: m, at: d.at, digest: r.Facts.PromptDigest})
		s.emit(d, mapping.PromptQueued(s.srv.cfg.Posture), emitOpts{noRun: true})
	default:
		s.drainRun(d)
		s.openRun(d, m, true)
	}
	return s.instructReply(d)
}

// turnStarted uses Kimi's real turn boundaries where they make runs truer: a
// queued prompt's run opens here, a turn no prompt started (a background
// task's completion) gets an honest run of its own, and a subagent's turn
// opens its scope inside the parent's run.
func (s *hookSession) turnStarted(d *delivery, r *mapping.HookResult, late bool) {
	f := r.Facts
	p := s.srv.cfg.Posture
	switch {
	case f.OriginKind == "user":
		if s.cur != nil && s.cur.turn != "" && s.cur.turn != f.TurnID && late {
			s.drainRun(d) // its end never came within the window
		}
		switch {
		case s.cur != nil && s.cur.turn == "":
			s.cur.turn = f.TurnID
		case s.cur == nil && len(s.pending) == 0 && s.closed != nil && s.closed.fromPrompt && s.closed.turn == "":
			// The turn of the prompt whose run already ended: its
			// TurnStarted (fire-and-forget) came after its Stop. It is
			// that run's, not a run of its own.
			s.closed.turn = f.TurnID
			s.turnRuns[f.TurnID] = s.closed.id
			s.emitAll(d, r, emitOpts{run: s.closed.id})
			return
		case s.cur == nil && len(s.pending) > 0:
			q := s.pending[0]
			s.pending = s.pending[1:]
			s.openRun(d, q.started, true)
			s.cur.turn = f.TurnID
		case s.cur == nil:
			s.openRun(d, mapping.RunStarted(mapping.TriggerUser, p), false)
			s.cur.turn = f.TurnID
		}
		if s.cur != nil && s.cur.turn != "" {
			s.turnRuns[s.cur.turn] = s.cur.id
		}
	case f.OriginKind == "system_trigger" && f.OriginName == "subagent":
		if sc := s.scopeAwaiting(func(sc *scope) bool { return !sc.turnStarted }); sc != nil {
			sc.turnStarted = true
		} else {
			s.scopes = append(s.scopes, &scope{turnStarted: true, at: d.at})
		}
	case f.OriginKind == "task" && s.cur == nil:
		s.openRun(d, mapping.RunStarted(mapping.TriggerAgent, p), false)
		s.cur.turn = f.TurnID
		s.turnRuns[f.TurnID] = s.cur.id
	}
	s.emitAll(d, r, emitOpts{})
}

// subagentTurn is the innermost subagent whose turn is running.
func (s *hookSession) subagentTurn() *scope {
	for i := len(s.scopes) - 1; i >= 0; i-- {
		sc := s.scopes[i]
		if (sc.turnStarted || (sc.started && !s.srv.turnHooks.Load())) && !sc.turnEnded {
			return sc
		}
	}
	return nil
}

func (s *hookSession) scopeAwaiting(match func(*scope) bool) *scope {
	for _, sc := range s.scopes {
		if match(sc) {
			return sc
		}
	}
	return nil
}

// turnEnded: Stop/StopFailure. A subagent's own Stop carries the parent's
// session_id; it ends the subagent's turn, never the parent's run.
func (s *hookSession) turnEnded(d *delivery, r *mapping.HookResult) {
	m := r.Events[0]
	p := s.srv.cfg.Posture
	if sc := s.subagentTurn(); sc != nil {
		sc.turnEnded = true
		failed := r.Facts.Hook == mapping.HookStopFailure
		s.emit(d, mapping.SubagentTurnEnded(failed, p), emitOpts{cause: sc.startID})
		return
	}
	if s.cur == nil {
		// No run we know of: the hook still lands, in its fallback form.
		s.emit(d, fallback(p, r.Facts.Hook), emitOpts{})
		return
	}
	s.closeRun(d, m)
}

// interrupted: Interrupt closes the run of its turn as cancelled by the user.
func (s *hookSession) interrupted(d *delivery, r *mapping.HookResult) {
	f := r.Facts
	p := s.srv.cfg.Posture
	if runID, ok := s.turnRuns[f.TurnID]; ok && f.TurnID != "" && (s.cur == nil || s.cur.id != runID) {
		// That turn's run already ended: record the late interrupt only.
		s.emit(d, fallback(p, f.Hook), emitOpts{run: runID})
		return
	}
	if s.cur == nil {
		s.emit(d, fallback(p, f.Hook), emitOpts{})
		return
	}
	if s.cur.turn == "" {
		s.cur.turn = f.TurnID
	}
	s.closeRun(d, r.Events[0])
}

func fallback(p mapping.Posture, hook string) mapping.Event { return mapping.Fallback(hook, p) }

func (s *hookSession) subagentStarted(d *delivery, r *mapping.HookResult) {
	sc := s.scopeAwaiting(func(sc *scope) bool { return !sc.started })
	if sc == nil {
		sc = &scope{at: d.at}
		s.scopes = append(s.scopes, sc)
	}
	sc.started, sc.agent = true, r.Facts.AgentName
	if ev := s.emit(d, r.Events[0], emitOpts{}); ev != nil {
		sc.startID = ev.ID
	}
}

func (s *hookSession) subagentStopped(d *delivery, r *mapping.HookResult) {
	m, o := r.Events[0], emitOpts{}
	for i, sc := range s.scopes {
		if sc.started && (sc.agent == r.Facts.AgentName || r.Facts.AgentName == "") {
			s.scopes = append(s.scopes[:i], s.scopes[i+1:]...)
			o.cause = sc.startID
			m = mapping.WithDuration(m, d.at.Sub(sc.at).Milliseconds())
			break
		}
	}
	s.emit(d, m, o)
}

// toolRequested records the request for pairing, and holds it at the control
// gate when that is on.
func (s *hookSession) toolRequested(d *delivery, r *mapping.HookResult) outcome {
	ev := s.emit(d, r.Events[0], emitOpts{})
	if ev == nil {
		return outcome{reply: emptyReply()}
	}
	rec := &toolRec{id: ev.ID, run: ev.Run, name: r.Facts.ToolName, at: d.at}
	if id := r.Facts.ToolCallID; id != "" {
		s.tools[id] = rec
	}
	return s.gate(d, r, rec)
}

// toolFinished pairs the result with its request by tool_call_id.
func (s *hookSession) toolFinished(d *delivery, r *mapping.HookResult) {
	m, o := r.Events[0], emitOpts{}
	if rec := s.tools[r.Facts.ToolCallID]; rec != nil && r.Facts.ToolCallID != "" {
		delete(s.tools, r.Facts.ToolCallID)
		o.cause, o.run = rec.id, rec.run
		if o.run == "" {
			o.noRun = true
		}
		m = mapping.WithDuration(m, d.at.Sub(rec.at).Milliseconds())
	}
	s.emit(d, m, o)
}

// permissionRequested opens an observed attention; from is the result it was
// synthesized from when the request itself never arrived in time.
func (s *hookSession) permissionRequested(d *delivery, r *mapping.HookResult, from *mapping.HookResult) {
	key := r.Facts.PermissionKey()
	p := s.srv.cfg.Posture
	if prev := s.perms[key]; prev != nil && key != "" {
		// The request arrived after its result already closed it.
		s.emit(d, fallback(p, r.Facts.Hook), emitOpts{run: prev.run, cause: prev.id})
		return
	}
	o := emitOpts{}
	if rec := s.tools[r.Facts.ToolCallID]; rec != nil && r.Facts.ToolCallID != "" {
		o.cause = rec.id
	}
	ev := s.emit(d, r.Events[0], o)
	if ev == nil {
		return
	}
	s.perms[key] = &permRec{id: ev.ID, run: ev.Run, tool: r.Facts.ToolName, callID: r.Facts.ToolCallID, at: d.at}
}

// permissionResult closes the observed attention: answered then resolved,
// plus tool.denied by runtime for a rejection; a cancellation dismisses.
func (s *hookSession) permissionResult(d *delivery, r *mapping.HookResult) {
	f := r.Facts
	key := f.PermissionKey()
	p := s.srv.cfg.Posture
	rec := s.perms[key]
	if rec == nil {
		// Opened before a restart (or an eviction): it came back from the log.
		if rec = s.restored(f.ToolCallID); rec != nil && key != "" {
			s.perms[key] = rec
		}
	}
	if rec == nil && key != "" {
		// The request never came within the window: the result carries the
		// same approval object, so open the attention from it.
		s.srv.metrics.synthesized.Inc()
		if req := mapping.PermissionRequestFrom(r, p); req != nil {
			s.permissionRequested(d, req, r)
			rec = s.perms[key]
		}
	}
	m := r.Events[0]
	if rec == nil || rec.closed || !strings.HasPrefix(m.Type, "attention.") {
		o := emitOpts{}
		if rec != nil {
			o.cause, o.run = rec.id, rec.run
		}
		s.emit(d, m, o)
		return
	}
	rec.closed = true
	run := rec.run
	latency := d.at.Sub(rec.at).Milliseconds()
	if m.Type == "attention.resolved" { // cancelled
		s.emit(d, mapping.WithLatency(m, latency), emitOpts{subject: rec.id, cause: rec.id, run: run, noRun: run == ""})
		return
	}
	answered := s.emit(d, m, emitOpts{subject: rec.id, cause: rec.id, run: run, noRun: run == ""})
	if answered == nil {
		return
	}
	resolved := mapping.AttentionResolved(mapping.ResolutionAnswered, latency, "", p)
	s.emit(d, resolved, emitOpts{subject: rec.id, cause: answered.ID, run: run, noRun: run == ""})
	if f.Decision == "rejected" {
		denied := mapping.ToolDenied(rec.tool, rec.callID, mapping.DeniedByRuntime, p)
		s.emit(d, denied, emitOpts{cause: answered.ID, run: run, noRun: run == ""})
	}
}

// endSession closes everything the session left open, then ends it.
func (s *hookSession) endSession(d *delivery, r *mapping.HookResult) {
	s.drain(d)
	if s.ended {
		// Kimi can end a session twice (a resumed session exits again);
		// AEP allows one session.ended, so the repeat degrades.
		s.emit(d, fallback(s.srv.cfg.Posture, r.Facts.Hook), emitOpts{noRun: true})
		return
	}
	s.emitEnd(d, r.Events[0], emitOpts{})
}

// noteUnanswered counts, once each, the tool calls the session ends with
// no result for, and says so in one line. Kimi ends PostToolUse hooks when
// a turn ends; one it ended before kimi-hook had the payload leaves its
// call without a result, and nothing else tells of it. No event is made
// up: the outcome is not known. Callers hold the session's lock.
func (s *hookSession) noteUnanswered() {
	var calls []string
	for id, rec := range s.tools {
		if !rec.unanswered {
			rec.unanswered = true
			calls = append(calls, id)
		}
	}
	if len(calls) == 0 {
		return
	}
	slices.Sort(calls)
	s.srv.metrics.noResult.Add(float64(len(calls)))
	s.srv.log.Warn("session ended with tool calls that never had a result (their PostToolUse hooks did not arrive)",
		"session", emitter.Clip(s.Key()), "calls", len(calls), "first", emitter.Clip(calls[0]))
}

// drain closes everything a session left open at its end: held hooks are
// released, queued instructions drop, open attention is dismissed (AEP-0002
// §7.2), subagents and background tasks stop, and the open run drains as
// cancelled. Callers hold the session's lock.
func (s *hookSession) drain(d *delivery) {
	p := s.srv.cfg.Posture
	s.releaseHolds(d, "session-ended")
	s.dropInstructions(d)
	for _, rec := range s.perms {
		if rec.closed {
			continue
		}
		rec.closed = true
		resolved := mapping.AttentionResolved(mapping.ResolutionDismissed, d.at.Sub(rec.at).Milliseconds(), "", p)
		s.emit(d, resolved, emitOpts{subject: rec.id, cause: rec.id, run: rec.run, noRun: rec.run == ""})
	}
	s.drainScopes(d)
	s.drainTasks(d)
	s.noteUnanswered()
	s.drainRun(d)
	s.pending = nil
	s.scopes = nil
}

// emitEnd emits the session's one session.ended, with its duration and run
// count. Callers hold the session's lock.
func (s *hookSession) emitEnd(d *delivery, m mapping.Event, o emitOpts) {
	if !s.startedAt.IsZero() {
		m = mapping.WithSessionSummary(m, d.at.Sub(s.startedAt).Milliseconds(), s.runs)
	}
	o.noRun = true
	s.emit(d, m, o)
	s.ended = true
	s.srv.life.release(s.Key()) // the last session of a process releases its watch
}

package consumer

import (
	"encoding/json"
	"math"
	"slices"
	"sort"
	"time"

	"github.com/aep-kimi/aep-kimi/aep"
	"github.com/aep-kimi/aep-kimi/mapping"
	"github.com/aep-kimi/aep-kimi/relay/wire"
	"github.com/aep-kimi/aep-kimi/rules"
)

// Fold is the state of a fleet derived from its events: sessions, their
// runs, and the attention requests with their outcomes (AEP-0002 §7). It
// keeps the AEP consumer obligations: events are deduplicated on (source,
// id) and derived per session in (epoch, seq) order whatever their arrival;
// an event without seq (a foreign emitter's: a command, attention.routed)
// sits after the owner's latest event when it arrived. fleetpage's
// assets/state.js derives the same state; both produce Projection, and the
// golden cases under testdata/fold hold them to it.
//
// The zero value is an empty fold. A Fold is not safe for concurrent use.
type Fold struct {
	seen     map[string]bool
	lanes    map[string]*lane
	arrivals int
	// companionOf maps a session to the Kimi session it is another view
	// of (mapping.ExtKimiSession: the kimi web bridge's {id}.web beside
	// the hook adapter's {id}). Each stays its own AEP session, with its
	// own owner and order; a person sees one session, under the Kimi id.
	companionOf map[string]string
}

// lane is one session's events in derivation order, and what was derived
// from a prefix of them.
type lane struct {
	id      string
	records []*record
	// byID resolves a bare id within the session (cause, the attention
	// subject): the owner's sequenced event wins a collision.
	byID      map[string]*record
	lastPos   *wire.Position
	taken     map[wire.Position]bool
	conflicts int
	derived   *Session
	derivedN  int // records[:derivedN] are applied to derived
}

type record struct {
	ev      *aep.Event
	arrival int
	key     *wire.Position // the event's position, or a seq-less event's anchor
	seqless bool
}

// compare orders records: by position (a seq-less event by its anchor,
// anchorless last), the owner's event before a seq-less one at one
// position, then by arrival.
func (a *record) compare(b *record) int {
	switch {
	case a.key != nil && b.key != nil:
		if *a.key != *b.key {
			if a.key.Less(*b.key) {
				return -1
			}
			return 1
		}
	case a.key != nil:
		return -1
	case b.key != nil:
		return 1
	}
	if a.seqless != b.seqless {
		if a.seqless {
			return 1
		}
		return -1
	}
	return a.arrival - b.arrival
}

// Add folds one event in. It returns false for a duplicate (same source and
// id) or an event with no id; everything else is kept whatever its type.
// Events without a session (agent.*) are deduplicated but hold no state here.
func (f *Fold) Add(ev *aep.Event) bool {
	if ev == nil || ev.ID == "" {
		return false
	}
	if f.seen == nil {
		f.seen, f.lanes = map[string]bool{}, map[string]*lane{}
	}
	key := ev.Source + "\n" + ev.ID
	if f.seen[key] {
		return false
	}
	f.seen[key] = true
	rec := &record{ev: ev, arrival: f.arrivals, seqless: ev.Seq == nil}
	f.arrivals++
	if ev.Session == "" {
		return true
	}
	l := f.lanes[ev.Session]
	if l == nil {
		l = &lane{id: ev.Session, byID: map[string]*record{}, taken: map[wire.Position]bool{}}
		f.lanes[ev.Session] = l
	}
	if k, ok := companionOf(ev); ok && f.companionOf[ev.Session] == "" {
		if f.companionOf == nil {
			f.companionOf = map[string]string{}
		}
		f.companionOf[ev.Session] = k
	}
	l.add(rec)
	return true
}

// Forget drops a session and what the fold holds of it, so a consumer
// that runs for long (the relay's notifier) stays bounded; its events,
// seen again, fold in anew.
func (f *Fold) Forget(session string) {
	l := f.lanes[session]
	if l == nil {
		return
	}
	for _, rec := range l.records {
		delete(f.seen, rec.ev.Source+"\n"+rec.ev.ID)
	}
	delete(f.lanes, session)
	delete(f.companionOf, session)
	for c, k := range f.companionOf {
		if k == session {
			f.Forget(c)
		}
	}
}

func (l *lane) add(rec *record) {
	if prev := l.byID[rec.ev.ID]; prev == nil || !rec.seqless {
		l.byID[rec.ev.ID] = rec
	}
	if rec.seqless {
		rec.key = l.lastPos
	} else {
		pos := wire.Position{Epoch: rec.ev.EpochOrZero(), Seq: *rec.ev.Seq}
		rec.key = &pos
		// Two events at one position is an emitter fault: kept, and counted.
		if l.taken[pos] {
			l.conflicts++
		}
		l.taken[pos] = true
		if l.lastPos == nil || l.lastPos.Less(pos) {
			l.lastPos = &pos
		}
	}
	// Insert in order: replay and resume put events between ones held.
	i := len(l.records)
	for i > 0 && l.records[i-1].compare(rec) > 0 {
		i--
	}
	l.records = append(l.records, nil)
	copy(l.records[i+1:], l.records[i:])
	l.records[i] = rec
	if i < l.derivedN {
		l.derived, l.derivedN = nil, 0
	}
}

// Session returns the derived state of one session, or nil when the fold
// holds no event of it. The result is shared: it stays valid until the next
// Add, and must not be modified. A Kimi session seen through hooks and the
// kimi web bridge both is one: its companions' facts (tokens used, how full
// the context is, which the bridge knows best) join the hooks' story, and
// a companion is never a session of its own (Sessions).
func (f *Fold) Session(id string) *Session {
	if _, ok := f.companionOf[id]; ok {
		return nil
	}
	comps := f.companions(id)
	own := f.derive(id)
	if len(comps) == 0 {
		return own
	}
	base := own
	if base == nil {
		base = f.derive(comps[0])
	}
	m := *base
	m.ID = id
	if own == nil {
		m.Meter = Meter{}
	}
	for _, c := range comps {
		cs := f.derive(c)
		m.Meter = m.Meter.Join(cs.Meter)
		m.Agent, m.Model = firstOf(m.Agent, cs.Agent), firstOf(m.Model, cs.Model)
	}
	return &m
}

// companions lists the sessions that are other views of session id.
func (f *Fold) companions(id string) []string {
	var out []string
	for c, k := range f.companionOf {
		if k == id && f.lanes[c] != nil {
			out = append(out, c)
		}
	}
	sort.Strings(out)
	return out
}

// derive is one lane's own derived state, or nil.
func (f *Fold) derive(id string) *Session {
	l := f.lanes[id]
	if l == nil {
		return nil
	}
	if l.derived == nil {
		l.derived = newSession(l)
	}
	for _, rec := range l.records[l.derivedN:] {
		l.derived.apply(rec)
	}
	l.derivedN = len(l.records)
	l.derived.Conflicts = l.conflicts
	return l.derived
}

// Sessions lists the ids of the sessions the fold holds, sorted: a
// companion as the Kimi session it is a view of.
func (f *Fold) Sessions() []string {
	out := make([]string, 0, len(f.lanes))
	seen := map[string]bool{}
	for id := range f.lanes {
		if k, ok := f.companionOf[id]; ok {
			id = k
		}
		if !seen[id] {
			seen[id] = true
			out = append(out, id)
		}
	}
	sort.Strings(out)
	return out
}

// KimiSession is the session a person knows session id as: the Kimi
// session a companion is a view of, else id itself.
func (f *Fold) KimiSession(id string) string {
	if k, ok := f.companionOf[id]; ok {
		return k
	}
	return id
}

// Pending lists the requests that wait on a person at now, oldest first:
// neither answered nor closed, and not past their own deadline. With a
// session given, only that session's.
func (f *Fold) Pending(now time.Time, session ...string) []*Request {
	ids := session
	if len(ids) == 0 {
		ids = f.Sessions()
	}
	var out []*Request
	for _, id := range ids {
		s := f.Session(id)
		if s == nil {
			continue
		}
		for _, r := range s.Requests {
			if r.Status(now) == StatePending {
				out = append(out, r)
			}
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if !a.At.Equal(b.At) {
			return a.At.Before(b.At)
		}
		if a.Session != b.Session {
			return a.Session < b.Session
		}
		return a.ID < b.ID
	})
	return out
}

// Session is what one session's events say: who runs it, its title and
// working directory, when it started and ended, its runs and its attention
// requests.
type Session struct {
	ID string
	// Agent is the owner: the agent of its first sequenced event.
	Agent string
	// Title is session.started's label, Cwd its cwd (both capture-gated),
	// Project its project (ProjectOf: at metadata and up), Model the last
	// gen_ai.request.model seen.
	Title, Cwd, Project, Model string
	// Started and Ended are the times of the last session.started and of
	// the session.ended after it ("" while it lives): a resumed session
	// (a new chapter) lives again.
	Started, Ended string
	EndReason      string
	// Runs in order of their first event; Requests in order of request.
	Runs     []*Run
	Requests []*Request
	// Conflicts counts positions claimed by two different events.
	Conflicts int
	// Meter is its token figures: Usage, the tokens its events account
	// for; Context, how full its context is, as the latest event that
	// says it has it; BurnPerHour, the tokens it used in the hour up to
	// its latest usage.
	Meter

	lane     *lane
	runs     map[string]*Run
	requests map[string]*Request
	endMark  Mark                // the session.ended while Ended is set
	ruled    map[string]*Request // a rule's command id -> the request it answers
	refused  map[string]bool     // command ids the emitter rejected
}

// Usage is a session's token use: the gen_ai.usage.* counts of its events
// (AEP-0002 §5.2), summed, since each event counts its own work. Known is
// set once an event carried one.
type Usage struct {
	InputTokens, OutputTokens int64
	Known                     bool
}

// Context is how full a session's context is: Tokens in it, from the latest
// event that says so (mapping.DataContextTokens, or session.compacted's
// estimated_token_count, its size after compacting), of Limit, the latest
// limit said (mapping.DataContextLimit; 0: not known). Known is set once an
// event gave the tokens.
type Context struct {
	Tokens, Limit int64
	Known         bool
}

// Fill is the fraction of the context in use, when the limit is known.
func (c Context) Fill() (float64, bool) {
	if !c.Known || c.Limit <= 0 {
		return 0, false
	}
	return float64(c.Tokens) / float64(c.Limit), true
}

// maxTokenCount bounds a token figure the fold takes: the largest integer
// a JavaScript number holds exactly, so fleetpage's fold reads the same.
const maxTokenCount = 1<<53 - 1

// tokenCount reads a token figure: a non-negative integer within
// maxTokenCount.
func tokenCount(data map[string]any, k string) (int64, bool) {
	n, ok := data[k].(json.Number)
	if !ok {
		return 0, false
	}
	i, err := n.Int64()
	if err != nil {
		f, ferr := n.Float64()
		if ferr != nil || f != math.Trunc(f) || f < 0 || f > maxTokenCount {
			return 0, false
		}
		i = int64(f)
	}
	return i, i >= 0 && i <= maxTokenCount
}

// Run is one run's state.
type Run struct {
	ID string
	// State is RunOpen until its first terminal, then the terminal's word.
	State          string
	Started, Ended string
	DurationMS     json.Number
	Reason         string
	// Feedback is what people said of the run (AEP-0009's
	// assessment.feedback.received), in order.
	Feedback []Feedback
}

// Feedback is one person's rating of a run: who (the person the relay
// stamped on the rating, and the surface it came through), the verdict
// (Rating and Label, AEP-0009's) and the note (Comment; absent at a
// ceiling below redacted).
type Feedback struct {
	Event, Time            string
	By, Surface            string
	Label, Comment, Source string
	// Rating is the number the feedback carries, nil when it carries none.
	Rating *float64
}

// Verdict is the feedback's verdict as the page and the terminal name it:
// mapping.VerdictUp or mapping.VerdictDown, "" for another label.
func (f Feedback) Verdict() string {
	switch f.Label {
	case mapping.LabelThumbsUp:
		return mapping.VerdictUp
	case mapping.LabelThumbsDown:
		return mapping.VerdictDown
	}
	return ""
}

func feedbackOf(ev *aep.Event, data map[string]any) Feedback {
	f := Feedback{Event: ev.ID, Time: ev.Time, By: str(data, mapping.DataBy), Surface: str(data, mapping.DataSurface),
		Label: str(data, "label"), Comment: str(data, "comment"), Source: str(data, "source")}
	if n, ok := data["rating"].(json.Number); ok {
		if v, err := n.Float64(); err == nil && !math.IsInf(v, 0) {
			f.Rating = &v
		}
	}
	return f
}

// Run states.
const (
	RunOpen      = "open"
	RunFinished  = "finished"
	RunFailed    = "failed"
	RunCancelled = "cancelled"
)

var runTerminals = map[string]string{"run.finished": RunFinished, "run.failed": RunFailed, "run.cancelled": RunCancelled}

func newSession(l *lane) *Session {
	return &Session{ID: l.id, lane: l, runs: map[string]*Run{}, requests: map[string]*Request{}, ruled: map[string]*Request{}, refused: map[string]bool{}}
}

// Event resolves a bare event id within the session (a cause, a subject),
// or nil.
func (s *Session) Event(id string) *aep.Event {
	if r := s.lane.byID[id]; r != nil {
		return r.ev
	}
	return nil
}

// Request returns the request with that id, or nil.
func (s *Session) Request(id string) *Request { return s.requests[id] }

// Open lists the requests without an outcome, in order of request.
func (s *Session) Open() []*Request {
	var out []*Request
	for _, r := range s.Requests {
		if r.Outcome == nil {
			out = append(out, r)
		}
	}
	return out
}

func (s *Session) run(id string) *Run {
	r := s.runs[id]
	if r == nil {
		r = &Run{ID: id, State: RunOpen}
		s.runs[id] = r
		s.Runs = append(s.Runs, r)
	}
	return r
}

// apply advances the session by one event in derivation order.
func (s *Session) apply(rec *record) {
	ev := rec.ev
	data, _ := ev.DataMap()
	if !rec.seqless && s.Agent == "" {
		s.Agent = ev.Agent
	}
	if m := str(data, "gen_ai.request.model"); m != "" {
		s.Model = m
	}
	s.Take(ev.Type, ev.Time, data)
	var run *Run
	if ev.Run != "" {
		run = s.run(ev.Run)
	}
	switch ev.Type {
	case "session.started":
		s.Started, s.Ended, s.EndReason = ev.Time, "", ""
		if t := str(data, "label"); t != "" {
			s.Title = t
		}
		if c := str(data, "cwd"); c != "" {
			s.Cwd = c
		}
		if p := ProjectOf(data); p != "" {
			s.Project = p
		}
	case "session.ended":
		s.Ended, s.EndReason, s.endMark = ev.Time, str(data, "reason"), markOf(ev)
		// The emitter closes its requests before the session ends
		// (AEP-0002 §7.2); any it left open wait on nobody now.
		for _, r := range s.Requests {
			if r.Outcome == nil {
				r.Outcome = &Outcome{Mark: s.endMark}
			}
		}
	case "run.started":
		if run != nil && run.Started == "" {
			run.Started = ev.Time
		}
	case "run.finished", "run.failed", "run.cancelled":
		// One terminal per run (AEP-0002 §2 convention 5): the first holds.
		if run != nil && run.State == RunOpen {
			run.State, run.Ended, run.Reason = runTerminals[ev.Type], ev.Time, str(data, "reason")
			run.DurationMS, _ = data["duration_ms"].(json.Number)
		}
	case mapping.TypeFeedback:
		// A person's rating: on the run the envelope names (AEP-0009 §2).
		if run != nil {
			run.Feedback = append(run.Feedback, feedbackOf(ev, data))
		}
	case "attention.requested":
		if s.requests[ev.ID] == nil {
			r := newRequest(ev, data)
			if s.Ended != "" {
				// Raised after the end (a late delivery): nobody is there
				// to act on an answer.
				r.Outcome = &Outcome{Mark: s.endMark}
			}
			s.requests[r.ID] = r
			s.Requests = append(s.Requests, r)
		}
	case "attention.answered":
		// Lifecycle events name the request in subject (AEP-0002 §7.1).
		// An answer is not the end: the emitter resolves it (§7.4).
		if r := s.requests[ev.Subject]; r != nil && r.Answered == nil && r.Outcome == nil {
			ans, _ := data["answer"].(map[string]any)
			r.Answer = ans
			r.Answered = &Answered{Mark: markOf(ev), By: str(data, "by"), Via: str(data, "via"), Surface: str(data, mapping.DataSurface)}
			if id, ok := rules.RuleOfAgent(r.Answered.By); ok && r.Rule == "" {
				r.Rule = id // the emitter names the rule whose answer it applied
			}
		}
	case rules.CommandType:
		// A rule's answer (the relay stamped its sender rule:<id>; the
		// agent a command names itself proves nothing): the request is
		// answered from here on, though its emitter has yet to say so; it
		// never waits on a person. A person's command changes nothing
		// until the emitter answers.
		id, ok := mapping.CommandRule(ev)
		if r := s.requests[ev.Subject]; ok && !s.refused[ev.ID] && r != nil && r.Rule == "" && r.Answered == nil && r.Outcome == nil {
			r.Rule, r.Ruled = id, markOf(ev)
			s.ruled[ev.ID] = r
		}
	case "control.rejected":
		// The emitter refused the rule's answer: the request waits on a
		// person again. Remembered, so the refusal holds whichever of the
		// two the fold derives first.
		s.refused[ev.Cause] = true
		if r := s.ruled[ev.Cause]; r != nil && r.Answered == nil {
			r.Rule, r.Ruled = "", Mark{}
			delete(s.ruled, ev.Cause)
		}
	case "attention.routed":
		// A consumer forwarded the request to a person's surface (§7.3):
		// where, and when; ordered by time, then surface, whatever the
		// arrival order of these seq-less events.
		if r := s.requests[ev.Subject]; r != nil {
			rt := Route{To: str(data, "to"), Via: str(data, "via"), Time: ev.Time}
			i := sort.Search(len(r.Routed), func(i int) bool { return rt.before(r.Routed[i]) })
			r.Routed = slices.Insert(r.Routed, i, rt)
		}
	case "attention.resolved", "attention.timeout":
		// The terminals (§7.2); the first holds.
		if r := s.requests[ev.Subject]; r != nil && r.Outcome == nil {
			r.Outcome = &Outcome{Mark: markOf(ev), Resolution: str(data, "resolution")}
		}
	}
}

// Request is one attention request: what it asks, how it may be answered,
// and what became of it.
type Request struct {
	ID, Session, Run string
	Kind, Prompt     string
	Options          []Option
	// Fields are a kind form request's fields (AEP-0006), in order, each
	// with an id and, for a select, its choices; nil for any other kind.
	Fields []Field
	// RespondVia is the request's respond_via, nil when absent (AEP-0008:
	// absent declares nothing, so control delivery is offered).
	RespondVia []string
	// Time is the request's time and At the same parsed; ExpiresAt its
	// expires_at and Deadline the same parsed (zero: none).
	Time, ExpiresAt string
	At, Deadline    time.Time
	// OnExpiry is what its emitter applies at Deadline when nobody answers
	// (mapping.DataOnExpiry): mapping.OnExpiryAllow (the call runs anyway)
	// or mapping.OnExpiryDeny; "" when the request does not say.
	OnExpiry string
	// Answer is the recorded answer (option, text, values) once answered.
	Answer   map[string]any
	Answered *Answered
	// Rule is the id of the rule that answered the request and Ruled its
	// command, from the command on (before the emitter's own answer); ""
	// when no rule did, or the emitter refused the rule's answer.
	Rule  string
	Ruled Mark
	// Outcome is the terminal (attention.resolved or attention.timeout),
	// or the session.ended that left it open; nil while it is open.
	Outcome *Outcome
	// Routed lists where the request was sent (attention.routed), in
	// order.
	Routed []Route
}

// Route is one attention.routed of a request: the surface it reached
// ("push:alice's Pixel 8", "webhook:example.org"), the mechanism, and when.
type Route struct {
	To   string `json:"to,omitempty"`
	Via  string `json:"via,omitempty"`
	Time string `json:"time,omitempty"`
}

// before orders routes by time, then surface, then mechanism.
func (a Route) before(b Route) bool {
	if a.Time != b.Time {
		return a.Time < b.Time
	}
	if a.To != b.To {
		return a.To < b.To
	}
	return a.Via < b.Via
}

// Option is one closed-choice answer.
type Option struct {
	ID    string `json:"id"`
	Label string `json:"label,omitempty"`
}

// Field is one field of a form (AEP-0006 field_spec) as an answer needs it:
// its id, type (string, number, boolean, select) and label; a select's
// choices, and whether several of them (Multi) or free text (Other) may
// answer it.
type Field struct {
	ID, Type, Label string
	Choices         []Option
	Multi, Other    bool
	Required        bool
}

// Questions are a form's select fields as questions (a Kimi question's,
// docs/questions.md): a label the record gives only as its id (capture
// metadata) reads as none. Nil for any other request.
func (r *Request) Questions() []mapping.Question {
	var out []mapping.Question
	for _, f := range r.Fields {
		if f.Type != "select" {
			continue
		}
		q := mapping.Question{ID: f.ID, Text: f.Label, Multi: f.Multi, Other: f.Other}
		if q.Text == q.ID {
			q.Text = ""
		}
		for _, c := range f.Choices {
			ch := mapping.Choice{ID: c.ID, Label: c.Label}
			if ch.Label == ch.ID {
				ch.Label = ""
			}
			q.Choices = append(q.Choices, ch)
		}
		out = append(out, q)
	}
	return out
}

// Mark is the event that moved a request on, and its cause: for an answer
// or a resolution through control, the command (its type and agent say who
// answered).
type Mark struct {
	Event, Type, Time, Cause string
}

// Answered is the attention.answered of a request: by whom (the responder's
// label) and via which channel (control or oob).
type Answered struct {
	Mark
	By, Via string
	// Surface is what the answer came through, as it names it
	// (mapping.DataSurface): "page", "cli", "push", "link"; "" unsaid.
	Surface string
}

// Outcome is how a request closed; Resolution is attention.resolved's
// (answered, auto or dismissed).
type Outcome struct {
	Mark
	Resolution string
}

func markOf(ev *aep.Event) Mark {
	return Mark{Event: ev.ID, Type: ev.Type, Time: ev.Time, Cause: ev.Cause}
}

// Request states, as Status and Projection report them.
const (
	StatePending  = "pending"  // waits on a person
	StateAnswered = "answered" // answered (by a person, or a rule's command), its emitter has not resolved it yet
	StateResolved = "resolved"
	StateTimeout  = "timeout"
	// StateSessionEnded: its session ended with it open.
	StateSessionEnded = "session_ended"
	// StateExpired: past its own deadline with no terminal yet (Status only).
	StateExpired = "expired"
)

func newRequest(ev *aep.Event, data map[string]any) *Request {
	r := &Request{ID: ev.ID, Session: ev.Session, Run: ev.Run, Time: ev.Time,
		Kind: str(data, "kind"), Prompt: str(data, "prompt"), ExpiresAt: str(data, "expires_at")}
	r.At, _ = time.Parse(time.RFC3339Nano, ev.Time)
	r.Deadline, _ = time.Parse(time.RFC3339Nano, r.ExpiresAt)
	if v := str(data, mapping.DataOnExpiry); v == mapping.OnExpiryAllow || v == mapping.OnExpiryDeny {
		r.OnExpiry = v
	}
	if opts, ok := data["options"].([]any); ok {
		for _, o := range opts {
			if om, ok := o.(map[string]any); ok && str(om, "id") != "" {
				r.Options = append(r.Options, Option{ID: str(om, "id"), Label: str(om, "label")})
			}
		}
	}
	if r.Kind == "form" {
		r.Fields = formFields(data)
	}
	if via, ok := data["respond_via"].([]any); ok {
		r.RespondVia = []string{}
		for _, v := range via {
			if s, ok := v.(string); ok {
				r.RespondVia = append(r.RespondVia, s)
			}
		}
	}
	return r
}

// formFields reads a form's fields: each with an id not seen before, its
// choices each with an id not seen before in it.
func formFields(data map[string]any) []Field {
	raw, _ := data["fields"].([]any)
	var out []Field
	seen := map[string]bool{}
	for _, f := range raw {
		fm, ok := f.(map[string]any)
		if !ok || str(fm, "id") == "" || seen[str(fm, "id")] {
			continue
		}
		seen[str(fm, "id")] = true
		fd := Field{ID: str(fm, "id"), Type: str(fm, "type"), Label: str(fm, "label")}
		fd.Multi, _ = fm["multi"].(bool)
		fd.Other, _ = fm["other"].(bool)
		fd.Required, _ = fm["required"].(bool)
		ids := map[string]bool{}
		cs, _ := fm["choices"].([]any)
		for _, c := range cs {
			if cm, ok := c.(map[string]any); ok && str(cm, "id") != "" && !ids[str(cm, "id")] {
				ids[str(cm, "id")] = true
				fd.Choices = append(fd.Choices, Option{ID: str(cm, "id"), Label: str(cm, "label")})
			}
		}
		out = append(out, fd)
	}
	return out
}

// State is where the request stands in its lifecycle, whatever the clock.
func (r *Request) State() string {
	switch {
	case r.Outcome == nil && (r.Answered != nil || r.Rule != ""):
		return StateAnswered
	case r.Outcome == nil:
		return StatePending
	case r.Outcome.Type == "attention.resolved":
		return StateResolved
	case r.Outcome.Type == "attention.timeout":
		return StateTimeout
	}
	return StateSessionEnded
}

// Status is State at now: a pending request past its deadline is expired.
func (r *Request) Status(now time.Time) string {
	st := r.State()
	if st == StatePending && !r.Deadline.IsZero() && !now.Before(r.Deadline) {
		return StateExpired
	}
	return st
}

// Answerable reports whether the request may be answered through control:
// respond_via lists control, or is absent.
func (r *Request) Answerable() bool {
	if r.RespondVia == nil {
		return true
	}
	for _, v := range r.RespondVia {
		if v == "control" {
			return true
		}
	}
	return false
}

// OptionIDs lists the options' ids.
func (r *Request) OptionIDs() []string {
	out := make([]string, len(r.Options))
	for i, o := range r.Options {
		out[i] = o.ID
	}
	return out
}

func str(m map[string]any, k string) string {
	s, _ := m[k].(string)
	return s
}

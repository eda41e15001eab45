package export

import (
	"crypto/sha256"
	"encoding/json"
	"strings"

	"github.com/aep-kimi/aep-kimi/aep"
	"github.com/aep-kimi/aep-kimi/mapping"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
)

// Tracer bounds.
const (
	// DefaultOpenRuns bounds the runs a Tracer tracks at once; the oldest
	// is forgotten (its span never sent) beyond it.
	DefaultOpenRuns = 4096
	// maxOpenPerRun bounds a run's open tool calls and delegations, and
	// maxSpanEvents its span events.
	maxOpenPerRun = 1024
	maxSpanEvents = 256
)

// Tracer synthesizes OpenTelemetry spans from AEP events, beyond AEP-0005
// (which defers span synthesis): each run is an invoke_agent span, each tool
// call an execute_tool child paired by call id, work between a subagent's
// start and stop nests under an invoke_agent span for it, and attention
// arcs and compactions are span events. Trace and span ids are hashes of
// the session, run and call ids, so a restarted exporter re-derives the same
// ids and never splits a run. Spans carry payload members only when the
// event's capture is at or below MaxCapture. It is not safe for concurrent
// use; the zero value works (MaxCapture none).
type Tracer struct {
	MaxCapture  aep.Capture
	ServiceName string
	// OpenRuns defaults to DefaultOpenRuns.
	OpenRuns int

	runs    map[runID]*openRun
	order   []runID
	current map[sessKey]runID // the session's latest open run
	parent  map[sessKey]spanRef
	labels  sessionLabels
}

type sessKey struct{ agent, session string }

type runID struct {
	sessKey
	run string
}

type spanRef struct {
	trace [16]byte
	span  [8]byte
}

// Run span attributes saying how full the agent's context was when the run
// ended: its size in tokens and the most it holds (OpenTelemetry's GenAI
// conventions have none).
const (
	AttrContextTokens = "aep.context.tokens"
	AttrContextLimit  = "aep.context.limit"
)

type openRun struct {
	agent      string
	ref        spanRef
	parent     []byte
	start      uint64
	seenStart  bool
	events     []*tracepb.Span_Event
	tools      map[string]*tracepb.Span
	delegation []*tracepb.Span // open subagent spans, innermost last
	inTokens   int64
	outTokens  int64
	hasTokens  bool
	// context is the latest context size its events said, and its limit
	// (0: none said).
	context, contextLimit int64
	hasContext            bool
}

// hashID derives an id from its parts (NUL-separated, so no two part lists
// collide).
func hashID(n int, parts ...string) []byte {
	h := sha256.New()
	for _, p := range parts {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	return h.Sum(nil)[:n]
}

// Add feeds events in stream order and returns the spans they completed.
func (t *Tracer) Add(events []*aep.Event) *tracepb.TracesData {
	if t.runs == nil {
		t.runs = make(map[runID]*openRun)
		t.current = make(map[sessKey]runID)
		t.parent = make(map[sessKey]spanRef)
	}
	out := &spanBatch{serviceName: t.ServiceName}
	for _, e := range events {
		t.add(e, out)
	}
	return out.data()
}

func (t *Tracer) add(e *aep.Event, out *spanBatch) {
	sk := sessKey{e.Agent, e.Session}
	if e.Session == "" {
		return
	}
	t.labels.observe(e, t.MaxCapture)
	var data map[string]any
	if raw := survivingData(e, t.MaxCapture); raw != nil {
		data, _ = e.DataMap()
	}
	if e.Type == "session.started" {
		// A session delegated from another run nests in that run's trace.
		if p, ok := data["parent"].(map[string]any); ok {
			ps, _ := p["session"].(string)
			pr, _ := p["run"].(string)
			if ps != "" && pr != "" {
				t.parent[sk] = runRef(sessKey{e.Agent, ps}, pr, spanRef{})
			}
		}
		return
	}
	if e.Type == "session.ended" {
		delete(t.parent, sk)
		delete(t.current, sk)
		return
	}
	if strings.HasPrefix(e.Type, "assessment.") {
		// A judgment of a run, usually after it ended: it opens no run.
		t.evaluate(e, sk, out)
		return
	}
	run := e.Run
	if run == "" {
		id, ok := t.current[sk]
		if !ok {
			return
		}
		run = id.run
	}
	r := t.open(runID{sk, run}, e)
	ts := unixNanos(e.Time)
	if !r.seenStart && (e.Type == "run.started" || ts < r.start) {
		r.start = ts
	}
	if e.Type == "run.started" {
		r.seenStart = true
	}
	if in, ok := intMember(data, "gen_ai.usage.input_tokens"); ok {
		r.inTokens += in
		r.hasTokens = true
	}
	if o, ok := intMember(data, "gen_ai.usage.output_tokens"); ok {
		r.outTokens += o
		r.hasTokens = true
	}
	n, ok := intMember(data, mapping.DataContextTokens)
	if !ok && e.Type == "session.compacted" {
		n, ok = intMember(data, "estimated_token_count")
	}
	if ok && n >= 0 {
		r.context, r.hasContext = n, true
	}
	if l, ok := intMember(data, mapping.DataContextLimit); ok && l > 0 {
		r.contextLimit = l
	}
	switch {
	case e.Type == "tool.requested":
		if len(r.tools) >= maxOpenPerRun {
			return
		}
		key, callID := toolKey(e, data, true)
		r.tools[key] = t.toolSpan(r, e, data, run, key, callID, ts)
	case e.Type == "tool.completed" || e.Type == "tool.failed" || e.Type == "tool.denied":
		key, callID := toolKey(e, data, false)
		sp, ok := r.tools[key]
		if ok {
			delete(r.tools, key)
		} else {
			// No request seen (a denial before it, or lost to a restart):
			// the span is the terminal's instant.
			sp = t.toolSpan(r, e, data, run, key, callID, ts)
		}
		sp.EndTimeUnixNano = ts
		if e.Type != "tool.completed" {
			sp.Status = &tracepb.Status{Code: tracepb.Status_STATUS_CODE_ERROR, Message: outcome(e, data)}
		}
		addUsage(&sp.Attributes, data)
		out.add(r.agent, sp)
	case e.Type == "delegation.subagent.started":
		if len(r.delegation) >= maxOpenPerRun {
			return
		}
		sp := &tracepb.Span{
			TraceId:           r.ref.trace[:],
			SpanId:            hashID(8, "delegation", e.Agent, e.Session, run, e.ID),
			ParentSpanId:      t.innermost(r),
			Name:              "invoke_agent " + e.Subject,
			Kind:              tracepb.Span_SPAN_KIND_INTERNAL,
			StartTimeUnixNano: ts,
			Attributes: []*commonpb.KeyValue{
				strKV("gen_ai.operation.name", "invoke_agent"),
				strKV("gen_ai.agent.name", e.Subject),
				strKV("gen_ai.conversation.id", e.Session),
				strKV("session.id", e.Session),
			},
		}
		r.delegation = append(r.delegation, sp)
	case e.Type == "delegation.subagent.stopped":
		// Close the innermost open delegation of that name.
		for i := len(r.delegation) - 1; i >= 0; i-- {
			sp := r.delegation[i]
			if sp.Name == "invoke_agent "+e.Subject {
				sp.EndTimeUnixNano = ts
				out.add(r.agent, sp)
				r.delegation = append(r.delegation[:i], r.delegation[i+1:]...)
				break
			}
		}
	case aep.IsRunTerminal(e.Type):
		sp := &tracepb.Span{
			TraceId:           r.ref.trace[:],
			SpanId:            r.ref.span[:],
			ParentSpanId:      r.parent,
			Name:              "invoke_agent " + r.agent,
			Kind:              tracepb.Span_SPAN_KIND_INTERNAL,
			StartTimeUnixNano: r.start,
			EndTimeUnixNano:   ts,
			Events:            r.events,
			Attributes: []*commonpb.KeyValue{
				strKV("gen_ai.operation.name", "invoke_agent"),
				strKV("gen_ai.agent.name", r.agent),
				strKV("gen_ai.conversation.id", e.Session),
				strKV("session.id", e.Session),
				strKV("aep.run_id", run),
				strKV("aep.outcome", strings.TrimPrefix(e.Type, "run.")),
				strKV(AttrSessionLabel, t.labels.label(e)),
			},
		}
		if r.hasTokens {
			sp.Attributes = append(sp.Attributes, intKV("gen_ai.usage.input_tokens", r.inTokens), intKV("gen_ai.usage.output_tokens", r.outTokens))
		}
		if r.hasContext {
			// GenAI has no attribute for how full the context is.
			sp.Attributes = append(sp.Attributes, intKV(AttrContextTokens, r.context))
			if r.contextLimit > 0 {
				sp.Attributes = append(sp.Attributes, intKV(AttrContextLimit, r.contextLimit))
			}
		}
		if e.Type == "run.failed" {
			sp.Status = &tracepb.Status{Code: tracepb.Status_STATUS_CODE_ERROR, Message: outcome(e, data)}
		}
		out.add(r.agent, sp)
		// Spans still open end with the run.
		for _, d := range r.delegation {
			d.EndTimeUnixNano = ts
			out.add(r.agent, d)
		}
		for _, tsp := range r.tools {
			tsp.EndTimeUnixNano = ts
			tsp.Status = &tracepb.Status{Code: tracepb.Status_STATUS_CODE_ERROR, Message: "run ended first"}
			out.add(r.agent, tsp)
		}
		t.forget(runID{sk, run})
	case strings.HasPrefix(e.Type, "attention.") || e.Type == "session.compacted":
		if len(r.events) >= maxSpanEvents {
			return
		}
		attrs := []*commonpb.KeyValue{strKV("aep.event_id", e.ID)}
		if e.Subject != "" {
			attrs = append(attrs, strKV("aep.subject", e.Subject))
		}
		if s, ok := data["resolution"].(string); ok {
			attrs = append(attrs, strKV("aep.resolution", s))
		}
		r.events = append(r.events, &tracepb.Span_Event{TimeUnixNano: ts, Name: e.Type, Attributes: attrs})
	}
}

// runRef is the span of a run: its own trace unless its session nests in
// another run's (parent non-zero).
func runRef(sk sessKey, run string, parent spanRef) spanRef {
	var ref spanRef
	if parent != (spanRef{}) {
		ref.trace = parent.trace
	} else {
		copy(ref.trace[:], hashID(16, "trace", sk.agent, sk.session, run))
	}
	copy(ref.span[:], hashID(8, "run", sk.agent, sk.session, run))
	return ref
}

// open returns the run's state, creating it (and evicting the oldest run
// beyond the bound) on first sight.
func (t *Tracer) open(id runID, e *aep.Event) *openRun {
	if r, ok := t.runs[id]; ok {
		t.current[id.sessKey] = id
		return r
	}
	limit := t.OpenRuns
	if limit <= 0 {
		limit = DefaultOpenRuns
	}
	for len(t.order) >= limit {
		t.forget(t.order[0])
	}
	r := &openRun{agent: e.Agent, start: unixNanos(e.Time), tools: make(map[string]*tracepb.Span)}
	if p, ok := t.parent[id.sessKey]; ok {
		r.ref = runRef(id.sessKey, id.run, p)
		r.parent = append([]byte(nil), p.span[:]...)
	} else {
		r.ref = runRef(id.sessKey, id.run, spanRef{})
	}
	t.runs[id] = r
	t.order = append(t.order, id)
	t.current[id.sessKey] = id
	return r
}

func (t *Tracer) forget(id runID) {
	delete(t.runs, id)
	for i, o := range t.order {
		if o == id {
			t.order = append(t.order[:i], t.order[i+1:]...)
			break
		}
	}
	if t.current[id.sessKey] == id {
		delete(t.current, id.sessKey)
	}
}

// toolSpan opens the execute_tool span of one call.
func (t *Tracer) toolSpan(r *openRun, e *aep.Event, data map[string]any, run, key, callID string, ts uint64) *tracepb.Span {
	name := toolName(e, data)
	return &tracepb.Span{
		TraceId:           r.ref.trace[:],
		SpanId:            hashID(8, "tool", e.Agent, e.Session, run, key),
		ParentSpanId:      t.innermost(r),
		Name:              "execute_tool " + name,
		Kind:              tracepb.Span_SPAN_KIND_INTERNAL,
		StartTimeUnixNano: ts,
		Attributes:        toolAttrs(e, name, callID),
	}
}

// innermost is the span new children of r hang under.
func (t *Tracer) innermost(r *openRun) []byte {
	if n := len(r.delegation); n > 0 {
		return r.delegation[n-1].SpanId
	}
	return r.ref.span[:]
}

// toolKey pairs a tool call's events: the call id when the payload carries
// it, else the requested event's id (the terminal's cause).
func toolKey(e *aep.Event, data map[string]any, requested bool) (key, callID string) {
	if tool, ok := data["tool"].(map[string]any); ok {
		if id, ok := tool["call_id"].(string); ok && id != "" {
			return "call:" + id, id
		}
	}
	if requested || e.Cause == "" {
		return "event:" + e.ID, ""
	}
	return "event:" + e.Cause, ""
}

func toolName(e *aep.Event, data map[string]any) string {
	if tool, ok := data["tool"].(map[string]any); ok {
		if n, ok := tool["name"].(string); ok && n != "" {
			return n
		}
	}
	return e.Subject
}

func toolAttrs(e *aep.Event, name, callID string) []*commonpb.KeyValue {
	attrs := []*commonpb.KeyValue{
		strKV("gen_ai.operation.name", "execute_tool"),
		strKV("gen_ai.tool.name", name),
		strKV("gen_ai.agent.name", e.Agent),
		strKV("gen_ai.conversation.id", e.Session),
		strKV("session.id", e.Session),
	}
	if callID != "" {
		attrs = append(attrs, strKV("gen_ai.tool.call.id", callID))
	}
	return attrs
}

// outcome is a status message from metadata-level members only: the error
// type or the denial's origin, never free text.
func outcome(e *aep.Event, data map[string]any) string {
	if er, ok := data["error"].(map[string]any); ok {
		if s, ok := er["type"].(string); ok && s != "" {
			return s
		}
	}
	if s, ok := data["by"].(string); ok && s != "" {
		return strings.TrimPrefix(e.Type, "tool.") + " by " + s
	}
	return e.Type
}

func addUsage(attrs *[]*commonpb.KeyValue, data map[string]any) {
	for _, k := range []string{"gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens"} {
		if n, ok := intMember(data, k); ok {
			*attrs = append(*attrs, intKV(k, n))
		}
	}
}

func intMember(data map[string]any, k string) (int64, bool) {
	n, ok := data[k].(json.Number)
	if !ok {
		return 0, false
	}
	v, err := n.Int64()
	return v, err == nil
}

// spanBatch groups finished spans by agent resource.
type spanBatch struct {
	serviceName string
	byAgent     map[string]*tracepb.ResourceSpans
	order       []string
}

func (b *spanBatch) add(agent string, sp *tracepb.Span) {
	if b.byAgent == nil {
		b.byAgent = make(map[string]*tracepb.ResourceSpans)
	}
	rs, ok := b.byAgent[agent]
	if !ok {
		rs = &tracepb.ResourceSpans{Resource: Resource(agent, b.serviceName), ScopeSpans: []*tracepb.ScopeSpans{{Scope: scope()}}}
		b.byAgent[agent] = rs
		b.order = append(b.order, agent)
	}
	rs.ScopeSpans[0].Spans = append(rs.ScopeSpans[0].Spans, sp)
}

// data returns TracesData, wire-identical to the OTLP/HTTP
// ExportTraceServiceRequest.
func (b *spanBatch) data() *tracepb.TracesData {
	out := &tracepb.TracesData{}
	for _, a := range b.order {
		out.ResourceSpans = append(out.ResourceSpans, b.byAgent[a])
	}
	return out
}

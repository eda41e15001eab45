package aep

import (
	"sort"
	"strings"
)

// Kind is the JSON kind a payload field carries (the subset of JSON Schema
// the AEP payload schemas use).
type Kind uint8

// Payload field kinds.
const (
	// KindAny accepts any JSON value.
	KindAny Kind = iota
	KindString
	// KindInteger is a JSON number with no fractional part (3.0 counts).
	KindInteger
	KindNumber
	KindBool
	KindObject
	KindArray
	// KindStringOrObject is the ["object","string"] union of result fields.
	KindStringOrObject
	// KindDateTime is a string in RFC 3339 date-time form.
	KindDateTime
)

var kindNames = [...]string{"any", "string", "integer", "number", "boolean", "object", "array", "string or object", "date-time string"}

// String names the kind for messages.
func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return "kind(?)"
}

// Field is one payload property of a registered type (AEP-0002 §5).
type Field struct {
	Name string
	Kind Kind
	// Capture is the minimum capture level at which the field may be present
	// (x-aep-capture; AEP-0002 §5.1).
	Capture Capture
	// Star marks the [metadata*] exception (AEP-0002 §5.3, AEP-0006): the
	// field is allowed at metadata, but only with synthesized or structural
	// content there; real content needs redacted or above.
	Star     bool
	Required bool
	// Enum, when set, lists the only string values allowed.
	Enum []string
	// Min and Max bound a number or integer, inclusive.
	Min, Max *float64
	// Fields are the object's properties, or each array item's properties.
	Fields []Field
	// Items is the kind of each array item; ItemEnum restricts string items.
	Items    Kind
	ItemEnum []string
}

// TypeSpec is one registered type (schemas/registry/types.json) with its
// payload fields.
type TypeSpec struct {
	Type string
	// Status is mandatory, optional or reserved (AEP-0002 §1).
	Status string
	// Scope follows the envelope rules: ScopeAgent for agent.*, ScopeForeign
	// for the control commands and attention.routed (AEP-0001 §5.2; the
	// registry files record attention.routed as "session", but AEP-0002 §7.3
	// makes it a foreign-emitter event), ScopeSession otherwise.
	Scope        Scope
	Experimental bool
	Fields       []Field
	// HasSchema is false for the reserved types whose payload is deferred.
	HasSchema bool
}

// findField returns the named property, or nil.
func findField(fields []Field, name string) *Field {
	for i := range fields {
		if fields[i].Name == name {
			return &fields[i]
		}
	}
	return nil
}

// LookupType returns the registered type t. The returned value is shared:
// callers must not modify it.
func LookupType(t string) (*TypeSpec, bool) {
	s, ok := registry.byName[t]
	return s, ok
}

// RegisteredTypes returns every registered type, sorted by name. The
// TypeSpecs are shared: callers must not modify them.
func RegisteredTypes() []*TypeSpec {
	return append([]*TypeSpec(nil), registry.sorted...)
}

// --- table construction -------------------------------------------------------

// Field builders used by buildRegistry; each returns a modified copy.
func (f Field) req() Field                 { f.Required = true; return f }
func (f Field) star() Field                { f.Star = true; return f }
func (f Field) oneOf(vals ...string) Field { f.Enum = vals; return f }
func (f Field) atLeast(v float64) Field    { f.Min = &v; return f }
func (f Field) atMost(v float64) Field     { f.Max = &v; return f }
func (f Field) items(k Kind, e ...string) Field {
	f.Items, f.ItemEnum = k, e
	return f
}

type registryTable struct {
	byName map[string]*TypeSpec
	sorted []*TypeSpec
}

// registry is built once and never modified.
var registry = buildRegistry()

func buildRegistry() registryTable {
	const (
		capM = CaptureMetadata
		capR = CaptureRedacted
		capF = CaptureFull
	)
	fld := func(name string, k Kind, c Capture) Field { return Field{Name: name, Kind: k, Capture: c} }
	str := func(name string, c Capture) Field { return fld(name, KindString, c) }
	flag := func(name string) Field { return fld(name, KindBool, capM) }
	enum := func(name string, vals ...string) Field { return str(name, capM).oneOf(vals...) }
	// count is a metadata integer >= 0, the commonest AEP field.
	count := func(name string) Field { return fld(name, KindInteger, capM).atLeast(0) }
	// amount is a metadata number >= 0 (cost members).
	amount := func(name string) Field { return fld(name, KindNumber, capM).atLeast(0) }
	obj := func(name string, c Capture, props ...Field) Field {
		f := fld(name, KindObject, c)
		f.Fields = props
		return f
	}
	// arrayOf is an array whose items are objects with props.
	arrayOf := func(name string, c Capture, props ...Field) Field {
		f := fld(name, KindArray, c).items(KindObject)
		f.Fields = props
		return f
	}
	schema := func(fs ...Field) []Field {
		if fs == nil {
			return []Field{}
		}
		return fs
	}
	join := func(groups ...[]Field) []Field {
		var out []Field
		for _, g := range groups {
			out = append(out, g...)
		}
		return out
	}

	// Common payload objects (AEP-0002 §5.2).
	toolRef := func() Field {
		return obj("tool", capM, str("name", capM).req(), str("call_id", capM)).req()
	}
	errorInfo := func() Field {
		return obj("error", capM, str("type", capM), str("message", capR))
	}
	usage := func() []Field {
		return []Field{count("gen_ai.usage.input_tokens"), count("gen_ai.usage.output_tokens")}
	}
	cost := func() Field {
		return obj("cost", capM,
			str("currency", capM).req(),
			amount("total"), amount("prompt"), amount("completion"), amount("cache"), amount("reasoning"))
	}
	documents := func(name string) Field {
		return arrayOf(name, capM,
			str("id", capM),
			fld("score", KindNumber, capM),
			str("content_redacted", capR),
			str("content", capF),
			fld("metadata", KindObject, capM))
	}
	span := func(name string, lead ...string) Field {
		var props []Field
		for _, n := range lead {
			props = append(props, fld(n, KindInteger, capM))
		}
		props = append(props, fld("start", KindInteger, capM), fld("end", KindInteger, capM))
		return obj(name, capM, props...)
	}
	citations := func() Field {
		return arrayOf("citations", capM,
			obj("source", capM, str("id", capM), str("uri", capR), str("title", capR)),
			str("cited_text_redacted", capR),
			str("cited_text", capF),
			obj("offset", capM, span("char"), span("page", "page"), span("block", "block")),
			count("document_index"))
	}
	guardrail := func() Field {
		return obj("guardrail", capM,
			enum("stage", "input", "output"),
			enum("verdict", "allowed", "flagged", "blocked", "modified"),
			arrayOf("categories", capM, str("name", capM), fld("score", KindNumber, capM)),
			obj("detector", capM, str("name", capM), str("version", capM)),
			str("explanation", capR))
	}
	// answer.values is [metadata*] with type-dependent gating (AEP-0006).
	answer := func() Field {
		return obj("answer", capM,
			str("option", capM),
			str("text", capR),
			fld("values", KindObject, capM).star()).req()
	}
	// fieldSpecs is the AEP-0006 form (AEP-0002 §5.2 field_spec).
	fieldSpecs := func() Field {
		return arrayOf("fields", capM,
			str("id", capM).req(),
			enum("type", "string", "number", "boolean", "select").req(),
			str("label", capM).req().star(),
			flag("required"),
			flag("multi"),
			flag("other"),
			arrayOf("choices", capM, str("id", capM).req(), str("label", capM).req().star()),
			fld("min", KindNumber, capM),
			fld("max", KindNumber, capM))
	}
	lineage := func(name string, sessionRequired bool) Field {
		s := str("session", capM)
		if sessionRequired {
			s = s.req()
		}
		return obj(name, capM, s, str("run", capM), str("agent", capM))
	}
	task := func() Field {
		return obj("task", capM, str("id", capM), str("title", capR))
	}

	type row struct {
		typ, status string
		fields      []Field
	}
	const mand, opt, rsv = "mandatory", "optional", "reserved"
	rows := []row{
		// AEP-0002 §5.3: the mandatory types.
		{"session.started", mand, schema(
			str("label", capR),
			lineage("parent", true),
			obj("client", capM, str("name", capM).req(), str("version", capM)),
			str("gen_ai.request.model", capM),
			str("cwd", capR))},
		{"session.ended", mand, schema(
			enum("reason", "normal", "error", "timeout", "killed", "compaction"),
			count("duration_ms"),
			count("runs"))},
		{"run.started", mand, join(
			[]Field{enum("trigger", "user", "schedule", "agent", "control", "resume"), str("prompt", capR)},
			usage(), []Field{cost()})},
		{"run.finished", mand, join(
			[]Field{count("duration_ms"), str("summary", capR)},
			usage(), []Field{cost()})},
		{"run.failed", mand, schema(
			str("reason", capM).req(),
			errorInfo(),
			count("duration_ms"))},
		{"run.cancelled", mand, schema(
			enum("by", "user", "control", "policy", "shutdown"),
			str("reason", capR),
			count("duration_ms"))},
		{"tool.requested", mand, schema(
			toolRef(),
			str("args_digest", capM),
			fld("args_redacted", KindObject, capR),
			fld("args", KindObject, capF))},
		{"tool.completed", mand, join([]Field{
			toolRef(),
			count("duration_ms"),
			str("status", capM),
			str("result_digest", capM),
			fld("result_redacted", KindStringOrObject, capR),
			fld("result", KindStringOrObject, capF)},
			usage(), []Field{cost()})},
		{"tool.failed", mand, schema(
			toolRef(),
			errorInfo().req(),
			count("duration_ms"))},
		{"tool.denied", mand, schema(
			toolRef(),
			enum("by", "policy", "user_setting", "runtime").req(),
			str("rule", capM))},
		{"attention.requested", mand, schema(
			enum("kind", "permission", "input", "auth", "review", "form", "other").req(),
			str("prompt", capM).req().star(),
			arrayOf("options", capM, str("id", capM).req(), str("label", capM).req().star()),
			fieldSpecs(),
			fld("expires_at", KindDateTime, capM),
			fld("respond_via", KindArray, capM).items(KindString, "control", "oob"),
			fld("context", KindObject, capF))},
		{"attention.answered", mand, schema(
			answer(),
			str("by", capM),
			enum("via", "control", "oob"))},
		{"attention.resolved", mand, schema(
			enum("resolution", "answered", "auto", "dismissed").req(),
			count("latency_ms"))},
		{"attention.timeout", mand, schema(count("after_ms"))},

		// AEP-0002 §5.4: the optional core types.
		{"session.compacted", opt, join([]Field{
			str("trigger", capM),
			str("strategy", capM),
			count("estimated_token_count"),
			count("forgotten")},
			usage())},
		{"run.step.started", opt, schema(str("name", capR), count("initial_num_steps"))},
		{"run.step.finished", opt, schema(str("status", capM))},
		{"progress.status", opt, schema(
			str("message", capR),
			str("phase", capM),
			fld("percent", KindNumber, capM).atLeast(0).atMost(100))},
		{"progress.task.planned", opt, schema(task(), str("parent", capM))},
		{"progress.task.completed", opt, schema(task(), str("status", capM))},
		{"progress.artifact.produced", opt, schema(obj("artifact", capM,
			str("id", capM),
			str("name", capR),
			str("mime", capM),
			count("bytes"),
			str("uri", capR)))},
		{"delegation.subagent.started", opt, schema(
			lineage("child", false),
			str("agent_type", capM),
			str("role", capM))},
		{"delegation.subagent.stopped", opt, schema(
			lineage("child", false),
			str("agent_type", capM),
			str("status", capM),
			count("duration_ms"))},
		{"attention.routed", opt, schema(str("to", capM), str("via", capM))},
		{"agent.presence", opt, schema(enum("state", "online", "offline", "busy").req())},
		{"agent.idle", opt, schema(count("since_ms"), str("reason", capM))},
		{"agent.health", opt, schema(
			enum("status", "ok", "degraded", "failing").req(),
			str("detail", capR))},
		{"agent.heartbeat", opt, schema(count("tick"), count("interval_ms"))},
		{"error.raised", opt, schema(errorInfo(), str("code", capM), flag("fatal"))},
		{"state.snapshot", opt, schema(
			fld("state", KindObject, capR),
			str("key", capM),
			count("rev"))},
		{"state.delta", opt, schema(
			fld("delta", KindArray, capR).items(KindObject),
			str("key", capM),
			count("rev"))},
		{"resource.retrieval.requested", opt, schema(
			str("query", capR),
			str("query_digest", capM),
			str("corpus", capM),
			count("top_k"))},
		{"resource.retrieval.returned", opt, schema(
			documents("documents"),
			count("count"),
			str("corpus", capM),
			count("duration_ms"))},
		{"resource.retrieval.reranked", opt, schema(
			str("query", capR),
			str("query_digest", capM),
			str("model", capM),
			count("top_k"),
			documents("input_documents"),
			documents("output_documents"),
			count("count"),
			count("duration_ms"))},
		{"resource.citation.recorded", opt, schema(citations(), count("count"))},
		{"assessment.evaluation.recorded", opt, schema(
			str("gen_ai.evaluation.name", capM),
			fld("gen_ai.evaluation.score.value", KindNumber, capM),
			str("gen_ai.evaluation.score.label", capM),
			str("gen_ai.evaluation.explanation", capR),
			str("evaluator", capM))},
		{"assessment.feedback.received", opt, schema(
			fld("rating", KindNumber, capM),
			str("label", capM),
			str("comment", capR),
			str("correction", capR),
			str("source", capM))},
		{"assessment.guardrail.recorded", opt, schema(guardrail())},

		// AEP-0002 §4.3: reserved for the message sub-profile; no schema.
		{"message.user.submitted", rsv, nil},
		{"message.agent.replied", rsv, nil},

		// AEP-0004 §5: the control profile.
		{"control.attention.respond", opt, schema(answer())},
		{"control.cancel", opt, schema(enum("scope", "run", "session").req(), str("reason", capR))},
		{"control.pause", opt, schema()},
		{"control.resume", opt, schema()},
		{"control.accepted", opt, schema()},
		{"control.rejected", opt, schema(
			enum("reason", "unsupported", "unauthorized", "busy", "refused", "invalid").req(),
			str("detail", capR))},
	}
	t := registryTable{byName: make(map[string]*TypeSpec, len(rows))}
	for _, r := range rows {
		cat, _, _ := strings.Cut(r.typ, ".")
		s := &TypeSpec{
			Type:   r.typ,
			Status: r.status,
			Scope:  ScopeOf(r.typ),
			// AEP-0002 §4.2 flags resource.* and assessment.*; the whole
			// control profile is experimental in 0.1 (AEP-0004).
			Experimental: cat == "resource" || cat == "assessment" || cat == "control",
			Fields:       r.fields,
			HasSchema:    r.fields != nil,
		}
		t.byName[r.typ] = s
		t.sorted = append(t.sorted, s)
	}
	sort.Slice(t.sorted, func(i, j int) bool { return t.sorted[i].Type < t.sorted[j].Type })
	return t
}

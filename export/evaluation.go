package export

import (
	"bytes"
	"encoding/json"
	"strings"

	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	logspb "go.opentelemetry.io/proto/otlp/logs/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"

	"github.com/aep-kimi/aep-kimi/aep"
	"github.com/aep-kimi/aep-kimi/mapping"
)

// An AEP-0009 assessment leaves as OpenTelemetry's GenAI evaluation result
// (an experimental event of the GenAI conventions), besides its AEP-0005
// record: a log record of that name parented to the judged run's span, and
// in traces an instant span under that run's span, carrying the same
// attributes. AEP-0009 names the evaluation's members after the
// convention's; a person's feedback names no metric, so it is
// FeedbackEvaluation, its rating the score, its label the score's label
// and its note the explanation.
const (
	EvaluationEvent    = "gen_ai.evaluation.result"
	FeedbackEvaluation = "human_feedback"

	attrEvalName        = "gen_ai.evaluation.name"
	attrEvalScore       = "gen_ai.evaluation.score.value"
	attrEvalLabel       = "gen_ai.evaluation.score.label"
	attrEvalExplanation = "gen_ai.evaluation.explanation"
	// AttrFeedbackSource, AttrFeedbackBy and AttrEvaluator carry what the
	// convention has no attribute for: the feedback's source, the person
	// the relay stamped on it, and an evaluation's judge.
	AttrFeedbackSource = "aep.feedback.source"
	AttrFeedbackBy     = "aep.feedback.by"
	AttrEvaluator      = "aep.evaluator"
)

const typeEvaluation = "assessment.evaluation.recorded"

// exportedAt is e as an exporter with ceiling max ships it. An assessment's
// members are annotated one by one (AEP-0009 §5), so above the ceiling it
// is down-leveled member by member: a metadata exporter keeps the verdict
// and loses the note. Any other event is e itself (survivingData drops its
// payload whole above the ceiling).
func exportedAt(e *aep.Event, max aep.Capture) *aep.Event {
	if !strings.HasPrefix(e.Type, "assessment.") {
		return e
	}
	d, err := aep.Downlevel(e, max)
	if err != nil {
		// Data that does not decode: nothing of it leaves.
		out := e.Clone()
		out.Data = nil
		return out
	}
	return d
}

// evaluation is an assessment's evaluation-result attributes from what
// survives the ceiling max; false for any other event, or one without a
// metric to name.
func evaluation(e *aep.Event, max aep.Capture) ([]*commonpb.KeyValue, bool) {
	if e.Type != mapping.TypeFeedback && e.Type != typeEvaluation {
		return nil, false
	}
	e = exportedAt(e, max)
	data := map[string]any{}
	if raw := survivingData(e, max); raw != nil {
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.UseNumber()
		if dec.Decode(&data) != nil {
			data = map[string]any{}
		}
	}
	str := func(k string) string { s, _ := data[k].(string); return s }
	name, score, label, explanation := FeedbackEvaluation, "rating", "label", "comment"
	if e.Type == typeEvaluation {
		name, score, label, explanation = str(attrEvalName), attrEvalScore, attrEvalLabel, attrEvalExplanation
	}
	if name == "" {
		return nil, false
	}
	attrs := []*commonpb.KeyValue{strKV(attrEvalName, name)}
	if n, ok := data[score].(json.Number); ok {
		if f, err := n.Float64(); err == nil {
			attrs = append(attrs, doubleKV(attrEvalScore, f))
		}
	}
	for _, m := range [][2]string{{attrEvalLabel, str(label)}, {attrEvalExplanation, str(explanation)},
		{AttrFeedbackSource, str("source")}, {AttrFeedbackBy, str(mapping.DataBy)}, {AttrEvaluator, str("evaluator")},
		{"gen_ai.conversation.id", e.Session}, {"session.id", e.Session}, {"aep.run_id", e.Run}, {"aep.event_id", e.ID}} {
		if m[1] != "" {
			attrs = append(attrs, strKV(m[0], m[1]))
		}
	}
	return attrs, true
}

// EvaluationRecord is an assessment as the convention's evaluation-result
// log record under the ceiling max, parented to its run's span (the one
// Tracer gives the run, a delegated session's aside); false for any other
// event.
func EvaluationRecord(e *aep.Event, max aep.Capture) (*logspb.LogRecord, bool) {
	attrs, ok := evaluation(e, max)
	if !ok {
		return nil, false
	}
	lr := &logspb.LogRecord{TimeUnixNano: unixNanos(e.Time), EventName: EvaluationEvent,
		SeverityText: "INFO", SeverityNumber: logspb.SeverityNumber_SEVERITY_NUMBER_INFO, Attributes: attrs}
	if e.Session != "" && e.Run != "" {
		ref := runRef(sessKey{e.Agent, e.Session}, e.Run, spanRef{})
		lr.TraceId, lr.SpanId = ref.trace[:], ref.span[:]
	}
	return lr, true
}

// evaluate adds an assessment of a run as an instant span under the run's
// span, in its trace: what a traces-only backend shows of it.
func (t *Tracer) evaluate(e *aep.Event, sk sessKey, out *spanBatch) {
	attrs, ok := evaluation(e, t.MaxCapture)
	if !ok || e.Run == "" {
		return
	}
	ref := runRef(sk, e.Run, t.parent[sk])
	ts := unixNanos(e.Time)
	out.add(e.Agent, &tracepb.Span{
		TraceId:           ref.trace[:],
		SpanId:            hashID(8, "evaluation", e.Agent, e.Session, e.ID),
		ParentSpanId:      ref.span[:],
		Name:              EvaluationEvent,
		Kind:              tracepb.Span_SPAN_KIND_INTERNAL,
		StartTimeUnixNano: ts,
		EndTimeUnixNano:   ts,
		Attributes:        append(attrs, strKV(AttrSessionLabel, t.labels.label(e))),
	})
}

func doubleKV(k string, v float64) *commonpb.KeyValue {
	return &commonpb.KeyValue{Key: k, Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_DoubleValue{DoubleValue: v}}}
}

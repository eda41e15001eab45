package export

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aep-kimi/aep-kimi/access"
	"github.com/aep-kimi/aep-kimi/aep"
	"github.com/aep-kimi/aep-kimi/internal/testkit/poll"
	"github.com/aep-kimi/aep-kimi/internal/testkit/relaytest"
	"github.com/aep-kimi/aep-kimi/mapping"
	"github.com/aep-kimi/aep-kimi/relay"
)

const ratingNote = "it only retried the flaky test"

// rated is a finished run r1 of session f1 and a person's thumbs down on
// it, with a note, as the emitter records it.
func rated() (run []*aep.Event, feedback *aep.Event) {
	run = []*aep.Event{ev("f1", "r1", 0, "run.started", "", `{"trigger":"user"}`), ev("f1", "r1", 1, "run.finished", "", `{"duration_ms":250}`)}
	feedback = ev("f1", "r1", 2, mapping.TypeFeedback, "", `{"rating":-1,"label":"thumbs_down","source":"human","x-kimi-code-by":"alice","x-kimi-code-surface":"page","comment":"`+ratingNote+`"}`)
	feedback.Cause, feedback.Capture = run[1].ID, "redacted"
	return run, feedback
}

// A person's rating leaves as the GenAI evaluation result, parented to the
// run's span, with its verdict at every ceiling but none and its note only
// at redacted and up; its AEP-0005 record keeps the verdict at metadata too
// (member by member, AEP-0009 §5), not only above it.
func TestEvaluationRecordOfFeedback(t *testing.T) {
	run, fb := rated()
	var tr Tracer
	tr.MaxCapture = aep.CaptureMetadata
	runSpan := spansOf(tr.Add(run))[0]
	for _, c := range []struct {
		max  aep.Capture
		note bool
	}{{aep.CaptureMetadata, false}, {aep.CaptureRedacted, true}, {aep.CaptureFull, true}} {
		er, ok := EvaluationRecord(fb, c.max)
		if !ok {
			t.Fatalf("max %s: no evaluation record", c.max)
		}
		a := kvMap(er.Attributes)
		if er.EventName != EvaluationEvent || a[attrEvalName] != FeedbackEvaluation || a[attrEvalScore] != float64(-1) ||
			a[attrEvalLabel] != mapping.LabelThumbsDown || a[AttrFeedbackBy] != "alice" || a[AttrFeedbackSource] != "human" || a["aep.run_id"] != "r1" {
			t.Errorf("max %s: evaluation record %s %v", c.max, er.EventName, a)
		}
		if (a[attrEvalExplanation] == ratingNote) != c.note {
			t.Errorf("max %s: explanation %v", c.max, a[attrEvalExplanation])
		}
		if !bytes.Equal(er.TraceId, runSpan.TraceId) || !bytes.Equal(er.SpanId, runSpan.SpanId) {
			t.Errorf("max %s: the record is not parented to the run's span", c.max)
		}
		lr, err := LogRecord(fb, c.max)
		if err != nil {
			t.Fatal(err)
		}
		body := kvMap(lr.Body.GetKvlistValue().GetValues())
		if body["label"] != mapping.LabelThumbsDown || (body["comment"] == ratingNote) != c.note {
			t.Errorf("max %s: AEP-0005 record body %v", c.max, body)
		}
		if want := map[bool]string{false: "metadata", true: "redacted"}[c.note]; kvMap(lr.Attributes)["aep.capture"] != want {
			t.Errorf("max %s: the record says capture %v, want what it carries (%s)", c.max, kvMap(lr.Attributes)["aep.capture"], want)
		}
	}
	if er, ok := EvaluationRecord(fb, aep.CaptureNone); !ok || len(kvMap(er.Attributes)) != 5 {
		t.Errorf("at none the evaluation keeps its name and envelope only: %v", er)
	}
	if _, ok := EvaluationRecord(run[1], aep.CaptureFull); ok {
		t.Error("a run's terminal made an evaluation record")
	}
}

// In traces, a rating that comes after its run ended is an instant span
// under the run's span, and opens no run of its own.
func TestTracerEvaluation(t *testing.T) {
	run, fb := rated()
	var tr Tracer
	tr.MaxCapture = aep.CaptureMetadata
	runSpan := spansOf(tr.Add(run))[0]
	spans := spansOf(tr.Add([]*aep.Event{fb}))
	if len(spans) != 1 {
		t.Fatalf("%d spans for a rating", len(spans))
	}
	sp := spans[0]
	a := kvMap(sp.Attributes)
	if sp.Name != EvaluationEvent || !bytes.Equal(sp.TraceId, runSpan.TraceId) || !bytes.Equal(sp.ParentSpanId, runSpan.SpanId) ||
		sp.StartTimeUnixNano != sp.EndTimeUnixNano || a[attrEvalLabel] != mapping.LabelThumbsDown || a[attrEvalExplanation] != nil {
		t.Errorf("evaluation span %s %v", sp.Name, a)
	}
	if len(tr.runs) != 0 {
		t.Errorf("the rating left %d runs open", len(tr.runs))
	}
}

// The upstream corpus's automated evaluation mirrors the convention's
// names: they pass through as they are, the explanation above metadata.
func TestEvaluationRecordOfUpstream(t *testing.T) {
	var eval *aep.Event
	for _, e := range golden(t) {
		if e.Type == typeEvaluation {
			eval = e
		}
	}
	if eval == nil {
		t.Fatal("the corpus has no assessment.evaluation.recorded")
	}
	er, ok := EvaluationRecord(eval, aep.CaptureMetadata)
	a := kvMap(er.Attributes)
	if !ok || a[attrEvalName] != "answer_relevance" || a[attrEvalScore] != 0.42 || a[attrEvalLabel] != "fail" ||
		a[AttrEvaluator] != "llm-judge:v2" || a[attrEvalExplanation] != nil {
		t.Errorf("upstream evaluation at metadata: %v", a)
	}
}

// The CloudEvents exporter ships a rating as an event, at its reader's
// ceiling: following the relay with a watcher's token (metadata), the
// verdict and who gave it arrive, the note does not.
func TestLiveCERatingAtReaderCeiling(t *testing.T) {
	home := t.TempDir()
	store := access.Store{Home: home}
	_, watcher, err := store.Add("walt", access.RoleWatch, "")
	if err != nil {
		t.Fatal(err)
	}
	srv := relaytest.RunServer(t, relay.Config{Token: testToken, People: access.OpenRoster(home, nil)})
	url, received := ceReceiver(t)
	run, fb := rated()
	srv.Post(t, append(run, fb)...)
	stop := runLive(t, &Live{Relay: srv.URL, Token: watcher, StatePath: filepath.Join(t.TempDir(), "state.json"),
		Sink: &PostSink{URL: url, ContentType: CEContentType, Conv: Converter{Mode: ModeCE}}})
	poll.Must(t, waitFor, "three CloudEvents", func() bool { return len(received()) >= 3 })
	stop()
	ce := received()[2]
	d, _ := ce.DataMap()
	if ce.Type != mapping.TypeFeedback || ce.ID != fb.ID || d["label"] != mapping.LabelThumbsDown || d[mapping.DataBy] != "alice" || ce.Capture != "metadata" {
		t.Errorf("the rating as the CE receiver got it: %s %v", ce.Type, d)
	}
	if b, _ := ce.MarshalJSON(); strings.Contains(string(b), ratingNote) {
		t.Errorf("the note left above the reader's ceiling: %s", b)
	}
}

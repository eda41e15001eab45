package mapping

import (
	"encoding/json"
	"fmt"
	"reflect"
	"testing"

	"github.com/aep-kimi/aep-kimi/aep"
)

// askedFrame is a real event.question.requested payload of Kimi 2.1.0
// (one single-select and one multi-select question, both with other).
const askedFrame = `{"type":"event.question.requested","agentId":"main","question_id":"question_1","questions":[` +
	`{"id":"q_0","question":"Deploy where?","options":[{"id":"opt_0_0","label":"staging","description":"safe"},{"id":"opt_0_1","label":"prod"}],"header":"Env","allow_other":true},` +
	`{"id":"q_1","question":"Notify whom?","options":[{"id":"opt_1_0","label":"ops"},{"id":"opt_1_1","label":"dev, qa"},{"id":"opt_1_2","label":"dev"}],"multi_select":true,"allow_other":true}]}`

func askedQuestions(t *testing.T) []Question {
	t.Helper()
	pl, err := decodeObject([]byte(askedFrame))
	if err != nil {
		t.Fatal(err)
	}
	return WebQuestions(pl)
}

func TestWebQuestionValues(t *testing.T) {
	qs := askedQuestions(t)
	cases := []struct {
		answers string
		want    string
	}{
		// kap keys answers by question text and gives labels.
		{`{"Deploy where?":"prod","Notify whom?":"ops"}`, `{"q_0":"opt_0_1","q_1":["opt_1_0"]}`},
		// A multi-select answer is its labels joined with ", ": a label
		// holding ", " is taken whole, and the words left are free text.
		{`{"Notify whom?":"dev, qa, dev, the boss"}`, `{"q_1":["opt_1_1","opt_1_2","the boss"]}`},
		{`{"Notify whom?":"ops, ops"}`, `{"q_1":["opt_1_0"]}`},
		{`{"Notify whom?":"only the boss"}`, `{"q_1":["only the boss"]}`},
		// Free text on a single-select question; a label in another case
		// is that choice.
		{`{"Deploy where?":"blue-green"}`, `{"q_0":"blue-green"}`},
		{`{"Deploy where?":" Staging "}`, `{"q_0":"opt_0_0"}`},
		// Keyed by id (a later kap), or by nothing asked.
		{`{"q_0":"staging","Who?":"x"}`, `{"q_0":"opt_0_0"}`},
		// Not strings: nothing to read.
		{`{"Deploy where?":{"kind":"single","option_id":"opt_0_0"},"Notify whom?":""}`, `{}`},
	}
	for _, c := range cases {
		pl, err := decodeObject([]byte(`{"answers":` + c.answers + `}`))
		if err != nil {
			t.Fatal(err)
		}
		got, _ := json.Marshal(WebQuestionValues(pl, qs))
		if string(got) != c.want {
			t.Errorf("%s: got %s, want %s", c.answers, got, c.want)
		}
	}
	pl, _ := decodeObject([]byte(`{"answers":{"Deploy where?":"prod"}}`))
	if v := WebQuestionValues(pl, nil); len(v) != 0 {
		t.Errorf("values without the questions: %v", v)
	}
}

// TestQuestionAnsweredGating: closed choices are structural at any
// capture; free text needs redacted (AEP-0006).
func TestQuestionAnsweredGating(t *testing.T) {
	qs := askedQuestions(t)
	values := map[string]any{"q_0": "blue-green", "q_1": []any{"opt_1_0", "the boss"}}
	for _, c := range []struct {
		capture aep.Capture
		want    string
	}{
		{aep.CaptureMetadata, `{"q_1":["opt_1_0"]}`},
		{aep.CaptureRedacted, `{"q_0":"blue-green","q_1":["opt_1_0","the boss"]}`},
	} {
		p := Posture{Capture: c.capture, AttentionCapture: c.capture}
		e := QuestionAnswered(values, qs, "control", p)
		ans, _ := e.Data["answer"].(map[string]any)
		got, _ := json.Marshal(ans["values"])
		if c.capture == aep.CaptureMetadata {
			// A multi answer mixing choices and text is text as a whole:
			// nothing of it at metadata.
			if string(got) != `{}` {
				t.Errorf("%s: %s", c.capture, got)
			}
			continue
		}
		if string(got) != c.want {
			t.Errorf("%s: got %s, want %s", c.capture, got, c.want)
		}
	}
	closed := QuestionAnswered(map[string]any{"q_0": "opt_0_0", "q_1": []any{"opt_1_2"}}, qs, "oob", Posture{Capture: aep.CaptureMetadata, AttentionCapture: aep.CaptureMetadata})
	got, _ := json.Marshal(closed.Data["answer"])
	if string(got) != `{"values":{"q_0":"opt_0_0","q_1":["opt_1_2"]}}` {
		t.Errorf("closed choices at metadata: %s", got)
	}
}

// TestFormQuestions: the questions read back from the request the bridge
// recorded are the ones asked, at redacted; at metadata the texts are gone
// but the ids and shape stay.
func TestFormQuestions(t *testing.T) {
	qs := askedQuestions(t)
	for _, c := range []aep.Capture{aep.CaptureRedacted, aep.CaptureMetadata} {
		p := Posture{Capture: c, AttentionCapture: c}
		var fields []any
		b, _ := json.Marshal(QuestionFields(qs, c, p))
		json.Unmarshal(b, &fields) //nolint:errcheck // our own JSON
		back := FormQuestions(fields)
		want := qs
		if c == aep.CaptureMetadata {
			want = make([]Question, len(qs))
			for i, q := range qs {
				q.Text = ""
				q.Choices = append([]Choice(nil), q.Choices...)
				for j := range q.Choices {
					q.Choices[j].Label = ""
				}
				want[i] = q
			}
		}
		if !reflect.DeepEqual(back, want) {
			t.Errorf("%s: read back %+v, want %+v", c, back, want)
		}
	}
}

func TestQuestionChoice(t *testing.T) {
	q := Question{ID: "q", Choices: []Choice{{ID: "a", Label: "Yes"}, {ID: "b", Label: "yes "}, {ID: "c", Label: "No"}}}
	for in, want := range map[string]string{"a": "a", "no": "c", " NO": "c", "yes": "", "b": "b", "": "", "maybe": ""} {
		c, ok := q.Choice(in)
		if got := map[bool]string{true: c.ID}[ok]; got != want {
			t.Errorf("Choice(%q) = %q, want %q", in, got, want)
		}
	}
}

func FuzzWebQuestionValues(f *testing.F) {
	f.Add([]byte(askedFrame), []byte(`{"answers":{"Deploy where?":"prod","Notify whom?":"dev, qa, x"}}`))
	f.Add([]byte(`{"questions":[{"question":"A?","options":[{"label":", "},{"label":""}],"multi_select":true}]}`), []byte(`{"answers":{"A?":", , , "}}`))
	f.Fuzz(func(t *testing.T, asked, answered []byte) {
		apl, err := decodeObject(asked)
		if err != nil {
			return
		}
		pl, err := decodeObject(answered)
		if err != nil {
			return
		}
		qs := WebQuestions(apl)
		values := WebQuestionValues(pl, qs)
		byID := map[string]Question{}
		for _, q := range qs {
			byID[q.ID] = q
		}
		for id, v := range values {
			q, ok := byID[id]
			if !ok {
				t.Fatalf("value for %q, no such question", id)
			}
			list, isList := v.([]any)
			if isList != q.Multi {
				t.Fatalf("question %q multi %v, value %#v", id, q.Multi, v)
			}
			if !isList {
				list = []any{v}
			}
			free := 0
			for _, e := range list {
				s, ok := e.(string)
				if !ok {
					t.Fatalf("value element %#v", e)
				}
				if _, ok := q.Choice(s); !ok {
					free++
				}
			}
			if free > 1 {
				t.Fatalf("%d free-text elements in %v", free, v)
			}
		}
		// The record of it is always a valid event at every capture.
		for _, c := range []aep.Capture{aep.CaptureMetadata, aep.CaptureRedacted, aep.CaptureFull} {
			e := QuestionAnswered(values, qs, "oob", Posture{Capture: c, AttentionCapture: c})
			ev := &aep.Event{ID: "01TEST", Time: "2026-11-29T00:00:00.000Z", Source: "aep://h/agent/kimi-code/session/s", Agent: Agent, Session: "s", Seq: aep.Int64(0), Subject: "q"}
			if err := e.Envelope(ev); err != nil {
				t.Fatal(err)
			}
			if err := aep.Validate(ev); err != nil {
				t.Fatalf("%s: %v: %s", c, err, fmt.Sprint(e.Data))
			}
		}
	})
}

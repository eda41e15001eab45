package mapping

import (
	"fmt"
	"strings"

	"github.com/aep-kimi/aep-kimi/aep"
)

// Kimi's AskUserQuestion call reaches kimi web as one question request of
// one to four questions. It maps to one kind "form" request (AEP-0006), a
// select field per question; the functions here read the questions and
// their answers both ways.

// OptionDismiss is the request-level option of a question offered for
// control: answering with it dismisses the question (kap's :dismiss), as
// closing Kimi's own question card does.
const OptionDismiss = "dismiss"

// Question is one question of a question request: what the bridge keeps
// to read an answer against it.
type Question struct {
	// ID is kap's question id, the form field's id.
	ID string
	// Text is the question as asked (empty when the record does not carry
	// it, e.g. at capture metadata).
	Text         string
	Multi, Other bool
	Choices      []Choice
}

// Choice is one offered answer of a question: kap's option id and label.
type Choice struct {
	ID, Label string
}

// WebQuestions reads the questions of an event.question.requested
// payload, in order; a question or option without an id gets the one its
// form field and choice get (q_N, {question}_N).
func WebQuestions(pl map[string]any) []Question {
	qs, _ := pl["questions"].([]any)
	var out []Question
	for i, q := range qs {
		qm, ok := q.(map[string]any)
		if !ok {
			continue
		}
		id := str(qm, "id")
		if id == "" {
			id = fmt.Sprintf("q_%d", i)
		}
		question := Question{ID: id, Text: str(qm, "question"), Other: boolean(qm, "allow_other"),
			Multi: boolean(qm, "multi_select") || boolean(qm, "multiSelect")}
		opts, _ := qm["options"].([]any)
		for j, o := range opts {
			om, ok := o.(map[string]any)
			if !ok {
				continue
			}
			cid := str(om, "id")
			if cid == "" {
				cid = fmt.Sprintf("%s_%d", id, j)
			}
			question.Choices = append(question.Choices, Choice{ID: cid, Label: str(om, "label")})
		}
		out = append(out, question)
	}
	return out
}

// FormQuestions reads questions back from a form request's fields (the
// bridge's own record, after a restart): a label that is only its id (a
// record at capture metadata) reads as no text.
func FormQuestions(fields []any) []Question {
	var out []Question
	for _, f := range fields {
		fm, ok := f.(map[string]any)
		if !ok || str(fm, "id") == "" || str(fm, "type") != "select" {
			continue
		}
		q := Question{ID: str(fm, "id"), Text: str(fm, "label"), Multi: boolean(fm, "multi"), Other: boolean(fm, "other")}
		if q.Text == q.ID {
			q.Text = ""
		}
		choices, _ := fm["choices"].([]any)
		for _, c := range choices {
			cm, ok := c.(map[string]any)
			if !ok || str(cm, "id") == "" {
				continue
			}
			ch := Choice{ID: str(cm, "id"), Label: str(cm, "label")}
			if ch.Label == ch.ID {
				ch.Label = ""
			}
			q.Choices = append(q.Choices, ch)
		}
		out = append(out, q)
	}
	return out
}

// QuestionFields are the form fields (AEP-0006 field_spec) of qs with
// their labels at capture level: the text at redacted and above (through
// the pipeline at redacted), the id below.
func QuestionFields(qs []Question, level aep.Capture, p Posture) []any {
	fields := make([]any, 0, len(qs))
	for _, q := range qs {
		label := q.ID
		if s, ok := p.text(level, q.Text); ok {
			label = s
		}
		choices := make([]any, 0, len(q.Choices))
		for _, c := range q.Choices {
			cl := c.ID
			if s, ok := p.text(level, c.Label); ok {
				cl = s
			}
			choices = append(choices, map[string]any{"id": c.ID, "label": cl})
		}
		field := map[string]any{"id": q.ID, "type": "select", "label": label, "choices": choices}
		if q.Other {
			field["other"] = true
		}
		if q.Multi {
			field["multi"] = true
		}
		fields = append(fields, field)
	}
	return fields
}

// Choice returns the choice of q that s names: its id, else (trimmed, any
// case) the label of exactly one choice (AEP-0008's rule for text naming
// an option, applied to choices).
func (q Question) Choice(s string) (Choice, bool) {
	for _, c := range q.Choices {
		if c.ID == s {
			return c, true
		}
	}
	s = strings.TrimSpace(s)
	var found Choice
	n := 0
	for _, c := range q.Choices {
		if c.Label != "" && strings.EqualFold(strings.TrimSpace(c.Label), s) {
			found = c
			n++
		}
	}
	return found, n == 1
}

// multiSeparator joins the labels of a multi-select answer in kap's
// event.question.answered (and in the tool result the model reads).
const multiSeparator = ", "

// WebQuestionValues reads the answers of an event.question.answered
// payload as AEP-0006 values against the questions asked. kap keys them by
// question text and gives each as the chosen label, the labels of a
// multi-select answer joined with ", ", or the person's own words: each
// becomes a choice id, an array of ids (with any words left over as one
// free-text element), or the free text. An answer to no known question is
// left out, and so is every one when qs is empty: values are keyed by
// field id, which only the question tells.
func WebQuestionValues(pl map[string]any, qs []Question) map[string]any {
	values := map[string]any{}
	answers, _ := pl["answers"].(map[string]any)
	for key, v := range answers {
		q, ok := questionByKey(qs, key)
		if !ok {
			continue
		}
		s, ok := v.(string)
		if !ok {
			continue
		}
		if !q.Multi {
			if c, ok := q.Choice(s); ok {
				values[q.ID] = c.ID
			} else if strings.TrimSpace(s) != "" {
				values[q.ID] = s
			}
			continue
		}
		if picked := multiValues(q, s); len(picked) > 0 {
			values[q.ID] = picked
		}
	}
	return values
}

// questionByKey finds the question kap keyed an answer by: its text, or
// its id.
func questionByKey(qs []Question, key string) (Question, bool) {
	for _, q := range qs {
		if q.Text != "" && q.Text == key {
			return q, true
		}
	}
	for _, q := range qs {
		if q.ID == key {
			return q, true
		}
	}
	return Question{}, false
}

// multiValues splits a multi-select answer into choice ids: the labels in
// order (a label may itself hold ", ", so the longest one that fits goes
// first), the rest, if any, one free-text element.
func multiValues(q Question, s string) []any {
	var out []any
	seen := map[string]bool{}
	rest := s
	for rest != "" {
		var best Choice
		for _, c := range q.Choices {
			if c.Label == "" || len(c.Label) <= len(best.Label) {
				continue
			}
			if rest == c.Label || strings.HasPrefix(rest, c.Label+multiSeparator) {
				best = c
			}
		}
		if best.Label == "" {
			break
		}
		if !seen[best.ID] {
			seen[best.ID] = true
			out = append(out, best.ID)
		}
		rest = strings.TrimPrefix(strings.TrimPrefix(rest, best.Label), multiSeparator)
	}
	if strings.TrimSpace(rest) != "" {
		out = append(out, rest)
	}
	return out
}

// QuestionAnswered is the answer to a question request: values (AEP-0006,
// keyed by field id) gated by type as AEP-0006 says (a choice id is
// structural; free text needs redacted and goes through the pipeline
// there), via the channel it came by. The caller adds who answered.
func QuestionAnswered(values map[string]any, qs []Question, via string, p Posture) Event {
	e := newEvent(p, "attention.answered", aep.SeverityNotice)
	answer := map[string]any{}
	if len(values) > 0 && e.Capture > aep.CaptureNone {
		redact := func(s string) string { return p.redactor().Text(s) }
		answer["values"] = aep.GateFormValues(QuestionFields(qs, aep.CaptureMetadata, p), values, e.Capture, redact)
	}
	e.Data["answer"] = answer
	e.Data["via"] = via
	return e
}

// QuestionDismissed is a question request's dismissal as an answer: the
// dismiss option, via the channel it came by (AttentionResolved dismissed
// follows it).
func QuestionDismissed(via string, p Posture) Event {
	e := newEvent(p, "attention.answered", aep.SeverityNotice)
	e.Data["answer"] = map[string]any{"option": OptionDismiss}
	e.Data["via"] = via
	return e
}

// OfferedQuestion says how a question request can be answered: with
// control on, through control (its fields, or the dismiss option) as well
// as in Kimi's own UI, which stays usable; otherwise only there
// (respond_via oob, AEP-0008).
func OfferedQuestion(e Event, control bool) Event {
	if !control {
		return e.with("respond_via", []any{"oob"})
	}
	opts := aep.OptionsData([]aep.Option{{ID: OptionDismiss, Label: "Dismiss"}}, e.Capture)
	return e.with("options", opts).with("respond_via", []any{"control", "oob"})
}

package bridgeweb

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/aep-kimi/aep-kimi/mapping"
)

// questionAnswer is an answer to a question request, read: what to post
// to kap-server and what the record says was answered.
type questionAnswer struct {
	// dismiss: post :dismiss, nothing else.
	dismiss bool
	// answers is kap's answers object, keyed by question id.
	answers map[string]any
	// values are the AEP-0006 values applied: a choice id, an array of
	// choice ids (with at most one free-text element), or free text.
	values map[string]any
}

// kap's answer kinds (the question response body).
const (
	kapSingle         = "single"
	kapMulti          = "multi"
	kapOther          = "other"
	kapMultiWithOther = "multi_with_other"
)

// readQuestionAnswer reads a control.attention.respond answer against the
// questions asked (docs/questions.md): values keyed by question id, text
// alone for a one-question form, or the dismiss option. A value names a
// choice by id or, as AEP-0008 lets text name an option, by its label;
// other words are free text where the question allows it. A question the
// answer leaves out is skipped. Anything else is an error that says why,
// and nothing is posted.
func readQuestionAnswer(qs []mapping.Question, answer map[string]any) (questionAnswer, error) {
	option, _ := answer["option"].(string)
	text, _ := answer["text"].(string)
	rawValues, hasValues := answer["values"]
	if _, ok := answer["option"]; ok && option == "" {
		return questionAnswer{}, errors.New("answer.option is not a string")
	}
	if option != "" {
		if !strings.EqualFold(strings.TrimSpace(option), mapping.OptionDismiss) {
			return questionAnswer{}, fmt.Errorf("a question takes answer.values, or option %s (not %q)", mapping.OptionDismiss, clipWords(option))
		}
		if hasValues || text != "" {
			return questionAnswer{}, fmt.Errorf("option %s dismisses the question: it takes no values or text", mapping.OptionDismiss)
		}
		return questionAnswer{dismiss: true}, nil
	}
	var values map[string]any
	switch {
	case hasValues && text != "":
		return questionAnswer{}, errors.New("give answer.values or answer.text, not both (free text goes in values, as the answer to a question that allows it)")
	case hasValues:
		m, ok := rawValues.(map[string]any)
		if !ok {
			return questionAnswer{}, errors.New("answer.values is not an object")
		}
		values = m
	case text != "":
		if strings.EqualFold(strings.TrimSpace(text), mapping.OptionDismiss) {
			return questionAnswer{dismiss: true}, nil
		}
		if len(qs) != 1 {
			return questionAnswer{}, fmt.Errorf("this form asks %d questions: answer with values keyed by question id (%s)", len(qs), questionIDs(qs))
		}
		values = map[string]any{qs[0].ID: text}
	default:
		return questionAnswer{}, fmt.Errorf("a question takes answer.values keyed by question id (%s), or option %s", questionIDs(qs), mapping.OptionDismiss)
	}
	if len(values) == 0 {
		return questionAnswer{}, fmt.Errorf("answer.values answers no question (%s); to decline, answer option %s", questionIDs(qs), mapping.OptionDismiss)
	}
	qa := questionAnswer{answers: map[string]any{}, values: map[string]any{}}
	// In the form's order, so the first error is the same every time.
	for _, q := range qs {
		v, ok := values[q.ID]
		if !ok {
			continue
		}
		kap, applied, err := readOne(q, v)
		if err != nil {
			return questionAnswer{}, fmt.Errorf("question %s: %w", q.ID, err)
		}
		qa.answers[q.ID], qa.values[q.ID] = kap, applied
	}
	if len(qa.answers) != len(values) {
		var unknown []string
		for id := range values {
			if _, ok := qa.answers[id]; !ok {
				unknown = append(unknown, clipWords(id))
			}
		}
		sort.Strings(unknown)
		return questionAnswer{}, fmt.Errorf("no question %s in this form (it asks %s)", strings.Join(unknown, ", "), questionIDs(qs))
	}
	return qa, nil
}

// readOne reads one question's value: kap's answer and the value applied.
func readOne(q mapping.Question, v any) (map[string]any, any, error) {
	items := []any{v}
	if list, ok := v.([]any); ok {
		if !q.Multi {
			return nil, nil, errors.New("it takes one choice, not a list")
		}
		items = list
	}
	if len(items) == 0 {
		return nil, nil, errors.New("the list chooses nothing")
	}
	var ids []string
	seen := map[string]bool{}
	other, hasOther := "", false
	for _, it := range items {
		s, ok := it.(string)
		if !ok {
			return nil, nil, fmt.Errorf("%s is not a choice id or text", jsonKind(it))
		}
		if c, ok := q.Choice(s); ok {
			if !seen[c.ID] {
				seen[c.ID] = true
				ids = append(ids, c.ID)
			}
			continue
		}
		switch {
		case !q.Other:
			return nil, nil, fmt.Errorf("%q is not one of its choices (%s)", clipWords(s), choiceWords(q))
		case strings.TrimSpace(s) == "":
			return nil, nil, errors.New("the free-text answer is empty")
		case hasOther:
			return nil, nil, errors.New("it takes at most one free-text answer")
		}
		other, hasOther = strings.TrimSpace(s), true
	}
	applied := make([]any, 0, len(ids)+1)
	for _, id := range ids {
		applied = append(applied, id)
	}
	switch {
	case !q.Multi && hasOther:
		return map[string]any{"kind": kapOther, "text": other}, other, nil
	case !q.Multi:
		return map[string]any{"kind": kapSingle, "option_id": ids[0]}, ids[0], nil
	case hasOther && len(ids) == 0:
		return map[string]any{"kind": kapOther, "text": other}, append(applied, other), nil
	case hasOther:
		return map[string]any{"kind": kapMultiWithOther, "option_ids": ids, "other_text": other}, append(applied, other), nil
	}
	return map[string]any{"kind": kapMulti, "option_ids": ids}, applied, nil
}

// questionIDs lists a form's question ids for a sentence.
func questionIDs(qs []mapping.Question) string {
	ids := make([]string, len(qs))
	for i, q := range qs {
		ids[i] = q.ID
	}
	if len(ids) == 0 {
		return "none"
	}
	return strings.Join(ids, ", ")
}

// choiceWords lists a question's choices for a sentence: their labels
// where the record has them, else their ids.
func choiceWords(q mapping.Question) string {
	words := make([]string, len(q.Choices))
	for i, c := range q.Choices {
		words[i] = c.ID
		if c.Label != "" {
			words[i] = clipWords(c.Label)
		}
	}
	s := strings.Join(words, ", ")
	if q.Other {
		s += ", or free text"
	}
	return s
}

// clipWords keeps a sender's or vendor's words short in a refusal.
func clipWords(s string) string {
	const most = 60
	if r := []rune(s); len(r) > most {
		return string(r[:most]) + "…"
	}
	return s
}

func jsonKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case map[string]any:
		return "an object"
	case []any:
		return "a list"
	case string:
		return "a string"
	}
	return "a number"
}

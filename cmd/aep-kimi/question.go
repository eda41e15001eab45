package main

import (
	"errors"
	"flag"
	"fmt"
	"strconv"
	"strings"

	"github.com/aep-kimi/aep-kimi/mapping"
	"github.com/aep-kimi/aep-kimi/relay/consumer"
)

// questionFlags are respond's flags for answering a question (a form
// request, docs/questions.md): --choice and --other answer the question the
// last --question named (the first without one). They apply in order, so
// one command answers several questions.
type questionFlags struct {
	cur   string
	named bool
	parts []answerPart
}

// answerPart is one --choice or --other, with the --question in force.
type answerPart struct {
	question string
	choice   string
	other    string
	isOther  bool
}

func (q *questionFlags) bind(fs *flag.FlagSet) {
	fs.Func("question", "the question (its number as pending shows it, or its id) the --choice and --other after it answer (default 1)", func(s string) error {
		if strings.TrimSpace(s) == "" {
			return errors.New("empty")
		}
		q.cur, q.named = s, true
		return nil
	})
	fs.Func("choice", "a question's choice: its number as pending shows it, or its label; repeat it for a question that takes several", func(s string) error {
		if strings.TrimSpace(s) == "" {
			return errors.New("empty")
		}
		q.parts = append(q.parts, answerPart{question: q.cur, choice: s})
		return nil
	})
	fs.Func("other", "your own words, for a question that takes them", func(s string) error {
		if strings.TrimSpace(s) == "" {
			return errors.New("empty")
		}
		q.parts = append(q.parts, answerPart{question: q.cur, other: s, isOther: true})
		return nil
	})
}

// given reports whether any question flag was.
func (q *questionFlags) given() bool { return q.named || len(q.parts) > 0 }

// usage checks the question flags against respond's others before anything
// is looked up: "" when they go together.
func (q *questionFlags) usage(option, text string, a alwaysOptions) string {
	switch {
	case !q.given():
		return ""
	case len(q.parts) == 0:
		return "--question names the question a --choice or --other after it answers: give one"
	case option != "":
		return "--option does not go with --choice or --other (to dismiss a question: --option dismiss alone)"
	case text != "":
		return "--text does not go with --choice or --other (your own words: --other TEXT)"
	case a.pattern != "":
		return "--always saves a rule for a tool's requests; no rule answers a question"
	}
	return ""
}

// formUsage checks respond's flags against the request they answer: a
// question takes --choice, --other or --option dismiss (or, for a
// one-question form, --text), and only a question takes --choice or
// --other. "" when they fit.
func (q *questionFlags) formUsage(r *consumer.Request, option, text string, a alwaysOptions) string {
	form := len(r.Questions()) > 0
	switch {
	case q.given() && !form:
		opts := strings.Join(r.OptionIDs(), ", ")
		if opts == "" {
			return fmt.Sprintf("request %s is not a question: answer it with --text", r.ID)
		}
		return fmt.Sprintf("request %s is not a question: answer it with --option (%s)", r.ID, opts)
	case !form || q.given():
		return ""
	case option != "" && !strings.EqualFold(strings.TrimSpace(option), mapping.OptionDismiss):
		return fmt.Sprintf("request %s is a question: answer it with --choice N or --other TEXT (see aep-kimi pending), or dismiss it with --option %s", r.ID, mapping.OptionDismiss)
	case text != "" && len(r.Questions()) > 1:
		return fmt.Sprintf("request %s asks %d questions: answer them with --question N --choice C (or --other TEXT)", r.ID, len(r.Questions()))
	case a.pattern != "":
		return "--always saves a rule for a tool's requests; no rule answers a question"
	}
	return ""
}

// values turns the flags into the form's values (AEP-0006: a choice id, an
// array of ids, free text), or a one-line error naming what does not fit.
func (q *questionFlags) values(qs []mapping.Question) (map[string]any, error) {
	type answer struct {
		ids   []any
		other string
	}
	got := map[int]*answer{}
	var order []int
	for _, p := range q.parts {
		i, err := pickQuestion(qs, p.question)
		if err != nil {
			return nil, err
		}
		qu := qs[i]
		a := got[i]
		if a == nil {
			a = &answer{}
			got[i] = a
			order = append(order, i)
		}
		if p.isOther {
			switch {
			case !qu.Other:
				return nil, fmt.Errorf("question %d takes no words of your own: choose %s", i+1, choiceList(qu))
			case a.other != "":
				return nil, fmt.Errorf("question %d takes one --other", i+1)
			}
			a.other = strings.TrimSpace(p.other)
		} else {
			c, err := pickChoice(qu, i, p.choice)
			if err != nil {
				return nil, err
			}
			dup := false
			for _, id := range a.ids {
				dup = dup || id == c.ID
			}
			if !dup {
				a.ids = append(a.ids, c.ID)
			}
		}
		if !qu.Multi && len(a.ids)+btoi(a.other != "") > 1 {
			return nil, fmt.Errorf("question %d takes one answer (a --choice or --other), not several", i+1)
		}
	}
	values := map[string]any{}
	for _, i := range order {
		qu, a := qs[i], got[i]
		switch {
		case !qu.Multi && a.other != "":
			values[qu.ID] = a.other
		case !qu.Multi:
			values[qu.ID] = a.ids[0]
		case a.other != "":
			values[qu.ID] = append(a.ids, a.other)
		default:
			values[qu.ID] = a.ids
		}
	}
	return values, nil
}

// pickQuestion finds the question a --question names: "" for the first,
// its number, its id or its text.
func pickQuestion(qs []mapping.Question, name string) (int, error) {
	if len(qs) == 0 {
		return 0, errors.New("the request asks no questions")
	}
	if name == "" {
		return 0, nil
	}
	if n, err := strconv.Atoi(strings.TrimSpace(name)); err == nil {
		if n >= 1 && n <= len(qs) {
			return n - 1, nil
		}
	} else {
		for i, q := range qs {
			if q.ID == name || (q.Text != "" && strings.EqualFold(strings.TrimSpace(q.Text), strings.TrimSpace(name))) {
				return i, nil
			}
		}
	}
	return 0, fmt.Errorf("no question %s: the request asks %s", consumer.Line(strconv.Quote(name)), questionList(qs))
}

// pickChoice finds the choice a --choice names: its number, id or label.
func pickChoice(q mapping.Question, i int, name string) (mapping.Choice, error) {
	if n, err := strconv.Atoi(strings.TrimSpace(name)); err == nil && n >= 1 && n <= len(q.Choices) {
		return q.Choices[n-1], nil
	}
	if c, ok := q.Choice(name); ok {
		return c, nil
	}
	hint := ""
	if q.Other {
		hint = ", or --other TEXT"
	}
	return mapping.Choice{}, fmt.Errorf("question %d has no choice %s: choose %s%s", i+1, consumer.Line(strconv.Quote(name)), choiceList(q), hint)
}

// choiceList names a question's choices as --choice takes them.
func choiceList(q mapping.Question) string {
	words := make([]string, len(q.Choices))
	for j, c := range q.Choices {
		words[j] = fmt.Sprintf("%d %s", j+1, consumer.Line(firstNonEmpty(c.Label, c.ID)))
	}
	return strings.Join(words, ", ")
}

// questionList names a form's questions as --question takes them.
func questionList(qs []mapping.Question) string {
	words := make([]string, len(qs))
	for i, q := range qs {
		words[i] = fmt.Sprintf("%d %s", i+1, consumer.Line(firstNonEmpty(q.Text, q.ID)))
	}
	return strings.Join(words, ", ")
}

func firstNonEmpty(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

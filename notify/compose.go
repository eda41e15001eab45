package notify

import (
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/aep-kimi/aep-kimi/access"
	"github.com/aep-kimi/aep-kimi/aep"
	"github.com/aep-kimi/aep-kimi/relay"
	"github.com/aep-kimi/aep-kimi/relay/consumer"
)

// Lengths of what a notification says.
const (
	titleRunes = 80
	bodyRunes  = 240
)

// compose is the message about one waiting request for r, said within r's
// ceiling, with answer links minted for r; false when the fold no longer
// holds it.
func (n *Notifier) compose(r *recipient, t *tracked, now time.Time) (Message, bool) {
	s, req := n.request(r.ceiling, t.session, t.id)
	if req == nil {
		return Message{}, false
	}
	tool := subjectOf(s, req)
	label := n.feed.fold(r.ceiling).Labels()[t.session].String()
	m := Message{
		Kind: KindRequest, Tag: t.tag, Session: t.session, Request: t.id, Label: label, Tool: tool,
		Deadline: req.Deadline, Fate: req.Fate(), Open: n.openURL(t.session, t.id),
	}
	m.Title = clip(firstOf(tool, whatIs(req, true))+" waits for you", titleRunes)
	var body []string
	if p := promptLine(req); p != "" {
		body = append(body, p)
	}
	answers, field := linkAnswers(req)
	// A form's links answer one question with one choice: the page has
	// the rest (its other questions, several choices, free text).
	m.More = req.Kind == "form" && (field == nil || len(req.Fields) > 1 || len(answers) == 0 || field.Multi || field.Other)
	if len(req.Fields) > 1 {
		body = append(body, fmt.Sprintf("The answers here are to %s; the page has all %d questions.", fieldWords(*field, 0), len(req.Fields)))
	}
	facts := []string{label}
	if !req.Deadline.IsZero() {
		facts = append(facts, req.Countdown(now))
	}
	body = append(body, strings.Join(facts, " · "))
	m.Body = clip(strings.Join(body, "\n"), bodyRunes)
	if req.Answerable() && r.who.Can(access.RoleAnswer) {
		exp := req.Deadline
		if exp.IsZero() {
			exp = now.Add(DefaultTokenTTL)
		}
		for i, o := range answers {
			c := Claims{Session: t.session, Request: t.id, Option: o.ID, By: r.who.Name, Token: r.who.Token.String(), Surface: r.surface, Expires: exp.Unix()}
			if field != nil {
				c.Field, c.Multi = field.ID, field.Multi
			}
			tok, err := n.signer.Mint(c)
			if err != nil {
				n.log.Warn("answer link not made", "err", err)
				continue
			}
			m.Answers = append(m.Answers, Answer{Option: o.ID, Label: answerWords(o, i, field != nil), URL: n.link(relay.AnswerPath + tok)})
		}
	}
	return m, true
}

// answerWords is the words on an answer's button: an option's (optionLabel),
// or a form choice's label; a choice whose label the capture ceiling
// withheld (it is its id, which is opaque) is "Choice N", by its place.
func answerWords(o consumer.Option, i int, choice bool) string {
	if !choice {
		return optionLabel(o)
	}
	if l := consumer.Line(strings.Join(strings.Fields(o.Label), " ")); l != "" && l != o.ID {
		return l
	}
	return fmt.Sprintf("Choice %d", i+1)
}

// linkAnswers are what a request's answer links answer with: a form's
// first question's choices (with that field; a link answers only it), or
// the request's options (field nil). A form whose first question has no
// choices (free text only) has no links: the page answers it.
func linkAnswers(req *consumer.Request) ([]consumer.Option, *consumer.Field) {
	if req.Kind != "form" {
		return req.Options, nil
	}
	if len(req.Fields) == 0 {
		return nil, nil
	}
	f := &req.Fields[0]
	if f.Type != "select" {
		return nil, f
	}
	return f.Choices, f
}

// subjectOf is what a notification names a request by: the tool it asks
// about, or "" for a form (its subject is the vendor's id of it).
func subjectOf(s *consumer.Session, req *consumer.Request) string {
	if req.Kind == "form" {
		return ""
	}
	return toolOf(s.Event(req.ID))
}

// whatIs is a request in a word, for a title (capital) or a sentence.
func whatIs(req *consumer.Request, capital bool) string {
	w := "a request"
	if req.Kind == "form" {
		w = "a question"
	}
	if capital {
		return capitalized(w)
	}
	return w
}

// fieldWords names the form field at place i: its label quoted, or, where
// the capture ceiling withheld it (the label is its id), "question N".
func fieldWords(f consumer.Field, i int) string {
	if l := consumer.Line(strings.Join(strings.Fields(f.Label), " ")); l != "" && l != f.ID {
		return "“" + l + "”"
	}
	return fmt.Sprintf("question %d", i+1)
}

// composeDigest is one message about several waiting requests.
func (n *Notifier) composeDigest(r *recipient, ts []*tracked, tag string, now time.Time) Message {
	sessions := map[string]bool{}
	labels := n.feed.fold(r.ceiling).Labels()
	var lines []string
	for _, t := range ts {
		sessions[t.session] = true
		s, _ := n.request(r.ceiling, t.session, t.id)
		tool := ""
		if s != nil {
			tool = toolOf(s.Event(t.id))
		}
		lines = append(lines, labels[t.session].String()+": "+firstOf(tool, "a request"))
	}
	title := fmt.Sprintf("%d sessions need you", len(sessions))
	if len(sessions) == 1 {
		title = fmt.Sprintf("%d requests need you", len(ts))
	}
	return Message{Kind: KindDigest, Tag: tag, Title: title, Body: clip(strings.Join(lines, "\n"), bodyRunes), Open: n.openURL("", "")}
}

// composeUpdate replaces a request's notification once it is over, saying
// what became of it in words: "Denied by ann from a phone", "Allowed by
// rule r3", "Proceeded: nobody answered".
func (n *Notifier) composeUpdate(r *recipient, t *tracked, now time.Time) (Message, bool) {
	s, req := n.request(r.ceiling, t.session, t.id)
	if req == nil {
		return Message{}, false
	}
	tool := subjectOf(s, req)
	label := n.feed.fold(r.ceiling).Labels()[t.session].String()
	m := Message{
		Kind: KindUpdate, Tag: t.tag, Session: t.session, Request: t.id, Label: label, Tool: tool,
		Body: clip(strings.Join(nonEmpty(tool, label), " · "), bodyRunes), Open: n.openURL(t.session, t.id),
	}
	if row, ok := s.Settlement(req); ok {
		m.Title, m.Outcome = clip(capitalized(consumer.Line(row.Words())), titleRunes), row.Outcome
		return m, true
	}
	why := req.Closed(now)
	if why == "" {
		why = "no longer waits" // withdrawn from here (not answerable)
	}
	m.Title = clip(firstOf(tool, "The "+strings.TrimPrefix(whatIs(req, false), "a "))+": "+why, titleRunes)
	return m, true
}

// capitalized is s with its first letter in upper case.
func capitalized(s string) string {
	r, size := utf8.DecodeRuneInString(s)
	return string(unicode.ToUpper(r)) + s[size:]
}

// nonEmpty is the strings given that are not empty, in order.
func nonEmpty(ss ...string) []string {
	var out []string
	for _, s := range ss {
		if s != "" {
			out = append(out, s)
		}
	}
	return out
}

// promptLine is a request's own words on one line, fit to print.
func promptLine(req *consumer.Request) string {
	return consumer.Line(strings.Join(strings.Fields(req.Prompt), " "))
}

// toolOf is the tool a request asks about (data.tool.name, else subject).
func toolOf(ev *aep.Event) string {
	if ev == nil {
		return ""
	}
	data, _ := ev.DataMap()
	if t, ok := data["tool"].(map[string]any); ok {
		if name, _ := t["name"].(string); name != "" {
			return consumer.Line(name)
		}
	}
	return consumer.Line(ev.Subject)
}

func firstOf(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// clip cuts s to n runes, ending in an ellipsis when cut.
func clip(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}

// optionLabel is the words on an option's button: its label, or (at a
// ceiling that reduced the label to the id) the id in words, capitalized
// ("allow_session": "Allow session").
func optionLabel(o consumer.Option) string {
	if l := consumer.Line(o.Label); l != "" && l != o.ID {
		return l
	}
	return capitalized(strings.NewReplacer("_", " ", "-", " ").Replace(consumer.Line(o.ID)))
}

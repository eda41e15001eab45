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
	tool := toolOf(s.Event(t.id))
	label := n.feed.fold(r.ceiling).Labels()[t.session].String()
	m := Message{
		Kind: KindRequest, Tag: t.tag, Session: t.session, Request: t.id, Label: label, Tool: tool,
		Deadline: req.Deadline, Open: n.openURL(t.session, t.id),
	}
	m.Title = clip(firstOf(tool, "A request")+" waits for you", titleRunes)
	var body []string
	if p := promptLine(req); p != "" {
		body = append(body, p)
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
		for _, o := range req.Options {
			tok, err := n.signer.Mint(Claims{Session: t.session, Request: t.id, Option: o.ID, By: r.who.Name, Token: r.who.Token.String(), Surface: r.surface, Expires: exp.Unix()})
			if err != nil {
				n.log.Warn("answer link not made", "err", err)
				continue
			}
			m.Answers = append(m.Answers, Answer{Option: o.ID, Label: optionLabel(o), URL: n.link(relay.AnswerPath + tok)})
		}
	}
	return m, true
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
	tool := toolOf(s.Event(t.id))
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
	m.Title = clip(firstOf(tool, "The request")+": "+why, titleRunes)
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

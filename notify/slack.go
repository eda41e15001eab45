package notify

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/aep-kimi/aep-kimi/relay/consumer"
)

// Block Kit's limits: a header's text, a section's text, a button's text,
// elements in an actions block.
const (
	slackMaxHeader  = 150
	slackMaxSection = 3000
	slackMaxButton  = 75
	slackMaxButtons = 25
	slackMaxText    = 4000
)

// Slack posts to a Slack-compatible incoming webhook: a text fallback
// (what notifications show, and all that Discord's and Mattermost's
// Slack-compatible endpoints render) and Block Kit blocks with a link
// button per answer. A link button opens the answer link in a browser,
// which GETs it: the confirmation page, which answers only when its form
// is submitted.
type Slack struct {
	url    string // carries the webhook's secret: never logged
	name   string
	client *http.Client
}

type slackMessage struct {
	Text   string       `json:"text"`
	Blocks []slackBlock `json:"blocks,omitempty"`
}

type slackBlock struct {
	Type     string     `json:"type"`
	Text     *slackText `json:"text,omitempty"`
	Elements []any      `json:"elements,omitempty"`
}

type slackText struct {
	Type string `json:"type"` // plain_text: nothing in it is markup
	Text string `json:"text"`
}

type slackButton struct {
	Type     string    `json:"type"` // button
	Text     slackText `json:"text"`
	URL      string    `json:"url"`
	ActionID string    `json:"action_id"`
	Style    string    `json:"style,omitempty"` // "danger" for a refusal
}

// Name is the target for logs: the webhook's host, its path (the
// secret) elided.
func (s *Slack) Name() string { return s.name }

// Send posts m once.
func (s *Slack) Send(ctx context.Context, m Message) error {
	body, err := json.Marshal(slackPayload(m))
	if err != nil {
		return fmt.Errorf("%s: %w: %w", s.name, ErrPermanent, err)
	}
	return post(ctx, s.client, s.name, s.url, nil, body)
}

// slackPayload builds the message. Every text from the request goes into
// plain_text objects with Slack's three control characters (& < >)
// escaped, so a tool argument can neither mention (<!channel>) nor link
// (<https://evil|click>) nor format (*bold*). The fallback text is markup
// in all three chats: it is escaped for Slack's mrkdwn and for Markdown.
func slackPayload(m Message) slackMessage {
	title := consumer.Line(m.Title)
	body := consumer.Text(m.Body)
	// Slack refuses a header or section with empty text.
	var blocks []slackBlock
	if title != "" {
		blocks = append(blocks, slackBlock{Type: "header", Text: plain(title, slackMaxHeader)})
	}
	if body != "" {
		blocks = append(blocks, slackBlock{Type: "section", Text: plain(body, slackMaxSection)})
	}
	if facts := requestFacts(m); facts != "" {
		blocks = append(blocks, slackBlock{Type: "context", Elements: []any{plain(facts, slackMaxSection)}})
	}
	var buttons []any
	var links []string
	if m.Kind != KindUpdate {
		for i, a := range keptAnswers(m.Answers, slackMaxButtons-1) {
			label := consumer.Line(answerLabel(a))
			b := slackButton{
				Type:     "button",
				Text:     *plain(label, slackMaxButton),
				URL:      a.URL,
				ActionID: fmt.Sprintf("aep-answer-%d", i),
			}
			if refusal.MatchString(a.Option + " " + a.Label) {
				b.Style = "danger" // Block Kit's red button
			}
			buttons = append(buttons, b)
			links = append(links, chatLink(a.URL, label))
		}
	}
	if m.Open != "" {
		buttons = append(buttons, slackButton{Type: "button", Text: *plain("Open", slackMaxButton), URL: m.Open, ActionID: "aep-open"})
		links = append(links, chatLink(m.Open, "Open"))
	}
	if len(buttons) > 0 {
		blocks = append(blocks, slackBlock{Type: "actions", Elements: buttons})
	}
	return slackMessage{Text: fallbackText(title, body, links), Blocks: blocks}
}

// fallbackText is the message's text: the title, the body, then the
// links, which Discord and Mattermost show in place of the buttons and so
// are never the part cut to fit.
func fallbackText(title, body string, links []string) string {
	head := truncate(escapeChat(title), slackMaxHeader*2)
	tail := strings.Join(links, " · ")
	if room := slackMaxText - len(head) - len(tail) - 2; body != "" && room > 0 {
		head += "\n" + truncate(escapeChat(body), room)
	}
	text := strings.TrimSpace(head + "\n" + tail)
	if text == "" {
		return "aep-kimi" // Slack refuses a message without text
	}
	return truncate(text, slackMaxText)
}

// requestFacts is the small print under a request: the session's label,
// the tool and the deadline.
func requestFacts(m Message) string {
	var parts []string
	if m.Label != "" {
		parts = append(parts, consumer.Line(m.Label))
	}
	if m.Tool != "" {
		parts = append(parts, consumer.Line(m.Tool))
	}
	if !m.Deadline.IsZero() && m.Kind == KindRequest {
		fate := m.Fate
		if fate == "" {
			fate = "expires"
		}
		parts = append(parts, fate+" at "+m.Deadline.UTC().Format(time.TimeOnly)+" UTC")
	}
	return strings.Join(parts, " · ")
}

// plain is a plain_text object with Slack's control characters escaped,
// at most limit bytes long once escaped (an entity is never cut).
func plain(s string, limit int) *slackText {
	var b strings.Builder
	for _, r := range s {
		e := escapeSlack(string(r))
		if b.Len()+len(e) > limit {
			break
		}
		b.WriteString(e)
	}
	return &slackText{Type: "plain_text", Text: b.String()}
}

// escapeSlack escapes the three characters Slack parses in every text
// object: & < > (mentions, links and dates all start with '<').
func escapeSlack(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
}

// escapeChat makes s inert in the fallback text: Slack's control
// characters escaped, Markdown's and mrkdwn's emphasis, code and link
// characters backslash-escaped (Mattermost and Discord render the text as
// Markdown; Slack's mrkdwn needs the character next to a space to format,
// which the backslash prevents), and '@' kept from starting a mention
// (@channel, @here, @all, @everyone) by a zero-width space after it.
func escapeChat(s string) string {
	var b strings.Builder
	for _, r := range escapeSlack(s) {
		switch r {
		case '\\', '*', '_', '~', '`', '[', ']', '|', '#':
			b.WriteByte('\\')
			b.WriteRune(r)
		case '@':
			b.WriteString("@\u200b")
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// chatLink is a link in Slack's <url|label> form, which Mattermost
// translates to its own. The URL's characters that would end the link
// early are percent-encoded.
func chatLink(u, label string) string {
	u = strings.NewReplacer("|", "%7C", ">", "%3E", "<", "%3C", " ", "%20").Replace(u)
	return "<" + u + "|" + escapeChat(label) + ">"
}

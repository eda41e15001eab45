package notify

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"

	"github.com/aep-kimi/aep-kimi/internal/tokenfile"
	"github.com/aep-kimi/aep-kimi/relay/consumer"
)

// ntfy's own limits: three actions per message, a 4,096-byte message (a
// longer one becomes an attachment), and its topic name rule.
const (
	ntfyMaxActions = 3
	ntfyMaxMessage = 4000
	ntfyMaxTitle   = 250
	ntfyMaxLabel   = 40
)

var ntfyTopic = regexp.MustCompile(`^[-_A-Za-z0-9]{1,64}$`)

// Ntfy publishes to one ntfy topic in ntfy's JSON publish format: a POST
// of the whole message as JSON, topic included, to the server's root URL
// (the topic URL's parent, so a server under a path prefix works too).
type Ntfy struct {
	root   string // where the JSON is POSTed
	topic  string
	name   string
	token  string // access token sent as Authorization: Bearer; "" for none
	client *http.Client
}

// ntfyMessage is ntfy's JSON publish body: only the fields we set.
type ntfyMessage struct {
	Topic    string       `json:"topic"`
	Title    string       `json:"title,omitempty"`
	Message  string       `json:"message"`
	Tags     []string     `json:"tags,omitempty"`
	Priority int          `json:"priority,omitempty"`
	Click    string       `json:"click,omitempty"`
	Actions  []ntfyAction `json:"actions,omitempty"`
}

// ntfyAction is one action button: "http" sends a request when tapped
// (POST unless method says otherwise), "view" opens a URL.
type ntfyAction struct {
	Action string `json:"action"`
	Label  string `json:"label"`
	URL    string `json:"url"`
	Method string `json:"method,omitempty"`
	Clear  bool   `json:"clear,omitempty"`
}

func newNtfy(u *url.URL, display, tokenFile string, c *http.Client) (*Ntfy, error) {
	p := strings.TrimSuffix(u.Path, "/")
	i := strings.LastIndex(p, "/")
	topic := p[i+1:]
	if !ntfyTopic.MatchString(topic) {
		return nil, fmt.Errorf("--notify ntfy: URL must end in a topic of 1-64 letters, digits, '-' or '_' (https://ntfy.sh/mytopic)")
	}
	root := *u
	root.Path, root.RawPath = p[:i+1], ""
	n := &Ntfy{root: root.String(), topic: topic, name: display, client: c}
	if n.name == "" {
		// ntfy's docs call a topic on a public server its password: the
		// name shows only its first letters.
		ep := strings.TrimSuffix(u.EscapedPath(), "/")
		n.name = KindNtfy + ":" + elideURL(u, strings.LastIndex(ep, "/")+1+min(3, len(topic)))
	}
	if tokenFile != "" {
		tok, err := tokenfile.Read(tokenFile, true)
		if err != nil {
			return nil, fmt.Errorf("--notify ntfy: %w", err)
		}
		if tok == "" {
			return nil, fmt.Errorf("--notify ntfy: token file %s is empty", tokenFile)
		}
		n.token = tok
	}
	return n, nil
}

// Name is the target for logs: the topic shortened, no credentials.
func (n *Ntfy) Name() string { return n.name }

// Send publishes m once.
func (n *Ntfy) Send(ctx context.Context, m Message) error {
	body, err := json.Marshal(n.payload(m))
	if err != nil {
		return fmt.Errorf("%s: %w: %w", n.name, ErrPermanent, err)
	}
	h := http.Header{}
	if n.token != "" {
		h.Set("Authorization", "Bearer "+n.token)
	}
	return post(ctx, n.client, n.name, n.root, h, body)
}

// payload builds the JSON message. ntfy shows title and message as plain
// text (markdown stays off), and the title travels on as an HTTP header
// inside ntfy: control characters are shown escaped, never passed.
func (n *Ntfy) payload(m Message) ntfyMessage {
	title := truncate(consumer.Line(m.Title), ntfyMaxTitle)
	text := consumer.Text(m.Body)
	if text == "" {
		text = title
	}
	out := ntfyMessage{
		Topic:   n.topic,
		Title:   title,
		Message: truncate(text, ntfyMaxMessage),
		Click:   m.Open,
	}
	switch m.Kind {
	case KindUpdate:
		// ntfy cannot replace a sent notification: the update arrives at
		// the lowest priority (no sound, under the fold) and without
		// buttons, its tag an emoji of the outcome.
		out.Priority, out.Tags = 1, []string{ntfyOutcomeTag(m.Outcome)}
		return out
	case KindTest:
		out.Priority, out.Tags = 3, []string{"test_tube"}
	case KindUsage:
		// Nothing waits on an answer: default priority, no buttons but
		// the page.
		out.Priority, out.Tags = 3, []string{"chart_with_upwards_trend"}
	default:
		out.Priority, out.Tags = 4, []string{"bell"}
	}
	out.Actions = ntfyActions(m)
	return out
}

// ntfyActions turns the answers into http actions that POST to each
// answer link. ntfy takes at most three: with more options, two answers
// become buttons, the first and a refusal (Allow and Deny), and the third
// opens the page, where every option is (without a page URL, three
// answers, a refusal among them). A form with more to answer than its
// links keeps the third for the page too.
func ntfyActions(m Message) []ntfyAction {
	open := (len(m.Answers) > ntfyMaxActions || m.More) && m.Open != ""
	room := ntfyMaxActions
	if open {
		room--
	}
	var acts []ntfyAction
	for _, a := range keptAnswers(m.Answers, room) {
		acts = append(acts, ntfyAction{
			Action: "http",
			Label:  truncate(consumer.Line(answerLabel(a)), ntfyMaxLabel),
			URL:    a.URL,
			Method: http.MethodPost,
			Clear:  true,
		})
	}
	if open {
		acts = append(acts, ntfyAction{Action: "view", Label: "Open", URL: m.Open})
	}
	return acts
}

// answerLabel is the words on an answer's button: its label, else its
// option, else a word (ntfy and Slack refuse a button without text).
func answerLabel(a Answer) string {
	switch {
	case strings.TrimSpace(a.Label) != "":
		return a.Label
	case strings.TrimSpace(a.Option) != "":
		return a.Option
	}
	return "Answer"
}

// ntfyOutcomeTag is the emoji (ntfy's tag shortcode) of a settled request's
// outcome: a check mark only for what was allowed.
func ntfyOutcomeTag(outcome string) string {
	switch outcome {
	case consumer.OutcomeAllowed, consumer.OutcomeAllowedSession:
		return "white_check_mark"
	case consumer.OutcomeDenied, consumer.OutcomeCancelled:
		return "no_entry"
	case consumer.OutcomeProceeded, consumer.OutcomeExpired:
		return "hourglass"
	}
	return "information_source"
}

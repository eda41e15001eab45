// Package notify reaches a person when a request waits for them: it decides
// when a held request deserves a notification, builds the message with its
// one-use answer links, and delivers it to the targets configured with
// --notify (Web Push devices, ntfy, Slack-compatible chats, signed webhooks)
// through a bounded, retried queue.
package notify

import (
	"context"
	"regexp"
	"slices"
	"time"

	"github.com/aep-kimi/aep-kimi/notify/webhook"
	"github.com/aep-kimi/aep-kimi/relay/consumer"
)

// Kind says what a Message is about: the kind its webhook body carries.
type Kind = webhook.Kind

// The kinds of Message.
const (
	KindRequest = webhook.KindRequest
	KindDigest  = webhook.KindDigest
	KindUpdate  = webhook.KindUpdate
	KindTest    = webhook.KindTest
	KindUsage   = webhook.KindUsage
)

// Message is one notification: a waiting request, a digest of several, the
// update that replaces one (answered elsewhere, expired, withdrawn), a
// usage alert, or a test.
type Message struct {
	Kind     Kind   // KindRequest, KindDigest, KindUpdate, KindUsage, KindTest
	Tag      string // a later Message with the same Tag replaces this one
	Title    string // plain words, already within the target's capture ceiling
	Body     string
	Session  string // AEP session of the request ("" for a digest)
	Request  string // attention.requested id
	Label    string // the session's label (project, agent)
	Tool     string
	Deadline time.Time // zero when the request has none
	// Fate is what happens at Deadline when nobody answers, in the
	// consumer's words (consumer.Request.Fate): "runs anyway", "denied",
	// or "" when the request does not say.
	Fate    string
	Answers []Answer // one per option (a form's: one per choice of its first question)
	Open    string   // absolute URL: the page at this request
	// More says the page has more to answer than Answers (a form's other
	// questions, or free text): a target with room for few buttons keeps
	// one for Open.
	More bool
	// Outcome is, for an update, what became of the request in the
	// audit's words (consumer.OutcomeDenied, ...); "" when it was
	// withdrawn or the record does not say.
	Outcome string
	// Usage is, for a usage alert, the threshold crossed and the
	// session's figures.
	Usage *UsageFacts
}

// UsageFacts are a usage alert's figures, all at metadata.
type UsageFacts struct {
	Threshold string // as --notify-usage names it: context=80%
	Tokens    int64  // input and output tokens the session used
	// Context is how full its context is.
	Context consumer.Context
	// BurnPerHour is the tokens it used in the hour up to its latest
	// usage.
	BurnPerHour int64
}

// refusal names an answer that refuses (deny, reject, no): where fewer
// buttons fit than there are answers, one of them stays (the service
// worker keeps one the same way).
var refusal = regexp.MustCompile(`(?i)\b(deny|reject|no)\b`)

// keptAnswers is at most n of answers, in their order: all when they fit;
// else the first, the first refusal, then the rest in order. A gate's
// Allow, Allow session, Deny, Cancel on two buttons is Allow and Deny.
func keptAnswers(answers []Answer, n int) []Answer {
	if len(answers) <= n {
		return answers
	}
	keep := make([]bool, len(answers))
	left := n
	mark := func(i int) {
		if i >= 0 && left > 0 && !keep[i] {
			keep[i] = true
			left--
		}
	}
	mark(0)
	mark(slices.IndexFunc(answers, func(a Answer) bool { return refusal.MatchString(a.Option + " " + a.Label) }))
	for i := range answers {
		mark(i)
	}
	var out []Answer
	for i, a := range answers {
		if keep[i] {
			out = append(out, a)
		}
	}
	return out
}

// Answer is one option of a request and the link that answers it.
type Answer struct {
	Option string // the option's id, as the request offers it ("allow")
	Label  string // the words on the button ("Allow")
	// URL is the absolute one-use answer link: a POST answers, a GET only
	// shows a confirmation page (chat apps fetch links to preview them).
	URL string
}

// Target is where notifications go.
type Target interface {
	Name() string                              // for logs, metrics and `notify test`; secrets elided
	Send(ctx context.Context, m Message) error // one attempt; the queue retries
}

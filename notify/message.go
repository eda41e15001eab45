// Package notify reaches a person when a request waits for them: it decides
// when a held request deserves a notification, builds the message with its
// one-use answer links, and delivers it to the targets configured with
// --notify (Web Push devices, ntfy, Slack-compatible chats, signed webhooks)
// through a bounded, retried queue.
package notify

import (
	"context"
	"time"
)

// Kind says what a Message is about.
type Kind string

// The kinds of Message.
const (
	KindRequest Kind = "request" // one waiting request, with its answers
	KindDigest  Kind = "digest"  // several waiting requests in one message
	KindUpdate  Kind = "update"  // replaces the message with the same Tag: answered elsewhere, expired, withdrawn
	KindTest    Kind = "test"    // `aep-kimi notify test`
)

// Message is one notification: a waiting request, a digest of several, the
// update that replaces one (answered elsewhere, expired, withdrawn), or a test.
type Message struct {
	Kind     Kind   // KindRequest, KindDigest, KindUpdate, KindTest
	Tag      string // a later Message with the same Tag replaces this one
	Title    string // plain words, already within the target's capture ceiling
	Body     string
	Session  string // AEP session of the request ("" for a digest)
	Request  string // attention.requested id
	Label    string // the session's label (project, agent)
	Tool     string
	Deadline time.Time // zero when the request has none
	Answers  []Answer  // one per option
	Open     string    // absolute URL: the page at this request
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

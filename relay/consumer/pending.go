package consumer

import (
	"fmt"
	"io"
	"strings"
	"time"
)

// PendingFilter asks a relay for what the attention state needs: the
// attention lifecycle, and session starts (titles, chapters) and ends.
const PendingFilter = `{"type":["attention.*","session.started","session.ended"]}`

// Closed says in a word why a request no longer waits on a person at now,
// or "" while it does: answered (whatever its resolution), the resolution
// of one closed unanswered (auto, dismissed), expired (timed out, or past
// its deadline), or session ended.
func (r *Request) Closed(now time.Time) string {
	switch st := r.Status(now); st {
	case StatePending:
		return ""
	case StateAnswered:
		return "answered"
	case StateResolved:
		if r.Answered != nil || r.Outcome.Resolution == "" {
			return "answered"
		}
		return r.Outcome.Resolution
	case StateTimeout, StateExpired:
		return "expired"
	}
	return "session ended"
}

// WritePending prints one pending request as a block: who asks, what, how
// long it has waited and has left, and how to answer it (the command, with
// relayArg as its --relay when not empty).
func WritePending(w io.Writer, f *Fold, r *Request, now time.Time, relayArg string) {
	head := r.Session
	if s := f.Session(r.Session); s != nil && s.Title != "" {
		head += " " + quoted(oneLine(s.Title))
	}
	fmt.Fprintf(w, "%s  request %s\n", Line(head), Line(r.ID))
	prompt := r.Prompt
	if r.Kind != "" {
		prompt += " (" + r.Kind + ")"
	}
	fmt.Fprintf(w, "  %s\n", clip(Line(oneLine(prompt)), SummaryRunes))
	facts := []string{"waiting " + HumanDuration(max(now.Sub(r.At), 0))}
	if r.Deadline.IsZero() {
		facts = append(facts, "no deadline")
	} else {
		facts = append(facts, HumanDuration(r.Deadline.Sub(now))+" left")
	}
	if len(r.Options) > 0 {
		facts = append(facts, "options "+strings.Join(r.OptionIDs(), ", "))
	}
	fmt.Fprintf(w, "  %s\n", Line(strings.Join(facts, " · ")))
	if r.Answerable() {
		fmt.Fprintf(w, "  %s\n", Line(r.Command(relayArg)))
	} else {
		fmt.Fprintf(w, "  answer it %s\n", Line(r.Where()))
	}
}

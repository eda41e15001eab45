package consumer

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/aep-kimi/aep-kimi/mapping"
	"github.com/aep-kimi/aep-kimi/rules"
)

// PendingFilter asks a relay for what the attention state needs: the
// attention lifecycle, session starts (titles, chapters) and ends, and the
// answers rules sent (and their refusals), which take a request off the
// list before its emitter records the answer.
const PendingFilter = `{"type":["attention.*","session.started","session.ended","control.attention.respond","control.accepted","control.rejected"]}`

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

// Fate is what happens to r at its deadline when nobody answers: "runs
// anyway", "denied", or "" when the request does not say.
func (r *Request) Fate() string {
	switch r.OnExpiry {
	case mapping.OnExpiryAllow:
		return "runs anyway"
	case mapping.OnExpiryDeny:
		return "denied"
	}
	return ""
}

// Countdown is the time r has left at now with what happens then: "runs
// anyway in 38s", "denied in 38s", "38s left" when the request does not
// say, "no deadline" without one.
func (r *Request) Countdown(now time.Time) string {
	if r.Deadline.IsZero() {
		return "no deadline"
	}
	left := HumanDuration(max(r.Deadline.Sub(now), 0))
	if f := r.Fate(); f != "" {
		return f + " in " + left
	}
	return left + " left"
}

// Hints fit what is said under a waiting request to its reader.
type Hints struct {
	// RelayArg is repeated as --relay in pasted commands ("" none).
	RelayArg string
	// Watching says the reader's token cannot answer (a watcher): no
	// answer commands.
	Watching bool
	// Rule, when set, says which rule answers the request ("rule r3
	// answers it: deny"), "" when a person must.
	Rule func(session, id string) string
}

func (h Hints) ruled(session, id string) string {
	if h.Rule == nil {
		return ""
	}
	return h.Rule(session, id)
}

// WritePending prints one pending request as a block: who asks, what, how
// long it has waited and has left, and how to answer it (the command, with
// h.RelayArg as its --relay when not empty; none for a watcher, nor for a
// request a rule answers).
func WritePending(w io.Writer, f *Fold, r *Request, now time.Time, h Hints) {
	relayArg := h.RelayArg
	label := f.Labels()[r.Session]
	fmt.Fprintf(w, "%s  request %s\n", Line(label.String()), Line(r.ID))
	prompt := r.Prompt
	if r.Kind != "" {
		prompt += " (" + r.Kind + ")"
	}
	fmt.Fprintf(w, "  %s\n", clip(Line(oneLine(prompt)), SummaryRunes))
	ruled := ""
	if r.Answerable() {
		ruled = h.ruled(r.Session, r.ID)
	}
	facts := []string{"waiting " + HumanDuration(max(now.Sub(r.At), 0)), r.Countdown(now)}
	if ruled != "" {
		facts[1] = ruled
	}
	if sent := r.SentWords(now); sent != "" {
		facts = append(facts, sent)
	}
	if len(r.Options) > 0 {
		facts = append(facts, "options "+strings.Join(r.OptionIDs(), ", "))
	}
	fmt.Fprintf(w, "  %s\n", Line(strings.Join(facts, " · ")))
	for _, q := range r.QuestionLines() {
		fmt.Fprintf(w, "  %s\n", clip(Line(q), 2*SummaryRunes))
	}
	switch {
	case ruled != "" || (r.Answerable() && h.Watching):
	case r.Answerable():
		fmt.Fprintf(w, "  %s\n", Line(r.Command(relayArg, label.ID)))
		if always := alwaysCommand(f, r, relayArg, label.ID); always != "" {
			fmt.Fprintf(w, "  always: %s\n", Line(always))
		}
	default:
		fmt.Fprintf(w, "  answer it %s\n", Line(r.Where()))
	}
}

// TargetProblem names why there is no single request to answer.
type TargetProblem int

// Target problems.
const (
	UnknownSession TargetProblem = iota + 1
	UnknownRequest
	NotPending // closed, answered elsewhere only, or nothing waits
	SeveralPending
)

// TargetError is Target's refusal: the problem, a one-line reason, and for
// SeveralPending the candidates, oldest first.
type TargetError struct {
	Problem    TargetProblem
	Reason     string
	Candidates []*Request
}

func (e *TargetError) Error() string { return e.Reason }

// Target picks the request an answer to session (and requestID, when
// given) is meant for at now: the named request while it waits and may be
// answered through control, else the session's one such pending request.
// Anything else is a *TargetError saying why, its reason safe to print.
func (f *Fold) Target(session, requestID string, now time.Time) (*Request, error) {
	refuse := func(p TargetProblem, format string, args ...any) (*Request, error) {
		return nil, &TargetError{Problem: p, Reason: Line(fmt.Sprintf(format, args...))}
	}
	session, several := f.resolve(session)
	if len(several) > 1 {
		return refuse(UnknownSession, "session %q begins %d sessions' ids (%s): give more of it", several[0], len(several)-1, strings.Join(several[1:], ", "))
	}
	s := f.Session(session)
	if s == nil {
		return refuse(UnknownSession, "unknown session %q: the relay holds no attention requests or session events for it", session)
	}
	if requestID != "" {
		r := s.Request(requestID)
		switch {
		case r == nil:
			return refuse(UnknownRequest, "unknown request %q: session %s has no attention request with that id", requestID, session)
		case r.Closed(now) != "":
			// Who settled it, when the record says: a late answer learns
			// it lost to Kimi's own UI, or to whom.
			if row, ok := s.Settlement(r); ok && (row.Surface == SurfaceKimi || (row.By != "" && row.By != Nobody)) {
				return refuse(NotPending, "request %s no longer waits (%s): %s", requestID, r.Closed(now), row.Words())
			}
			return refuse(NotPending, "request %s no longer waits (%s)", requestID, r.Closed(now))
		case !r.Answerable():
			return refuse(NotPending, "request %s cannot be answered from here: answer it %s", requestID, r.Where())
		}
		return r, nil
	}
	var answerable, elsewhere []*Request
	for _, r := range f.Pending(now, session) {
		if r.Answerable() {
			answerable = append(answerable, r)
		} else {
			elsewhere = append(elsewhere, r)
		}
	}
	switch {
	case len(answerable) == 1:
		return answerable[0], nil
	case len(answerable) > 1:
		return nil, &TargetError{Problem: SeveralPending, Candidates: answerable,
			Reason: Line(fmt.Sprintf("session %s has %d pending requests; name one", session, len(answerable)))}
	case len(elsewhere) > 0:
		return refuse(NotPending, "session %s has no request answerable from here: answer it %s", session, elsewhere[0].Where())
	}
	return refuse(NotPending, "session %s has no pending request", session)
}

// minShortID is the shortest start of an id respond takes for the whole.
const minShortID = 4

// resolve is the session arg names: itself when the fold holds it, else
// the one session whose id (without Kimi's session_ prefix) begins with
// it, the short id labels print. With several, arg comes back first in
// the list, then theirs.
func (f *Fold) resolve(arg string) (string, []string) {
	if f.Session(arg) != nil || len([]rune(BareID(arg))) < minShortID {
		return arg, nil
	}
	var found []string
	for _, id := range f.Sessions() {
		switch {
		case BareID(id) == BareID(arg):
			return id, nil
		case strings.HasPrefix(BareID(id), BareID(arg)):
			found = append(found, id)
		}
	}
	switch len(found) {
	case 0:
		return arg, nil
	case 1:
		return found[0], nil
	}
	return arg, append([]string{arg}, found...)
}

// WritePendingList writes what waits on a person at now, oldest first:
// a count and each request's block (see WritePending), or that nothing
// waits.
func WritePendingList(w io.Writer, f *Fold, now time.Time, h Hints) {
	reqs := f.Pending(now)
	switch len(reqs) {
	case 0:
		fmt.Fprintln(w, "nothing waits on you")
		return
	case 1:
		fmt.Fprintln(w, "1 request waits on you:")
	default:
		fmt.Fprintf(w, "%d requests wait on you (oldest first):\n", len(reqs))
	}
	for _, r := range reqs {
		fmt.Fprintln(w)
		WritePending(w, f, r, now, h)
	}
	if h.Watching && len(reqs) > 0 {
		fmt.Fprintln(w, "\nyour token watches: answering needs an answer or admin token (aep-kimi token)")
	}
}

// WriteTargetError writes, after prefix, why Target refused: the reason,
// pointing at pending when the session or request is unknown, and every
// candidate when several wait.
func WriteTargetError(w io.Writer, prefix string, f *Fold, te *TargetError, now time.Time) {
	switch te.Problem {
	case UnknownSession, UnknownRequest:
		fmt.Fprintf(w, "%s%s (see aep-kimi pending)\n", prefix, te.Reason)
	case SeveralPending:
		fmt.Fprintf(w, "%s%s:\n", prefix, te.Reason)
		for _, c := range te.Candidates {
			fmt.Fprintln(w)
			WritePending(w, f, c, now, Hints{})
		}
	default:
		fmt.Fprintf(w, "%s%s\n", prefix, te.Reason)
	}
}

// Always is the rule respond --always saves with an answer to r: option
// for r's tool when its arguments match pattern, in scope of r's session's
// project. The error, safe to print, says why no rule can be made.
func (f *Fold) Always(r *Request, option, pattern, scope string) (rules.Rule, error) {
	s := f.Session(r.Session)
	if s == nil {
		return rules.Rule{}, fmt.Errorf("request %s is not a tool permission request a rule can answer", Line(r.ID))
	}
	asked, ok := rules.ReadRequest(s.Event(r.ID))
	if !ok {
		return rules.Rule{}, fmt.Errorf("request %s is not a tool permission request a rule can answer", Line(r.ID))
	}
	rule, err := asked.Always(option, pattern, scope, s.Cwd)
	if err != nil {
		return rules.Rule{}, errors.New(Line(err.Error()))
	}
	return rule, nil
}

// alwaysCommand is the respond command that allows the request and saves
// the answer as a rule with the pattern rules.Propose makes of its
// argument text, or "" when no rule could answer such a request.
func alwaysCommand(f *Fold, r *Request, relayArg, short string) string {
	s := f.Session(r.Session)
	if s == nil {
		return ""
	}
	asked, ok := rules.ReadRequest(s.Event(r.ID))
	option := asked.Option(rules.Allow)
	if !ok || option == "" {
		return ""
	}
	pattern, proposed := asked.Proposal()
	if !proposed {
		return ""
	}
	args := []string{"aep-kimi", "respond"}
	if relayArg != "" {
		args = append(args, "--relay", ShellQuote(relayArg))
	}
	args = append(args, "--option", ShellQuote(option), "--always", ShellQuote(pattern))
	if s.Cwd == "" {
		args = append(args, "--scope", rules.ScopeAll)
	}
	return strings.Join(append(args, ShellQuote(firstOf(short, r.Session)), ShellQuote(r.ID)), " ")
}

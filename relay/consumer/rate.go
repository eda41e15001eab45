package consumer

import (
	"context"
	"fmt"
	"net/http"
)

// RateFilter asks a relay for what picking a run to rate needs: the
// sessions' lifecycle, their runs', and the ratings given.
const RateFilter = `{"type":["session.started","session.ended","run.*","assessment.feedback.received"]}`

// LoadRuns reads a relay's replay of sessions and runs (RateFilter) and
// folds it; an error names the relay (without credentials).
func LoadRuns(ctx context.Context, base, token string, hc *http.Client) (*Fold, error) {
	return loadFold(ctx, base, token, hc, RateFilter)
}

// The problems of a run to rate (TargetError.Problem).
const (
	UnknownRun TargetProblem = iota + SeveralPending + 1
	RunNotFinished
)

// RunTarget picks the run a rating of session (its id, or the start of it
// labels print) is for: the named run once it ended, else the session's
// latest run to end. It returns the session's whole id and the run, or a
// *TargetError saying why there is none, its reason safe to print.
func (f *Fold) RunTarget(session, run string) (string, *Run, error) {
	refuse := func(p TargetProblem, format string, args ...any) (string, *Run, error) {
		return "", nil, &TargetError{Problem: p, Reason: Line(fmt.Sprintf(format, args...))}
	}
	session, several := f.resolve(session)
	if len(several) > 1 {
		return refuse(UnknownSession, "session %q begins %d sessions' ids: give more of it", several[0], len(several)-1)
	}
	s := f.Session(session)
	if s == nil {
		return refuse(UnknownSession, "unknown session %q: the relay holds no session or run events for it", session)
	}
	if run != "" {
		for _, r := range s.Runs {
			if r.ID != run {
				continue
			}
			if r.State == RunOpen {
				return refuse(RunNotFinished, "run %s of session %s has not finished", run, session)
			}
			return session, r, nil
		}
		return refuse(UnknownRun, "unknown run %q: session %s has no run with that id", run, session)
	}
	var last *Run
	for _, r := range s.Runs {
		if r.State != RunOpen && (last == nil || r.Ended >= last.Ended) {
			last = r
		}
	}
	if last == nil {
		return refuse(RunNotFinished, "session %s has no finished run yet", session)
	}
	return session, last, nil
}

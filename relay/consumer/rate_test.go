package consumer

import (
	"errors"
	"path/filepath"
	"testing"

	"github.com/aep-kimi/aep-kimi/aep"
)

// RunTarget names the run a rating is for, or says in one line why none:
// the latest run to end by default, a named run only once it ended.
func TestRunTarget(t *testing.T) {
	evs := readEvents(t, filepath.Join("testdata", "streams", "feedback.jsonl"))
	open := &aep.Event{AEP: aep.Version, ID: "01JZFEEDBACKOPEN", Type: "run.started", Time: "2026-07-04T09:07:00.000Z",
		Source: evs[0].Source, Agent: "kimi-code", Session: evs[0].Session, Run: "r3", Seq: aep.Int64(12), Epoch: aep.Int64(0)}
	f := fold(append(evs, open))
	whole := evs[0].Session
	for _, c := range []struct {
		session, run string
		want         string
		problem      TargetProblem
	}{
		{whole, "", "r2", 0},
		{whole[:6], "", "r2", 0},
		{whole, "r1", "r1", 0},
		{whole, "r3", "", RunNotFinished},
		{whole, "r9", "", UnknownRun},
		{"nope-session", "", "", UnknownSession},
	} {
		s, r, err := f.RunTarget(c.session, c.run)
		var te *TargetError
		switch {
		case c.problem != 0:
			if !errors.As(err, &te) || te.Problem != c.problem || te.Reason == "" {
				t.Errorf("RunTarget(%q, %q) = %v, want problem %d", c.session, c.run, err, c.problem)
			}
		case err != nil || r.ID != c.want || s != whole:
			t.Errorf("RunTarget(%q, %q) = %q %v %v, want %s", c.session, c.run, s, r, err, c.want)
		}
	}
	// A session whose runs have not ended has nothing to rate yet.
	g := fold([]*aep.Event{evs[0], evs[1]})
	if _, _, err := g.RunTarget(whole, ""); err == nil {
		t.Error("a session with only an open run gave a run to rate")
	}
}

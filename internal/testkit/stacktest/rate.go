package stacktest

import (
	"net/http"
	"testing"

	"github.com/aep-kimi/aep-kimi/aep"
	"github.com/aep-kimi/aep-kimi/internal/testkit/httpcall"
	"github.com/aep-kimi/aep-kimi/mapping"
)

// Get is a relay path read with token, "" unless it answers 200.
func (st *Stack) Get(t *testing.T, token, path string) string {
	t.Helper()
	res, err := httpcall.Try(httpcall.Request{URL: st.RelayURL + path, Token: token})
	if err != nil || res.Status != http.StatusOK {
		return ""
	}
	return string(res.Body)
}

// FinishedRun runs one real print-mode Kimi session to its end (Kimi
// exits, so the session ends) and returns its events and its run's
// terminal.
func (st *Stack) FinishedRun(t *testing.T, kimi string) ([]*aep.Event, *aep.Event) {
	t.Helper()
	Scenario(t, kimi, "basic", st.HookCmd(t))
	st.WaitQuiet(t)
	_, _, ev := st.OneSession(t)
	var fin *aep.Event
	ended := false
	for _, e := range ev {
		if aep.IsRunTerminal(e.Type) {
			fin = e
		}
		ended = ended || e.Type == "session.ended"
	}
	if fin == nil || !ended {
		t.Fatalf("the session's log holds no run that ended (%v) or no end (%v)", fin, ended)
	}
	return ev, fin
}

// Feedback are the ratings recorded in the stack's one session log.
func (st *Stack) Feedback(t *testing.T) []*aep.Event {
	t.Helper()
	_, _, ev := st.OneSession(t)
	var out []*aep.Event
	for _, e := range ev {
		if e.Type == mapping.TypeFeedback {
			out = append(out, e)
		}
	}
	return out
}

package stacktest

import (
	"bytes"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/aep-kimi/aep-kimi/aep"
	"github.com/aep-kimi/aep-kimi/internal/testkit/livecheck"
	"github.com/aep-kimi/aep-kimi/internal/testkit/poll"
)

// LiveAckWindow is the sender-side ack window the checker observes for each
// control check. The targets ack within milliseconds; a cancel's outcome
// waits for kimi web to abort the turn, which takes longer on a loaded
// machine.
const LiveAckWindow = "3000"

// LiveControlSkips are the checks live.js may skip against each real control
// target, with the reason the checker states.
var LiveControlSkips = map[string]livecheck.Skips{
	// The hook surface has no way to stop a running Kimi turn, so the
	// adapter does not declare control.cancel and the cancel check is not
	// asked for.
	"adapter": {
		"control-auth-gate": livecheck.SkipAuthenticated,
		"control-cancel":    livecheck.SkipNoCancel,
	},
	"bridge-web": {
		"control-auth-gate": livecheck.SkipAuthenticated,
	},
}

// LiveArgs are the checker's arguments against a target session.
func LiveArgs(token, session string, extra ...string) []string {
	return append([]string{"--token", token, "--evict", "--timeout", "5000",
		"--control-session", session, "--ack-window", LiveAckWindow}, extra...)
}

func LiveCheckAdapter(t *testing.T, checker livecheck.Checker, relayEnv []string) {
	st := NewStack(t, relayEnv...).WithAdapter(t, "AEP_KIMI_CONTROL=1")
	k := NewKimiRun(t, st, map[string]any{"responses": []any{map[string]any{"delay": 120, "text": "too late"}}})
	k.Start(t, "Wait for the slow model.")
	run := st.WaitEvent(t, func(e *aep.Event) bool { return e.Type == "run.started" })
	// The run's start on the relay came over the adapter's socket, which
	// makes the adapter the session's claimant: commands route to it.
	WaitOnRelay(t, st, run)

	checker.Run(t, st.RelayURL, LiveControlSkips["adapter"], LiveArgs(st.Token, run.Session)...)

	// The probes reached the adapter: it answered the declared type's
	// (unknown subject) as invalid, in the session's own log.
	st.WaitEvent(t, func(e *aep.Event) bool {
		return e.Session == run.Session && e.Type == "control.rejected" && DataOf(e)["reason"] == "invalid"
	})
	if st.LiveSessions(t) != 1 {
		t.Error("the session ended under the checker")
	}
}

func LiveCheckBridgeWeb(t *testing.T, checker livecheck.Checker, relayEnv []string) {
	ws := StartWebStackOn(t, relayEnv, "primary", "AEP_KIMI_WEB_CONTROL=1")
	sid := ws.Web.CreateSession(t)
	ws.Web.Prompt(t, sid, "checker turn")
	run := ws.WaitFor(t, sid, "run.started", func(e *aep.Event) bool { return e.Type == "run.started" })
	WaitOnRelay(t, ws.Stack, run)

	checker.Run(t, ws.RelayURL, LiveControlSkips["bridge-web"], LiveArgs(ws.Token, ws.Session(sid), "--control-cancel", run.Run)...)

	// The cancel stopped the real turn: kimi web went idle with the run
	// cancelled by the checker's command.
	ws.WaitIdle(t, sid)
	done := ws.WaitCount(t, sid, "run.cancelled", 1)
	for _, e := range done {
		if e.Type == "run.cancelled" && (e.Run != run.Run || DataOf(e)["by"] != "control") {
			t.Errorf("run.cancelled %s by %v, want %s by control", e.Run, DataOf(e)["by"], run.Run)
		}
	}
}

// WaitOnRelay waits until the relay serves ev in its session's replay.
func WaitOnRelay(t *testing.T, st *Stack, ev *aep.Event) {
	t.Helper()
	id := []byte(fmt.Sprintf("%q", ev.ID))
	if !poll.Until(20*time.Second, func() bool {
		return slices.ContainsFunc(st.RelayEvents(t, ev.Session), func(line []byte) bool { return bytes.Contains(line, id) })
	}) {
		t.Fatalf("%s %s never reached the relay", ev.Type, ev.ID)
	}
}

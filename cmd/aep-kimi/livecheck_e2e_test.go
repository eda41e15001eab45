package main

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

// liveAckWindow is the sender-side ack window the checker observes for each
// control check. The targets ack within milliseconds; a cancel's outcome
// waits for kimi web to abort the turn, which takes longer on a loaded
// machine.
const liveAckWindow = "3000"

// liveControlSkips are the checks live.js may skip against each real control
// target, with the reason the checker states.
var liveControlSkips = map[string]livecheck.Skips{
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

// The upstream live checker against the real relay on each store, with the
// control checks aimed at a real target: the hook adapter serving a running
// Kimi session (print mode, the model slow to answer), and bridge-web in
// primary mode serving a kimi web session whose running turn the checker
// cancels. Authenticated, with --evict (the relay's per-session buffer is
// 8). Like TestLiveChecker in relay/, it needs AEP_NODE and AEP_SPEC.
func TestE2ELiveCheckerControl(t *testing.T) {
	checker := livecheck.Require(t)
	binaries(t)
	for _, store := range []string{"memory", "jetstream"} {
		t.Run(store, func(t *testing.T) {
			relayEnv := func() []string {
				return []string{"AEP_STORE=" + store, "AEP_HOME=" + t.TempDir(), "AEP_BUFFER=8"}
			}
			t.Run("adapter", func(t *testing.T) { liveCheckAdapter(t, checker, relayEnv()) })
			t.Run("bridge-web", func(t *testing.T) { liveCheckBridgeWeb(t, checker, relayEnv()) })
		})
	}
}

// liveArgs are the checker's arguments against a target session.
func liveArgs(token, session string, extra ...string) []string {
	return append([]string{"--token", token, "--evict", "--timeout", "5000",
		"--control-session", session, "--ack-window", liveAckWindow}, extra...)
}

func liveCheckAdapter(t *testing.T, checker livecheck.Checker, relayEnv []string) {
	st := newStack(t, relayEnv...).withAdapter(t, "AEP_KIMI_CONTROL=1")
	k := newKimiRun(t, st, map[string]any{"responses": []any{map[string]any{"delay": 120, "text": "too late"}}})
	k.start(t, "Wait for the slow model.")
	run := st.waitEvent(t, func(e *aep.Event) bool { return e.Type == "run.started" })
	// The run's start on the relay came over the adapter's socket, which
	// makes the adapter the session's claimant: commands route to it.
	waitOnRelay(t, st, run)

	checker.Run(t, st.relayURL, liveControlSkips["adapter"], liveArgs(st.token, run.Session)...)

	// The probes reached the adapter: it answered the declared type's
	// (unknown subject) as invalid, in the session's own log.
	st.waitEvent(t, func(e *aep.Event) bool {
		return e.Session == run.Session && e.Type == "control.rejected" && dataOf(e)["reason"] == "invalid"
	})
	if st.liveSessions(t) != 1 {
		t.Error("the session ended under the checker")
	}
}

func liveCheckBridgeWeb(t *testing.T, checker livecheck.Checker, relayEnv []string) {
	ws := startWebStackOn(t, relayEnv, "primary", "AEP_KIMI_WEB_CONTROL=1")
	sid := ws.web.CreateSession(t)
	ws.web.Prompt(t, sid, "checker turn")
	run := ws.waitFor(t, sid, "run.started", func(e *aep.Event) bool { return e.Type == "run.started" })
	waitOnRelay(t, ws.stack, run)

	checker.Run(t, ws.relayURL, liveControlSkips["bridge-web"], liveArgs(ws.token, ws.session(sid), "--control-cancel", run.Run)...)

	// The cancel stopped the real turn: kimi web went idle with the run
	// cancelled by the checker's command.
	ws.waitIdle(t, sid)
	done := ws.waitCount(t, sid, "run.cancelled", 1)
	for _, e := range done {
		if e.Type == "run.cancelled" && (e.Run != run.Run || dataOf(e)["by"] != "control") {
			t.Errorf("run.cancelled %s by %v, want %s by control", e.Run, dataOf(e)["by"], run.Run)
		}
	}
}

// waitOnRelay waits until the relay serves ev in its session's replay.
func waitOnRelay(t *testing.T, st *stack, ev *aep.Event) {
	t.Helper()
	id := []byte(fmt.Sprintf("%q", ev.ID))
	if !poll.Until(20*time.Second, func() bool {
		return slices.ContainsFunc(st.relayEvents(t, ev.Session), func(line []byte) bool { return bytes.Contains(line, id) })
	}) {
		t.Fatalf("%s %s never reached the relay", ev.Type, ev.ID)
	}
}

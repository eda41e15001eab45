// How sessions end and begin again with the real Kimi: print mode, a
// SIGKILL mid-run, and `kimi -r` resuming.

package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/aep-kimi/aep-kimi/adapter"
	"github.com/aep-kimi/aep-kimi/aep"
	"github.com/aep-kimi/aep-kimi/internal/testkit/kimiharness"
	"github.com/aep-kimi/aep-kimi/internal/testkit/poll"
	"github.com/aep-kimi/aep-kimi/internal/testkit/stacktest"
	"github.com/aep-kimi/aep-kimi/mapping"
)

// A Kimi killed with SIGKILL in the middle of a run (the mock answers slowly)
// fires nothing: the run closes and the session ends killed within 5 s.
func TestE2EKilledMidRunEndsKilled(t *testing.T) {
	// Serial: it bounds session.ended's latency after Kimi is killed, which tests running beside it would stretch.
	st := stacktest.StartStack(t)
	k := stacktest.NewKimiRun(t, st, map[string]any{"responses": []map[string]any{
		{"tool_calls": []map[string]any{{"name": "Bash", "arguments": map[string]any{"command": "echo first"}}}},
		{"delay": 60, "text": "too late"},
	}})
	cmd := k.Start(t, "run the probe slowly")
	// Mid-run: the tool has completed and the next model call is pending.
	stacktest.WaitLog(t, st, func(ev []*aep.Event) bool { return stacktest.TypeCounts(ev)["tool.completed"] >= 1 })
	poll.Must(t, kimiharness.Patience, "Kimi's second model call", func() bool { return len(k.Mock.Requests(t)) >= 2 })
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	cmd.Wait()
	ev, took := st.WaitEnded(t, 1, killed)
	t.Logf("session.ended %s after kill -9", took.Round(time.Millisecond))
	if took > stacktest.MaxEndLatency {
		t.Errorf("session.ended %s after the kill, want under %s", took, stacktest.MaxEndLatency)
	}
	if reason, observed := stacktest.LastEnd(t, ev); reason != mapping.EndKilled || observed != adapter.ObservedProcess {
		t.Errorf("ended %q observed %q, want killed from the process", reason, observed)
	}
	stacktest.Want(t, ev, map[string]int{"run.started": 1, "run.cancelled": 1, "run.finished": 0, "session.ended": 1})
	got := []string{ev[len(ev)-2].Type, ev[len(ev)-1].Type}
	if got[0] != "run.cancelled" || got[1] != "session.ended" {
		t.Errorf("the stream ends %v, want the run closed, then the session", got)
	}
	st.WaitQuiet(t)
	st.ValidateLogAndRelay(t, ev[0].Session)
}

// `kimi -p` never fires SessionEnd: the session ends (normal) on the stream
// within 5 s of the process exit, observed from the process. `kimi -r ID`
// after that end starts a new chapter of the same session: session.started
// (resume) under the chapter's source, then its own end; the log and the
// relay's replay validate. One Kimi home, two runs.
func TestE2EResumeStartsNewChapter(t *testing.T) {
	// Serial: it bounds session.ended's latency after Kimi exits, which tests running beside it would stretch.
	st := stacktest.StartStack(t)
	k := stacktest.NewKimiRun(t, st, map[string]any{"responses": []map[string]any{
		{"tool_calls": []map[string]any{{"name": "Bash", "arguments": map[string]any{"command": "echo probe"}}}},
		{"text": "first"},
	}, "default": map[string]any{"text": "again"}})
	exited := k.Run(t, "run the probe")
	ev, took := st.WaitEnded(t, 1, exited)
	t.Logf("session.ended %s after kimi -p exited", took.Round(time.Millisecond))
	if took > stacktest.MaxEndLatency {
		t.Errorf("session.ended %s after the exit, want under %s", took, stacktest.MaxEndLatency)
	}
	if reason, observed := stacktest.LastEnd(t, ev); reason != mapping.EndNormal || observed != adapter.ObservedProcess {
		t.Errorf("ended %q observed %q, want normal from the process", reason, observed)
	}
	stacktest.Want(t, ev, map[string]int{"session.started": 1, "run.started": 1, "run.finished": 1, "run.cancelled": 0,
		"tool.requested": 1, "tool.completed": 1, "session.ended": 1})
	if ev[len(ev)-1].Type != "session.ended" {
		t.Errorf("last event %s", ev[len(ev)-1].Type)
	}
	sid := ev[0].Session
	exited = k.Run(t, "second prompt", "-r", sid)
	ev, took = st.WaitEnded(t, 2, exited)
	t.Logf("the resumed chapter ended %s after its kimi exited", took.Round(time.Millisecond))
	if took > stacktest.MaxEndLatency {
		t.Errorf("second session.ended %s after the exit, want under %s", took, stacktest.MaxEndLatency)
	}
	var marks []string
	for _, e := range ev {
		if e.Session != sid {
			t.Fatalf("event of another session %q in %q's log", e.Session, sid)
		}
		if e.Type == "session.started" || e.Type == "session.ended" {
			marks = append(marks, e.Type+"@"+strings.TrimPrefix(e.Source, aep.SourceURI(st.HostName(t), mapping.Agent, sid)))
		}
	}
	if got := strings.Join(marks, " "); got != "session.started@ session.ended@ session.started@/chapter/2 session.ended@/chapter/2" {
		t.Errorf("chapters: %s", got)
	}
	for _, e := range ev {
		if e.Type == "session.started" && strings.HasSuffix(e.Source, "/chapter/2") && stacktest.DataOf(e)["trigger"] != mapping.TriggerResume {
			t.Errorf("the second chapter starts with trigger %v", stacktest.DataOf(e)["trigger"])
		}
	}
	st.WaitQuiet(t)
	st.ValidateLogAndRelay(t, sid)
}

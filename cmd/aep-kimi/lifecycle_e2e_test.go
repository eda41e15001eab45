package main

// End-to-end tests of session lifecycles with the real Kimi CLI: a session
// ends on the stream when its Kimi process does, whether Kimi said so or not.

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aep-kimi/aep-kimi/adapter"
	"github.com/aep-kimi/aep-kimi/aep"
	"github.com/aep-kimi/aep-kimi/internal/testkit/kimiharness"
	"github.com/aep-kimi/aep-kimi/internal/testkit/poll"
	"github.com/aep-kimi/aep-kimi/internal/testkit/syncbuf"
	"github.com/aep-kimi/aep-kimi/mapping"
)

// maxEndLatency is the bound: no session outlives its Kimi process
// on the stream by more than this.
const maxEndLatency = 5 * time.Second

// kimiRun is a Kimi CLI environment against the mock provider, with every
// hook registered to the stack's kimi-hook.
type kimiRun struct {
	kimi, home, work string
}

func newKimiRun(t *testing.T, st *stack, script any) *kimiRun {
	t.Helper()
	kimi := kimiharness.Require(t)
	b, _ := json.Marshal(script)
	path := filepath.Join(t.TempDir(), "script.json")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	mock := kimiharness.StartMock(t, path)
	k := &kimiRun{kimi: kimi, home: filepath.Join(t.TempDir(), "kimi-home"), work: t.TempDir()}
	kimiharness.WriteConfig(t, k.home, mock.Port, st.hookCmd(t))
	return k
}

// start runs `kimi -p PROMPT ARGS...` without waiting for it.
func (k *kimiRun) start(t *testing.T, prompt string, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(k.kimi, append([]string{"-p", prompt}, args...)...)
	cmd.Dir, cmd.Env = k.work, kimiharness.Env(k.home)
	cmd.Stdout, cmd.Stderr = &syncbuf.Buffer{}, &syncbuf.Buffer{}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	return cmd
}

// run runs `kimi -p` to its exit and returns the exit time.
func (k *kimiRun) run(t *testing.T, prompt string, args ...string) time.Time {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	out, err := kimiharness.Print(ctx, k.kimi, k.home, k.work, prompt, args...)
	exited := time.Now()
	if err != nil {
		t.Fatalf("kimi -p: %v\n%s", err, out)
	}
	return exited
}

// waitEnded waits for the n-th session.ended in the only session log and
// returns the log's events and how long after since it appeared.
func (st *stack) waitEnded(t *testing.T, n int, since time.Time) ([]*aep.Event, time.Duration) {
	t.Helper()
	var ev []*aep.Event
	var took time.Duration
	if !poll.Until(time.Until(since.Add(maxEndLatency+10*time.Second)), func() bool {
		for _, b := range st.sessionLogs(t) {
			if ev = parseLines(t, wholeLines(b)); typeCounts(ev)["session.ended"] >= n {
				took = time.Since(since)
				return true
			}
		}
		return false
	}) {
		t.Fatalf("no session.ended #%d %s after the exit: %v", n, time.Since(since), st.sessionLogs(t))
	}
	return ev, took
}

func lastEnd(t *testing.T, ev []*aep.Event) (reason, observed string) {
	t.Helper()
	var end *aep.Event
	for _, e := range ev {
		if e.Type == "session.ended" {
			end = e
		}
	}
	reason, _ = dataOf(end)["reason"].(string)
	observed, _ = end.ExtString(adapter.ExtObserved)
	return reason, observed
}

// validateLogAndRelay checks the session's log and the relay's replay of it
// with the stream validators (`aep-kimi validate`).
func (st *stack) validateLogAndRelay(t *testing.T, session string) {
	t.Helper()
	name := adapter.LogFileName(session)
	validateWithCLI(t, filepath.Join(st.home, "logs", "kimi-code", name))
	raw := st.sessionLogs(t)[name]
	st.sameOnRelay(t, raw, session)
	relayed := filepath.Join(t.TempDir(), "relay.jsonl")
	var lines []string
	for _, l := range st.relayEvents(t, session) {
		lines = append(lines, string(l))
	}
	if err := os.WriteFile(relayed, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	validateWithCLI(t, relayed)
}

// `kimi -p` never fires SessionEnd: the session ends (normal) on the stream
// within 5 s of the process exit, observed from the process.
func TestE2EPrintModeEndsNormal(t *testing.T) {
	st := startStack(t)
	k := newKimiRun(t, st, map[string]any{"responses": []map[string]any{
		{"tool_calls": []map[string]any{{"name": "Bash", "arguments": map[string]any{"command": "echo probe"}}}},
		{"text": "done"},
	}})
	exited := k.run(t, "run the probe")
	ev, took := st.waitEnded(t, 1, exited)
	t.Logf("session.ended %s after kimi -p exited", took.Round(time.Millisecond))
	if took > maxEndLatency {
		t.Errorf("session.ended %s after the exit, want under %s", took, maxEndLatency)
	}
	if reason, observed := lastEnd(t, ev); reason != mapping.EndNormal || observed != adapter.ObservedProcess {
		t.Errorf("ended %q observed %q, want normal from the process", reason, observed)
	}
	want(t, ev, map[string]int{"session.started": 1, "run.started": 1, "run.finished": 1, "run.cancelled": 0, "session.ended": 1})
	if ev[len(ev)-1].Type != "session.ended" {
		t.Errorf("last event %s", ev[len(ev)-1].Type)
	}
	st.waitQuiet(t)
	st.validateLogAndRelay(t, ev[0].Session)
}

// A Kimi killed with SIGKILL in the middle of a run (the mock answers slowly)
// fires nothing: the run closes and the session ends killed within 5 s.
func TestE2EKilledMidRunEndsKilled(t *testing.T) {
	st := startStack(t)
	k := newKimiRun(t, st, map[string]any{"responses": []map[string]any{
		{"tool_calls": []map[string]any{{"name": "Bash", "arguments": map[string]any{"command": "echo first"}}}},
		{"delay": 60, "text": "too late"},
	}})
	cmd := k.start(t, "run the probe slowly")
	// Mid-run: the tool has completed and the next model call is pending.
	waitLog(t, st, func(ev []*aep.Event) bool { return typeCounts(ev)["tool.completed"] >= 1 })
	time.Sleep(300 * time.Millisecond)
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	cmd.Wait()
	ev, took := st.waitEnded(t, 1, killed)
	t.Logf("session.ended %s after kill -9", took.Round(time.Millisecond))
	if took > maxEndLatency {
		t.Errorf("session.ended %s after the kill, want under %s", took, maxEndLatency)
	}
	if reason, observed := lastEnd(t, ev); reason != mapping.EndKilled || observed != adapter.ObservedProcess {
		t.Errorf("ended %q observed %q, want killed from the process", reason, observed)
	}
	want(t, ev, map[string]int{"run.started": 1, "run.cancelled": 1, "run.finished": 0, "session.ended": 1})
	got := []string{ev[len(ev)-2].Type, ev[len(ev)-1].Type}
	if got[0] != "run.cancelled" || got[1] != "session.ended" {
		t.Errorf("the stream ends %v, want the run closed, then the session", got)
	}
	st.waitQuiet(t)
	st.validateLogAndRelay(t, ev[0].Session)
}

// `kimi -r ID` after an observed end starts a new chapter of the same
// session: session.started (resume) under the chapter's source, then its
// own end; the log and the relay's replay validate.
func TestE2EResumeStartsNewChapter(t *testing.T) {
	st := startStack(t)
	k := newKimiRun(t, st, map[string]any{"responses": []map[string]any{{"text": "first"}}, "default": map[string]any{"text": "again"}})
	exited := k.run(t, "first prompt")
	ev, _ := st.waitEnded(t, 1, exited)
	sid := ev[0].Session
	exited = k.run(t, "second prompt", "-r", sid)
	ev, took := st.waitEnded(t, 2, exited)
	t.Logf("the resumed chapter ended %s after its kimi exited", took.Round(time.Millisecond))
	if took > maxEndLatency {
		t.Errorf("second session.ended %s after the exit, want under %s", took, maxEndLatency)
	}
	var marks []string
	for _, e := range ev {
		if e.Session != sid {
			t.Fatalf("event of another session %q in %q's log", e.Session, sid)
		}
		if e.Type == "session.started" || e.Type == "session.ended" {
			marks = append(marks, e.Type+"@"+strings.TrimPrefix(e.Source, aep.SourceURI(st.hostName(t), mapping.Agent, sid)))
		}
	}
	if got := strings.Join(marks, " "); got != "session.started@ session.ended@ session.started@/chapter/2 session.ended@/chapter/2" {
		t.Errorf("chapters: %s", got)
	}
	for _, e := range ev {
		if e.Type == "session.started" && strings.HasSuffix(e.Source, "/chapter/2") && dataOf(e)["trigger"] != mapping.TriggerResume {
			t.Errorf("the second chapter starts with trigger %v", dataOf(e)["trigger"])
		}
	}
	st.waitQuiet(t)
	st.validateLogAndRelay(t, sid)
}

// hostName is the host the adapter names in source URIs.
func (st *stack) hostName(t *testing.T) string {
	t.Helper()
	h, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// The real Kimi's hooks into the real adapter and relay: the print and
// kimi web scenarios on aep-setup's registration, a kill -9 and a relay outage, and secrets kept in.

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aep-kimi/aep-kimi/adapter"
	"github.com/aep-kimi/aep-kimi/aep"
	"github.com/aep-kimi/aep-kimi/internal/testkit/kimiharness"
	"github.com/aep-kimi/aep-kimi/internal/testkit/poll"
	"github.com/aep-kimi/aep-kimi/internal/testkit/spooltest"
	"github.com/aep-kimi/aep-kimi/internal/testkit/stacktest"
	"github.com/aep-kimi/aep-kimi/mapping"
	"github.com/aep-kimi/aep-kimi/setup"
)

// Every scenario once, each into its own stack, on hooks aep-setup
// registered (`kimi doctor` accepts them): the print-mode scenarios and the
// kimi web one (an approved permission pair, a manual compaction, a prompt
// queued behind a slow one that the user aborts, a rejected permission, the
// 60 s heartbeat, and the archive that ends the session). Each checks its
// own stream; together they must fire every one of the installed version's
// 20 hooks into the adapters. One Kimi run per scenario: the suite's Kimi
// CPU is most of its cost.
func TestE2EScenarios(t *testing.T) {
	t.Parallel()
	kimi := kimiharness.Require(t)
	var mu sync.Mutex
	fired := map[string]int{}
	count := func(t *testing.T, st *stacktest.Stack) {
		mu.Lock()
		defer mu.Unlock()
		for ev, n := range st.HookCounts(t) {
			fired[ev] += n
		}
	}
	prints := []struct {
		name  string
		check func(t *testing.T, ev []*aep.Event)
	}{
		{"basic", func(t *testing.T, ev []*aep.Event) {
			stacktest.Want(t, ev, map[string]int{"session.started": 1, "run.started": 1, "run.finished": 1, "tool.requested": 1, "tool.completed": 1})
		}},
		{"tool-failure", func(t *testing.T, ev []*aep.Event) {
			stacktest.Want(t, ev, map[string]int{"run.started": 1, "run.finished": 1, "tool.requested": 2, "tool.failed": 2})
		}},
		{"subagent", func(t *testing.T, ev []*aep.Event) {
			stacktest.Want(t, ev, map[string]int{"run.started": 1, "run.finished": 1, "delegation.subagent.started": 1,
				"delegation.subagent.stopped": 1, "x.kimi-code.run.subagent_turn_ended": 1, "tool.requested": 2, "tool.completed": 2})
		}},
		// The background command must outlast the turn that starts it:
		// `kimi -p` keeps running for a second turn only if a task is still
		// active when the first ends, and drops the notification of one that
		// finished during it. At load 17 "sleep 1" finished first (one turn);
		// the scenario sleeps 10 s.
		{"background", func(t *testing.T, ev []*aep.Event) {
			stacktest.Want(t, ev, map[string]int{"run.started": 2, "run.finished": 2, "progress.status": 1})
		}},
		{"compact", func(t *testing.T, ev []*aep.Event) {
			stacktest.Want(t, ev, map[string]int{"run.started": 1, "run.finished": 1, "session.compacted": 1})
		}},
		{"stop-failure", func(t *testing.T, ev []*aep.Event) {
			stacktest.Want(t, ev, map[string]int{"run.started": 1, "run.failed": 1, "run.finished": 0})
		}},
	}
	t.Run("each", func(t *testing.T) {
		t.Run("web", func(t *testing.T) {
			t.Parallel()
			st := stacktest.StartStack(t)
			mock := kimiharness.StartMock(t, kimiharness.ScenarioFile(t, "web"))
			home := st.RegisterWithSetup(t, kimi, mock.Port)
			web := kimiharness.StartWeb(t, kimi, home, t.TempDir())
			// The heartbeat is the adapter's to see: wait for its count.
			kimiharness.DriveWeb(t, web, func() bool { return st.HookCounts(t)[mapping.HookSessionHeartbeat] > 0 })
			st.WaitEvent(t, func(e *aep.Event) bool { return e.Type == "session.ended" }) // the archive's SessionEnd hook
			web.Stop(t)
			st.WaitQuiet(t)
			count(t, st)
			name, raw, ev := st.OneSession(t)
			stacktest.ValidateWithCLI(t, filepath.Join(st.Home, "logs", "kimi-code", name))
			stacktest.Want(t, ev, map[string]int{"run.started": 4, "run.finished": 3, "run.cancelled": 1, "attention.requested": 2,
				"attention.answered": 2, "attention.resolved": 2, "tool.denied": 1, "session.compacted": 1, "session.ended": 1})
			var terms []string
			for _, e := range ev {
				if aep.IsRunTerminal(e.Type) {
					terms = append(terms, e.Type)
				}
				if e.Type == "run.cancelled" && stacktest.DataOf(e)["by"] != "user" {
					t.Errorf("the aborted run is cancelled by %v, want user", stacktest.DataOf(e)["by"])
				}
			}
			if got := strings.Join(terms, ","); got != "run.finished,run.cancelled,run.finished,run.finished" {
				t.Errorf("run terminals %s", got)
			}
			if ev[len(ev)-1].Type != "session.ended" {
				t.Errorf("last event %s", ev[len(ev)-1].Type)
			}
			stacktest.PairedTools(t, ev)
			st.SameOnRelay(t, raw, ev[0].Session)
		})
		for _, c := range prints {
			t.Run(c.name, func(t *testing.T) {
				t.Parallel()
				st := stacktest.StartStack(t)
				script := kimiharness.ScenarioFile(t, c.name)
				sc, err := kimiharness.ReadScript(script)
				if err != nil {
					t.Fatal(err)
				}
				mock := kimiharness.StartMock(t, script)
				home := st.SetupHome(t, mock.Port)
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
				out, err := kimiharness.Print(ctx, kimi, home, t.TempDir(), sc.Prompt)
				cancel()
				if err != nil && c.name != "stop-failure" {
					t.Fatalf("%s: kimi -p: %v\n%s", c.name, err, out)
				}
				st.WaitQuiet(t)
				count(t, st)
				name, raw, ev := st.OneSession(t)
				stacktest.ValidateWithCLI(t, filepath.Join(st.Home, "logs", "kimi-code", name))
				c.check(t, ev)
				stacktest.PairedTools(t, ev)
				st.SameOnRelay(t, raw, ev[0].Session)
			})
		}
	})
	var missing []string
	for _, ev := range setup.HookEvents(kimiharness.KimiVersion) {
		if fired[ev] == 0 {
			missing = append(missing, ev)
		}
	}
	if len(missing) > 0 {
		t.Fatalf("hooks never fired into the adapters: %s (seen %v)", strings.Join(missing, ", "), fired)
	}
}

// kill -9 of the adapter in the middle of a hook sequence while hooks keep
// firing, then a restart: the log holds every event, in hook order, valid.
func TestE2EAdapterKill9(t *testing.T) {
	t.Parallel()
	kimi := kimiharness.Require(t)
	st := stacktest.StartStack(t)
	sc := stacktest.SlowScenario(t, "k9")
	done := stacktest.Async(t, func() kimiharness.PrintRun { return stacktest.Scenario(t, kimi, sc, st.HookCmd(t)) })
	// Crash it once the run is under way, keep it down while hooks fire
	// (they spool), then bring it back.
	stacktest.WaitLog(t, st, func(ev []*aep.Event) bool { return stacktest.TypeCounts(ev)["tool.requested"] >= 2 })
	st.Adapter.Kill()
	// A record of a hook the adapter logged just before it died is a
	// duplicate its next run drops: wait for one it never took.
	poll.Must(t, 30*time.Second, "a hook spooled while the adapter is down", func() bool { return st.SpooledUnlogged(t) > 0 })
	st.StartAdapter(t)
	<-done
	st.WaitQuiet(t)
	name, raw, ev := st.OneSession(t)
	stacktest.ValidateWithCLI(t, filepath.Join(st.Home, "logs", "kimi-code", name))
	stacktest.Want(t, ev, map[string]int{"session.started": 1, "run.started": 1, "run.finished": 1, "tool.requested": 6, "tool.completed": 6, "session.ended": 1})
	stacktest.PairedTools(t, ev)
	// Hook order: each tool's request precedes its result, the run opens
	// first and finishes before the session ends (Kimi's exit, observed by
	// the restarted adapter), and there are two epochs.
	epochs := map[int64]bool{}
	for _, e := range ev {
		epochs[e.EpochOrZero()] = true
	}
	if len(epochs) != 2 {
		t.Errorf("%d epochs, want 2 (one per adapter run)", len(epochs))
	}
	if ev[1].Type != "run.started" || ev[len(ev)-2].Type != "run.finished" || ev[len(ev)-1].Type != "session.ended" {
		t.Errorf("run does not wrap the session: %s ... %s, %s", ev[1].Type, ev[len(ev)-2].Type, ev[len(ev)-1].Type)
	}
	spooled := 0
	for _, e := range ev {
		if _, ok := e.Ext[adapter.ExtSpooled]; ok {
			spooled++
		}
	}
	if spooled == 0 {
		t.Error("no event came through the spool: the crash window caught nothing")
	}
	st.SameOnRelay(t, raw, ev[0].Session)
}

// Kimi ends every PostToolUse hook still running when its turn ends
// (SIGTERM to the hook's process group, SIGKILL 100 ms later). Here all six
// are still on their way to the disk when that comes: the spool's lock is
// held until Kimi has exited (a second after the turn's end). Each left
// Kimi's group once it had read its payload, so each outlives the kill and
// delivers once the lock frees; before, every one was killed and lost.
func TestE2EPostToolUseOutlivesTurnEnd(t *testing.T) {
	t.Parallel()
	kimi := kimiharness.Require(t)
	st := stacktest.StartStack(t)
	release := spooltest.HoldLock(t, st.Home)
	stacktest.Scenario(t, kimi, stacktest.SlowScenario(t, "te"), st.HookCmd(t))
	release()
	st.WaitQuiet(t)
	_, _, ev := st.OneSession(t)
	// The turn's TurnStarted waited on the lock too, and came after the
	// Stop: it joins the prompt's run rather than opening one of its own.
	stacktest.Want(t, ev, map[string]int{"tool.requested": 6, "tool.completed": 6, "run.started": 1, "run.cancelled": 0})
	stacktest.PairedTools(t, ev)
}

// The relay down for part of a session, then back: the relay ends with every
// event.
func TestE2ERelayOutage(t *testing.T) {
	t.Parallel()
	kimi := kimiharness.Require(t)
	st := stacktest.StartStack(t)
	sc := stacktest.SlowScenario(t, "outage")
	done := stacktest.Async(t, func() kimiharness.PrintRun { return stacktest.Scenario(t, kimi, sc, st.HookCmd(t)) })
	seen := 0
	stacktest.WaitLog(t, st, func(ev []*aep.Event) bool { seen = len(ev); return stacktest.TypeCounts(ev)["tool.requested"] >= 2 })
	st.Relay.Kill()
	stacktest.WaitLog(t, st, func(ev []*aep.Event) bool { return len(ev) > seen }) // events while the relay is down
	port := strings.TrimPrefix(st.RelayURL, "http://127.0.0.1:")
	st.Relay = stacktest.StartDaemon(t, st.RelayURL, []string{"AEP_TOKEN=" + st.Token, "AEP_HOME=" + st.Home}, "relay", "--listen", "127.0.0.1:"+port)
	<-done
	st.WaitQuiet(t)
	_, raw, ev := st.OneSession(t)
	stacktest.Want(t, ev, map[string]int{"run.started": 1, "run.finished": 1, "tool.requested": 6, "tool.completed": 6})
	st.SameOnRelay(t, raw, ev[0].Session)
}

// At the default capture posture, secrets planted in the prompt, tool input
// and tool output never reach the log or the relay.
func TestE2ESecretsNeverLeave(t *testing.T) {
	t.Parallel()
	kimi := kimiharness.Require(t)
	st := stacktest.StartStack(t)
	secrets := []string{"AKIAIOSFODNN7EXAMPLE", "hunter2sequel", "ghp_AbCdEfGhIjKlMnOpQrStUvWxYz012345", "sk-proj-AbCdEf123456GhIjKl789012"}
	sc := map[string]any{
		"prompt": "Deploy with AKIAIOSFODNN7EXAMPLE and password=hunter2sequel",
		"responses": []map[string]any{
			{"tool_calls": []map[string]any{{"name": "Bash", "arguments": map[string]any{
				"command": "echo ghp_AbCdEfGhIjKlMnOpQrStUvWxYz012345 sk-proj-AbCdEf123456GhIjKl789012"}}}},
			{"text": "done"},
		},
	}
	b, _ := json.Marshal(sc)
	path := filepath.Join(t.TempDir(), "secrets.json")
	os.WriteFile(path, b, 0o600)
	stacktest.Scenario(t, kimi, path, st.HookCmd(t))
	st.WaitQuiet(t)
	_, raw, ev := st.OneSession(t)
	if stacktest.TypeCounts(ev)["tool.completed"] != 1 {
		t.Fatalf("scenario did not run its tool: %v", stacktest.TypeCounts(ev))
	}
	relayed := bytes.Join(st.RelayEvents(t, ev[0].Session), []byte("\n"))
	for _, s := range secrets {
		if bytes.Contains(raw, []byte(s)) {
			t.Errorf("secret %q in the log", s)
		}
		if bytes.Contains(relayed, []byte(s)) {
			t.Errorf("secret %q on the relay", s)
		}
	}
}

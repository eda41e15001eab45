// Control from another terminal on a real Kimi: deny, allow, time out
// and steer, through the real relay and gate.

package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aep-kimi/aep-kimi/aep"
	"github.com/aep-kimi/aep-kimi/internal/testkit/kimiharness"
	"github.com/aep-kimi/aep-kimi/internal/testkit/netaddr"
	"github.com/aep-kimi/aep-kimi/internal/testkit/poll"
	"github.com/aep-kimi/aep-kimi/internal/testkit/stacktest"
	"github.com/aep-kimi/aep-kimi/relay/client"
)

// A person denies or allows a real Kimi tool call from another terminal:
// the held PreToolUse gate, answered with `aep-kimi respond`. One Kimi
// session makes one call per case, one after another (the mock hands out
// the next call once the last one's result is in), and each case reads the
// one recorded stream and the model's requests.
func TestE2EGate(t *testing.T) {
	t.Parallel()
	kimi := kimiharness.Require(t)
	cases := []struct {
		name, option, text string
		ran                bool
	}{
		{"deny", "deny", "not on this box", false},
		{"allow", "allow", "", true},
		{"free text denies", "", "use the staging box instead", false},
	}
	// The harness registers hooks with a 10 s timeout: the hold fits.
	st := stacktest.StartStack(t, "AEP_KIMI_CONTROL=1", "AEP_ATTENTION_TIMEOUT_MS=8000")
	dir := t.TempDir()
	markers := make([]string, len(cases))
	var responses []any
	for i := range cases {
		markers[i] = filepath.Join(dir, fmt.Sprintf("side-effect-%d", i))
		responses = append(responses, map[string]any{"tool_calls": []any{map[string]any{"name": "Bash",
			"arguments": map[string]any{"command": "touch " + markers[i]}}}})
	}
	script := stacktest.WriteScript(t, map[string]any{"prompt": "Create the marker files.",
		"responses": append(responses, map[string]any{"text": "done"})})
	out := stacktest.Async(t, func() kimiharness.PrintRun { return stacktest.Scenario(t, kimi, script, st.HookCmd(t)) })
	answered := map[string]bool{}
	for _, c := range cases {
		req := st.WaitEvent(t, func(e *aep.Event) bool {
			return e.Type == "attention.requested" && strings.Contains(string(e.Data), `"control"`) && !answered[e.ID]
		})
		answered[req.ID] = true
		args := []string{"respond"}
		if c.option != "" {
			args = append(args, "--option", c.option)
		}
		if c.text != "" {
			args = append(args, "--text", c.text)
		}
		code, msg := st.Cli(t, append(args, req.Session, req.ID)...)
		if code != 0 || !strings.Contains(msg, "accepted") {
			t.Fatalf("%s: respond: exit %d: %s", c.name, code, msg)
		}
	}
	run := <-out
	st.WaitQuiet(t)
	name, _, ev := st.OneSession(t)
	stacktest.ValidateWithCLI(t, filepath.Join(st.Home, "logs", "kimi-code", name))
	counts := stacktest.TypeCounts(ev)
	if counts["control.accepted"] != 3 || counts["attention.answered"] != 3 || counts["attention.resolved"] != 3 {
		t.Fatalf("control loop not on the stream: %v", counts)
	}
	if counts["tool.denied"] != 2 || counts["tool.failed"] != 2 || counts["tool.completed"] != 1 {
		t.Fatalf("two denied tools and one allowed: %v", counts)
	}
	reqs := run.Mock.Requests(t)
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := os.Stat(markers[i])
			if ran := err == nil; ran != c.ran {
				t.Fatalf("tool side effect happened=%v, want %v", ran, c.ran)
			}
			if c.text == "" {
				return
			}
			// The model got the reason with this call's result: the mock
			// saw it first in the request after the call.
			first := slices.IndexFunc(reqs, func(r string) bool { return strings.Contains(r, c.text) })
			if first != i+1 {
				t.Fatalf("the model saw the reason %q first in request %d of %d, want %d", c.text, first, len(reqs), i+1)
			}
		})
	}
}

// A hold nobody answers times out and fails open: the tool runs.
func TestE2EGateTimeoutFailsOpen(t *testing.T) {
	t.Parallel()
	kimi := kimiharness.Require(t)
	st := stacktest.StartStack(t, "AEP_KIMI_CONTROL=1", "AEP_ATTENTION_TIMEOUT_MS=1500")
	marker := filepath.Join(t.TempDir(), "ran")
	script := stacktest.MarkerScript(t, marker)
	stacktest.Scenario(t, kimi, script, st.HookCmd(t))
	st.WaitQuiet(t)
	if _, err := os.Stat(marker); err != nil {
		t.Fatal("the tool did not run after the hold timed out")
	}
	_, _, ev := st.OneSession(t)
	if c := stacktest.TypeCounts(ev); c["attention.timeout"] != 1 || c["tool.completed"] != 1 {
		t.Fatalf("stream: %v", c)
	}
}

// Steering: an instruction queued from another terminal reaches the model on
// the session's next prompt (the mock provider sees it in the request). The
// session is a kimi web one, live across both prompts: an instruction still
// queued when its Kimi exits is dropped with the session's end.
func TestE2EInstruct(t *testing.T) {
	t.Parallel()
	kimi := kimiharness.Require(t)
	st := stacktest.StartStack(t, "AEP_INSTRUCT=1")
	mock := kimiharness.StartMock(t, stacktest.WriteScript(t, map[string]any{"responses": []any{}, "default": map[string]any{"text": "ok", "repeat": true}}))
	home, work := t.TempDir(), t.TempDir()
	kimiharness.WriteConfig(t, home, mock.Port, st.HookCmd(t))
	web := kimiharness.StartWeb(t, kimi, home, work)
	defer web.Stop(t)
	sid := web.CreateSession(t)
	finished := func(n int) {
		t.Helper()
		st.WaitEvent(t, func(e *aep.Event) bool {
			return e.Type == "run.finished" && e.Session == sid && stacktest.CountType(st.SessionLogs(t), "run.finished") >= n
		})
	}
	web.Prompt(t, sid, "First prompt.")
	finished(1)
	const steer = "Answer only in French from now on."
	code, msg := st.Cli(t, "instruct", sid, steer)
	if code != 0 {
		t.Fatalf("instruct: exit %d: %s", code, msg)
	}
	web.Prompt(t, sid, "Second prompt.")
	finished(2)
	reqs := mock.Requests(t)
	if len(reqs) < 2 || !strings.Contains(reqs[len(reqs)-1], steer) {
		t.Fatalf("the model never saw the instruction in its next request (%d requests)", len(reqs))
	}
	if strings.Contains(reqs[0], steer) {
		t.Fatal("the instruction leaked into a request before it was queued")
	}
	web.Stop(t)
	st.WaitQuiet(t)
	_, _, ev := st.OneSession(t)
	delivered := 0
	for _, e := range ev {
		if e.Type == "x.kimi-code.instruction.delivered" {
			delivered++
		}
	}
	if delivered != 1 {
		t.Fatalf("%d delivered events, want 1: %v", delivered, stacktest.TypeCounts(ev))
	}
}

// A command without a token never reaches the adapter: the relay without
// AEP_TOKEN is watch-only and refuses it toward the sender.
func TestE2ECommandWithoutTokenNeverArrives(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	rport, aport := netaddr.FreePort(t), netaddr.FreePort(t)
	relayURL := "http://127.0.0.1:" + strconv.Itoa(rport)
	stacktest.StartDaemon(t, relayURL, nil, "relay", "--listen", "127.0.0.1:"+strconv.Itoa(rport))
	adapterURL := "http://127.0.0.1:" + strconv.Itoa(aport)
	stacktest.StartDaemon(t, adapterURL, []string{"AEP_HOME=" + home, "AEP_INSTRUCT=1", "AEP_TOKEN="}, "adapter", "--listen", "127.0.0.1:"+strconv.Itoa(aport), "--relay", relayURL)
	// A session the adapter owns on the relay.
	hook := exec.Command(filepath.Join(stacktest.Binaries(t), "kimi-hook"), "--daemon", adapterURL, "--home", home)
	hook.Stdin = strings.NewReader(`{"hook_event_name":"SessionStart","session_id":"nt","source":"startup"}`)
	if out, err := hook.CombinedOutput(); err != nil {
		t.Fatalf("kimi-hook: %v %s", err, out)
	}
	adapter := &stacktest.Stack{HookTo: adapterURL}
	poll.Must(t, 10*time.Second, "the adapter's session", func() bool { return adapter.LiveSessions(t) > 0 })
	cmd, _ := client.NewCommand("x.kimi-code.control.instruct", "nt", map[string]any{"text": "hi"})
	res, err := client.SendCommand(context.Background(), relayURL, "", nil, cmd, 3*time.Second)
	if err != nil {
		t.Fatalf("send: %v", err)
	}
	if !res.Refused || res.Reason != "unauthorized" {
		t.Fatalf("command without a token: %+v", res)
	}
	b, _ := os.ReadFile(filepath.Join(home, "logs", "kimi-code", "nt.jsonl"))
	if bytes.Contains(b, []byte("control.")) {
		t.Fatalf("the command reached the adapter:\n%s", b)
	}
}

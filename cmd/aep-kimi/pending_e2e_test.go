package main

import (
	"bytes"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/aep-kimi/aep-kimi/aep"
	"github.com/aep-kimi/aep-kimi/internal/testkit/poll"
)

// hook runs kimi-hook with one payload, as Kimi would, in the background;
// the channel yields its stdout (the reply Kimi acts on) when it exits.
func (st *stack) hook(t *testing.T, payload map[string]any) <-chan string {
	t.Helper()
	cmd := st.kimiHook(t, payload)
	var out bytes.Buffer
	cmd.Stdout = &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan string, 1)
	go func() { cmd.Wait(); done <- out.String() }()
	t.Cleanup(func() { cmd.Process.Kill() })
	return done
}

// kimiHook is kimi-hook set to deliver payload to the stack's adapter and
// wait up to a minute for its answer, not yet started.
func (st *stack) kimiHook(t *testing.T, payload map[string]any) *exec.Cmd {
	t.Helper()
	b, _ := json.Marshal(payload)
	cmd := exec.Command(filepath.Join(binaries(t), "kimi-hook"), "--daemon", st.hookTo, "--home", st.home, "--timeout", "60")
	cmd.Stdin = bytes.NewReader(b)
	return cmd
}

// bashCall is the PreToolUse payload of a Bash call running command.
func bashCall(session, callID, command string) map[string]any {
	return map[string]any{"hook_event_name": "PreToolUse", "session_id": session,
		"tool_name": "Bash", "tool_input": map[string]any{"command": command}, "tool_call_id": callID}
}

// heldGate posts a PreToolUse for Bash running command; with the gate on,
// the adapter holds it until someone answers.
func (st *stack) heldGate(t *testing.T, session, callID, command string) <-chan string {
	return st.hook(t, bashCall(session, callID, command))
}

// waitCLI runs an aep-kimi subcommand until its output satisfies ok.
func (st *stack) waitCLI(t *testing.T, ok func(string) bool, args ...string) string {
	t.Helper()
	var code int
	var out string
	if !poll.Until(30*time.Second, func() bool { code, out = st.cli(t, args...); return code == 0 && ok(out) }) {
		t.Fatalf("aep-kimi %s never showed what was awaited (exit %d):\n%s", strings.Join(args, " "), code, out)
	}
	return out
}

func reply(t *testing.T, held <-chan string) string {
	t.Helper()
	select {
	case out := <-held:
		return out
	case <-time.After(30 * time.Second):
		t.Fatal("the held hook was never released")
		return ""
	}
}

func denies(out string) bool {
	return strings.Contains(out, `"permissionDecision":"deny"`)
}

// The terminal path end to end: a held gate is found with `pending`, answered
// with `respond --option deny SESSION` (no request id), and the hook's reply
// denies; afterwards nothing waits and a second answer finds nothing.
func TestE2EPendingThenRespondSession(t *testing.T) {
	if testing.Short() {
		t.Skip("end to end: builds and runs the binaries")
	}
	st := startStack(t, "AEP_KIMI_CONTROL=1", "AEP_ATTENTION_TIMEOUT_MS=45000", "AEP_CAPTURE=redacted")
	session := "term-" + strings.ToLower(aep.NewID())
	if out := reply(t, st.hook(t, map[string]any{"hook_event_name": "SessionStart", "session_id": session,
		"source": "startup", "session_title": "Clean up the cluster"})); out != "" {
		t.Fatalf("SessionStart reply %q", out)
	}
	held := st.heldGate(t, session, "call_1", "kubectl delete pod x")
	out := st.waitCLI(t, func(s string) bool { return strings.Contains(s, "kubectl delete pod x") }, "pending")
	m := regexp.MustCompile(`(?m)^Clean up the cluster · (\S+)  request (\S+)$`).FindStringSubmatch(out)
	if m != nil && !strings.HasPrefix(session, m[1]) {
		m = nil
	}
	if m == nil {
		t.Fatalf("pending does not name the session, its title and the request:\n%s", out)
	}
	for _, want := range []string{"1 request waits on you", "options allow, allow_session, deny, cancel", "· runs anyway in ",
		"aep-kimi respond --option deny " + m[1] + " " + m[2]} {
		if !strings.Contains(out, want) {
			t.Fatalf("pending lacks %q:\n%s", want, out)
		}
	}
	code, msg := st.cli(t, "respond", "--option", "deny", session)
	if code != 0 || !strings.Contains(msg, "accepted control.attention.respond") {
		t.Fatalf("respond SESSION: exit %d: %s", code, msg)
	}
	if r := reply(t, held); !denies(r) {
		t.Fatalf("the hook's reply does not deny: %q", r)
	}
	st.waitCLI(t, func(s string) bool { return strings.TrimSpace(s) == "nothing waits on you" }, "pending")
	if code, msg := st.cli(t, "respond", "--option", "deny", session); code != exitNotPending || !strings.Contains(msg, "no pending request") {
		t.Fatalf("respond with nothing pending: exit %d: %s", code, msg)
	}
	if code, msg := st.cli(t, "respond", "--option", "deny", session, m[2]); code != exitNotPending || !strings.Contains(msg, "no longer waits (answered)") {
		t.Fatalf("respond to the answered request: exit %d: %s", code, msg)
	}
	if code, msg := st.cli(t, "respond", "--option", "deny", "no-such-session"); code != exitUnknownSession {
		t.Fatalf("respond to an unknown session: exit %d: %s", code, msg)
	}
}

// From tail alone: with two holds in one session, respond SESSION refuses and
// lists both; each request's pasted command from tail answers it.
func TestE2ETailPastedCommandAnswers(t *testing.T) {
	if testing.Short() {
		t.Skip("end to end: builds and runs the binaries")
	}
	st := startStack(t, "AEP_KIMI_CONTROL=1", "AEP_ATTENTION_TIMEOUT_MS=45000")
	session := "term-" + strings.ToLower(aep.NewID())
	first := st.heldGate(t, session, "call_1", "rm -rf /tmp/a")
	second := st.heldGate(t, session, "call_2", "rm -rf /tmp/b")
	out := st.waitCLI(t, func(s string) bool { return strings.Count(s, "aep-kimi respond") == 2 },
		"tail", "--from", "all", "--once", "--state", "none")
	if strings.Contains(out, "\x1b[") {
		t.Fatalf("tail coloured a pipe:\n%s", out)
	}
	var pasted [][]string
	for _, l := range strings.Split(out, "\n") {
		if _, cmd, ok := strings.Cut(l, "↳ aep-kimi respond "); ok {
			pasted = append(pasted, append([]string{"respond"}, strings.Fields(cmd)...))
		}
	}
	if len(pasted) != 2 || !strings.Contains(out, "options allow, allow_session, deny, cancel · runs anyway in") {
		t.Fatalf("tail shows %d answer commands:\n%s", len(pasted), out)
	}
	code, msg := st.cli(t, "respond", "--option", "deny", session)
	if code != exitSeveralPending || !strings.Contains(msg, pasted[0][len(pasted[0])-1]) || !strings.Contains(msg, pasted[1][len(pasted[1])-1]) {
		t.Fatalf("respond SESSION with two pending: exit %d, want %d and both listed:\n%s", code, exitSeveralPending, msg)
	}
	for _, args := range pasted {
		if code, msg := st.cli(t, args...); code != 0 {
			t.Fatalf("pasted %q: exit %d: %s", args, code, msg)
		}
	}
	for i, held := range []<-chan string{first, second} {
		if r := reply(t, held); !denies(r) {
			t.Fatalf("hold %d: the reply does not deny: %q", i+1, r)
		}
	}
}

package stacktest

import (
	"bytes"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aep-kimi/aep-kimi/internal/testkit/poll"
)

// Hook runs kimi-hook with one payload, as Kimi would, in the background;
// the channel yields its stdout (the reply Kimi acts on) when it exits.
func (st *Stack) Hook(t *testing.T, payload map[string]any) <-chan string {
	t.Helper()
	cmd := st.KimiHook(t, payload)
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

// KimiHook is kimi-hook set to deliver payload to the stack's adapter and
// wait up to a minute for its answer, not yet started.
func (st *Stack) KimiHook(t *testing.T, payload map[string]any) *exec.Cmd {
	t.Helper()
	b, _ := json.Marshal(payload)
	cmd := exec.Command(filepath.Join(Binaries(t), "kimi-hook"), "--daemon", st.HookTo, "--home", st.Home, "--timeout", "60")
	cmd.Stdin = bytes.NewReader(b)
	return cmd
}

// BashCall is the PreToolUse payload of a Bash call running command.
func BashCall(session, callID, command string) map[string]any {
	return map[string]any{"hook_event_name": "PreToolUse", "session_id": session,
		"tool_name": "Bash", "tool_input": map[string]any{"command": command}, "tool_call_id": callID}
}

// HeldGate posts a PreToolUse for Bash running command; with the gate on,
// the adapter holds it until someone answers.
func (st *Stack) HeldGate(t *testing.T, session, callID, command string) <-chan string {
	return st.Hook(t, BashCall(session, callID, command))
}

// WaitCLI runs an aep-kimi subcommand until its output satisfies ok, for
// as long as a real Kimi run may take (Scenario's bound).
func (st *Stack) WaitCLI(t *testing.T, ok func(string) bool, args ...string) string {
	t.Helper()
	var code int
	var out string
	if !poll.Until(90*time.Second, func() bool { code, out = st.Cli(t, args...); return code == 0 && ok(out) }) {
		t.Fatalf("aep-kimi %s never showed what was awaited (exit %d):\n%s", strings.Join(args, " "), code, out)
	}
	return out
}

func Reply(t *testing.T, held <-chan string) string {
	t.Helper()
	select {
	case out := <-held:
		return out
	case <-time.After(30 * time.Second):
		t.Fatal("the held hook was never released")
		return ""
	}
}

func Denies(out string) bool {
	return strings.Contains(out, `"permissionDecision":"deny"`)
}

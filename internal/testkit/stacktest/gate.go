package stacktest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aep-kimi/aep-kimi/aep"
	"github.com/aep-kimi/aep-kimi/internal/testkit/kimiharness"
	"github.com/aep-kimi/aep-kimi/internal/testkit/proctest"
	"github.com/aep-kimi/aep-kimi/mapping"
)

// KimiTimeoutGap is how close to Kimi's own hook timeout an unanswered hold
// must be on the stream as proceeding (issue 24: within 2 s).
const KimiTimeoutGap = 2 * time.Second

// BashScript is a print-mode session whose first answer calls Bash once per
// command, then closes.
func BashScript(t testing.TB, commands ...string) string {
	calls := make([]any, len(commands))
	for i, c := range commands {
		calls[i] = map[string]any{"name": "Bash", "arguments": map[string]any{"command": c}}
	}
	return WriteScript(t, map[string]any{
		"prompt":    "Run the commands.",
		"responses": []any{map[string]any{"tool_calls": calls}, map[string]any{"text": "done"}},
	})
}

// GateKimiHome writes a Kimi home for the mock serving script, with the hooks
// registered by hooks (TOML appended to the provider config); it returns the
// home, a working directory and the mock.
func GateKimiHome(t testing.TB, script, hooks string) (home, work string, mock *kimiharness.Mock) {
	t.Helper()
	mock = kimiharness.StartMock(t, script)
	home, work = t.TempDir(), t.TempDir()
	kimiharness.WriteConfig(t, home, mock.Port, "")
	f, err := os.OpenFile(filepath.Join(home, "config.toml"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(hooks); err != nil {
		t.Fatal(err)
	}
	return home, work, mock
}

// HooksTOML registers hookCmd for every event with timeout seconds, except
// PreToolUse, which Kimi gives preTimeout seconds while kimi-hook is told
// hookTimeout: a registration where Kimi kills the hook before it gives up.
func HooksTOML(hookCmd string, timeout, preTimeout, hookTimeout int) string {
	var b strings.Builder
	for _, ev := range mapping.HooksKimi0_32() {
		to, kt := timeout, timeout
		if ev == mapping.HookPreToolUse {
			to, kt = preTimeout, hookTimeout
		}
		fmt.Fprintf(&b, "\n[[hooks]]\nevent = %q\ncommand = %q\ntimeout = %d\n", ev, fmt.Sprintf("%s --timeout %d", hookCmd, kt), to)
	}
	return b.String()
}

// PrintKimi runs `kimi -p` with the script's prompt in work against home.
func PrintKimi(t testing.TB, kimi, home, work, prompt string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	out, err := kimiharness.Print(ctx, kimi, home, work, prompt)
	if err != nil {
		t.Fatalf("kimi -p: %v\n%s", err, out)
	}
	return out
}

func EventTime(t testing.TB, e *aep.Event) time.Time {
	t.Helper()
	at, err := time.Parse(time.RFC3339Nano, e.Time)
	if err != nil {
		t.Fatalf("event %s time %q: %v", e.ID, e.Time, err)
	}
	return at
}

// byID indexes events; position gives each one's place in the log.
func Positions(ev []*aep.Event) map[string]int {
	pos := map[string]int{}
	for i, e := range ev {
		pos[e.ID] = i
	}
	return pos
}

// HeldHookGroup runs kimi-hook with a held PreToolUse in its own process
// group, as Kimi spawns hooks; kill ends it the way Kimi's hook timeout
// does (SIGTERM to the group, SIGKILL 100 ms later).
func (st *Stack) HeldHookGroup(t *testing.T, session, callID, command string) (kill func()) {
	t.Helper()
	cmd := st.KimiHook(t, BashCall(session, callID, command))
	kimiharness.OwnGroup(cmd)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	kill = func() {
		kimiharness.SignalGroup(cmd.Process, syscall.SIGTERM)
		select { // a short grace, then the rest of the group goes too
		case <-done:
		case <-time.After(100 * time.Millisecond):
		}
		kimiharness.SignalGroup(cmd.Process, syscall.SIGKILL)
		<-done
	}
	t.Cleanup(func() {
		select {
		case <-done:
		default:
			kill()
		}
	})
	return kill
}

// SetupCLI runs aep-setup with args and returns its exit code and output.
func SetupCLI(t *testing.T, args ...string) (int, string) {
	t.Helper()
	cmd := exec.Command(filepath.Join(Binaries(t), "aep-setup"), args...)
	cmd.Env = append(os.Environ(), "AEP_KIMI_CONTROL=", "AEP_ATTENTION_TIMEOUT_MS=")
	return proctest.Run(t, cmd)
}

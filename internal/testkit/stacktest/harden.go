package stacktest

import (
	"os/exec"
	"strings"
	"testing"
)

// RunHook runs the stack's hook command the way Kimi does.
func (st *Stack) RunHook(t *testing.T, payload string) {
	t.Helper()
	cmd := exec.Command("sh", "-c", st.HookCmd(t))
	cmd.Stdin = strings.NewReader(payload)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("kimi-hook: %v %s", err, out)
	}
}

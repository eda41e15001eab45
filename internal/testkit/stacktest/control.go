package stacktest

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"

	"github.com/aep-kimi/aep-kimi/aep"
	"github.com/aep-kimi/aep-kimi/internal/testkit/proctest"
)

// Cli runs an aep-kimi subcommand against the stack and returns its exit code
// and output.
func (st *Stack) Cli(t testing.TB, args ...string) (int, string) {
	t.Helper()
	return st.CliIn(t, nil, args...)
}

// CliIn is cli with stdin read from in (nil: empty).
func (st *Stack) CliIn(t testing.TB, in io.Reader, args ...string) (int, string) {
	t.Helper()
	cmd := exec.Command(filepath.Join(Binaries(t), "aep-kimi"), args...)
	cmd.Env = append(os.Environ(), "AEP_TOKEN="+st.Token, "AEP_RELAY="+st.RelayURL)
	cmd.Stdin = in
	return proctest.Run(t, cmd)
}

func WriteScript(t testing.TB, v any) string {
	t.Helper()
	b, _ := json.Marshal(v)
	path := filepath.Join(t.TempDir(), "script.json")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// MarkerScript is a print-mode session with one tool call, whose side
// effect creates marker, then a closing answer.
func MarkerScript(t testing.TB, marker string) string {
	return WriteScript(t, map[string]any{
		"prompt": "Create the marker file.",
		"responses": []any{
			map[string]any{"tool_calls": []any{map[string]any{"name": "Bash", "arguments": map[string]any{"command": "touch " + marker}}}},
			map[string]any{"text": "done"},
		},
	})
}

// WaitEvent waits for an event in the session log matching match.
func (st *Stack) WaitEvent(t testing.TB, match func(*aep.Event) bool) *aep.Event {
	t.Helper()
	var found *aep.Event
	if !st.LogsUntil(t, func(ev []*aep.Event) bool {
		i := slices.IndexFunc(ev, match)
		if i >= 0 {
			found = ev[i]
		}
		return i >= 0
	}) {
		t.Fatal("the awaited event never came")
	}
	return found
}

// CountType counts events of a type across session logs.
func CountType(logs map[string][]byte, typ string) int {
	n := 0
	for _, b := range logs {
		n += bytes.Count(b, []byte(`"type":"`+typ+`"`))
	}
	return n
}

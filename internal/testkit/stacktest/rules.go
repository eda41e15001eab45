package stacktest

import (
	"regexp"
	"strings"
	"testing"

	"github.com/aep-kimi/aep-kimi/aep"
)

// BashSteps is a print-mode session whose model runs each command with
// Bash in turn, then says it is done.
func BashSteps(t testing.TB, commands ...string) string {
	responses := make([]any, 0, len(commands)+1)
	for _, c := range commands {
		responses = append(responses, map[string]any{"tool_calls": []any{map[string]any{"name": "Bash", "arguments": map[string]any{"command": c}}}})
	}
	return WriteScript(t, map[string]any{"prompt": "Tidy the build.", "responses": append(responses, map[string]any{"text": "done"})})
}

// AddRule runs `aep-kimi rules add` and returns the new rule's id.
func (st *Stack) AddRule(t testing.TB, args ...string) string {
	t.Helper()
	code, out := st.Cli(t, append([]string{"rules", "add"}, args...)...)
	id := strings.TrimSpace(out)
	if code != 0 || !regexp.MustCompile(`^r-[a-z0-9]{8}$`).MatchString(id) {
		t.Fatalf("rules add %v: exit %d: %s", args, code, out)
	}
	return id
}

func IndexOf(evs []*aep.Event, id string) int {
	for i, e := range evs {
		if e.ID == id {
			return i
		}
	}
	return -1
}

package mapping

import (
	"encoding/json"
	"testing"

	"github.com/aep-kimi/aep-kimi/aep"
)

// Who sent a command is what the relay stamped, never what the command
// says of itself: its data's by, its agent posing as a rule.
func TestCommandSender(t *testing.T) {
	cmd := func(agent, stamp string) *aep.Event {
		e := &aep.Event{Agent: agent, Data: json.RawMessage(`{"answer":{"option":"deny"},"by":"mallory"}`)}
		if stamp != "" {
			if err := e.SetExt(ExtBy, stamp); err != nil {
				t.Fatal(err)
			}
		}
		return e
	}
	for _, c := range []struct {
		agent, stamp, by, surface string
	}{
		{"aep-kimi-page", "alice", "alice", "page"},
		{"aep-kimi-cli", "alice", "alice", "cli"},
		{"aep-kimi-push", "bob", "bob", "push"},
		{"aep-kimi-link", "bob", "bob", "link"},
		{"ops-console", "bob", "bob", "ops-console"},
		{"rule:r3", "alice", "alice", "rule:r3"}, // a person posing as a rule stays the person
		{"rule:r3", "rule:r3", "rule:r3", ""},
		{"aep-kimi-page", "", "aep-kimi-page", ""}, // no relay stamped it
	} {
		by, surface := CommandSender(cmd(c.agent, c.stamp))
		if by != c.by || surface != c.surface {
			t.Errorf("agent %q stamped %q: %q %q, want %q %q", c.agent, c.stamp, by, surface, c.by, c.surface)
		}
	}
	if got := SenderWords("alice", "page"); got != "alice (page)" {
		t.Errorf("SenderWords = %q", got)
	}
}

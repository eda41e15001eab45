package setup

import (
	"fmt"

	"github.com/aep-kimi/aep-kimi/mapping"
)

// KimiDefaultHookTimeout is the timeout, in seconds, Kimi applies to a hook
// registered without one.
const KimiDefaultHookTimeout = 30

// RegisteredHook is one hook table aep-setup manages, as Kimi reads it.
type RegisteredHook struct {
	Event, Command string
	// Timeout is the timeout Kimi applies, in seconds: the table's own,
	// else KimiDefaultHookTimeout.
	Timeout int
}

// Registered reads home/config.toml and returns the hook tables aep-setup
// manages (its fenced block, or unfenced tables running kimi-hook), by
// event; a missing file has none. A file Kimi would not take (bad TOML, or a
// hooks section it drops whole) is an error: Kimi runs none of its hooks.
func Registered(home string) (map[string]RegisteredHook, error) {
	cur, err := readConfig(Config{Home: home}.ConfigPath())
	if err != nil || !cur.exists {
		return nil, err
	}
	l, err := analyze(cur.data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", cur.path, err)
	}
	if err := Validate(cur.data, AllHookEvents()); err != nil {
		return nil, fmt.Errorf("every hook in %s would be ignored by Kimi: %w", cur.path, err)
	}
	doc, _ := parseCheck(cur.data) // analyze already parsed it
	hooks, _ := doc["hooks"].([]any)
	out := map[string]RegisteredHook{}
	for _, e := range l.entries {
		if !e.ours() {
			continue
		}
		spec := specOf(hooks, e.index)
		if spec.event == "" {
			continue
		}
		h := RegisteredHook{Event: spec.event, Command: spec.command, Timeout: KimiDefaultHookTimeout}
		if t, ok := spec.timeout.(int64); ok {
			h.Timeout = int(t)
		}
		// Kimi runs every table of an event: the shortest wait governs.
		if prev, seen := out[spec.event]; !seen || h.Timeout < prev.Timeout {
			out[spec.event] = h
		}
	}
	return out, nil
}

// PreToolUseTimeout is the PreToolUse timeout registered in home's
// config.toml, in seconds; ok is false when aep-setup's PreToolUse hook is
// not registered there.
func PreToolUseTimeout(home string) (secs int, ok bool, err error) {
	reg, err := Registered(home)
	if err != nil {
		return 0, false, err
	}
	h, ok := reg[mapping.HookPreToolUse]
	return h.Timeout, ok, nil
}

package setup

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"time"

	toml "github.com/pelletier/go-toml/v2"
	"github.com/pelletier/go-toml/v2/unstable"
)

// allowedHookKeys is Kimi 2.1.0's strict HookDefSchema. Kimi camel-cases
// snake_case keys before checking, so fail_mode fails as "failMode"; none of
// these four changes under that conversion.
var allowedHookKeys = [...]string{"event", "matcher", "command", "timeout"}

// errVoidsHooks explains why one bad entry matters.
//
//lint:ignore ST1005 Kimi is a proper noun
var errVoidsHooks = errors.New("Kimi drops every hook when one entry is invalid; fix or delete that entry")

// Validate checks content the way Kimi 2.1.0 checks its hooks section: the
// file parses, and every hooks entry is a table with only event, matcher,
// command and timeout; event is one of events; command is a non-empty
// string; matcher, when present, a string; timeout, when present, a whole
// number in 1..600 (Kimi's check is Number.isInteger, so 30.0 passes there
// and here). It returns the first violation as one line.
func Validate(content []byte, events []string) error {
	doc, err := parseCheck(content)
	if err != nil {
		return err
	}
	raw, ok := doc["hooks"]
	if !ok {
		return nil
	}
	list, ok := raw.([]any)
	if !ok {
		return fmt.Errorf("hooks is %s, not an array of [[hooks]] tables: %w", tomlTypeName(raw), errVoidsHooks)
	}
	lines := hooksHeaderLines(content, len(list))
	for i, item := range list {
		where := "hooks[" + strconv.Itoa(i) + "]"
		if lines != nil {
			where += " (line " + strconv.Itoa(lines[i]) + ")"
		}
		if err := validateEntry(item, events); err != nil {
			return fmt.Errorf("%s: %w: %w", where, err, errVoidsHooks)
		}
	}
	return nil
}

func validateEntry(item any, events []string) error {
	entry, ok := item.(map[string]any)
	if !ok {
		return fmt.Errorf("is %s, not a table", tomlTypeName(item))
	}
	keys := make([]string, 0, len(entry))
	for k := range entry {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if !slices.Contains(allowedHookKeys[:], k) {
			return fmt.Errorf("unknown key %q (only event, matcher, command and timeout are allowed)", k)
		}
	}
	switch ev, ok := entry["event"].(string); {
	case entry["event"] == nil:
		return errors.New("no event")
	case !ok:
		return fmt.Errorf("event is %s, not a string", tomlTypeName(entry["event"]))
	case !slices.Contains(events, ev):
		return fmt.Errorf("event %q is not one of the %d events this Kimi accepts", ev, len(events))
	}
	switch cmd, ok := entry["command"].(string); {
	case entry["command"] == nil:
		return errors.New("no command")
	case !ok:
		return fmt.Errorf("command is %s, not a string", tomlTypeName(entry["command"]))
	case cmd == "":
		return errors.New("command is empty")
	}
	if m, ok := entry["matcher"]; ok {
		if _, isStr := m.(string); !isStr {
			return fmt.Errorf("matcher is %s, not a string", tomlTypeName(m))
		}
	}
	if t, ok := entry["timeout"]; ok {
		return checkTimeout(t)
	}
	return nil
}

func checkTimeout(t any) error {
	var v float64
	switch x := t.(type) {
	case int64:
		if x < MinHookTimeout || x > MaxHookTimeout {
			return fmt.Errorf("timeout = %d is outside %d..%d", x, MinHookTimeout, MaxHookTimeout)
		}
		return nil
	case float64:
		v = x
	default:
		return fmt.Errorf("timeout is %s, not an integer", tomlTypeName(t))
	}
	if math.IsNaN(v) || math.IsInf(v, 0) || v != math.Trunc(v) {
		return fmt.Errorf("timeout = %v is not an integer", v)
	}
	if v < MinHookTimeout || v > MaxHookTimeout {
		return fmt.Errorf("timeout = %v is outside %d..%d", v, MinHookTimeout, MaxHookTimeout)
	}
	return nil
}

// hooksHeaderLines returns the line of each [[hooks]] header when they
// account for all n entries (nil otherwise).
func hooksHeaderLines(content []byte, n int) []int {
	stmts, err := scanStmts(content)
	if err != nil {
		return nil
	}
	var lines []int
	for _, s := range stmts {
		if s.kind == unstable.ArrayTable && s.keyIs("hooks") {
			lines = append(lines, s.line)
		}
	}
	if len(lines) != n {
		return nil
	}
	return lines
}

func tomlTypeName(v any) string {
	switch v.(type) {
	case string:
		return "a string"
	case int64:
		return "an integer"
	case float64:
		return "a float"
	case bool:
		return "a boolean"
	case time.Time, toml.LocalDate, toml.LocalTime, toml.LocalDateTime:
		return "a date-time"
	case []any:
		return "an array"
	case map[string]any:
		return "a table"
	}
	return fmt.Sprintf("a %T", v)
}

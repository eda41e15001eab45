package setup

import (
	"slices"
	"testing"

	"github.com/aep-kimi/aep-kimi/mapping"
)

func TestHookEventsByVersion(t *testing.T) {
	t.Parallel()
	tests := []struct {
		version string
		want    int
	}{
		{"2.1.0", ExtendedEventCount},
		{"0.32.0", ExtendedEventCount},
		{"0.32.1", ExtendedEventCount},
		{"1.0.0", ExtendedEventCount},
		{"kimi version 0.40.2", ExtendedEventCount},
		{"v0.33.0\n", ExtendedEventCount},
		{"0.31.0", BaseEventCount},
		{"0.31.9", BaseEventCount},
		{"0.28.1", BaseEventCount},
		{"0.32.0-beta.1", BaseEventCount}, // only the published 0.32.0 is known to have them
		{"", BaseEventCount},
		{"unknown", BaseEventCount},
		{"2.1", BaseEventCount},
	}
	for _, tt := range tests {
		got := HookEvents(tt.version)
		if len(got) != tt.want {
			t.Errorf("HookEvents(%q) has %d events, want %d", tt.version, len(got), tt.want)
		}
	}
}

func TestEventSets(t *testing.T) {
	t.Parallel()
	// Kimi 2.1.0's HOOK_EVENT_TYPES (exactly 20), in its own order.
	want20 := []string{"PreToolUse", "PostToolUse", "PostToolUseFailure", "PermissionRequest",
		"PermissionResult", "UserPromptSubmit", "UserPromptQueued", "TurnStarted", "Stop",
		"StopFailure", "Interrupt", "SessionStart", "SessionEnd", "SessionHeartbeat",
		"SubagentStart", "SubagentStop", "TaskStarted", "PreCompact", "PostCompact", "Notification"}
	if got := AllHookEvents(); !slices.Equal(got, want20) {
		t.Errorf("AllHookEvents = %v", got)
	}
	// The 0.28.1 design record's sixteen, as a set.
	want16 := []string{"SessionStart", "SessionEnd", "UserPromptSubmit", "Stop", "StopFailure",
		"Interrupt", "PreToolUse", "PostToolUse", "PostToolUseFailure", "PermissionRequest",
		"PermissionResult", "SubagentStart", "SubagentStop", "PreCompact", "PostCompact", "Notification"}
	got16 := BaseHookEvents()
	if len(got16) != BaseEventCount {
		t.Fatalf("BaseHookEvents has %d", len(got16))
	}
	for _, e := range want16 {
		if !slices.Contains(got16, e) {
			t.Errorf("BaseHookEvents lacks %s", e)
		}
	}
	// Callers get copies.
	a := AllHookEvents()
	a[0] = "X"
	if AllHookEvents()[0] != mapping.HookPreToolUse {
		t.Error("AllHookEvents shares its backing array")
	}
	if !IsHookEvent(mapping.HookTaskStarted) || IsHookEvent("PostToolUseFoo") {
		t.Error("IsHookEvent")
	}
}

func TestExtendedEventsSinceMatchesThreshold(t *testing.T) {
	t.Parallel()
	v, err := ParseVersion(ExtendedEventsSince)
	if err != nil || v != extendedSince {
		t.Fatalf("ParseVersion(%q) = %v, %v; threshold is %v", ExtendedEventsSince, v, err, extendedSince)
	}
}

func TestVersionLess(t *testing.T) {
	t.Parallel()
	tests := []struct {
		a, b string
		less bool
	}{
		{"0.31.0", "0.32.0", true},
		{"0.32.0", "0.31.0", false},
		{"0.32.0", "0.32.0", false},
		{"0.32.0-rc.1", "0.32.0", true},
		{"0.32.0", "0.32.0-rc.1", false},
		{"0.32.0-a", "0.32.0-b", true},
		{"1.0.0", "0.99.99", false},
		{"0.9.0", "0.10.0", true},
	}
	for _, tt := range tests {
		a, err := ParseVersion(tt.a)
		if err != nil {
			t.Fatal(err)
		}
		b, err := ParseVersion(tt.b)
		if err != nil {
			t.Fatal(err)
		}
		if got := a.Less(b); got != tt.less {
			t.Errorf("%s < %s = %v, want %v", tt.a, tt.b, got, tt.less)
		}
	}
}

func TestParseVersion(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"2.1.0\n":                  "2.1.0",
		"kimi, version 0.31.0":     "0.31.0",
		"v0.32.0-beta.2 (abc)":     "0.32.0-beta.2",
		"Node v22.23.5 then 2.1.0": "22.23.5", // first match wins: callers pass kimi's stdout only
	} {
		v, err := ParseVersion(in)
		if err != nil || v.String() != want {
			t.Errorf("ParseVersion(%q) = %v, %v; want %s", in, v, err, want)
		}
	}
	for _, in := range []string{"", "2.1", "version unknown", "99999999999.0.0"} {
		if _, err := ParseVersion(in); err == nil {
			t.Errorf("ParseVersion(%q) succeeded", in)
		}
	}
}

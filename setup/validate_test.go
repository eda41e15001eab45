package setup

import (
	"strings"
	"testing"
)

func TestValidate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		content string
		events  []string
		wantErr string // substring; "" means valid
	}{
		{"no hooks", "a = 1\n", nil, ""},
		{"empty file", "", nil, ""},
		{"good", "[[hooks]]\nevent = \"Stop\"\ncommand = \"x\"\ntimeout = 10\n", nil, ""},
		{"matcher", "[[hooks]]\nevent = \"PreToolUse\"\nmatcher = \"^Bash$\"\ncommand = \"x\"\n", nil, ""},
		{"no timeout is fine", "[[hooks]]\nevent = \"Stop\"\ncommand = \"x\"\n", nil, ""},
		{"timeout 1", "[[hooks]]\nevent = \"Stop\"\ncommand = \"x\"\ntimeout = 1\n", nil, ""},
		{"timeout 600", "[[hooks]]\nevent = \"Stop\"\ncommand = \"x\"\ntimeout = 600\n", nil, ""},
		{"whole float", "[[hooks]]\nevent = \"Stop\"\ncommand = \"x\"\ntimeout = 30.0\n", nil, ""},
		{"inline array of tables", "hooks = [{event = \"Stop\", command = \"x\"}]\n", nil, ""},
		{"fail_mode", "[[hooks]]\nevent = \"Stop\"\ncommand = \"x\"\nfail_mode = \"open\"\n", nil, `hooks[0] (line 1): unknown key "fail_mode"`},
		{"camel key", "[[hooks]]\nevent = \"Stop\"\ncommand = \"x\"\nfailMode = \"open\"\n", nil, `unknown key "failMode"`},
		{"timeout 0", "[[hooks]]\nevent = \"Stop\"\ncommand = \"x\"\ntimeout = 0\n", nil, "timeout = 0 is outside 1..600"},
		{"timeout 601", "[[hooks]]\nevent = \"Stop\"\ncommand = \"x\"\ntimeout = 601\n", nil, "timeout = 601 is outside"},
		{"timeout 1.5", "[[hooks]]\nevent = \"Stop\"\ncommand = \"x\"\ntimeout = 1.5\n", nil, "timeout = 1.5 is not an integer"},
		{"timeout string", "[[hooks]]\nevent = \"Stop\"\ncommand = \"x\"\ntimeout = \"5\"\n", nil, "timeout is a string"},
		{"timeout nan", "[[hooks]]\nevent = \"Stop\"\ncommand = \"x\"\ntimeout = nan\n", nil, "not an integer"},
		{"timeout inf", "[[hooks]]\nevent = \"Stop\"\ncommand = \"x\"\ntimeout = inf\n", nil, "not an integer"},
		{"unknown event", "[[hooks]]\nevent = \"PostToolUseFoo\"\ncommand = \"x\"\n", nil, `event "PostToolUseFoo" is not one of the 20`},
		{"event for newer kimi", "[[hooks]]\nevent = \"TurnStarted\"\ncommand = \"x\"\n", BaseHookEvents(), `event "TurnStarted" is not one of the 16`},
		{"event not string", "[[hooks]]\nevent = 1\ncommand = \"x\"\n", nil, "event is an integer"},
		{"no event", "[[hooks]]\ncommand = \"x\"\n", nil, "no event"},
		{"empty command", "[[hooks]]\nevent = \"Stop\"\ncommand = \"\"\n", nil, "command is empty"},
		{"no command", "[[hooks]]\nevent = \"Stop\"\n", nil, "no command"},
		{"command array", "[[hooks]]\nevent = \"Stop\"\ncommand = [\"x\"]\n", nil, "command is an array"},
		{"matcher bool", "[[hooks]]\nevent = \"Stop\"\ncommand = \"x\"\nmatcher = true\n", nil, "matcher is a boolean"},
		{"subtable", "[[hooks]]\nevent = \"Stop\"\ncommand = \"x\"\n[hooks.extra]\na = 1\n", nil, `unknown key "extra"`},
		{"hooks string", "hooks = \"x\"\n", nil, "hooks is a string, not an array"},
		{"hooks table", "[hooks]\na = 1\n", nil, "hooks is a table"},
		{"array of scalars", "hooks = [1]\n", nil, "hooks[0]: is an integer, not a table"},
		{"second entry line", "[[hooks]]\nevent = \"Stop\"\ncommand = \"x\"\n\n[[hooks]]\nevent = \"Stop\"\ncommand = \"\"\n", nil, "hooks[1] (line 5): command is empty"},
		{"date", "[[hooks]]\nevent = 1979-05-27\ncommand = \"x\"\n", nil, "event is a date-time"},
		{"invalid toml", "[[hooks]\n", nil, "not valid TOML: line 1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			events := tt.events
			if events == nil {
				events = AllHookEvents()
			}
			err := Validate([]byte(tt.content), events)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tt.wantErr != "" && err == nil:
				t.Fatalf("accepted, want error containing %q", tt.wantErr)
			case tt.wantErr != "" && !strings.Contains(err.Error(), tt.wantErr):
				t.Fatalf("error %q does not contain %q", err, tt.wantErr)
			case err != nil && strings.Contains(err.Error(), "\n"):
				t.Fatalf("error is not one line: %q", err)
			}
		})
	}
}

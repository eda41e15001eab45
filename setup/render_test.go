package setup

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	toml "github.com/pelletier/go-toml/v2"

	"github.com/aep-kimi/aep-kimi/mapping"
)

func TestHookTimeout(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		control bool
		hold    int
		event   string
		want    int
	}{
		{"default", false, 0, mapping.HookPreToolUse, DefaultHookTimeout},
		{"control off ignores hold", false, 90000, mapping.HookPreToolUse, DefaultHookTimeout},
		{"control default hold", true, 0, mapping.HookPreToolUse, 60},
		{"control 50000", true, 50000, mapping.HookPreToolUse, 60},
		{"control other event", true, 50000, mapping.HookStop, DefaultHookTimeout},
		{"ceil 1 ms", true, 1, mapping.HookPreToolUse, 11},
		{"ceil 1000", true, 1000, mapping.HookPreToolUse, 11},
		{"ceil 1001", true, 1001, mapping.HookPreToolUse, 12},
		{"cap edge", true, 590000, mapping.HookPreToolUse, 600},
		{"cap", true, 590001, mapping.HookPreToolUse, 600},
		{"huge", true, 1 << 62, mapping.HookPreToolUse, 600},
	}
	for _, tt := range tests {
		cfg := Config{Control: tt.control, HoldMs: tt.hold}
		if got := cfg.HookTimeout(tt.event); got != tt.want {
			t.Errorf("%s: HookTimeout = %d, want %d", tt.name, got, tt.want)
		}
	}
}

func TestRenderRejectsBadConfig(t *testing.T) {
	t.Parallel()
	good := Config{HookCmd: "/x/kimi-hook", AEPHome: "/a"}
	tests := []struct {
		name string
		edit func(*Config)
	}{
		{"empty hook", func(c *Config) { c.HookCmd = "" }},
		{"relative hook", func(c *Config) { c.HookCmd = "bin/kimi-hook" }},
		{"relative aep home", func(c *Config) { c.AEPHome = "~/.aep" }},
		{"bad utf8", func(c *Config) { c.HookCmd = "/x/\xff/kimi-hook" }},
		{"nul", func(c *Config) { c.AEPHome = "/a\x00b" }},
		{"ftp daemon", func(c *Config) { c.DaemonURL = "ftp://h" }},
		{"hostless daemon", func(c *Config) { c.DaemonURL = "http://" }},
		{"daemon newline", func(c *Config) { c.DaemonURL = "http://h\n" }},
	}
	if _, err := Render(good); err != nil {
		t.Fatalf("good config: %v", err)
	}
	for _, tt := range tests {
		c := good
		tt.edit(&c)
		if _, err := Render(c); !errors.Is(err, ErrBadConfig) {
			t.Errorf("%s: err = %v, want ErrBadConfig", tt.name, err)
		}
	}
}

// TestRenderShape decodes a rendered block: one table per event, exactly
// event, command and timeout, the command's --timeout equal to the table's.
func TestRenderShape(t *testing.T) {
	t.Parallel()
	for _, cfg := range []Config{
		{HookCmd: "/x/kimi-hook", AEPHome: "/a", KimiVersion: "2.1.0"},
		{HookCmd: "/x/kimi-hook", AEPHome: "/a", KimiVersion: "0.31.0", Control: true},
		{HookCmd: "/x/kimi-hook", AEPHome: "/a"},
	} {
		block, err := Render(cfg)
		if err != nil {
			t.Fatal(err)
		}
		var doc struct {
			Hooks []map[string]any `toml:"hooks"`
		}
		if err := toml.Unmarshal(block, &doc); err != nil {
			t.Fatal(err)
		}
		var events []string
		for _, h := range doc.Hooks {
			keys := slices.Sorted(mapKeys(h))
			if !slices.Equal(keys, []string{"command", "event", "timeout"}) {
				t.Errorf("keys %v", keys)
			}
			ev := h["event"].(string)
			events = append(events, ev)
			want := int64(cfg.HookTimeout(ev))
			if h["timeout"] != want {
				t.Errorf("%s timeout %v, want %d", ev, h["timeout"], want)
			}
			words, err := shellWords(h["command"].(string))
			if err != nil || words[len(words)-2] != "--timeout" || words[len(words)-1] != strconv.FormatInt(want, 10) {
				t.Errorf("%s command %q does not end in --timeout %d", ev, h["command"], want)
			}
		}
		if !slices.Equal(events, cfg.Events()) {
			t.Errorf("events %v, want %v", events, cfg.Events())
		}
		if err := Validate(block, cfg.Events()); err != nil {
			t.Errorf("Validate(block): %v", err)
		}
	}
}

func mapKeys(m map[string]any) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// TestCommandRunsUnderSh renders a command for paths full of shell and TOML
// metacharacters, decodes it from TOML, and runs it with /bin/sh -c as Kimi
// does: the program must see exactly the intended argv.
func TestCommandRunsUnderSh(t *testing.T) {
	t.Parallel()
	sh, err := exec.LookPath("/bin/sh")
	if err != nil {
		t.Skip("no /bin/sh")
	}
	root := t.TempDir()
	dir := filepath.Join(root, `bin with space 'single' "double" $HOME `+"`tick` \\back\\ ; & | *?")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	hook := filepath.Join(dir, HookCmdName)
	// Prints each argument followed by a NUL.
	script := "#!/bin/sh\nfor a in \"$@\"; do printf '%s\\0' \"$a\"; done\n"
	if err := os.WriteFile(hook, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	aepHome := filepath.Join(root, "aep home\nwith newline and tab\t and 'quote'")
	cfg := Config{HookCmd: hook, AEPHome: aepHome, DaemonURL: "http://127.0.0.1:8398/x?a=1&b='2'", KimiVersion: "2.1.0"}
	block, err := Render(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Hooks []struct {
			Event, Command string
		} `toml:"hooks"`
	}
	if err := toml.Unmarshal(block, &doc); err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(context.Background(), sh, "-c", doc.Hooks[0].Command)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("sh -c %q: %v", doc.Hooks[0].Command, err)
	}
	got := strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00")
	want := []string{"--daemon", cfg.DaemonURL, "--home", aepHome, "--timeout", "10"}
	if !slices.Equal(got, want) {
		t.Errorf("argv = %q, want %q", got, want)
	}
	if !isOurCommand(doc.Hooks[0].Command) {
		t.Error("rendered command not recognised as ours")
	}
}

func TestShellQuote(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"/usr/local/bin/kimi-hook": "/usr/local/bin/kimi-hook",
		"http://127.0.0.1:8398":    "http://127.0.0.1:8398",
		"":                         "''",
		"a b":                      "'a b'",
		"it's":                     `'it'\''s'`,
		"$HOME":                    "'$HOME'",
		"~/x":                      "'~/x'",
		"a\nb":                     "'a\nb'",
	} {
		if got := shellQuote(in); got != want {
			t.Errorf("shellQuote(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestShellWords(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		want []string
		err  bool
	}{
		{"a b  c", []string{"a", "b", "c"}, false},
		{`'a b' "c d" e\ f`, []string{"a b", "c d", "e f"}, false},
		{`"a\"b\$c\x"`, []string{`a"b$c\x`}, false},
		{`'it'\''s'`, []string{"it's"}, false},
		{"a\\\nb", []string{"ab"}, false},
		{`''`, []string{""}, false},
		{"", nil, false},
		{`'open`, nil, true},
		{`"open`, nil, true},
		{`trailing\`, nil, true},
	}
	for _, tt := range tests {
		got, err := shellWords(tt.in)
		if (err != nil) != tt.err || !slices.Equal(got, tt.want) {
			t.Errorf("shellWords(%q) = %q, %v", tt.in, got, err)
		}
	}
}

func TestIsOurCommand(t *testing.T) {
	t.Parallel()
	for cmd, want := range map[string]bool{
		"/opt/aep/bin/kimi-hook --daemon x":      true,
		"kimi-hook":                              true,
		"'/opt/My Tools/kimi-hook' --timeout 10": true,
		`"/opt/a b/kimi-hook"`:                   true,
		"/opt/aep/bin/kimi-hook.js":              false,
		"logger kimi-hook":                       false,
		"/opt/kimi-hook/other":                   false,
		"'unterminated /kimi-hook":               false,
		"":                                       false,
		"setsid -w python3 capture-hook.py":      false,
		"/usr/bin/env kimi-hook --daemon http://x:1 --x ": false, // argv[0] is env
	} {
		if got := isOurCommand(cmd); got != want {
			t.Errorf("isOurCommand(%q) = %v, want %v", cmd, got, want)
		}
	}
}

func TestTOMLStringRoundTrip(t *testing.T) {
	t.Parallel()
	for _, s := range []string{"", "plain", `q"uote`, `back\slash`, "nl\n cr\r tab\t", "\x00\x01\x1f\x7f", "ünï 🚀", `'\''`} {
		var v struct{ S string }
		if err := toml.Unmarshal([]byte("S = "+tomlString(s)+"\n"), &v); err != nil || v.S != s {
			t.Errorf("tomlString(%q) decodes to %q, %v", s, v.S, err)
		}
	}
}

func TestMergeRejectsNonBlock(t *testing.T) {
	t.Parallel()
	block, err := Render(Config{HookCmd: "/x/kimi-hook", AEPHome: "/a"})
	if err != nil {
		t.Fatal(err)
	}
	for name, b := range map[string][]byte{
		"empty":  nil,
		"crlf":   bytes.ReplaceAll(block, []byte("\n"), []byte("\r\n")),
		"no end": bytes.TrimSuffix(block, []byte(fenceEndText+"\n")),
		"plain":  []byte("a = 1\n"),
		"lead":   append([]byte(fenceBeginLine(1)+"\n"), block[len(fenceBeginText)+1:]...),
	} {
		if _, err := Merge(nil, b); err == nil {
			t.Errorf("%s: Merge accepted a non-block", name)
		}
	}
}

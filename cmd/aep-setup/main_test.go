package main

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	toml "github.com/pelletier/go-toml/v2"

	"github.com/aep-kimi/aep-kimi/mapping"
	"github.com/aep-kimi/aep-kimi/setup"
)

// testEnv is a process surroundings with only the given variables and an
// executable path whose directory holds nothing.
func testEnv(t *testing.T, vars map[string]string) env {
	t.Helper()
	exeDir := t.TempDir()
	return env{
		getenv:     func(k string) string { return vars[k] },
		executable: func() (string, error) { return filepath.Join(exeDir, "aep-setup"), nil },
	}
}

type result struct {
	code           int
	stdout, stderr string
}

func runCLI(t *testing.T, e env, args ...string) result {
	t.Helper()
	var out, errOut bytes.Buffer
	code := run(context.Background(), args, e, &out, &errOut)
	return result{code, out.String(), errOut.String()}
}

func executable(t *testing.T, dir, name, body string) string {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestUsageErrors(t *testing.T) {
	e := testEnv(t, map[string]string{"HOME": t.TempDir()})
	tests := []struct {
		name string
		args []string
		want string // in the one stderr line
	}{
		{"no args", nil, "missing command"},
		{"unknown command", []string{"install", "kimi-code"}, `unknown command "install"`},
		{"missing agent", []string{"write"}, "missing agent name (supported: kimi-code)"},
		{"unknown agent", []string{"write", "claude-code"}, `unknown agent "claude-code" (supported: kimi-code)`},
		{"unknown agent remove", []string{"remove", "kimi"}, `unknown agent "kimi" (supported: kimi-code)`},
		{"unknown agent check", []string{"check", "x"}, `unknown agent "x"`},
		{"bad flag", []string{"write", "kimi-code", "--bogus"}, "flag provided but not defined: -bogus"},
		{"remove has no daemon", []string{"remove", "kimi-code", "--daemon", "x"}, "flag provided but not defined: -daemon"},
		{"extra arg", []string{"write", "kimi-code", "extra"}, `unexpected argument "extra"`},
		{"bad version", []string{"write", "kimi-code", "--kimi-version", "latest", "--hook-cmd", "/x/kimi-hook"}, `--kimi-version "latest" is not a version`},
		{"bad daemon", []string{"write", "kimi-code", "--kimi-version", "2.1.0", "--hook-cmd", "/x/kimi-hook", "--daemon", "ftp://h"}, `--daemon "ftp://h" is not an http(s)://host[:port] URL`},
		{"check dry run", []string{"check", "kimi-code", "--dry-run"}, "--dry-run does not apply"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := runCLI(t, e, tt.args...)
			if r.code != exitUsage {
				t.Errorf("exit %d, want %d (stderr %q)", r.code, exitUsage, r.stderr)
			}
			if strings.Count(r.stderr, "\n") != 1 || !strings.Contains(r.stderr, tt.want) {
				t.Errorf("stderr %q, want one line containing %q", r.stderr, tt.want)
			}
		})
	}
}

func TestHoldEnvMustBeANumber(t *testing.T) {
	e := testEnv(t, map[string]string{"HOME": t.TempDir(), "AEP_ATTENTION_TIMEOUT_MS": "50s"})
	r := runCLI(t, e, "write", "kimi-code", "--kimi-version", "2.1.0", "--hook-cmd", "/x/kimi-hook")
	if r.code != exitUsage || !strings.Contains(r.stderr, `AEP_ATTENTION_TIMEOUT_MS="50s"`) {
		t.Errorf("%+v", r)
	}
}

func TestHelp(t *testing.T) {
	e := testEnv(t, nil)
	for _, args := range [][]string{{"--help"}, {"-h"}, {"help"}} {
		r := runCLI(t, e, args...)
		if r.code != exitOK || r.stderr != "" {
			t.Errorf("%v: %+v", args, r)
		}
		for _, cmd := range []string{"write", "remove", "check"} {
			if !strings.Contains(r.stdout, "\n  "+cmd+" ") {
				t.Errorf("%v: the help does not list %s:\n%s", args, cmd, r.stdout)
			}
		}
	}
	for _, args := range [][]string{{"write", "-h"}, {"remove", "--help"}, {"check", "kimi-code", "--help"}} {
		r := runCLI(t, e, args...)
		if r.code != exitOK || r.stderr != "" || !strings.HasPrefix(r.stdout, "usage: aep-setup "+args[0]+" kimi-code") ||
			!strings.Contains(r.stdout, "-home string") {
			t.Errorf("%v: %+v", args, r)
		}
	}
}

func TestHookCmdNotFound(t *testing.T) {
	home := t.TempDir()
	e := testEnv(t, map[string]string{"HOME": home, "PATH": t.TempDir()})
	r := runCLI(t, e, "write", "kimi-code", "--kimi-version", "2.1.0")
	if r.code != exitFailed || !strings.Contains(r.stderr, "cannot find kimi-hook next to") || !strings.Contains(r.stderr, "pass --hook-cmd PATH") {
		t.Errorf("%+v", r)
	}
	if _, err := os.Stat(filepath.Join(home, ".kimi-code")); !errors.Is(err, os.ErrNotExist) {
		t.Error("a failed write created files")
	}
}

func TestHookCmdDefaults(t *testing.T) {
	// Next to the executable wins over PATH.
	exeDir := t.TempDir()
	next := executable(t, exeDir, "kimi-hook", "exit 0\n")
	pathDir := t.TempDir()
	onPath := executable(t, pathDir, "kimi-hook", "exit 0\n")
	e := env{
		getenv:     func(k string) string { return map[string]string{"PATH": pathDir}[k] },
		executable: func() (string, error) { return filepath.Join(exeDir, "aep-setup"), nil },
	}
	if got, err := hookCmd(options{}, e); err != nil || got != next {
		t.Errorf("hookCmd = %q, %v; want %q", got, err, next)
	}
	e.executable = func() (string, error) { return "", errors.New("no exe") }
	if got, err := hookCmd(options{}, e); err != nil || got != onPath {
		t.Errorf("hookCmd = %q, %v; want %q", got, err, onPath)
	}
	// A relative --hook-cmd is made absolute.
	got, err := hookCmd(options{hookCmd: "rel/kimi-hook"}, e)
	if err != nil || !filepath.IsAbs(got) || !strings.HasSuffix(got, "rel/kimi-hook") {
		t.Errorf("relative --hook-cmd: %q %v", got, err)
	}
}

// TestWriteCheckRemove is the user's round trip with defaults from the
// environment: KIMI_CODE_HOME, AEP_HOME, kimi-hook on PATH, kimi on PATH.
func TestWriteCheckRemove(t *testing.T) {
	root := t.TempDir()
	kimiHome := filepath.Join(root, "kimi home")
	bin := filepath.Join(root, "bin")
	hook := executable(t, bin, "kimi-hook", "exit 0\n")
	executable(t, bin, "kimi", "echo 2.1.0\n")
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte("{}"))
	}))
	defer srv.Close()
	e := testEnv(t, map[string]string{
		"HOME": root, "PATH": bin, "KIMI_CODE_HOME": kimiHome, "AEP_HOME": filepath.Join(root, "aep"),
	})
	cfgPath := filepath.Join(kimiHome, "config.toml")

	r := runCLI(t, e, "write", "kimi-code", "--daemon", srv.URL)
	if r.code != exitOK || !strings.Contains(r.stdout, "created "+cfgPath+" with 20 AEP hooks (Kimi 2.1.0)") {
		t.Fatalf("write: %+v", r)
	}
	hooks := decodeHooks(t, cfgPath)
	if len(hooks) != setup.ExtendedEventCount {
		t.Fatalf("%d hooks", len(hooks))
	}
	wantCmd := hook + " --daemon " + srv.URL + " --home " + filepath.Join(root, "aep") + " --timeout 10"
	if hooks[0].Command != wantCmd || hooks[0].Timeout != 10 {
		t.Errorf("hook 0 = %+v, want command %q", hooks[0], wantCmd)
	}

	r = runCLI(t, e, "write", "kimi-code", "--daemon", srv.URL)
	if r.code != exitOK || !strings.Contains(r.stdout, "nothing written") {
		t.Fatalf("rewrite: %+v", r)
	}
	r = runCLI(t, e, "check", "kimi-code", "--daemon", srv.URL)
	// Reachability itself is tested in setup with a generous timeout; the
	// CLI's 1 s probe could time out on a loaded machine.
	if r.code != exitOK || !strings.Contains(r.stdout, "block:      current") || !strings.Contains(r.stdout, "adapter:    "+srv.URL+"/healthz ") {
		t.Fatalf("check: %+v", r)
	}
	// Check against a different expectation fails with exit 1.
	r = runCLI(t, e, "check", "kimi-code", "--daemon", srv.URL, "--control")
	if r.code != exitFailed || !strings.Contains(r.stdout, "block:      stale") {
		t.Fatalf("check --control: %+v", r)
	}

	r = runCLI(t, e, "write", "kimi-code", "--daemon", srv.URL, "--dry-run", "--control")
	before, _ := os.ReadFile(cfgPath)
	if r.code != exitOK || !strings.Contains(r.stdout, "dry run: would update") || !strings.Contains(r.stdout, "timeout = 60") {
		t.Fatalf("dry run: %+v", r)
	}
	if after, _ := os.ReadFile(cfgPath); !bytes.Equal(before, after) {
		t.Fatal("dry run changed the file")
	}

	r = runCLI(t, e, "remove", "kimi-code")
	if r.code != exitOK || !strings.Contains(r.stdout, "removed 1 block(s)") || !strings.Contains(r.stdout, "backup ") {
		t.Fatalf("remove: %+v", r)
	}
	if b, _ := os.ReadFile(cfgPath); len(b) != 0 {
		t.Errorf("after remove: %q", b)
	}
	r = runCLI(t, e, "remove", "kimi-code")
	if r.code != exitOK || !strings.Contains(r.stdout, "nothing written") {
		t.Fatalf("second remove: %+v", r)
	}
	r = runCLI(t, e, "check", "kimi-code", "--daemon", srv.URL)
	if r.code != exitFailed || !strings.Contains(r.stdout, "block:      absent") {
		t.Fatalf("check after remove: %+v", r)
	}
}

func TestControlFromEnvAndHold(t *testing.T) {
	root := t.TempDir()
	hook := executable(t, filepath.Join(root, "bin"), "kimi-hook", "exit 0\n")
	e := testEnv(t, map[string]string{"HOME": root, "AEP_KIMI_CONTROL": "1", "AEP_ATTENTION_TIMEOUT_MS": "120500"})
	r := runCLI(t, e, "write", "kimi-code", "--kimi-version", "2.1.0", "--hook-cmd", hook)
	if r.code != exitOK {
		t.Fatalf("%+v", r)
	}
	hooks := decodeHooks(t, filepath.Join(root, ".kimi-code", "config.toml"))
	if hooks[0].Event != mapping.HookPreToolUse || hooks[0].Timeout != 131 || !strings.HasSuffix(hooks[0].Command, "--timeout 131") {
		t.Errorf("PreToolUse = %+v, want timeout 131", hooks[0])
	}
	if hooks[1].Timeout != setup.DefaultHookTimeout {
		t.Errorf("other hooks timeout %d", hooks[1].Timeout)
	}
	// --control=false overrides the environment.
	r = runCLI(t, e, "write", "kimi-code", "--kimi-version", "2.1.0", "--hook-cmd", hook, "--control=false")
	if r.code != exitOK || decodeHooks(t, filepath.Join(root, ".kimi-code", "config.toml"))[0].Timeout != 10 {
		t.Fatalf("--control=false: %+v", r)
	}
}

func TestUnknownKimiFallsBackTo16(t *testing.T) {
	root := t.TempDir()
	hook := executable(t, filepath.Join(root, "bin"), "kimi-hook", "exit 0\n")
	broken := executable(t, filepath.Join(root, "bin"), "kimi-broken", "exit 3\n")
	for name, args := range map[string][]string{
		"not on PATH": {"write", "kimi-code", "--hook-cmd", hook, "--home", filepath.Join(root, "a")},
		"fails":       {"write", "kimi-code", "--hook-cmd", hook, "--home", filepath.Join(root, "b"), "--kimi", broken},
	} {
		e := testEnv(t, map[string]string{"HOME": root, "PATH": t.TempDir()})
		r := runCLI(t, e, args...)
		if r.code != exitOK || !strings.Contains(r.stderr, "note:") || !strings.Contains(r.stderr, "safe 16 events") ||
			!strings.Contains(r.stdout, "16 AEP hooks (Kimi version unknown") {
			t.Errorf("%s: %+v", name, r)
		}
	}
	// An older Kimi gets 16 without a note.
	old := executable(t, filepath.Join(root, "bin"), "kimi-old", "echo 0.31.0\n")
	r := runCLI(t, testEnv(t, map[string]string{"HOME": root}), "write", "kimi-code", "--hook-cmd", hook, "--home", filepath.Join(root, "c"), "--kimi", old)
	if r.code != exitOK || r.stderr != "" || !strings.Contains(r.stdout, "16 AEP hooks (Kimi 0.31.0)") {
		t.Errorf("old kimi: %+v", r)
	}
}

func TestRefusalExitsOneAndKeepsFile(t *testing.T) {
	root := t.TempDir()
	hook := executable(t, filepath.Join(root, "bin"), "kimi-hook", "exit 0\n")
	home := filepath.Join(root, "k")
	if err := os.MkdirAll(home, 0o700); err != nil {
		t.Fatal(err)
	}
	orig := []byte("hooks = []\n")
	cfgPath := filepath.Join(home, "config.toml")
	if err := os.WriteFile(cfgPath, orig, 0o600); err != nil {
		t.Fatal(err)
	}
	r := runCLI(t, testEnv(t, map[string]string{"HOME": root}), "write", "kimi-code", "--home", home, "--hook-cmd", hook, "--kimi-version", "2.1.0")
	if r.code != exitFailed || strings.Count(r.stderr, "\n") != 1 || !strings.Contains(r.stderr, `"hooks = []" defines hooks as a static array`) {
		t.Fatalf("%+v", r)
	}
	if b, _ := os.ReadFile(cfgPath); !bytes.Equal(b, orig) {
		t.Error("refusal changed the file")
	}
	if ents, _ := os.ReadDir(home); len(ents) != 1 {
		t.Errorf("refusal left %d files", len(ents))
	}
}

type hookTable struct {
	Event   string `toml:"event"`
	Command string `toml:"command"`
	Timeout int    `toml:"timeout"`
}

func decodeHooks(t *testing.T, path string) []hookTable {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Hooks []hookTable `toml:"hooks"`
	}
	if err := toml.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	return doc.Hooks
}

// write says what the running adapter makes of the registration: how long
// it holds the next call when its gate is on, and, when it holds none, that
// --control needs a restart of the adapter (issue 36).
func TestWriteSaysWhatTheAdapterMakesOfIt(t *testing.T) {
	root := t.TempDir()
	bin := filepath.Join(root, "bin")
	executable(t, bin, "kimi-hook", "exit 0\n")
	executable(t, bin, "kimi", "echo 2.1.0\n")
	e := testEnv(t, map[string]string{
		"HOME": root, "PATH": bin, "KIMI_CODE_HOME": filepath.Join(root, "kimi"), "AEP_HOME": filepath.Join(root, "aep"),
	})
	adapter := func(body string) string {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte(body)) }))
		t.Cleanup(srv.Close)
		return srv.URL
	}
	off := adapter(`{"ok":true}`)
	if r := runCLI(t, e, "write", "kimi-code", "--daemon", off, "--control"); r.code != exitOK ||
		!strings.Contains(r.stderr, "the running adapter holds no tool call: restart it with --control (aep-kimi up --control)") {
		t.Fatalf("write --control, gate off: %+v", r)
	}
	on := adapter(`{"ok":true,"gate":{"hold_ms":50000,"effective_hold_ms":50000,"on_timeout":"deny","needs_kimi_timeout_s":52}}`)
	if r := runCLI(t, e, "write", "kimi-code", "--daemon", on, "--control"); r.code != exitOK ||
		!strings.Contains(r.stderr, "the running adapter holds the next tool call up to 50s, then deny (no restart needed)") {
		t.Fatalf("write --control, gate on: %+v", r)
	}
}

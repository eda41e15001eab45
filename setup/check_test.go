package setup

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aep-kimi/aep-kimi/internal/testkit/netaddr"
)

// writeScript creates an executable shell script.
func writeScript(t *testing.T, dir, name, body string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestDetectVersion(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	tests := []struct {
		name, body, want string
		wantErr          bool
	}{
		{"plain", "echo 2.1.0\n", "2.1.0", false},
		{"prefixed", "echo 'kimi, version 0.31.0'\n", "0.31.0", false},
		{"stderr noise ignored", "echo 'node 22.23.5 warning' >&2; echo 0.32.0\n", "0.32.0", false},
		{"garbage", "echo hello\n", "", true},
		{"exit 1", "echo broken >&2; exit 1\n", "", true},
	}
	for _, tt := range tests {
		bin := writeScript(t, dir, strings.ReplaceAll(tt.name, " ", "-"), tt.body)
		got, err := DetectVersion(context.Background(), bin)
		if (err != nil) != tt.wantErr || got != tt.want {
			t.Errorf("%s: DetectVersion = %q, %v", tt.name, got, err)
		}
	}
	if _, err := DetectVersion(context.Background(), filepath.Join(dir, "missing")); err == nil {
		t.Error("missing binary: no error")
	}
}

// TestCheckStates walks one file through absent, current, stale, unfenced
// and invalid, with a real adapter stand-in answering /healthz.
func TestCheckStates(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != HealthPath {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write([]byte(`{"ok":true}`))
	}))
	defer srv.Close()

	home := t.TempDir()
	hook := writeScript(t, t.TempDir(), HookCmdName, "exit 0\n")
	cfg := testConfig(home)
	cfg.HookCmd = hook
	cfg.DaemonURL = srv.URL
	cfg.HealthTimeout = 30 * time.Second // other tests may load the machine

	r := Check(ctx, cfg)
	if r.State != StateAbsent || r.OK() || !r.DaemonReachable || r.DaemonStatus != "200 OK" {
		t.Fatalf("missing file: %+v", r)
	}

	if err := os.WriteFile(cfg.ConfigPath(), []byte("a = 1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if r = Check(ctx, cfg); r.State != StateAbsent || r.OK() {
		t.Fatalf("no hooks: %+v", r)
	}

	if _, err := Write(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	r = Check(ctx, cfg)
	if r.State != StateCurrent || !r.OK() || !slices.Equal(r.Registered, AllHookEvents()) || !slices.Equal(r.HookPrograms, []string{hook}) {
		t.Fatalf("after write: %+v", r)
	}

	stale := cfg
	stale.Control = true
	r = Check(ctx, stale)
	if r.State != StateStale || r.OK() || !strings.Contains(r.StateDetail, "timeout PreToolUse 10 (want 60)") {
		t.Fatalf("stale: %+v", r)
	}
	older := cfg
	older.KimiVersion = "0.31.0"
	r = Check(ctx, older)
	if r.State != StateStale || !strings.Contains(r.StateDetail, "not for this Kimi SessionHeartbeat, TaskStarted, TurnStarted, UserPromptQueued") {
		t.Fatalf("older kimi: %+v", r)
	}
	// An empty HookCmd compares against the registered program.
	unknownHook := cfg
	unknownHook.HookCmd = ""
	if r = Check(ctx, unknownHook); r.State != StateCurrent {
		t.Fatalf("empty HookCmd: %+v", r)
	}

	// Strip the fence lines as a re-serializing editor would.
	content := readFile(t, cfg.ConfigPath())
	var kept [][]byte
	for _, line := range bytes.SplitAfter(content, []byte("\n")) {
		if !bytes.HasPrefix(line, []byte("# ")) {
			kept = append(kept, line)
		}
	}
	if err := os.WriteFile(cfg.ConfigPath(), bytes.Join(kept, nil), 0o600); err != nil {
		t.Fatal(err)
	}
	if r = Check(ctx, cfg); r.State != StateUnfenced || r.OK() || len(r.Registered) != ExtendedEventCount {
		t.Fatalf("unfenced: %+v", r)
	}
	res, err := Write(ctx, cfg)
	if err != nil || res.Before != StateUnfenced {
		t.Fatalf("re-fence: %+v %v", res, err)
	}
	if r = Check(ctx, cfg); r.State != StateCurrent {
		t.Fatalf("after re-fence: %+v", r)
	}

	// Missing hook program is a problem even when the block is current.
	if err := os.Remove(hook); err != nil {
		t.Fatal(err)
	}
	if r = Check(ctx, cfg); r.State != StateCurrent || r.OK() {
		t.Fatalf("missing program: %+v", r)
	}

	if err := os.WriteFile(cfg.ConfigPath(), []byte("[[hooks]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if r = Check(ctx, cfg); r.State != StateInvalid || r.OK() {
		t.Fatalf("invalid: %+v", r)
	}
	var out bytes.Buffer
	if err := r.WriteText(&out); err != nil || !strings.Contains(out.String(), "block:      invalid") {
		t.Errorf("WriteText: %q %v", out.String(), err)
	}
}

func TestCheckAdapterDownIsNotAProblem(t *testing.T) {
	t.Parallel()
	url := "http://" + netaddr.FreeAddr(t) // nothing listens there

	cfg := testConfig(t.TempDir())
	cfg.HookCmd = writeScript(t, t.TempDir(), HookCmdName, "exit 0\n")
	cfg.DaemonURL = url
	if _, err := Write(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
	r := Check(context.Background(), cfg)
	if r.DaemonReachable || r.DaemonStatus == "" || !r.OK() {
		t.Fatalf("adapter down: %+v", r)
	}
	var out bytes.Buffer
	if err := r.WriteText(&out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "/healthz unreachable") || !strings.Contains(out.String(), "problems:   none") {
		t.Errorf("report:\n%s", out.String())
	}
}

func TestCheckUnknownVersionNote(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t.TempDir())
	cfg.KimiVersion = ""
	cfg.DaemonURL = "http://127.0.0.1:1"
	r := Check(context.Background(), cfg)
	if len(r.Expected) != BaseEventCount || len(r.Notes) == 0 || r.KimiVersion != "" {
		t.Fatalf("%+v", r)
	}
}

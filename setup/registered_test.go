package setup

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/aep-kimi/aep-kimi/internal/testkit/netaddr"
	"github.com/aep-kimi/aep-kimi/mapping"
)

func TestRegisteredReadBack(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	if reg, err := Registered(home); err != nil || len(reg) != 0 {
		t.Fatalf("no file: %v %v", reg, err)
	}
	cfg := testConfig(home)
	cfg.Control = true
	if _, err := Write(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
	secs, ok, err := PreToolUseTimeout(home)
	if err != nil || !ok || secs != cfg.HookTimeout(mapping.HookPreToolUse) || secs != 60 {
		t.Fatalf("PreToolUse: %d %v %v", secs, ok, err)
	}
	reg, _ := Registered(home)
	if len(reg) != ExtendedEventCount || reg[mapping.HookStop].Timeout != DefaultHookTimeout {
		t.Fatalf("registered %v", reg)
	}
	// A table of ours without a timeout gets Kimi's default; someone
	// else's table is not ours.
	other := "[[hooks]]\nevent = \"PreToolUse\"\ncommand = \"/usr/bin/other-tool\"\ntimeout = 1\n\n" +
		"[[hooks]]\nevent = \"PreToolUse\"\ncommand = \"/opt/aep/bin/kimi-hook --timeout 60\"\n"
	if err := os.WriteFile(cfg.ConfigPath(), []byte(other), 0o600); err != nil {
		t.Fatal(err)
	}
	if secs, ok, err := PreToolUseTimeout(home); err != nil || !ok || secs != KimiDefaultHookTimeout {
		t.Fatalf("unfenced, no timeout: %d %v %v", secs, ok, err)
	}
	if err := os.WriteFile(cfg.ConfigPath(), []byte("[[hooks]]\nevent = \"PreToolUse\"\ncommand = \"/opt/aep/bin/kimi-hook\"\ntimeout = 0\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := PreToolUseTimeout(home); err == nil || !strings.Contains(err.Error(), "ignored by Kimi") {
		t.Fatalf("a hooks section Kimi drops: %v", err)
	}
}

// gateAdapter stands in for an adapter whose gate is on.
func gateAdapter(t *testing.T, body string) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(body))
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// With the adapter's gate on, a PreToolUse timeout shorter than its hold
// needs is a problem naming the fix; the --control registration is what
// check then expects, with or without --control on its own command line.
func TestCheckGateTimeoutMismatch(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	home := t.TempDir()
	cfg := testConfig(home)
	cfg.HookCmd = writeScript(t, t.TempDir(), HookCmdName, "exit 0\n")
	cfg.HealthTimeout = 30 * time.Second
	if _, err := Write(ctx, cfg); err != nil { // without --control: 10 s
		t.Fatal(err)
	}
	cfg.DaemonURL = gateAdapter(t, `{"ok":true,"gate":{"hold_ms":50000,"effective_hold_ms":8000,"on_timeout":"allow","kimi_timeout_s":10,"needs_kimi_timeout_s":52}}`)
	r := Check(ctx, cfg)
	if r.OK() {
		t.Fatalf("a 10 s PreToolUse timeout under a 50 s gate passed: %+v", r)
	}
	found := false
	for _, p := range r.Problems {
		if strings.Contains(p, "Kimi's PreToolUse timeout is 10s") && strings.Contains(p, "`aep-setup write kimi-code --control`") {
			found = true
		}
	}
	if !found {
		t.Fatalf("no gate-timeout problem with its fix: %q", r.Problems)
	}
	ctl := cfg
	ctl.Control = true
	if _, err := Write(ctx, ctl); err != nil {
		t.Fatal(err)
	}
	if r := Check(ctx, cfg); !r.OK() {
		t.Fatalf("after the fix: %q", r.Problems)
	}
	// A longer hold: the fix carries it.
	cfg.DaemonURL = gateAdapter(t, `{"ok":true,"gate":{"hold_ms":120000,"on_timeout":"deny","needs_kimi_timeout_s":122}}`)
	r = Check(ctx, cfg)
	if r.OK() || !strings.Contains(strings.Join(r.Problems, "\n"), "`AEP_ATTENTION_TIMEOUT_MS=120000 aep-setup write kimi-code --control`") {
		t.Fatalf("a 120 s hold: %q", r.Problems)
	}
	// No gate, or no adapter: the --control registration stands (the
	// hooks work either way, and a plain rewrite would undo control), and
	// the note says what holds calls.
	cfg.DaemonURL = gateAdapter(t, `{"ok":true}`)
	ctl.DaemonURL = cfg.DaemonURL
	if _, err := Write(ctx, ctl); err != nil {
		t.Fatal(err)
	}
	if r := Check(ctx, cfg); !r.OK() || r.State != StateCurrent || !strings.Contains(strings.Join(r.Notes, "\n"), "restart it with --control (aep-kimi up --control)") {
		t.Fatalf("gate off: %+v", r)
	}
	cfg.DaemonURL = "http://" + netaddr.FreeAddr(t) // nothing listens there
	ctl.DaemonURL = cfg.DaemonURL
	if _, err := Write(ctx, ctl); err != nil {
		t.Fatal(err)
	}
	if r := Check(ctx, cfg); !r.OK() || r.State != StateCurrent || !strings.Contains(strings.Join(r.Notes, "\n"), "the adapter is not running") {
		t.Fatalf("adapter stopped: %+v", r)
	}
	// A plain registration is still what check expects then.
	if _, err := Write(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	if r := Check(ctx, cfg); !r.OK() || r.State != StateCurrent {
		t.Fatalf("plain, adapter stopped: %+v", r)
	}
}

package station

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aep-kimi/aep-kimi/adapter"
	"github.com/aep-kimi/aep-kimi/setup"
)

// register writes aep-setup's block into a fresh Kimi home: with --control
// for hold when control is set.
func register(t *testing.T, control bool, holdMs int) string {
	t.Helper()
	home := t.TempDir()
	cfg := setup.Config{Home: home, HookCmd: "/opt/aep/bin/kimi-hook", AEPHome: "/home/op/.aep", KimiVersion: "2.1.0",
		Control: control, HoldMs: holdMs}
	if _, err := setup.Write(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
	return home
}

// handRegistered is a Kimi home whose PreToolUse runs kimi-hook with a
// hand-edited timeout (aep-setup never writes one this short).
func handRegistered(t *testing.T, secs int) string {
	t.Helper()
	home := t.TempDir()
	toml := fmt.Sprintf("[[hooks]]\nevent = \"PreToolUse\"\ncommand = \"/opt/aep/bin/kimi-hook --timeout %d\"\ntimeout = %d\n", secs, secs)
	if err := os.WriteFile(filepath.Join(home, "config.toml"), []byte(toml), 0o600); err != nil {
		t.Fatal(err)
	}
	return home
}

// The gate reads the PreToolUse timeout Kimi has registered: the hold is
// capped there, a timeout too short to hold anything refuses to start with
// the fix named, and an on-timeout choice it cannot apply is refused.
func TestGateOptionsReadRegistration(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	cases := []struct {
		name      string
		home      string
		onTimeout string
		hold      time.Duration
		wantKimi  time.Duration
		wantHold  time.Duration
		wantErr   string
	}{
		{"registered without --control: capped", register(t, false, 0), "allow", 50 * time.Second, 10 * time.Second, 8 * time.Second, ""},
		{"registered with --control: the hold", register(t, true, 0), "deny", 50 * time.Second, 60 * time.Second, 50 * time.Second, ""},
		{"not registered: per hook", t.TempDir(), "", 50 * time.Second, 0, 50 * time.Second, ""},
		{"a 2 s registration: refused", handRegistered(t, 2), "allow", 50 * time.Second, 0, 0, "is 2s, too short to hold a tool call for an answer: run `aep-setup write kimi-code --control`"},
		{"an unknown choice", t.TempDir(), "maybe", 50 * time.Second, 0, 0, `--on-timeout "maybe": want allow or deny`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := adapter.Config{Control: adapter.Control{HoldTimeout: c.hold}}
			err := Gate{Control: true, OnTimeout: c.onTimeout, KimiHome: c.home}.Apply(&cfg, log)
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("err %v, want %q", err, c.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if cfg.Control.KimiTimeout != c.wantKimi {
				t.Fatalf("Kimi timeout %s, want %s", cfg.Control.KimiTimeout, c.wantKimi)
			}
			if hold, _ := cfg.Control.Hold(); hold != c.wantHold || !cfg.Control.Gate || cfg.Control.OnTimeout != c.onTimeout {
				t.Fatalf("hold %s (want %s), control %+v", hold, c.wantHold, cfg.Control)
			}
		})
	}
}

// A registration changed under a running gate governs the next hold: the
// plain registration caps it at 8 s, `aep-setup write kimi-code --control`
// lifts the cap, and removing the hooks leaves each hook's declared wait.
func TestGateFollowsRegistration(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	home := register(t, false, 0)
	cfg := adapter.Config{Control: adapter.Control{HoldTimeout: 50 * time.Second}}
	if err := (Gate{Control: true, KimiHome: home}).Apply(&cfg, log); err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		name string
		do   func(setup.Config) error
		want time.Duration
	}{
		{"plain", func(setup.Config) error { return nil }, 8 * time.Second},
		{"--control", func(c setup.Config) error {
			c.Control = true
			_, err := setup.Write(context.Background(), c)
			return err
		}, 50 * time.Second},
		{"plain again", func(c setup.Config) error { _, err := setup.Write(context.Background(), c); return err }, 8 * time.Second},
		{"removed", func(c setup.Config) error { _, err := setup.Remove(context.Background(), c); return err }, 50 * time.Second},
	}
	for _, s := range steps {
		c := setup.Config{Home: home, HookCmd: "/opt/aep/bin/kimi-hook", AEPHome: "/home/op/.aep", KimiVersion: "2.1.0"}
		if err := s.do(c); err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		if hold, _ := cfg.Control.Hold(); hold != s.want {
			t.Fatalf("%s: the next hold is %s, want %s", s.name, hold, s.want)
		}
	}
}

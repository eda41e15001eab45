package setup

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aep-kimi/aep-kimi/internal/buildinfo"
)

// TestCheckWarnsOfAnotherHookBuild: when the running adapter reports its
// build on /healthz, check runs each kimi-hook Kimi would run (the
// registered one, and the one a write would register) with --version and
// warns, without failing, of any other build, or of one that cannot say;
// an adapter that reports no build runs no hook. A hook older than
// --version forwards what it reads: it is handed a home of check's own
// and a daemon it refuses, so nothing lands in the user's home.
func TestCheckWarnsOfAnotherHookBuild(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	adapterBuild := buildinfo.Info{Version: "0.5.0", Commit: "aaaabbbbccccddddeeeeffff0000111122223333", Date: "2026-05-01T10:00:00Z", Go: "go1.26.8", Platform: "linux/amd64"}
	var health []byte
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write(health) }))
	defer srv.Close()
	setHealth := func(b *buildinfo.Info) {
		var err error
		health, err = json.Marshal(map[string]any{"ok": true, "build": b})
		if err != nil {
			t.Fatal(err)
		}
	}

	bin := t.TempDir()
	argsFile := filepath.Join(t.TempDir(), "args")
	line := func(in buildinfo.Info) string { return in.Line(HookCmdName) }
	other := adapterBuild
	other.Version, other.Commit = "0.4.0", "0123456789abcdef"
	sameHook := writeScript(t, bin, "same", "echo '"+line(adapterBuild)+"'\n")
	otherHook := writeScript(t, bin, "other", "echo '"+line(other)+"'\n")
	// An old kimi-hook: records its arguments, prints nothing.
	oldHook := writeScript(t, bin, "old", `printf '%s\n' "$@" > '`+argsFile+`'`+"\n")

	cfg := testConfig(t.TempDir())
	cfg.DaemonURL = srv.URL
	cfg.HealthTimeout = 30 * time.Second
	check := func(registered, onPath string) Report {
		t.Helper()
		c := cfg
		c.HookCmd = registered
		if _, err := Write(ctx, c); err != nil {
			t.Fatal(err)
		}
		c.HookCmd = onPath
		return Check(ctx, c)
	}

	setHealth(&adapterBuild)
	if r := check(sameHook, sameHook); len(r.Warnings) != 0 || !r.OK() || r.AdapterBuild == nil || *r.AdapterBuild != adapterBuild {
		t.Errorf("same build: %+v", r)
	}
	r := check(sameHook, otherHook)
	// The registered hook is the adapter's build; the one on PATH is not
	// (and a write would register it: the block is stale too).
	if len(r.Warnings) != 1 || !strings.Contains(r.Warnings[0], otherHook+" is version 0.4.0 (commit 0123456789ab) but the running adapter is version 0.5.0 (commit aaaabbbbcccc)") {
		t.Errorf("another build on PATH: %+v", r)
	}
	var out bytes.Buffer
	if err := r.WriteText(&out); err != nil || !strings.Contains(out.String(), "\nwarning:    "+otherHook+" is version 0.4.0") ||
		!strings.Contains(out.String(), "reachable: 200 OK, version 0.5.0 (commit aaaabbbbcccc)") {
		t.Errorf("report:\n%s", out.String())
	}
	if r := check(otherHook, sameHook); len(r.Warnings) != 1 || !strings.Contains(r.Warnings[0], otherHook+" is version 0.4.0") {
		t.Errorf("another build registered: %+v", r)
	}

	r = check(oldHook, "")
	if len(r.Warnings) != 1 || r.AdapterBuild == nil || !strings.Contains(r.Warnings[0], "cannot tell which build "+oldHook+" is") || !r.OK() {
		t.Errorf("a hook older than --version: %+v", r)
	}
	got, err := os.ReadFile(argsFile)
	if err != nil {
		t.Fatal(err)
	}
	args := strings.Fields(string(got))
	if len(args) != 5 || args[0] != "--home" || !strings.Contains(args[1], "aep-setup-hook-version") || args[3] != "http://kimi-hook-version.invalid" || args[4] != "--version" {
		t.Errorf("an old hook was run with %q", args)
	}
	if _, err := os.Stat(args[1]); !os.IsNotExist(err) {
		t.Errorf("the scratch home %s was left behind: %v", args[1], err)
	}

	// An adapter that does not report its build: nothing to compare, no
	// hook is run.
	os.Remove(argsFile)
	setHealth(nil)
	if r := check(oldHook, otherHook); len(r.Warnings) != 0 || r.AdapterBuild != nil {
		t.Errorf("no adapter build: %+v", r)
	}
	if _, err := os.Stat(argsFile); !os.IsNotExist(err) {
		t.Errorf("a hook ran although the adapter reports no build")
	}
}

// TestCheckReportNeutralisesHostileBuilds: what check prints of other
// programs' output (a kimi-hook's --version line and stderr, the build the
// adapter's /healthz reports) and of paths reaches the terminal escaped: an
// ESC sequence, a bell, a bidi override or a newline in any of them is
// shown, never obeyed, and forges no line of the report.
func TestCheckReportNeutralisesHostileBuilds(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const hostile = "\x1b[2J\x07\u202e"
	adapterBuild := buildinfo.Info{Version: "0.5.0" + hostile + "\nforged:     all clear", Commit: "aaaabbbbccccddddeeeeffff0000111122223333", Date: "2026-05-01T10:00:00Z", Go: "go1.26.8", Platform: "linux/amd64"}
	health, err := json.Marshal(map[string]any{"ok": true, "build": adapterBuild})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write(health) }))
	defer srv.Close()

	// A directory whose name carries the sequences too: the hooks' paths.
	bin := filepath.Join(t.TempDir(), "bin"+hostile)
	if err := os.Mkdir(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	// printf's octal escapes: ESC [2J, BEL, U+202E in UTF-8.
	const shHostile = `\033[2J\007\342\200\256`
	otherHook := writeScript(t, bin, "other", `printf 'kimi-hook 0.4.0`+shHostile+` (commit 0123456789abcdef, built 2026-04-01T10:00:00Z, go1.26.8, linux/amd64)\n'`+"\n")
	failingHook := writeScript(t, bin, "failing", `printf 'boom`+shHostile+`\n' >&2; exit 3`+"\n")

	cfg := testConfig(t.TempDir())
	cfg.DaemonURL = srv.URL
	cfg.HealthTimeout = 30 * time.Second
	for _, hooks := range [][2]string{{otherHook, otherHook}, {failingHook, otherHook}} {
		c := cfg
		c.HookCmd = hooks[0]
		if _, err := Write(ctx, c); err != nil {
			t.Fatal(err)
		}
		c.HookCmd = hooks[1]
		r := Check(ctx, c)
		if len(r.Warnings) == 0 {
			t.Fatalf("no warning for %q: %+v", hooks, r)
		}
		var out bytes.Buffer
		if err := r.WriteText(&out); err != nil {
			t.Fatal(err)
		}
		text := out.String()
		if strings.ContainsAny(text, "\x1b\x07\u202e\r") {
			t.Errorf("a control character reached the report:\n%q", text)
		}
		if !strings.Contains(text, `\x1b[2J\x07\u202e`) {
			t.Errorf("the hostile sequences are not shown escaped:\n%q", text)
		}
		for _, l := range strings.Split(strings.TrimSuffix(text, "\n"), "\n") {
			label, _, ok := strings.Cut(l, ":")
			switch {
			case !ok:
				t.Errorf("a line without a label: %q", l)
			case !slices.Contains([]string{"config", "kimi", "expected", "registered", "block", "hook", "adapter", "note", "warning", "problem", "problems"}, label):
				t.Errorf("a forged line: %q", l)
			}
		}
	}
}

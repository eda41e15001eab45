package kimiharness

import (
	"encoding/json"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aep-kimi/aep-kimi/internal/testkit/fixtures"
	"github.com/aep-kimi/aep-kimi/internal/testkit/poll"
	"github.com/aep-kimi/aep-kimi/mapping"
)

var record = flag.Bool("record", false, "re-record the hook captures and the kimi web frames the adapter and bridgeweb tests replay")

// printTimeout bounds one print-mode scenario.
const printTimeout = 2 * time.Minute

// settle bounds the wait for fire-and-forget hooks (PostToolUse,
// SubagentStop, ...) to finish after kimi exits.
const settle = 10 * time.Second

// captured reads the captures in dir once none is still being written: Kimi
// does not wait for its fire-and-forget hooks, so some may still run after
// it exits (each started before it exited, and so has its file open).
func captured(t *testing.T, dir string) []Capture {
	t.Helper()
	poll.Must(t, settle, "the capture hooks still running", func() bool {
		n, err := InFlight(dir)
		return err == nil && n == 0
	})
	caps, err := ReadCaptures(dir)
	if err != nil {
		t.Fatal(err)
	}
	return caps
}

func events(caps []Capture) []string {
	out := make([]string, len(caps))
	for i, c := range caps {
		out[i] = c.Event
	}
	return out
}

// Require gives a kimi that runs and, unless $KIMI_BIN names another one,
// is the pinned version on a Node it supports.
func TestInstall(t *testing.T) {
	kimi := Require(t)
	out, err := exec.Command(kimi, "--version").CombinedOutput()
	if err != nil {
		t.Fatalf("%s --version: %v\n%s", kimi, err, out)
	}
	got := strings.TrimSpace(string(out))
	t.Logf("kimi %s at %s", got, kimi)
	if os.Getenv(EnvBin) != "" {
		return
	}
	if got != KimiVersion {
		t.Errorf("kimi --version says %q, want %s", got, KimiVersion)
	}
	if _, ok := nodePackage(); ok {
		node, err := exec.Command(Node(kimi), "--version").Output()
		if got := strings.TrimSpace(string(node)); err != nil || got != "v"+NodeVersion {
			t.Errorf("the installed Node reports %q (%v), want v%s", got, err, NodeVersion)
		}
	}
}

// The TUI runner drives an approval and /exit, and Kimi reports the session
// end with reason "exit".
func TestTUI(t *testing.T) {
	kimi := Require(t)
	caps := runTUI(t, kimi)
	var reason string
	for _, c := range caps {
		if c.Event == "SessionEnd" {
			var p struct {
				Reason string `json:"reason"`
			}
			json.Unmarshal([]byte(c.Raw), &p) //nolint:errcheck // checked through reason
			reason = p.Reason
		}
	}
	if reason != "exit" {
		t.Errorf("SessionEnd reason %q, want exit; hooks: %v", reason, events(caps))
	}
	if got := strings.Join(events(caps), ","); !strings.Contains(got, "PermissionRequest") || !strings.Contains(got, "PermissionResult") {
		t.Errorf("no approval round trip: %s", got)
	}
}

func runTUI(t *testing.T, kimi string) []Capture {
	t.Helper()
	dir, home := t.TempDir(), t.TempDir()
	mock := StartMock(t, ScenarioFile(t, "basic"))
	WriteConfig(t, home, mock.Port, CaptureHook(dir))
	RunTUI(t, kimi, home, t.TempDir(), "run the probe", "The command printed")
	return captured(t, dir)
}

// TestRecord re-records what the adapter and bridgeweb tests replay from
// their testdata: the hooks of each print-mode scenario, of the kimi web
// drive and of the TUI session, and every WebSocket frame of the kimi web
// drive (heartbeat included, so it takes over a minute). Run it with
// `go test ./internal/testkit/kimiharness/ -run TestRecord -record` and read the
// diff before committing it.
func TestRecord(t *testing.T) {
	if !*record {
		t.Skip("re-records testdata; run with -record")
	}
	kimi := Require(t)
	root, err := fixtures.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	captures := filepath.Join(root, "adapter", "testdata", "captures")
	if err := os.MkdirAll(captures, 0o755); err != nil {
		t.Fatal(err)
	}
	save := func(name string, caps []Capture) {
		t.Helper()
		if err := WriteCaptures(filepath.Join(captures, name+".hooks.jsonl"), caps); err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: %s", name, strings.Join(events(caps), " "))
	}
	for _, name := range []string{"basic", "tool-failure", "subagent", "background", "compact", "stop-failure"} {
		dir := t.TempDir()
		r := RunPrint(t, kimi, ScenarioFile(t, name), CaptureHook(dir), printTimeout)
		if r.Err != nil && name != "stop-failure" {
			t.Fatalf("%s: kimi -p: %v\n%s", name, r.Err, r.Output)
		}
		save(name, captured(t, dir))
	}
	save("tui", runTUI(t, kimi))

	dir, home := t.TempDir(), t.TempDir()
	mock := StartMock(t, ScenarioFile(t, "web"))
	WriteConfig(t, home, mock.Port, CaptureHook(dir))
	web := StartWeb(t, kimi, home, t.TempDir())
	drive := DriveWeb(t, web, func() bool {
		caps, err := ReadCaptures(dir)
		return err == nil && slices.ContainsFunc(caps, func(c Capture) bool { return c.Event == mapping.HookSessionHeartbeat })
	})
	web.Stop(t)
	save("web", captured(t, dir))
	frames := filepath.Join(root, "bridgeweb", "testdata", "kimi-web-frames.jsonl")
	if err := WriteFrames(frames, drive.Frames); err != nil {
		t.Fatal(err)
	}
	t.Logf("web: %d frames", len(drive.Frames))
}

// The login shell test kimis run with answers Kimi's start-up probe
// (`$SHELL -l -c /usr/bin/env`) with the environment it was given, so the
// probe neither runs the machine's login profile nor changes Kimi's PATH;
// and every test kimi gets it, with the compile cache directory made.
func TestLoginShellKeepsTheEnvironment(t *testing.T) {
	t.Setenv(EnvCache, t.TempDir())
	t.Setenv(EnvBin, "/bin/true") // Bin prepares the cache, then returns this
	if _, err := Bin(t.Context()); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(compileCacheDir()); err != nil || !fi.IsDir() {
		t.Fatalf("no compile cache directory: %v", err)
	}
	var shell string
	for _, kv := range kimiEnv(t.TempDir()) {
		if v, ok := strings.CutPrefix(kv, "SHELL="); ok {
			shell = v
		}
	}
	if shell != loginShellPath() {
		t.Fatalf("kimi's SHELL is %q, want %q", shell, loginShellPath())
	}
	cmd := exec.Command(shell, "-l", "-c", "/usr/bin/env")
	cmd.Env = []string{"PATH=/only/this:/usr/bin:/bin", "PROBE=1"}
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if !slices.Contains(lines, "PATH=/only/this:/usr/bin:/bin") || !slices.Contains(lines, "PROBE=1") {
		t.Fatalf("the login shell printed:\n%s", out)
	}
}

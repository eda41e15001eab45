package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aep-kimi/aep-kimi/internal/testkit/fixtures"
	"github.com/aep-kimi/aep-kimi/internal/testkit/kimiharness"
	"github.com/aep-kimi/aep-kimi/internal/testkit/netaddr"
	"github.com/aep-kimi/aep-kimi/internal/testkit/poll"
	"github.com/aep-kimi/aep-kimi/internal/testkit/proctest"
	"github.com/aep-kimi/aep-kimi/internal/testkit/syncbuf"
)

// readmeBlocks returns the README's ```sh blocks in order.
func readmeBlocks(t *testing.T) (string, []string) {
	t.Helper()
	root, err := fixtures.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	var blocks []string
	for _, m := range regexp.MustCompile("(?s)```sh\n(.*?)```").FindAllStringSubmatch(string(b), -1) {
		blocks = append(blocks, strings.TrimSpace(m[1]))
	}
	return root, blocks
}

// TestREADMEQuickstart follows the README literally, as a stranger would on a
// clean machine (a scratch HOME, so ~/.aep and ~/.kimi-code are fresh): the
// install-and-run command, `aep-setup write kimi-code`, one real Kimi
// print-mode session, and the events seen through `aep-kimi tail`. The test
// command is the one .ci/run runs.
func TestREADMEQuickstart(t *testing.T) {
	kimi := kimiharness.Require(t)
	root, blocks := readmeBlocks(t)
	if len(blocks) < 3 {
		t.Fatalf("README has %d sh blocks; want the install-and-run, test and next-steps blocks first", len(blocks))
	}
	install, testCmd, next := blocks[0], blocks[1], blocks[2]
	if !strings.Contains(install, "go install ./cmd/...") || !strings.Contains(install, "aep-kimi up") {
		t.Fatalf("first README block is not install-and-run: %q", install)
	}
	ci, err := os.ReadFile(filepath.Join(root, ".ci", "run"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(ci), "\n"+testCmd+"\n") {
		t.Fatalf(".ci/run does not run the README's test command %q", testCmd)
	}
	var steps []string
	for _, line := range strings.Split(next, "\n") {
		cmd := strings.TrimSpace(strings.SplitN(line, "#", 2)[0])
		if cmd != "" {
			steps = append(steps, cmd)
		}
	}
	if len(steps) != 2 || steps[0] != "aep-setup write kimi-code" || steps[1] != "aep-kimi tail" {
		t.Fatalf("README's next steps are %q, want aep-setup write kimi-code then aep-kimi tail", steps)
	}

	scratch := t.TempDir()
	home := filepath.Join(scratch, "home")
	gobin := filepath.Join(scratch, "bin")
	kimiDir := filepath.Join(scratch, "kimi-bin")
	for _, d := range []string{home, gobin, kimiDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// kimi on PATH, as an installed Kimi would be.
	if err := os.Symlink(kimi, filepath.Join(kimiDir, "kimi")); err != nil {
		t.Fatal(err)
	}
	rport, aport := netaddr.FreePort(t), netaddr.FreePort(t)
	gocache, _ := exec.Command("go", "env", "GOCACHE").Output()
	gomodcache, _ := exec.Command("go", "env", "GOMODCACHE").Output()
	env := []string{
		"HOME=" + home,
		"PATH=" + gobin + ":" + kimiDir + ":" + os.Getenv("PATH"),
		"GOBIN=" + gobin,
		"GOCACHE=" + strings.TrimSpace(string(gocache)),
		"GOMODCACHE=" + strings.TrimSpace(string(gomodcache)),
		"GOFLAGS=-buildvcs=false",
		// Free ports instead of the defaults, through the components' own
		// environment, so the test never fights a running aep-kimi.
		fmt.Sprintf("AEP_PORT=%d", rport),
		fmt.Sprintf("AEP_KIMI_ADDR=127.0.0.1:%d", aport),
		fmt.Sprintf("AEP_KIMI_WEB_ADDR=127.0.0.1:%d", netaddr.FreePort(t)),
		fmt.Sprintf("AEP_RELAY=http://127.0.0.1:%d", rport),
		"KIMI_DISABLE_TELEMETRY=1", "KIMI_CODE_NO_AUTO_UPDATE=1",
	}

	// 1. Install and run.
	up := exec.Command("bash", "-c", install)
	up.Dir = root
	up.Env = env
	upOut := &syncbuf.Buffer{}
	up.Stdout, up.Stderr = upOut, upOut
	kimiharness.OwnGroup(up)
	if err := up.Start(); err != nil {
		t.Fatal(err)
	}
	upDone := make(chan error, 1)
	go func() { upDone <- up.Wait() }()
	t.Cleanup(func() {
		kimiharness.SignalGroup(up.Process, syscall.SIGTERM)
		select {
		case <-upDone:
		case <-time.After(15 * time.Second):
			kimiharness.SignalGroup(up.Process, syscall.SIGKILL)
			t.Error("aep-kimi up did not stop on SIGTERM")
		}
	})
	waitHealthy(t, fmt.Sprintf("http://127.0.0.1:%d/healthz", aport), upDone, upOut)
	waitHealthy(t, fmt.Sprintf("http://127.0.0.1:%d/healthz", rport), upDone, upOut)
	if out := upOut.String(); !strings.Contains(out, "aep-setup write kimi-code") || !strings.Contains(out, "aep-kimi tail") {
		t.Errorf("up did not print the next two commands:\n%s", out)
	}

	// The user already has Kimi set up with a provider: here, the mock.
	mock := kimiharness.StartMock(t, writeScript(t, map[string]any{
		"responses": []any{
			map[string]any{"tool_calls": []any{map[string]any{"name": "Bash", "arguments": map[string]any{"command": "echo readme"}}}},
			map[string]any{"text": "It printed readme."},
		},
	}))
	kimiHome := filepath.Join(home, ".kimi-code")
	if err := os.MkdirAll(kimiHome, 0o700); err != nil {
		t.Fatal(err)
	}
	provider := fmt.Sprintf("default_model = \"mock\"\ntelemetry = false\n\n[providers.mock]\ntype = \"openai\"\nbase_url = \"http://127.0.0.1:%d/v1\"\napi_key = \"sk-mock\"\n\n[models.mock]\nprovider = \"mock\"\nmodel = \"mock-model\"\nmax_context_size = 131072\n", mock.Port)
	if err := os.WriteFile(filepath.Join(kimiHome, "config.toml"), []byte(provider), 0o600); err != nil {
		t.Fatal(err)
	}

	// 2. Register the hooks, exactly as printed.
	run := func(cmdline string) string {
		t.Helper()
		c := exec.Command("bash", "-c", cmdline)
		c.Dir = scratch
		c.Env = env
		out, err := c.CombinedOutput()
		if err != nil {
			t.Fatalf("%s: %v\n%s", cmdline, err, out)
		}
		return string(out)
	}
	run(steps[0])
	if out := run("kimi doctor"); !strings.Contains(out, "valid") {
		t.Fatalf("kimi doctor after aep-setup: %s", out)
	}

	// 3. One real Kimi print-mode session.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	work := filepath.Join(scratch, "work")
	os.MkdirAll(work, 0o755)
	kc := exec.CommandContext(ctx, "bash", "-c", `kimi -p "Run echo readme with Bash."`)
	kc.Dir, kc.Env = work, env
	if out, err := kc.CombinedOutput(); err != nil {
		t.Fatalf("kimi -p: %v\n%s", err, out)
	}

	// 4. The events, seen through aep-kimi tail.
	want := []string{"session.started", "run.started", "tool.requested", "tool.completed", "run.finished"}
	var seen string
	if !poll.Until(30*time.Second, func() bool {
		tctx, tcancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer tcancel()
		tc := exec.CommandContext(tctx, "bash", "-c", steps[1]+" --from all --once --no-color --state none")
		tc.Dir, tc.Env = scratch, env
		out, _ := tc.CombinedOutput()
		seen = string(out)
		return !slices.ContainsFunc(want, func(w string) bool { return !strings.Contains(seen, w) })
	}) {
		t.Fatalf("aep-kimi tail never showed %v:\n%s", want, seen)
	}
}

func waitHealthy(t *testing.T, url string, done <-chan error, logs *syncbuf.Buffer) {
	t.Helper()
	var exitErr error
	exited := false
	healthy := poll.Until(5*time.Minute, func() bool { // includes `go install`
		select {
		case exitErr = <-done:
			exited = true
			return true
		default:
		}
		return proctest.Answers(url)
	})
	if exited {
		t.Fatalf("the command under test exited (%v):\n%s", exitErr, logs.String())
	}
	if healthy {
		return
	}
	t.Fatalf("%s never became healthy:\n%s", url, logs.String())
}

package stacktest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aep-kimi/aep-kimi/internal/testkit/fixtures"
	"github.com/aep-kimi/aep-kimi/internal/testkit/kimiharness"
	"github.com/aep-kimi/aep-kimi/internal/testkit/netaddr"
	"github.com/aep-kimi/aep-kimi/internal/testkit/poll"
	"github.com/aep-kimi/aep-kimi/internal/testkit/proctest"
	"github.com/aep-kimi/aep-kimi/internal/testkit/syncbuf"
)

// Readme returns the repository root and the README's text.
func Readme(t *testing.T) (string, string) {
	t.Helper()
	root, err := fixtures.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	return root, string(b)
}

// UserEnv is a stranger's fresh machine: a scratch HOME (so ~/.aep,
// ~/.kimi-code and ~/.npm are fresh), kimi on PATH after dirs, and free
// ports for every component, set through their own environment, so the
// test never fights a running aep-kimi. It returns the environment, the
// home and the relay's and adapter's base URLs.
func UserEnv(t *testing.T, kimi, scratch string, dirs ...string) (env []string, home, relayURL, adapterURL string) {
	t.Helper()
	home = filepath.Join(scratch, "home")
	kimiDir := filepath.Join(scratch, "kimi-bin")
	for _, d := range []string{home, kimiDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// kimi on PATH, as an installed Kimi would be.
	if err := os.Symlink(kimi, filepath.Join(kimiDir, "kimi")); err != nil {
		t.Fatal(err)
	}
	rport, aport := netaddr.FreePort(t), netaddr.FreePort(t)
	env = []string{
		"HOME=" + home,
		"PATH=" + strings.Join(append(dirs, kimiDir, os.Getenv("PATH")), string(os.PathListSeparator)),
		fmt.Sprintf("AEP_PORT=%d", rport),
		fmt.Sprintf("AEP_KIMI_ADDR=127.0.0.1:%d", aport),
		fmt.Sprintf("AEP_KIMI_WEB_ADDR=127.0.0.1:%d", netaddr.FreePort(t)),
		fmt.Sprintf("AEP_RELAY=http://127.0.0.1:%d", rport),
		"KIMI_DISABLE_TELEMETRY=1", "KIMI_CODE_NO_AUTO_UPDATE=1",
	}
	return env, home, fmt.Sprintf("http://127.0.0.1:%d", rport), fmt.Sprintf("http://127.0.0.1:%d", aport)
}

// RunShell runs cmdline with bash in dir and env, failing the test when it
// fails, and returns its output.
func RunShell(t *testing.T, dir string, env []string, cmdline string) string {
	t.Helper()
	c := exec.Command("bash", "-c", cmdline)
	c.Dir = dir
	c.Env = env
	out, err := c.CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", cmdline, err, out)
	}
	return string(out)
}

// WithProvider sets Kimi up in home the way a stranger has it before
// installing aep-kimi: signed in to a model provider, here the mock, with
// one Bash call and an answer. It returns Kimi's home.
func WithProvider(t *testing.T, home string) string {
	t.Helper()
	mock := kimiharness.StartMock(t, WriteScript(t, map[string]any{
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
	return kimiHome
}

// FirstSession runs one real Kimi print-mode session on the machine
// UserEnv made, its hooks registered, and waits for its events through
// the tail command, in its plain words (session.started, run.started,
// tool.requested, tool.completed, run.finished).
func FirstSession(t *testing.T, scratch string, env []string, tail string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	work := filepath.Join(scratch, "work")
	os.MkdirAll(work, 0o755)
	kc := exec.CommandContext(ctx, "bash", "-c", `kimi -p "Run echo readme with Bash."`)
	kc.Dir, kc.Env = work, env
	if out, err := kc.CombinedOutput(); err != nil {
		t.Fatalf("kimi -p: %v\n%s", err, out)
	}

	want := []string{"session started", "turn started", "calls Bash", "ran Bash", "turn finished"}
	var seen string
	if !poll.Until(30*time.Second, func() bool {
		tctx, tcancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer tcancel()
		tc := exec.CommandContext(tctx, "bash", "-c", tail+" --from all --once --no-color --state none")
		tc.Dir, tc.Env = scratch, env
		out, _ := tc.CombinedOutput()
		seen = string(out)
		return !slices.ContainsFunc(want, func(w string) bool { return !strings.Contains(seen, w) })
	}) {
		t.Fatalf("%s never showed %v:\n%s", tail, want, seen)
	}
}

func WaitHealthy(t *testing.T, url string, done <-chan error, logs *syncbuf.Buffer) {
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

// Package kimiharness gives tests the real Kimi Code CLI through the shared
// harness (../shared/kimi-harness): it finds or installs the pinned kimi
// (Node 22 and @moonshot-ai/kimi-code from npm) and runs its scripted
// scenarios against the mock LLM provider.
package kimiharness

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aep-kimi/aep-kimi/internal/fixtures"
	"github.com/aep-kimi/aep-kimi/internal/safefile"
)

// Environment variables that steer the harness.
const (
	EnvDir   = "KIMI_HARNESS"   // the harness directory
	EnvBin   = "KIMI_BIN"       // a kimi wrapper to use as is
	EnvCache = "AEP_KIMI_CACHE" // where to install kimi when KIMI_BIN is unset
)

// Dir returns the harness directory.
func Dir() (string, error) {
	d := os.Getenv(EnvDir)
	if d == "" {
		root, err := fixtures.ModuleRoot()
		if err != nil {
			return "", err
		}
		d = filepath.Join(root, "..", "shared", "kimi-harness")
	}
	d, _ = filepath.Abs(d)
	if _, err := os.Stat(filepath.Join(d, "install-kimi.sh")); err != nil {
		return "", fmt.Errorf("no Kimi harness at %s (set %s): %w", d, EnvDir, err)
	}
	return d, nil
}

// CacheDir is where Bin installs kimi.
func CacheDir() string {
	if d := os.Getenv(EnvCache); d != "" {
		return d
	}
	base, err := os.UserCacheDir()
	if err != nil {
		base = os.TempDir()
	}
	return filepath.Join(base, "aep-kimi", "kimi-harness")
}

// Bin returns the path of a runnable kimi: $KIMI_BIN, or the cached install,
// installing it with the harness's install-kimi.sh (idempotent, under a file
// lock so parallel test packages install once).
func Bin(ctx context.Context) (string, error) {
	if b := os.Getenv(EnvBin); b != "" {
		return b, nil
	}
	dir, err := Dir()
	if err != nil {
		return "", err
	}
	cache := CacheDir()
	if err := os.MkdirAll(cache, 0o755); err != nil {
		return "", err
	}
	lock, err := os.OpenFile(filepath.Join(cache, ".install.lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return "", err
	}
	defer lock.Close()
	if err := safefile.Lock(lock); err != nil {
		return "", err
	}
	defer safefile.Unlock(lock) //nolint:errcheck // released on close
	bin := filepath.Join(cache, "bin", "kimi")
	if out, err := exec.CommandContext(ctx, bin, "--version").Output(); err == nil && len(bytes.TrimSpace(out)) > 0 {
		return bin, nil
	}
	cmd := exec.CommandContext(ctx, "bash", filepath.Join(dir, "install-kimi.sh"), cache)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("install-kimi.sh: %w\n%s", err, stderr.String())
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	return lines[len(lines)-1], nil
}

// Require returns a runnable kimi or stops the test: it skips under -short
// (every test that runs Kimi is end-to-end), fails under CI (the end-to-end
// suite must run there) and skips with the reason otherwise.
func Require(t testing.TB) string {
	t.Helper()
	if testing.Short() {
		t.Skip("end-to-end: runs the real Kimi CLI; skipped under -short")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	bin, err := Bin(ctx)
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("CI is set but the real Kimi CLI is unavailable: %v", err)
		}
		t.Skipf("skipping: real Kimi CLI unavailable: %v", err)
	}
	return bin
}

// Node returns the Node 22 that comes with a harness install of kimi.
func Node(kimiBin string) string {
	n := filepath.Join(filepath.Dir(kimiBin), "..", "node", "bin", "node")
	if _, err := os.Stat(n); err == nil {
		return n
	}
	return "node"
}

// Mock is a running scripted mock LLM provider.
type Mock struct {
	Port int
	// Log is the JSONL file of every request the provider served.
	Log  string
	proc *exec.Cmd
}

// StartMock runs the harness's mock provider on a free loopback port with a
// scenario script; it stops with the test.
func StartMock(t testing.TB, script string) *Mock {
	t.Helper()
	dir, err := Dir()
	if err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir()
	m := &Mock{Log: filepath.Join(tmp, "requests.jsonl")}
	portFile := filepath.Join(tmp, "port")
	m.proc = exec.Command("python3", filepath.Join(dir, "mock-provider.py"), "--script", script, "--log", m.Log, "--port-file", portFile)
	if err := m.proc.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.proc.Process.Kill(); m.proc.Wait() })
	deadline := time.Now().Add(10 * time.Second)
	for {
		if b, err := os.ReadFile(portFile); err == nil && len(bytes.TrimSpace(b)) > 0 {
			fmt.Sscanf(string(b), "%d", &m.Port)
			if m.Port > 0 {
				return m
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("mock provider did not start")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Requests returns the raw request bodies the mock served, in order.
func (m *Mock) Requests(t testing.TB) []string {
	t.Helper()
	b, err := os.ReadFile(m.Log)
	if err != nil {
		return nil
	}
	var out []string
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if l != "" {
			out = append(out, l)
		}
	}
	return out
}

// WriteConfig writes a KIMI_CODE_HOME config.toml that talks only to the mock
// and registers hookCmd for all 20 hook events (the harness's own config).
func WriteConfig(t testing.TB, home string, port int, hookCmd string) {
	t.Helper()
	dir, err := Dir()
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("bash", filepath.Join(dir, "write-config.sh"), fmt.Sprint(port), hookCmd).Output()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(home, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, "config.toml"), out, 0o600); err != nil {
		t.Fatal(err)
	}
}

// Env is the environment a test kimi runs with: its own home, no telemetry,
// no update checks.
func Env(home string) []string {
	return append(os.Environ(), "KIMI_CODE_HOME="+home, "KIMI_DISABLE_TELEMETRY=1", "KIMI_CODE_NO_AUTO_UPDATE=1")
}

// Print runs `kimi -p PROMPT [args...]` in workdir and returns its combined
// output; a non-zero exit is returned as an error.
func Print(ctx context.Context, kimi, home, workdir, prompt string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, kimi, append([]string{"-p", prompt}, args...)...)
	cmd.Dir = workdir
	cmd.Env = Env(home)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

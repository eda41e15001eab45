// Package kimiharness gives tests the real Kimi Code CLI, offline: it
// installs the pinned kimi-code (and the Node it needs) from the npm registry
// into a user cache once, serves a scripted mock of the model provider from
// inside the test process, writes the Kimi home that points at it, and runs
// Kimi in print mode, as the interactive TUI (under tmux) or as `kimi web`.
package kimiharness

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/pelletier/go-toml/v2"

	"github.com/aep-kimi/aep-kimi/internal/atomicfile"
	"github.com/aep-kimi/aep-kimi/mapping"
)

// Environment variables that steer the harness.
const (
	EnvBin   = "KIMI_BIN"       // a kimi to use as is, instead of the pinned install
	EnvCache = "AEP_KIMI_CACHE" // where the pinned install lives (default under the user cache)
)

// Patience bounds a test's wait on something the real Kimi does that a
// healthy run does in seconds (its start, a model call, a hook, a frame).
// It is generous on purpose: a start alone costs Kimi about 2.4 CPU-seconds
// (module initialisation of a 22 MB bundle), so on two cores at load 30 a
// start takes most of a minute, and a shorter wait then reports a broken
// product that is not. Only a hang waits it out.
const Patience = 3 * time.Minute

// installTimeout bounds a first install (two npm downloads) in Require.
const installTimeout = 10 * time.Minute

// hookTimeout is the timeout, in seconds, of every hook WriteConfig
// registers.
const hookTimeout = 10

// Require returns a runnable kimi or stops the test: it skips under -short
// (every test that runs Kimi is end-to-end), installs the pinned kimi on
// first use, and when that fails it fails under CI and skips otherwise.
func Require(t testing.TB) string {
	t.Helper()
	if testing.Short() {
		t.Skip("end-to-end: runs the real Kimi CLI; skipped under -short")
	}
	ctx, cancel := context.WithTimeout(context.Background(), installTimeout)
	defer cancel()
	bin, err := Bin(ctx)
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("CI is set but the real Kimi CLI is unavailable: %v", err)
		}
		t.Skipf("skipping: real Kimi CLI unavailable (needs npm to install %s@%s): %v", KimiPackage, KimiVersion, err)
	}
	return bin
}

// kimiConfig is the part of Kimi's config.toml the harness writes.
type kimiConfig struct {
	DefaultModel string                  `toml:"default_model"`
	Telemetry    bool                    `toml:"telemetry"`
	Providers    map[string]kimiProvider `toml:"providers"`
	Models       map[string]kimiModel    `toml:"models"`
	Hooks        []kimiHook              `toml:"hooks,omitempty"`
}

type kimiProvider struct {
	Type    string `toml:"type"`
	BaseURL string `toml:"base_url"`
	APIKey  string `toml:"api_key"`
}

type kimiModel struct {
	Provider       string `toml:"provider"`
	Model          string `toml:"model"`
	MaxContextSize int    `toml:"max_context_size"`
}

type kimiHook struct {
	Event   string `toml:"event"`
	Command string `toml:"command"`
	Timeout int    `toml:"timeout"`
}

// MockModel is the model alias the written config defines; a kimi web
// prompt names it.
const MockModel = "mock"

// contextWindow is the mock model's context size; a reported usage near it
// makes Kimi compact.
const contextWindow = 131072

// Config renders a config.toml whose only provider is the mock on port
// (OpenAI chat-completions protocol), telemetry off, and, when hookCmd is
// not empty, hookCmd registered for every hook event Kimi 2.1.0 has.
func Config(port int, hookCmd string) ([]byte, error) {
	c := kimiConfig{
		DefaultModel: MockModel,
		Providers: map[string]kimiProvider{MockModel: {Type: "openai",
			BaseURL: fmt.Sprintf("http://127.0.0.1:%d/v1", port), APIKey: "sk-mock"}},
		Models: map[string]kimiModel{MockModel: {Provider: MockModel, Model: "mock-model", MaxContextSize: contextWindow}},
	}
	if hookCmd != "" {
		for _, ev := range mapping.HooksKimi0_32() {
			c.Hooks = append(c.Hooks, kimiHook{Event: ev, Command: hookCmd, Timeout: hookTimeout})
		}
	}
	return toml.Marshal(c)
}

// WriteConfig writes home/config.toml (see Config) for the mock on port
// with hookCmd on every event.
func WriteConfig(t testing.TB, home string, port int, hookCmd string) {
	t.Helper()
	b, err := Config(port, hookCmd)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(home, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, "config.toml"), b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// WriteWebConfig writes home/config.toml for the mock on port with no hooks.
func WriteWebConfig(t testing.TB, home string, port int) {
	t.Helper()
	WriteConfig(t, home, port, "")
}

// Env is the environment a test kimi runs with: its own home, no telemetry,
// no update checks, and Node's compile cache beside the install.
func Env(home string) []string {
	return append(os.Environ(), kimiEnv(home)...)
}

// kimiEnv is what Env adds to the environment. The suite starts Kimi a
// few hundred times and Node compiles its bundle at every start; the
// compile cache keeps the bytecode between starts (about a fifth of a
// start's CPU), which changes nothing Kimi does. One already set wins.
func kimiEnv(home string) []string {
	env := []string{"KIMI_CODE_HOME=" + home, "KIMI_DISABLE_TELEMETRY=1", "KIMI_CODE_NO_AUTO_UPDATE=1",
		"SHELL=" + loginShellPath()}
	if os.Getenv(envNodeCompileCache) == "" {
		env = append(env, envNodeCompileCache+"="+compileCacheDir())
	}
	return env
}

// loginShell is the SHELL a test kimi runs with. At every start Kimi runs
// `$SHELL -l -c /usr/bin/env` to add the login shell's PATH to its own
// (its Bash tool runs /bin/bash whatever SHELL says); a login profile
// that does work (pyenv's init and rehash here: ~60 processes, a second of
// CPU) costs that much at each of the suite's Kimi starts. This one
// prints the environment it was given, so Kimi's PATH stays the test's.
const loginShell = "#!/bin/sh\n# The login shell of test kimis (aep-kimi kimiharness): the environment as given.\nexec /usr/bin/env\n"

// loginShellPath is where writeLoginShell puts loginShell.
func loginShellPath() string { return filepath.Join(CacheDir(), "login-shell") }

// writeLoginShell writes loginShell, once, where loginShellPath says.
func writeLoginShell() error {
	if b, err := os.ReadFile(loginShellPath()); err == nil && string(b) == loginShell {
		return nil
	}
	return atomicfile.Write(loginShellPath(), []byte(loginShell), atomicfile.Options{Perm: 0o755})
}

// compileCacheDir is the Node compile cache every test kimi shares, across
// tests and packages, beside the pinned install.
func compileCacheDir() string { return filepath.Join(CacheDir(), "node-compile-cache") }

// envNodeCompileCache is Node's (22.1 and later) directory for its
// on-disk compile cache.
const envNodeCompileCache = "NODE_COMPILE_CACHE"

// Print runs `kimi -p PROMPT [args...]` in workdir and returns its combined
// output; a non-zero exit is returned as an error.
func Print(ctx context.Context, kimi, home, workdir, prompt string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, kimi, append([]string{"-p", prompt}, args...)...)
	cmd.Dir = workdir
	cmd.Env = Env(home)
	started := time.Now()
	out, err := cmd.CombinedOutput()
	LogLaunch("print", home, started, cmd.ProcessState)
	return string(out), err
}

// PrintRun is one finished print-mode scenario.
type PrintRun struct {
	Home, Work string
	Mock       *Mock
	// Output is kimi's combined stdout and stderr.
	Output string
	// Err is kimi's exit error, nil on exit 0.
	Err error
}

// RunPrint runs one scenario in print mode: the mock serves the script at
// path, a fresh Kimi home registers hookCmd (if any) for every event, and
// `kimi -p` sends the script's prompt from a fresh working directory. It
// returns when kimi exits or timeout passes. It only calls t.Fatal before
// kimi starts.
func RunPrint(t testing.TB, kimi, path, hookCmd string, timeout time.Duration) PrintRun {
	t.Helper()
	s, err := ReadScript(path)
	if err != nil {
		t.Fatal(err)
	}
	if s.Prompt == "" {
		t.Fatalf("script %s has no prompt", path)
	}
	r := PrintRun{Home: t.TempDir(), Work: t.TempDir(), Mock: StartMock(t, path)}
	WriteConfig(t, r.Home, r.Mock.Port, hookCmd)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	r.Output, r.Err = Print(ctx, kimi, r.Home, r.Work, s.Prompt)
	return r
}

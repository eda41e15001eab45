package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aep-kimi/aep-kimi/internal/testkit/kimiharness"
	"github.com/aep-kimi/aep-kimi/internal/testkit/proctest"
	"github.com/aep-kimi/aep-kimi/setup"
)

// Integration with the real Kimi CLI, found like every end-to-end test finds
// it (kimiharness.Require: $KIMI_BIN, else the pinned install).

const doctorTimeout = 90 * time.Second

// providerConfig is the provider part of the config kimiharness.Config
// writes, pointing at port 9: kimi doctor only checks the config.
const providerConfig = `default_model = "mock"
telemetry = false

[providers.mock]
type = "openai"
base_url = "http://127.0.0.1:9/v1"
api_key = "sk-mock"

[models.mock]
provider = "mock"
model = "mock-model"
max_context_size = 131072
`

// kimiDoctor runs `kimi doctor` on home and returns its exit code and output.
func kimiDoctor(t *testing.T, bin, home string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), doctorTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "doctor")
	cmd.Env = kimiharness.Env(home)
	return proctest.Run(t, cmd)
}

func writeConfig(t *testing.T, home, content string) {
	t.Helper()
	if err := os.MkdirAll(home, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, "config.toml"), []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

func readConfigFile(t *testing.T, home string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(home, "config.toml"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestRealKimiAcceptsOurBlock writes provider configs plus our block with
// the real CLI path (version detected from the binary) and has kimi doctor
// judge them; a fail_mode key must make the same doctor fail.
func TestRealKimiAcceptsOurBlock(t *testing.T) {
	bin := kimiharness.Require(t)
	v, err := setup.DetectVersion(context.Background(), bin)
	if err != nil {
		t.Fatalf("DetectVersion(%s): %v", bin, err)
	}
	root := t.TempDir()
	plainHook := executable(t, filepath.Join(root, "bin"), "kimi-hook", "exit 0\n")
	oddHook := executable(t, filepath.Join(root, `odd dir 'q' "dq" $x`), "kimi-hook", "exit 0\n")
	e := testEnv(t, map[string]string{"HOME": root, "AEP_HOME": filepath.Join(root, "aep home")})

	cases := []struct {
		name     string
		existing string
		args     []string
	}{
		{"provider", providerConfig, []string{"--hook-cmd", plainHook}},
		{"provider no trailing newline, control", strings.TrimSuffix(providerConfig, "\n"), []string{"--hook-cmd", plainHook, "--control"}},
		{"crlf with user hooks, odd paths", strings.ReplaceAll(providerConfig+"\n[[hooks]]\nevent = \"Stop\"\nmatcher = \"\"\ncommand = \"true\"\ntimeout = 5\n", "\n", "\r\n"),
			[]string{"--hook-cmd", oddHook, "--daemon", "http://127.0.0.1:8398/a?b='c'"}},
		{"missing file", "", []string{"--hook-cmd", plainHook}},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			home := filepath.Join(root, "home"+string(rune('a'+i)))
			if c.existing != "" {
				writeConfig(t, home, c.existing)
			}
			args := append([]string{"write", "kimi-code", "--home", home, "--kimi", bin}, c.args...)
			r := runCLI(t, e, args...)
			wantEvents := len(setup.HookEvents(v))
			if r.code != exitOK || !strings.Contains(r.stdout, "Kimi "+v) || !strings.Contains(r.stdout, " "+strconv.Itoa(wantEvents)+" AEP hooks") {
				t.Fatalf("write: %+v", r)
			}
			code, out := kimiDoctor(t, bin, home)
			if code != 0 || !strings.Contains(out, "All checked config files are valid") {
				t.Fatalf("kimi doctor exit %d on our config:\n%s\n--- config.toml:\n%s", code, out, readConfigFile(t, home))
			}
			// The same config with one fail_mode key (the online docs' fifth
			// key) voids every hook: kimi doctor must fail, proving it judges.
			bad := readConfigFile(t, home) + "\n[[hooks]]\nevent = \"Stop\"\ncommand = \"true\"\nfail_mode = \"open\"\n"
			badHome := home + "-fail-mode"
			writeConfig(t, badHome, bad)
			code, out = kimiDoctor(t, bin, badHome)
			if code != 1 || !strings.Contains(out, "failMode") {
				t.Fatalf("kimi doctor exit %d with fail_mode (want 1 naming failMode):\n%s", code, out)
			}
			if err := setup.Validate([]byte(bad), setup.HookEvents(v)); err == nil {
				t.Error("Validate accepts what kimi doctor rejects")
			}
		})
	}
}

// TestValidateAgreesWithRealKimi runs hooks entries that Kimi 2.1.0 is known
// to accept or reject through both Validate and kimi doctor.
func TestValidateAgreesWithRealKimi(t *testing.T) {
	bin := kimiharness.Require(t)
	v, err := setup.DetectVersion(context.Background(), bin)
	if err != nil {
		t.Fatal(err)
	}
	entries := map[string]string{
		"good":          "event = \"Stop\"\ncommand = \"true\"\ntimeout = 10\n",
		"no timeout":    "event = \"Stop\"\ncommand = \"true\"\n",
		"whole float":   "event = \"Stop\"\ncommand = \"true\"\ntimeout = 30.0\n",
		"timeout 0":     "event = \"Stop\"\ncommand = \"true\"\ntimeout = 0\n",
		"timeout 601":   "event = \"Stop\"\ncommand = \"true\"\ntimeout = 601\n",
		"timeout 1.5":   "event = \"Stop\"\ncommand = \"true\"\ntimeout = 1.5\n",
		"timeout str":   "event = \"Stop\"\ncommand = \"true\"\ntimeout = \"5\"\n",
		"unknown event": "event = \"PostToolUseFoo\"\ncommand = \"true\"\n",
		"empty command": "event = \"Stop\"\ncommand = \"\"\n",
		"fail_mode":     "event = \"Stop\"\ncommand = \"true\"\nfail_mode = \"closed\"\n",
		"matcher":       "event = \"PreToolUse\"\nmatcher = \"^Bash$\"\ncommand = \"true\"\n",
	}
	root := t.TempDir()
	for name, entry := range entries {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			content := providerConfig + "\n[[hooks]]\n" + entry
			home := filepath.Join(root, strings.ReplaceAll(name, " ", "-"))
			writeConfig(t, home, content)
			code, out := kimiDoctor(t, bin, home)
			verr := setup.Validate([]byte(content), setup.HookEvents(v))
			if (code == 0) != (verr == nil) {
				t.Errorf("kimi doctor exit %d but Validate = %v\n%s", code, verr, out)
			}
		})
	}
}

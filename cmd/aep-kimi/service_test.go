package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aep-kimi/aep-kimi/internal/cli"
	"github.com/aep-kimi/aep-kimi/service"
)

// recordRunner answers every service manager call with success and
// records it.
type recordRunner struct{ calls []string }

func (r *recordRunner) Run(_ context.Context, name string, args ...string) (string, error) {
	r.calls = append(r.calls, strings.Join(append([]string{name}, args...), " "))
	return "", nil
}

// runService runs `aep-kimi service ARGS` on goos with a recording
// runner, in a home of the test's own.
func runService(t *testing.T, goos string, env map[string]string, args ...string) (code int, stdout, stderr string, r *recordRunner) {
	t.Helper()
	return runServiceExe(t, goos, "/opt/aep/bin/aep-kimi", env, args...)
}

func runServiceExe(t *testing.T, goos, exe string, env map[string]string, args ...string) (code int, stdout, stderr string, r *recordRunner) {
	t.Helper()
	r = &recordRunner{}
	getenv := func(k string) string { return env[k] }
	var out, errb bytes.Buffer
	std := stdio{in: strings.NewReader(""), out: &out, err: &errb}
	deps := serviceDeps{goos: goos, runner: r, exe: func() (string, error) { return exe, nil }}
	p := cli.Program{Name: prog, Commands: []cli.Command{serviceCommandWith(getenv, std, deps)}, Out: &out, Err: &errb}
	code = p.Main(context.Background(), append([]string{"service"}, args...))
	return code, out.String(), errb.String(), r
}

// TestServiceOnWindowsSaysWhatToUse: every mode is one clear line on
// Windows, and nothing runs.
func TestServiceOnWindowsSaysWhatToUse(t *testing.T) {
	env := map[string]string{"HOME": t.TempDir()}
	for _, mode := range []string{"install", "uninstall", "status", "print"} {
		code, out, errb, r := runService(t, "windows", env, mode)
		if code != 1 || out != "" || strings.Count(errb, "\n") != 1 || !strings.Contains(errb, "not supported on windows; use Task Scheduler") || len(r.calls) != 0 {
			t.Errorf("%s: exit %d stdout %q stderr %q calls %q", mode, code, out, errb, r.calls)
		}
	}
}

// TestServiceInstallChecksUpFlags: up's own flags check what goes in the
// unit, and a secret never gets there: each refusal exits 2 with one line
// that does not quote the secret, and writes and runs nothing.
func TestServiceInstallChecksUpFlags(t *testing.T) {
	home := t.TempDir()
	env := map[string]string{"HOME": home}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--bogus"}, "flag provided but not defined: -bogus"},
		{[]string{"--store", "memory", "extra"}, `unexpected argument "extra"`},
		{[]string{"--notify", "slack:https://hooks.slack.com/services/T0/B0/s3cr3t"}, "give slack:@FILE"},
		{[]string{"--otlp", "http://127.0.0.1:4318", "--otlp-header", "Authorization=Bearer s3cr3t"}, "Authorization=@FILE"},
		{[]string{"--home", "rel/aep"}, "is relative"},
	} {
		code, out, errb, r := runService(t, "linux", env, append([]string{"install", "--"}, c.args...)...)
		if code != 2 || out != "" || strings.Count(errb, "\n") != 1 || !strings.Contains(errb, c.want) || strings.Contains(errb, "s3cr3t") || len(r.calls) != 0 {
			t.Errorf("%q: exit %d stdout %q stderr %q calls %q", c.args, code, out, errb, r.calls)
		}
	}
	// npx's cache may be cleared under a service that runs from it.
	code, out, errb, r := runServiceExe(t, "linux", filepath.Join(home, ".npm", "_npx", "4f1e", "node_modules", "@aep-kimi", "linux-x64", "bin", "aep-kimi"), env, "install")
	if code != 2 || out != "" || !strings.Contains(errb, "runs from npx's cache") || len(r.calls) != 0 {
		t.Errorf("install from npx: exit %d stdout %q stderr %q", code, out, errb)
	}
	if entries, _ := os.ReadDir(home); len(entries) != 0 {
		t.Errorf("a refused install wrote %v", entries)
	}
}

// TestServicePrintIsWhatInstallWrites: print shows the very file install
// then writes, carrying where the homes are from the shell and no token;
// install says which of up's variables the service will not see.
func TestServicePrintIsWhatInstallWrites(t *testing.T) {
	home := t.TempDir()
	env := map[string]string{"HOME": home, "AEP_HOME": filepath.Join(home, "aep"), "AEP_TOKEN": "s3cr3t-token", "AEP_PORT": "9000"}
	args := []string{"--", "--control", "--notify", "ntfy:@" + filepath.Join(home, "ntfy-url")}
	code, printed, errb, r := runService(t, "linux", env, append([]string{"print"}, args...)...)
	if code != 0 || errb != "" || len(r.calls) != 0 {
		t.Fatalf("print: exit %d stderr %q calls %q", code, errb, r.calls)
	}
	if !strings.Contains(printed, "ExecStart=/opt/aep/bin/aep-kimi up --control --notify ntfy:@"+filepath.Join(home, "ntfy-url")+"\n") ||
		!strings.Contains(printed, "Environment=AEP_HOME="+filepath.Join(home, "aep")+"\n") || strings.Contains(printed, "s3cr3t") || strings.Contains(printed, "AEP_PORT") {
		t.Errorf("print:\n%s", printed)
	}
	code, out, errb, r := runService(t, "linux", env, append([]string{"install"}, args...)...)
	if code != 0 || errb != "" || len(r.calls) == 0 {
		t.Fatalf("install: exit %d stdout %q stderr %q calls %q", code, out, errb, r.calls)
	}
	if !strings.Contains(out, "does not see AEP_TOKEN, AEP_PORT from this shell") || strings.Contains(out, "s3cr3t") {
		t.Errorf("install said:\n%s", out)
	}
	written, err := os.ReadFile(service.Host{Home: home}.Path(service.Systemd))
	if err != nil || string(written) != printed {
		t.Errorf("install wrote (%v):\n%s\nprint showed:\n%s", err, written, printed)
	}
	code, launchd, _, _ := runService(t, "linux", env, append([]string{"print", "--for", "launchd"}, args...)...)
	if code != 0 || !strings.Contains(launchd, "<string>"+filepath.Join(home, "Library", "Logs", "aep-kimi.log")+"</string>") {
		t.Errorf("print --for launchd: exit %d\n%s", code, launchd)
	}
}

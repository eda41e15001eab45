// Version stamping: the binaries built with the release flags report
// the version, commit and date they were given.

package e2e

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/aep-kimi/aep-kimi/internal/buildinfo"
	"github.com/aep-kimi/aep-kimi/internal/testkit/fixtures"
	"github.com/aep-kimi/aep-kimi/internal/testkit/netaddr"
	"github.com/aep-kimi/aep-kimi/internal/testkit/proctest"
	"github.com/aep-kimi/aep-kimi/internal/testkit/stacktest"
)

// TestE2EVersionStamped builds the three binaries with the -X flags the
// buildinfo package documents and checks each prints what they set (and
// that aep-setup check compares kimi-hook's with the running adapter's):
// --version on one line, `aep-kimi version` one field a line and as JSON
// (without -trimpath, which would rebuild every dependency: it changes
// nothing the stamp reads).
// kimi-hook answers --version without reading its stdin (a pipe nobody
// closes), so asking it never waits like a hook does.
func TestE2EVersionStamped(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("end-to-end: builds the binaries; skipped under -short")
	}
	root, err := fixtures.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	const commit = "0123456789abcdef0123456789abcdef01234567"
	ldflags := "-X " + stacktest.StampPkg + ".version=v0.4.0-test -X " + stacktest.StampPkg + ".commit=" + commit +
		" -X " + stacktest.StampPkg + ".date=2026-05-01T10:00:00Z"
	dir := t.TempDir() + string(filepath.Separator)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := proctest.GoBuild(ctx, root, dir, "-ldflags", ldflags, "./cmd/aep-kimi", "./cmd/kimi-hook", "./cmd/aep-setup"); err != nil {
		t.Fatal(err)
	}
	platform := runtime.GOOS + "/" + runtime.GOARCH
	want := buildinfo.Info{Version: "0.4.0-test", Commit: commit, Date: "2026-05-01T10:00:00Z", Go: runtime.Version(), Platform: platform}
	for _, prog := range []string{"aep-kimi", "kimi-hook", "aep-setup"} {
		// A kimi-hook that read its stdin would wait here until killed.
		runCtx, stop := context.WithTimeout(ctx, 30*time.Second)
		defer stop()
		cmd := exec.CommandContext(runCtx, filepath.Join(dir, prog), "--version")
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close()
		cmd.Stdin = r
		code, out := proctest.Run(t, cmd)
		r.Close()
		wantLine := prog + " 0.4.0-test (commit 0123456789ab, built 2026-05-01T10:00:00Z, " + runtime.Version() + ", " + platform + ")\n"
		if code != 0 || out != wantLine {
			t.Errorf("%s --version: exit %d, printed %q; want 0 and %q", prog, code, out, wantLine)
		}
	}
	code, out := proctest.Run(t, exec.CommandContext(ctx, filepath.Join(dir, "aep-kimi"), "version"))
	if code != 0 || out != want.Text() {
		t.Errorf("aep-kimi version: exit %d, printed:\n%s\nwant:\n%s", code, out, want.Text())
	}
	code, out = proctest.Run(t, exec.CommandContext(ctx, filepath.Join(dir, "aep-kimi"), "version", "--json"))
	var got buildinfo.Info
	if err := json.Unmarshal([]byte(out), &got); code != 0 || err != nil || got != want {
		t.Errorf("aep-kimi version --json: exit %d, %v, printed %q; want %+v", code, err, out, want)
	}
	if strings.Count(out, "\n") != 1 {
		t.Errorf("aep-kimi version --json printed more than one line: %q", out)
	}

	// The adapter reports its build on /healthz, and aep-setup check
	// compares the registered kimi-hook with it: the same build is quiet,
	// a kimi-hook replaced by another build (upgraded, the adapter not
	// restarted) is a warning, not a failure.
	home := t.TempDir()
	env := stacktest.CleanEnv(home, "HOME="+home)
	addr := netaddr.FreeAddr(t)
	base := "http://" + addr
	adapter := exec.Command(filepath.Join(dir, "aep-kimi"), "adapter", "--listen", addr, "--relay", "none")
	adapter.Env = env
	stacktest.StartProc(t, base, adapter, "adapter")
	hook := filepath.Join(dir, "kimi-hook")
	setup := func(args ...string) (int, string) {
		cmd := exec.CommandContext(ctx, filepath.Join(dir, "aep-setup"), append(args, "kimi-code", "--daemon", base, "--kimi-version", "2.1.0", "--hook-cmd", hook)...)
		cmd.Env = env
		return proctest.Run(t, cmd)
	}
	if code, out := setup("write"); code != 0 {
		t.Fatalf("aep-setup write: exit %d\n%s", code, out)
	}
	code, out = setup("check")
	if code != 0 || strings.Contains(out, "warning:") || !strings.Contains(out, "reachable: 200 OK, version 0.4.0-test (commit 0123456789ab)") {
		t.Errorf("check with the adapter's own kimi-hook: exit %d\n%s", code, out)
	}
	older := filepath.Join(t.TempDir(), "kimi-hook")
	if err := proctest.GoBuild(ctx, root, older, "-ldflags", "-X "+stacktest.StampPkg+".version=0.3.9-test -X "+stacktest.StampPkg+".commit=fedcba9876543210", "./cmd/kimi-hook"); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(older, hook); err != nil {
		t.Fatal(err)
	}
	code, out = setup("check")
	if code != 0 || !strings.Contains(out, "warning:    "+hook+" is version 0.3.9-test (commit fedcba987654) but the running adapter is version 0.4.0-test (commit 0123456789ab)") {
		t.Errorf("check with another build of kimi-hook: exit %d\n%s", code, out)
	}
}

// The npm packages release/npm.sh builds, installed and run as a user
// would: only the real install shows what ships.

package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aep-kimi/aep-kimi/internal/testkit/kimiharness"
	"github.com/aep-kimi/aep-kimi/internal/testkit/npmtest"
	"github.com/aep-kimi/aep-kimi/internal/testkit/proctest"
	"github.com/aep-kimi/aep-kimi/internal/testkit/stacktest"
)

// TestE2ENPMInstall installs the npm tarballs release/npm.sh made into an
// empty prefix with the real npm, offline and with no registry to fall
// back on, then runs what it installed: `aep-kimi up` until /healthz
// answers and the fleet page loads and logs in, `aep-setup write
// kimi-code` registering the installed native kimi-hook, and a real Kimi
// session whose events reach the relay through it. The launchers pass
// argv, stdin, output, exit codes and SIGTERM through both ways they run
// the binary: replacing Node's process (Node 22.15 and later) and as a
// child (older Node, Windows; here Node without process.execve).
func TestE2ENPMInstall(t *testing.T) {
	t.Parallel()
	kimi := kimiharness.Require(t)
	set := stacktest.NpmPackages(t)
	plat, _ := npmtest.Platform()
	stacktest.CheckManifests(t, set, plat)

	scratch := t.TempDir()
	prefix := filepath.Join(scratch, "prefix")
	node := kimiharness.Node(kimi)
	env, home, relayURL, adapterURL := stacktest.UserEnv(t, kimi, scratch, filepath.Join(prefix, "bin"), filepath.Dir(node))
	env = append(env, npmtest.Env(prefix)...)
	// Offline, with no registry to fall back on: nothing listens on the
	// discard port.
	env = append(env, "npm_config_registry=http://127.0.0.1:9/")
	install := exec.Command("npm", "install", "-g", "--offline", set.Main.File, set.Host.File)
	install.Dir, install.Env = scratch, env
	start := time.Now()
	if out, err := install.CombinedOutput(); err != nil {
		t.Fatalf("npm install -g --offline: %v\n%s", err, out)
	}
	t.Logf("npm install -g --offline %s took %s", set.Version, time.Since(start).Round(time.Millisecond))
	native := stacktest.NativeDir(t, prefix)
	launcher := func(name string) string { return filepath.Join(prefix, "bin", name) }

	// Without process.execve, as on older Node: the launcher runs the
	// binary as its child.
	noExecve := filepath.Join(scratch, "no-execve.js")
	if err := os.WriteFile(noExecve, []byte("process.execve = undefined;\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	modes := map[string][]string{
		"exec":  env,
		"spawn": append(slices.Clone(env), "NODE_OPTIONS=--require="+noExecve),
	}

	// argv, stdin, stdout and stderr, and the exit code, as the binary's.
	for name, menv := range modes {
		for _, c := range []struct {
			args  []string
			stdin string
			code  int
		}{
			{[]string{"validate", "-"}, "{}\n", 1},
			{[]string{"no-such-command"}, "", 2},
		} {
			run := func(bin string) (int, string) {
				cmd := exec.Command(bin, c.args...)
				cmd.Env, cmd.Stdin = menv, strings.NewReader(c.stdin)
				return proctest.Run(t, cmd)
			}
			code, out := run(launcher("aep-kimi"))
			ncode, nout := run(filepath.Join(native, stacktest.ExeName("aep-kimi")))
			if code != c.code || code != ncode || out != nout {
				t.Errorf("%s: aep-kimi %q through the launcher: exit %d, %q; the binary: exit %d, %q (want exit %d)", name, c.args, code, out, ncode, nout, c.code)
			}
		}
	}

	// Each binary says the version npm.sh stamped: the package's.
	for _, c := range []string{"aep-kimi", "kimi-hook", "aep-setup"} {
		cmd := exec.Command(launcher(c), "--version")
		cmd.Env = env
		if code, out := proctest.Run(t, cmd); code != 0 || !strings.HasPrefix(out, c+" "+set.Version+" (commit ") {
			t.Errorf("%s --version: exit %d, %q; want %s %s (commit ...", c, code, out, c, set.Version)
		}
	}

	// up through the launcher, as Node 22 runs it: the binary takes over
	// the launcher's process.
	up := proctest.Start(t, "aep-kimi up (npm)", stacktest.NpmUpCommand(launcher("aep-kimi"), scratch, env))
	stacktest.AwaitUp(t, up, relayURL, adapterURL)
	if exe := stacktest.ProcExe(up.Cmd.Process.Pid); exe != "" {
		if want, _ := filepath.EvalSymlinks(filepath.Join(native, "aep-kimi")); exe != want {
			t.Errorf("up's process runs %s, want the native %s in place of Node", exe, want)
		}
	}
	stacktest.AssertPageLoads(t, scratch, env, relayURL)
	kimiHome := stacktest.WithProvider(t, home)
	stacktest.RunShell(t, scratch, env, "aep-setup write kimi-code")
	stacktest.FirstSession(t, scratch, env, "aep-kimi tail")
	stacktest.AssertNativeHook(t, kimiHome, prefix)
	stacktest.StopUp(t, up, relayURL)

	// The same as the launcher's child: a SIGTERM to the launcher alone,
	// as a service manager sends it, stops the binary too.
	up = proctest.Start(t, "aep-kimi up (npm, child)", stacktest.NpmUpCommand(launcher("aep-kimi"), scratch, modes["spawn"]))
	stacktest.AwaitUp(t, up, relayURL, adapterURL)
	if exe := stacktest.ProcExe(up.Cmd.Process.Pid); exe != "" && !strings.HasPrefix(filepath.Base(exe), "node") {
		t.Errorf("without process.execve the launcher's process runs %s, want node", exe)
	}
	stacktest.StopUp(t, up, relayURL)
}

// BenchmarkNPMLauncher is what the launcher adds to a command: one
// fire-and-forget hook (PostToolUse) through kimi-hook, run as the native
// binary, through the launcher on Node 22 (process.execve) and through
// the launcher as its child (Node without process.execve). No adapter
// listens, so each delivery is refused at once and spooled: the hook's
// own cost stays small and the same in all three.
func BenchmarkNPMLauncher(b *testing.B) {
	kimi := kimiharness.Require(b)
	set := stacktest.NpmPackages(b)
	scratch := b.TempDir()
	prefix := filepath.Join(scratch, "prefix")
	node := kimiharness.Node(kimi)
	env := append([]string{
		"HOME=" + scratch,
		"PATH=" + filepath.Dir(node) + string(os.PathListSeparator) + os.Getenv("PATH"),
		"npm_config_registry=http://127.0.0.1:9/",
		"AEP_HOME=" + filepath.Join(scratch, "aep"),
	}, npmtest.Env(prefix)...)
	install := exec.Command("npm", "install", "-g", "--offline", set.Main.File, set.Host.File)
	install.Env = env
	if out, err := install.CombinedOutput(); err != nil {
		b.Fatalf("npm install: %v\n%s", err, out)
	}
	noExecve := filepath.Join(scratch, "no-execve.js")
	if err := os.WriteFile(noExecve, []byte("process.execve = undefined;\n"), 0o644); err != nil {
		b.Fatal(err)
	}
	native := filepath.Join(stacktest.NativeDir(b, prefix), stacktest.ExeName("kimi-hook"))
	launcher := filepath.Join(prefix, "bin", "kimi-hook")
	payload := `{"hook_event_name":"PostToolUse","session_id":"bench","tool_name":"Bash","tool_input":{"command":"true"}}`
	for _, c := range []struct {
		name, bin string
		Env       []string
	}{
		{"native", native, env},
		{"launcher", launcher, env},
		{"launcher-child", launcher, append(slices.Clone(env), "NODE_OPTIONS=--require="+noExecve)},
	} {
		b.Run(c.name, func(b *testing.B) {
			// CPU time too: on a loaded machine the wall time is mostly
			// waiting for a core.
			var cpu time.Duration
			for b.Loop() {
				cmd := exec.Command(c.bin, "--daemon", "http://127.0.0.1:9")
				cmd.Env, cmd.Stdin = c.Env, strings.NewReader(payload)
				if out, err := cmd.CombinedOutput(); err != nil {
					b.Fatalf("%s: %v\n%s", c.bin, err, out)
				}
				cpu += cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
			}
			b.ReportMetric(float64(cpu.Microseconds())/1000/float64(b.N), "cpu-ms/op")
		})
	}
}

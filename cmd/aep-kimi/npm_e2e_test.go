package main

// The npm packages release/npm.sh makes, installed with the real npm into
// an empty prefix, offline, and run as a user runs them: through the Node
// launchers in the prefix's bin.

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aep-kimi/aep-kimi/internal/testkit/fixtures"
	"github.com/aep-kimi/aep-kimi/internal/testkit/kimiharness"
	"github.com/aep-kimi/aep-kimi/internal/testkit/npmtest"
	"github.com/aep-kimi/aep-kimi/internal/testkit/poll"
	"github.com/aep-kimi/aep-kimi/internal/testkit/proctest"
	"github.com/aep-kimi/aep-kimi/setup"
)

// npmBuildTimeout bounds release/npm.sh for one platform from a cold build
// cache on a busy machine.
const npmBuildTimeout = 20 * time.Minute

var (
	npmOnce sync.Once
	npmSet  npmtest.Set
	npmErr  error
)

// npmPackages is this platform's npm packages: those in $AEP_KIMI_NPM_DIR
// (CI builds all five once), else this platform's, built by release/npm.sh
// once per test process.
func npmPackages(t testing.TB) npmtest.Set {
	t.Helper()
	if testing.Short() {
		t.Skip("end-to-end: builds and installs the npm packages; skipped under -short")
	}
	if _, err := exec.LookPath("npm"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("CI is set but there is no npm: %v", err)
		}
		t.Skipf("skipping: no npm: %v", err)
	}
	if p, ok := npmtest.Platform(); !ok {
		t.Skipf("skipping: no npm package for %s", p)
	}
	npmOnce.Do(func() {
		dir := os.Getenv(npmtest.EnvDir)
		if dir == "" {
			root, err := fixtures.ModuleRoot()
			if err != nil {
				npmErr = err
				return
			}
			if dir, npmErr = os.MkdirTemp("", "aep-kimi-npm"); npmErr != nil {
				return
			}
			ctx, cancel := context.WithTimeout(context.Background(), npmBuildTimeout)
			defer cancel()
			if npmErr = npmtest.Build(ctx, root, dir); npmErr != nil {
				return
			}
		}
		npmSet, npmErr = npmtest.Read(dir)
	})
	if npmErr != nil {
		t.Fatal(npmErr)
	}
	return npmSet
}

// exeName is a command's file name on this platform.
func exeName(name string) string {
	if runtime.GOOS == "windows" {
		return name + ".exe"
	}
	return name
}

// nativeDir is where npm put this platform's binaries under prefix: beside
// the main package when both tarballs were installed, inside it when npm
// resolved the optional dependency itself.
func nativeDir(t testing.TB, prefix string) string {
	t.Helper()
	plat, _ := npmtest.Platform()
	modules := filepath.Join(prefix, "lib", "node_modules")
	for _, d := range []string{
		filepath.Join(modules, npmtest.Scope, plat, "bin"),
		filepath.Join(modules, npmtest.Main, "node_modules", npmtest.Scope, plat, "bin"),
	} {
		if _, err := os.Stat(filepath.Join(d, exeName("kimi-hook"))); err == nil {
			return d
		}
	}
	t.Fatalf("no %s/%s binaries under %s", npmtest.Scope, plat, modules)
	return ""
}

// assertNativeHook checks that the hooks registered in kimiHome run the
// installed platform package's kimi-hook under prefix, the native binary
// itself: Kimi waits on the hook, and the Node launcher would add its
// start-up to every one.
func assertNativeHook(t *testing.T, kimiHome, prefix string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// A daemon nothing listens on: only the file is of interest.
	r := setup.Check(ctx, setup.Config{Home: kimiHome, DaemonURL: "http://127.0.0.1:9", HealthTimeout: time.Second})
	if len(r.HookPrograms) != 1 {
		t.Fatalf("the hooks in %s run %q, want one kimi-hook", kimiHome, r.HookPrograms)
	}
	hook := r.HookPrograms[0]
	want, err := filepath.EvalSymlinks(filepath.Join(nativeDir(t, prefix), exeName("kimi-hook")))
	if err != nil {
		t.Fatal(err)
	}
	if hook != want {
		t.Errorf("the hooks run %s, want the native %s", hook, want)
	}
	b, err := os.ReadFile(hook)
	if err != nil || len(b) < 2 || string(b[:2]) == "#!" {
		t.Errorf("the registered hook %s is not a native binary (%v)", hook, err)
	}
}

// checkManifests checks what npm decides by: the main package runs the
// three commands through its launchers, names the five platform packages
// of its own version as optional dependencies and runs nothing at install
// time; the platform package says which os and cpu it is for and carries
// the three binaries.
func checkManifests(t *testing.T, set npmtest.Set, plat string) {
	t.Helper()
	m := set.Main.Manifest
	bin, _ := m["bin"].(map[string]any)
	files, err := npmtest.Files(set.Main.File)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []string{"aep-kimi", "kimi-hook", "aep-setup"} {
		if bin[c] != "bin/"+c || files[bin[c].(string)]&0o111 == 0 {
			t.Errorf("%s's bin %s is %v (mode %v), want an executable bin/%s", set.Main.Name, c, bin[c], files["bin/"+c], c)
		}
	}
	opt, _ := m["optionalDependencies"].(map[string]any)
	var names []string
	for n, v := range opt {
		names = append(names, n)
		if v != set.Version {
			t.Errorf("optional dependency %s@%v, want its own version %s", n, v, set.Version)
		}
	}
	slices.Sort(names)
	if want := []string{"@aep-kimi/darwin-arm64", "@aep-kimi/darwin-x64", "@aep-kimi/linux-arm64", "@aep-kimi/linux-x64", "@aep-kimi/win32-x64"}; !slices.Equal(names, want) {
		t.Errorf("optional dependencies %q, want %q", names, want)
	}
	for _, p := range set.All {
		if s, ok := p.Manifest["scripts"]; ok {
			t.Errorf("%s has scripts %v: nothing may run at install time", p.Name, s)
		}
	}
	h := set.Host.Manifest
	goos, cpu, _ := strings.Cut(plat, "-")
	if fmt.Sprint(h["os"]) != "["+goos+"]" || fmt.Sprint(h["cpu"]) != "["+cpu+"]" {
		t.Errorf("%s has os %v cpu %v, want [%s] [%s]", set.Host.Name, h["os"], h["cpu"], goos, cpu)
	}
	if files, err = npmtest.Files(set.Host.File); err != nil {
		t.Fatal(err)
	}
	for _, c := range []string{"aep-kimi", "kimi-hook", "aep-setup"} {
		if mode, ok := files["bin/"+exeName(c)]; !ok || mode&0o111 == 0 {
			t.Errorf("%s has no executable bin/%s (%v)", set.Host.Name, exeName(c), mode)
		}
	}
}

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
	kimi := kimiharness.Require(t)
	set := npmPackages(t)
	plat, _ := npmtest.Platform()
	checkManifests(t, set, plat)

	scratch := t.TempDir()
	prefix := filepath.Join(scratch, "prefix")
	node := kimiharness.Node(kimi)
	env, home, relayURL, adapterURL := userEnv(t, kimi, scratch, filepath.Join(prefix, "bin"), filepath.Dir(node))
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
	native := nativeDir(t, prefix)
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
			ncode, nout := run(filepath.Join(native, exeName("aep-kimi")))
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
	up := proctest.Start(t, "aep-kimi up (npm)", npmUpCommand(launcher("aep-kimi"), scratch, env))
	awaitUp(t, up, relayURL, adapterURL)
	if exe := procExe(up.Cmd.Process.Pid); exe != "" {
		if want, _ := filepath.EvalSymlinks(filepath.Join(native, "aep-kimi")); exe != want {
			t.Errorf("up's process runs %s, want the native %s in place of Node", exe, want)
		}
	}
	assertPageLoads(t, scratch, env, relayURL)
	kimiHome := withProvider(t, home)
	runShell(t, scratch, env, "aep-setup write kimi-code")
	firstSession(t, scratch, env, "aep-kimi tail")
	assertNativeHook(t, kimiHome, prefix)
	stopUp(t, up, relayURL)

	// The same as the launcher's child: a SIGTERM to the launcher alone,
	// as a service manager sends it, stops the binary too.
	up = proctest.Start(t, "aep-kimi up (npm, child)", npmUpCommand(launcher("aep-kimi"), scratch, modes["spawn"]))
	awaitUp(t, up, relayURL, adapterURL)
	if exe := procExe(up.Cmd.Process.Pid); exe != "" && !strings.HasPrefix(filepath.Base(exe), "node") {
		t.Errorf("without process.execve the launcher's process runs %s, want node", exe)
	}
	stopUp(t, up, relayURL)
}

// npmUpCommand is `aep-kimi up` run as bin, in dir with env, in a process
// group of its own, so a binary the launcher left behind can be found and
// ended. Such a binary keeps up's output open: Wait gives up on it.
func npmUpCommand(bin, dir string, env []string) *exec.Cmd {
	cmd := exec.Command(bin, "up")
	cmd.Dir, cmd.Env = dir, env
	cmd.WaitDelay = 5 * time.Second
	kimiharness.OwnGroup(cmd)
	return cmd
}

// awaitUp waits for up's relay and adapter to answer /healthz.
func awaitUp(t *testing.T, up *proctest.Proc, relayURL, adapterURL string) {
	t.Helper()
	up.Await(t, time.Minute, "/healthz", func() bool {
		return proctest.Answers(relayURL+"/healthz") && proctest.Answers(adapterURL+"/healthz")
	})
}

// stopUp sends up SIGTERM and checks it exits 0 with nothing left
// serving: no child outlives the launcher.
func stopUp(t *testing.T, up *proctest.Proc, relayURL string) {
	t.Helper()
	up.Stop(t)
	if code := up.Cmd.ProcessState.ExitCode(); code != 0 {
		t.Errorf("up exited %d (%v) on SIGTERM, want 0; output:\n%s", code, up.Cmd.ProcessState, up.Logs.String())
	}
	if _, err := http.Get(relayURL + "/healthz"); err == nil {
		t.Errorf("the relay still answers after up's launcher exited")
	}
	kimiharness.SignalGroup(up.Cmd.Process, syscall.SIGKILL) //nolint:errcheck // nothing left is the good case
}

// procExe is the executable a process runs, where /proc says ("" elsewhere).
func procExe(pid int) string {
	if runtime.GOOS != "linux" {
		return ""
	}
	exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
	if err != nil {
		return ""
	}
	return exe
}

// assertPageLoads opens the fleet page as `aep-kimi open` would: the
// login URL it prints, the login it trades the token for, the page and
// every file the page links.
func assertPageLoads(t *testing.T, dir string, env []string, relayURL string) {
	t.Helper()
	out := strings.TrimSpace(runShell(t, dir, env, "aep-kimi open --print"))
	u, err := url.Parse(out)
	if err != nil || !strings.HasPrefix(out, relayURL+"/") {
		t.Fatalf("aep-kimi open --print: %q (%v), want a login URL on %s", out, err, relayURL)
	}
	frag, _ := url.ParseQuery(u.Fragment)
	if frag.Get("token") == "" {
		t.Fatalf("aep-kimi open --print: %q carries no token", out)
	}
	loginPage(t, relayURL, frag.Get("token"))
	page := getOK(t, relayURL+"/")
	links := regexp.MustCompile(`(?:src|href)="(/app/[^"]+)"`).FindAllStringSubmatch(page, -1)
	if len(links) == 0 {
		t.Fatalf("the fleet page links no files:\n%s", page)
	}
	for _, l := range links {
		getOK(t, relayURL+l[1])
	}
}

// getOK fetches url, failing the test unless it answers 200.
func getOK(t *testing.T, url string) string {
	t.Helper()
	var body []byte
	var status string
	if !poll.Until(10*time.Second, func() bool {
		res, err := http.Get(url)
		if err != nil {
			status = err.Error()
			return false
		}
		defer res.Body.Close()
		body, err = io.ReadAll(res.Body)
		status = res.Status
		return err == nil && res.StatusCode == http.StatusOK
	}) {
		t.Fatalf("GET %s: %s", url, status)
	}
	return string(body)
}

// BenchmarkNPMLauncher is what the launcher adds to a command: one
// fire-and-forget hook (PostToolUse) through kimi-hook, run as the native
// binary, through the launcher on Node 22 (process.execve) and through
// the launcher as its child (Node without process.execve). No adapter
// listens, so each delivery is refused at once and spooled: the hook's
// own cost stays small and the same in all three.
func BenchmarkNPMLauncher(b *testing.B) {
	kimi := kimiharness.Require(b)
	set := npmPackages(b)
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
	native := filepath.Join(nativeDir(b, prefix), exeName("kimi-hook"))
	launcher := filepath.Join(prefix, "bin", "kimi-hook")
	payload := `{"hook_event_name":"PostToolUse","session_id":"bench","tool_name":"Bash","tool_input":{"command":"true"}}`
	for _, c := range []struct {
		name, bin string
		env       []string
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
				cmd.Env, cmd.Stdin = c.env, strings.NewReader(payload)
				if out, err := cmd.CombinedOutput(); err != nil {
					b.Fatalf("%s: %v\n%s", c.bin, err, out)
				}
				cpu += cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
			}
			b.ReportMetric(float64(cpu.Microseconds())/1000/float64(b.N), "cpu-ms/op")
		})
	}
}

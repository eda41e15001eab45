package stacktest

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

// NpmBuildTimeout bounds release/npm.sh for one platform from a cold build
// cache on a busy machine.
const NpmBuildTimeout = 20 * time.Minute

var (
	NpmOnce sync.Once
	NpmSet  npmtest.Set
	NpmErr  error
)

// NpmPackages is this platform's npm packages: those in $AEP_KIMI_NPM_DIR
// (CI builds all five once), else this platform's, built by release/npm.sh
// once per test process.
func NpmPackages(t testing.TB) npmtest.Set {
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
	NpmOnce.Do(func() {
		dir := os.Getenv(npmtest.EnvDir)
		if dir == "" {
			root, err := fixtures.ModuleRoot()
			if err != nil {
				NpmErr = err
				return
			}
			if dir, NpmErr = os.MkdirTemp("", "aep-kimi-npm"); NpmErr != nil {
				return
			}
			ctx, cancel := context.WithTimeout(context.Background(), NpmBuildTimeout)
			defer cancel()
			if NpmErr = npmtest.Build(ctx, root, dir); NpmErr != nil {
				return
			}
		}
		NpmSet, NpmErr = npmtest.Read(dir)
	})
	if NpmErr != nil {
		t.Fatal(NpmErr)
	}
	return NpmSet
}

// ExeName is a command's file name on this platform.
func ExeName(name string) string {
	if runtime.GOOS == "windows" {
		return name + ".exe"
	}
	return name
}

// NativeDir is where npm put this platform's binaries under prefix: beside
// the main package when both tarballs were installed, inside it when npm
// resolved the optional dependency itself.
func NativeDir(t testing.TB, prefix string) string {
	t.Helper()
	plat, _ := npmtest.Platform()
	modules := filepath.Join(prefix, "lib", "node_modules")
	for _, d := range []string{
		filepath.Join(modules, npmtest.Scope, plat, "bin"),
		filepath.Join(modules, npmtest.Main, "node_modules", npmtest.Scope, plat, "bin"),
	} {
		if _, err := os.Stat(filepath.Join(d, ExeName("kimi-hook"))); err == nil {
			return d
		}
	}
	t.Fatalf("no %s/%s binaries under %s", npmtest.Scope, plat, modules)
	return ""
}

// AssertNativeHook checks that the hooks registered in kimiHome run the
// installed platform package's kimi-hook under prefix, the native binary
// itself: Kimi waits on the hook, and the Node launcher would add its
// Start-up to every one.
func AssertNativeHook(t *testing.T, kimiHome, prefix string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// A daemon nothing listens on: only the file is of interest.
	r := setup.Check(ctx, setup.Config{Home: kimiHome, DaemonURL: "http://127.0.0.1:9", HealthTimeout: time.Second})
	if len(r.HookPrograms) != 1 {
		t.Fatalf("the hooks in %s run %q, want one kimi-hook", kimiHome, r.HookPrograms)
	}
	hook := r.HookPrograms[0]
	want, err := filepath.EvalSymlinks(filepath.Join(NativeDir(t, prefix), ExeName("kimi-hook")))
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

// CheckManifests checks what npm decides by: the main package runs the
// three commands through its launchers, names the five platform packages
// of its own version as optional dependencies and runs nothing at install
// time; the platform package says which os and cpu it is for and carries
// the three binaries.
func CheckManifests(t *testing.T, set npmtest.Set, plat string) {
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
		if mode, ok := files["bin/"+ExeName(c)]; !ok || mode&0o111 == 0 {
			t.Errorf("%s has no executable bin/%s (%v)", set.Host.Name, ExeName(c), mode)
		}
	}
}

// NpmUpCommand is `aep-kimi up` run as bin, in dir with env, in a process
// group of its own, so a binary the launcher left behind can be found and
// ended. Such a binary keeps up's output open: Wait gives up on it.
func NpmUpCommand(bin, dir string, env []string) *exec.Cmd {
	cmd := exec.Command(bin, "up")
	cmd.Dir, cmd.Env = dir, env
	cmd.WaitDelay = 5 * time.Second
	kimiharness.OwnGroup(cmd)
	return cmd
}

// AwaitUp waits for up's relay and adapter to answer /healthz.
func AwaitUp(t *testing.T, up *proctest.Proc, relayURL, adapterURL string) {
	t.Helper()
	up.Await(t, time.Minute, "/healthz", func() bool {
		return proctest.Answers(relayURL+"/healthz") && proctest.Answers(adapterURL+"/healthz")
	})
}

// StopUp sends up SIGTERM and checks it exits 0 with nothing left
// serving: no child outlives the launcher.
func StopUp(t *testing.T, up *proctest.Proc, relayURL string) {
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

// ProcExe is the executable a process runs, where /proc says ("" elsewhere).
func ProcExe(pid int) string {
	if runtime.GOOS != "linux" {
		return ""
	}
	exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
	if err != nil {
		return ""
	}
	return exe
}

// AssertPageLoads opens the fleet page as `aep-kimi open` would: the
// Login URL it prints, the login it trades the token for, the page and
// every file the page links.
func AssertPageLoads(t *testing.T, dir string, env []string, relayURL string) {
	t.Helper()
	out := strings.TrimSpace(RunShell(t, dir, env, "aep-kimi open --print"))
	u, err := url.Parse(out)
	if err != nil || !strings.HasPrefix(out, relayURL+"/") {
		t.Fatalf("aep-kimi open --print: %q (%v), want a login URL on %s", out, err, relayURL)
	}
	frag, _ := url.ParseQuery(u.Fragment)
	if frag.Get("token") == "" {
		t.Fatalf("aep-kimi open --print: %q carries no token", out)
	}
	LoginPage(t, relayURL, frag.Get("token"))
	page := GetOK(t, relayURL+"/")
	links := regexp.MustCompile(`(?:src|href)="(/app/[^"]+)"`).FindAllStringSubmatch(page, -1)
	if len(links) == 0 {
		t.Fatalf("the fleet page links no files:\n%s", page)
	}
	for _, l := range links {
		GetOK(t, relayURL+l[1])
	}
}

// GetOK fetches url, failing the test unless it answers 200.
func GetOK(t *testing.T, url string) string {
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

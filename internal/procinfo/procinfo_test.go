package procinfo

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aep-kimi/aep-kimi/internal/testkit/poll"
)

func skipUnsupported(t *testing.T) {
	t.Helper()
	if runtime.GOOS != "linux" && runtime.GOOS != "darwin" {
		t.Skip("no process reader on " + runtime.GOOS)
	}
}

func TestReadSelf(t *testing.T) {
	skipUnsupported(t)
	a, err := Read(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	b, _ := Read(os.Getpid())
	if a.PPID != os.Getppid() || a.Start == "" || a.Start != b.Start || a.Comm == "" {
		t.Fatalf("Read(self) = %+v, then %+v (ppid %d)", a, b, os.Getppid())
	}
	if _, err := Read(1 << 30); err == nil {
		t.Fatal("Read of a pid that cannot exist succeeded")
	}
}

func TestIsShell(t *testing.T) {
	for comm, want := range map[string]bool{"sh": true, "-bash": true, "/bin/dash": true, "node": false, "kimi": false, "": false} {
		if IsShell(comm) != want {
			t.Errorf("IsShell(%q) = %v", comm, !want)
		}
	}
}

// helperEnv makes the test binary, run as a child, print what Served finds.
const helperEnv = "PROCINFO_SERVED_HELPER"

// helperDelayEnv makes the child take this long (a duration) before it
// calls Served.
const helperDelayEnv = "PROCINFO_SERVED_DELAY"

func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) == "1" {
		if d, err := time.ParseDuration(os.Getenv(helperDelayEnv)); err == nil {
			// A hook slow to reach Served, as on a loaded machine: a
			// modelled delay in the child, not a synchronisation.
			time.Sleep(d)
		}
		pid, info, ok := Served()
		fmt.Printf("%d %s %v\n", pid, info.Start, ok)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// Served skips the hook's shell and a wrapper that started with the hook,
// and names the long-running process above them.
func TestServed(t *testing.T) {
	skipUnsupported(t)
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skip("no sh")
	}
	self, err := Read(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	// The test process must be older than the launch window, on the
	// kernel's clock Served reads, to count as the served process.
	poll.Must(t, 5*time.Second, "the test process to be older than the launch window", func() bool {
		now, err := clockNs()
		return err == nil && now-self.StartNs >= LaunchWindow
	})
	bin, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string]string{
		// "; true" keeps the shell from exec'ing into the command.
		"shell":   fmt.Sprintf("'%s' -test.run=^$; true", bin),
		"exec":    fmt.Sprintf("exec '%s' -test.run=^$", bin),
		"wrapper": fmt.Sprintf("sh -c \"'%s' -test.run=^$; true\"; true", bin),
	}
	if _, err := exec.LookPath("timeout"); err == nil {
		cases["timeout"] = fmt.Sprintf("timeout 20 '%s' -test.run=^$; true", bin)
		// The hook reaches Served well past the launch window (a loaded
		// machine): the wrapper it started through is still not Kimi.
		cases["timeout-slow"] = fmt.Sprintf("%s=%s timeout 20 '%s' -test.run=^$; true",
			helperDelayEnv, 3*time.Duration(LaunchWindow), bin)
		// The hook starts well past the launch window after the wrapper
		// (a loaded machine; here a shell under the wrapper waits before
		// it starts the hook), so the wrapper's age does not give it
		// away: its name does.
		cases["timeout-slow-fork"] = fmt.Sprintf("timeout 20 sh -c \"sleep %.1f; '%s' -test.run=^$; true\"; true",
			3*time.Duration(LaunchWindow).Seconds(), bin)
	}
	for name, script := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel() // each case is its own process tree
			cmd := exec.Command("sh", "-c", script)
			cmd.Env = append(os.Environ(), helperEnv+"=1")
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("%v: %s", err, out)
			}
			f := strings.Fields(string(out))
			if len(f) != 3 || f[2] != "true" {
				t.Fatalf("Served found nothing: %q", out)
			}
			if pid, _ := strconv.Atoi(f[0]); pid != os.Getpid() || f[1] != self.Start {
				t.Fatalf("Served = %s (start %s), want the test process %d (start %s)", f[0], f[1], os.Getpid(), self.Start)
			}
		})
	}
}

//go:build linux || darwin

package bridgeweb

import (
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/aep-kimi/aep-kimi/internal/procinfo"
	"github.com/aep-kimi/aep-kimi/internal/testkit/poll"
)

// The real liveness checks, on real processes: a server whose process
// exits is gone even while its record stays; a zombie (which kill(pid, 0)
// still answers for) is gone; a pid whose process is not the one that
// appeared (a reused pid: another start time) is gone.
func TestRegistryProcessIdentity(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	now := time.Now()
	r := registry{kimiHome: home, staleAfter: DefaultStaleInstance}
	check := func(what, appeared, gone string) {
		t.Helper()
		ch, err := r.poll(now)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if keysOf(ch.appeared) != appeared || keysOf(ch.gone) != gone {
			t.Errorf("%s: appeared %q gone %q, want %q and %q", what, keysOf(ch.appeared), keysOf(ch.gone), appeared, gone)
		}
	}
	start := func() *exec.Cmd {
		cmd := exec.Command("sleep", "30")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() }) //nolint:errcheck // gone already is fine
		return cmd
	}

	a := start()
	writeInstance(t, home, "a", instance(a.Process.Pid, 5001, now, now))
	check("a appears", "a:"+strconv.Itoa(a.Process.Pid), "")
	a.Process.Kill() //nolint:errcheck // reaped below
	a.Wait()         //nolint:errcheck // killed
	check("a's process exited, its record stays", "", "a:"+strconv.Itoa(a.Process.Pid))

	// A zombie: exited, not reaped.
	z := exec.Command("sh", "-c", "exit 0")
	if err := z.Start(); err != nil {
		t.Fatal(err)
	}
	defer z.Wait() //nolint:errcheck // reaped at the end
	if !poll.Until(5*time.Second, func() bool {
		info, err := procinfo.Read(z.Process.Pid)
		return err == nil && info.Exited
	}) {
		t.Fatal("the child never became a zombie")
	}
	if !pidAlive(z.Process.Pid) {
		t.Fatal("kill(pid, 0) no longer answers for a zombie: the check below proves nothing")
	}
	writeInstance(t, home, "z", instance(z.Process.Pid, 5002, now, now))
	check("a zombie's record", "", "")

	// Another process on the same pid reads as another start time.
	b := start()
	writeInstance(t, home, "b", instance(b.Process.Pid, 5003, now, now))
	check("b appears", "b:"+strconv.Itoa(b.Process.Pid), "")
	for k := range r.starts {
		r.starts[k] = "a start time that is not b's"
	}
	check("b's pid now names another process", "", "b:"+strconv.Itoa(b.Process.Pid))
}

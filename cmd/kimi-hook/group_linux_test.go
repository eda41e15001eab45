package main

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/aep-kimi/aep-kimi/adapter"
	"github.com/aep-kimi/aep-kimi/aep"
	"github.com/aep-kimi/aep-kimi/internal/procinfo"
	"github.com/aep-kimi/aep-kimi/internal/spool"
	"github.com/aep-kimi/aep-kimi/internal/testkit/kimiharness"
	"github.com/aep-kimi/aep-kimi/internal/testkit/poll"
	"github.com/aep-kimi/aep-kimi/internal/testkit/spooltest"
)

// childOf finds a live child of pid.
func childOf(pid int) (int, bool) {
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		n, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if in, err := procinfo.Read(n); err == nil && in.PPID == pid && !in.Exited {
			return n, true
		}
	}
	return 0, false
}

// Kimi's kill at turn end can come before a PostToolUse hook has written
// its payload ahead (a loaded machine; here, the spool's lock held by
// another writer). The hook leaves the shell's process group once it has
// read its payload, so the kill ends the shell and not the hook, which
// delivers once the lock frees: the event arrives, live (not through the
// spool), and the spool is left empty.
func TestFireAndForgetOutlivesTurnEndKill(t *testing.T) {
	bin := hookBinary(t)
	home := t.TempDir()
	_, base := startAdapter(t, home)
	dir := spool.Dir(home)
	release := spooltest.HoldLock(t, home)

	payload := `{"hook_event_name":"PostToolUse","session_id":"kh-group","tool_name":"Bash","tool_input":{},"tool_call_id":"c1","tool_output":"x"}`
	// As Kimi runs it: sh -c in a group of its own, which dash forks into.
	sh := exec.Command("/bin/sh", "-c", "'"+bin+"' --daemon "+base+" --home '"+home+"' --timeout 10; true")
	sh.Stdin = strings.NewReader(payload)
	kimiharness.OwnGroup(sh)
	if err := sh.Start(); err != nil {
		t.Fatal(err)
	}
	var hookPid int
	poll.Must(t, hookWait, "kimi-hook in a process group of its own", func() bool {
		pid, ok := childOf(sh.Process.Pid)
		hookPid = pid
		pgid, err := syscall.Getpgid(pid)
		return ok && err == nil && pgid == pid
	})
	kimiharness.SignalGroup(sh.Process, syscall.SIGTERM)
	kimiharness.SignalGroup(sh.Process, syscall.SIGKILL)
	sh.Wait()
	if in, err := procinfo.Read(hookPid); err != nil || in.Exited {
		t.Fatal("the turn-end kill ended kimi-hook")
	}
	release()
	poll.Must(t, hookWait, "the payload delivered and the spool empty", func() bool {
		files, _ := spool.List(dir)
		return len(logLines(t, home, "kh-group")) == 1 && len(files) == 0
	})
	ev, err := aep.ParseEvent([]byte(logLines(t, home, "kh-group")[0]))
	if err != nil {
		t.Fatal(err)
	}
	if _, spooled := ev.Ext[adapter.ExtSpooled]; spooled {
		t.Fatal("the event came through the spool: kimi-hook died before it delivered")
	}
}

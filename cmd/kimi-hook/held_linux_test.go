package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aep-kimi/aep-kimi/adapter"
	"github.com/aep-kimi/aep-kimi/internal/testkit/emittertest"
	"github.com/aep-kimi/aep-kimi/internal/testkit/kimiharness"
	"github.com/aep-kimi/aep-kimi/internal/testkit/poll"
)

// catches reports whether process pid has a handler for sig (SigCgt in
// /proc/PID/status).
func catches(pid int, sig syscall.Signal) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return false
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "SigCgt:"); ok {
			mask, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			return err == nil && mask&(1<<(uint(sig)-1)) != 0
		}
	}
	return false
}

// A hook held past quickReply catches SIGTERM: it spools the payload and
// exits 0 (a hook that has not caught it yet ends by the signal, which
// TestHeldHookLeavesOnSIGTERM also accepts); either way the adapter
// records the request expired.
func TestHeldHookCatchesSIGTERMOnceLate(t *testing.T) {
	bin := hookBinary(t)
	home := t.TempDir()
	pub := &emittertest.Recorder{}
	_, base := startAdapter(t, home, func(c *adapter.Config) {
		c.Publisher = pub
		c.Control = adapter.Control{Gate: true, Authenticated: true, HoldTimeout: time.Minute}
	})
	pre := `{"hook_event_name":"PreToolUse","session_id":"kh-late","tool_name":"Bash","tool_input":{"command":"ls"},"tool_call_id":"c1"}`
	cmd := exec.Command(bin, "--daemon", base, "--home", home, "--timeout", "60")
	cmd.Stdin = strings.NewReader(pre)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	kimiharness.OwnGroup(cmd)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	var waitErr error
	go func() { waitErr = cmd.Wait(); close(exited) }()
	t.Cleanup(func() { kimiharness.SignalGroup(cmd.Process, syscall.SIGKILL); <-exited })
	poll.Must(t, hookWait, "the held request", func() bool { return len(pub.Find("attention.requested")) == 1 })
	poll.Must(t, hookWait, "kimi-hook catching SIGTERM", func() bool { return catches(cmd.Process.Pid, syscall.SIGTERM) })
	kimiharness.SignalGroup(cmd.Process, syscall.SIGTERM)
	select {
	case <-exited:
		if waitErr != nil {
			t.Fatalf("kimi-hook ended with %v (stderr %q): it did not catch SIGTERM", waitErr, errb.String())
		}
	case <-time.After(hookWait):
		t.Fatal("kimi-hook went on waiting after Kimi's SIGTERM")
	}
	waitExpired(t, pub, out.String())
}

//go:build unix

package proctest

import (
	"os/exec"
	"strings"
	"testing"
	"time"
)

func TestStartAwaitStop(t *testing.T) {
	p := Start(t, "sh", exec.Command("sh", "-c", "echo ready; exec sleep 60"))
	p.Await(t, 10*time.Second, "its ready line", func() bool { return strings.Contains(p.Logs.String(), "ready") })
	start := time.Now()
	p.Stop(t)
	select {
	case <-p.Exited():
	default:
		t.Fatal("Stop returned with the process still running")
	}
	if waited := time.Since(start); waited >= StopWait {
		t.Fatalf("SIGTERM did not end it: Stop took %s", waited)
	}
}

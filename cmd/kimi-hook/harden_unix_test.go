//go:build unix

package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/aep-kimi/aep-kimi/internal/spool"
	"github.com/aep-kimi/aep-kimi/internal/testkit/poll"
)

// A pipe planted where the hook token belongs is not a token: kimi-hook
// neither blocks opening it (an open for reading waits for a writer) nor
// reads it, and the payload spools for the adapter to ingest. Before, the
// open hung until Kimi killed the hook, and an awaited hook's payload was
// lost with it.
func TestPipeHookTokenDoesNotHang(t *testing.T) {
	bin := hookBinary(t)
	home := t.TempDir()
	_, base := startAdapter(t, home)
	tokenPath := filepath.Join(home, "kimi", "hook.token")
	os.Remove(tokenPath)
	if err := syscall.Mkfifo(tokenPath, 0o600); err != nil {
		t.Skipf("no pipes here: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), hookWait)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "--daemon", base, "--home", home, "--timeout", "10")
	cmd.Stdin = strings.NewReader(startPayload)
	out, err := cmd.Output()
	if ctx.Err() != nil {
		t.Fatalf("kimi-hook still blocked on the pipe after %s", hookWait)
	}
	if err != nil || len(out) != 0 {
		t.Fatalf("err %v out %q", err, out)
	}
	poll.Must(t, hookWait, "the spooled payload's event", func() bool {
		files, _ := spool.List(spool.Dir(home))
		lines := logLines(t, home, "kh1")
		return len(files) == 0 && len(lines) == 1 && strings.Contains(lines[0], `"kimispooled":true`)
	})
}

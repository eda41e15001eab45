package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aep-kimi/aep-kimi/internal/spool"
	"github.com/aep-kimi/aep-kimi/internal/testkit/poll"
	"github.com/aep-kimi/aep-kimi/internal/testkit/safefiletest"
)

// A link planted where the hook token belongs is not read (its target is
// left alone, never sent as a token): the adapter refuses the tokenless
// delivery, the payload spools, and the adapter ingests it from there.
func TestLinkedHookTokenIsNotUsed(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs kimi-hook")
	}
	home := t.TempDir()
	_, base := startAdapter(t, home)
	tokenPath := filepath.Join(home, "kimi", "hook.token")
	os.Remove(tokenPath)
	link := safefiletest.Plant(t, tokenPath)
	if out, _, code := hook(t, base, home, startPayload); code != 0 || out != "" {
		t.Fatalf("exit %d out %q", code, out)
	}
	link.Untouched(t)
	poll.Must(t, hookWait, "the spooled payload's event", func() bool {
		files, _ := spool.List(spool.Dir(home))
		lines := logLines(t, home, "kh1")
		return len(files) == 0 && len(lines) == 1 && strings.Contains(lines[0], `"kimispooled":true`)
	})
}

// A link planted in place of the spool's lock file is refused: kimi-hook
// says so on stderr, still exits 0, and the target is untouched.
func TestLinkedSpoolLockRefused(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs kimi-hook")
	}
	home := t.TempDir()
	link := safefiletest.Plant(t, filepath.Join(spool.Dir(home), ".lock"))
	out, errOut, code := hook(t, "http://127.0.0.1:1", home, startPayload)
	if code != 0 || out != "" || !strings.Contains(errOut, "symbolic link") {
		t.Fatalf("exit %d out %q stderr %q", code, out, errOut)
	}
	link.Untouched(t)
}

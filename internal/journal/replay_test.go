package journal

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aep-kimi/aep-kimi/aep"
)

const replayLine = `{"specversion":"0.1","id":"01J","source":"aep://h/agent/kimi-code/session/s","type":"run.started","time":"2026-11-29T00:00:00Z","session":"s","epoch":1,"seq":0,"data":{}}`

func TestReplayCountsWhatItPassesOver(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.jsonl")
	log := replayLine + "\n{torn\n" + replayLine + "\n" + `{"seq":` // torn tail, no newline
	if err := os.WriteFile(path, []byte(log), 0o600); err != nil {
		t.Fatal(err)
	}
	var n int
	skipped, err := Replay(path, 1<<20, func(*aep.Event) { n++ })
	if err != nil || n != 2 || skipped != 2 {
		t.Fatalf("Replay = %d events, %d skipped, err %v; want 2, 2, nil", n, skipped, err)
	}
}

func TestReplayMissingLogIsNoError(t *testing.T) {
	skipped, err := Replay(filepath.Join(t.TempDir(), "none.jsonl"), 1<<20, func(*aep.Event) { t.Fatal("event from no log") })
	if err != nil || skipped != 0 {
		t.Fatalf("Replay of a missing log = %d, %v", skipped, err)
	}
}

// A log that exists but cannot be read is reported with its path, not
// replayed as if it were empty. A directory stands in for an unreadable file
// (permissions do not stop root, which CI runs as).
func TestReplayReportsUnreadableLog(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.jsonl")
	if err := os.Mkdir(path, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(path, "x"), []byte(replayLine), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := Replay(path, 1<<20, func(*aep.Event) { t.Fatal("event from a directory") })
	if err == nil || !strings.Contains(err.Error(), path) {
		t.Fatalf("Replay of an unreadable log: err %v, want one naming %s", err, path)
	}
}

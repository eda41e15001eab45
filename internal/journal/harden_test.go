package journal

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/aep-kimi/aep-kimi/internal/safefile"
	"github.com/aep-kimi/aep-kimi/internal/testkit/safefiletest"
)

const event1 = `{"specversion":"0.1","id":"01J00000000000000000000001","type":"session.started","source":"aep://h/kimi-code/s","time":"2026-01-01T00:00:00Z","agent":"kimi-code","session":"s","seq":0,"epoch":1}`

// A crash mid-append leaves a partial line; the next open cuts it into a
// quarantine file (0600) and the next event starts a line of its own.
func TestAppendCutsTornTail(t *testing.T) {
	dir := t.TempDir()
	l := NewLog(dir, "s")
	torn := `{"specversion":"0.1","id":"01J0000000000`
	if err := os.WriteFile(l.Path(), []byte(event1+"\n"+torn), 0o600); err != nil {
		t.Fatal(err)
	}
	var reps []Repair
	l.OnRepair(func(r Repair) { reps = append(reps, r) })
	if err := l.Append([]byte(`{"b":2}`)); err != nil {
		t.Fatal(err)
	}
	l.Close()
	b, _ := os.ReadFile(l.Path())
	if string(b) != event1+"\n{\"b\":2}\n" {
		t.Fatalf("log %q", b)
	}
	if len(reps) != 1 || reps[0].Action != RepairCut || reps[0].Bytes != int64(len(torn)) || reps[0].Path != l.Path() {
		t.Fatalf("repairs %+v", reps)
	}
	q := reps[0].Quarantine
	if !strings.HasPrefix(q, l.Path()+TornSuffix) {
		t.Fatalf("quarantine %s", q)
	}
	if qb, err := os.ReadFile(q); err != nil || string(qb) != torn {
		t.Fatalf("quarantine holds %q %v", qb, err)
	}
	if st, _ := os.Stat(q); st.Mode().Perm() != 0o600 && runtime.GOOS != "windows" {
		t.Fatalf("quarantine mode %v", st.Mode().Perm())
	}
	// Reopening finds nothing torn.
	l.Append([]byte(`{"c":3}`))
	l.Close()
	if len(reps) != 1 {
		t.Fatalf("repaired twice: %+v", reps)
	}
}

// A torn log with no newline at all is cut back to nothing.
func TestAppendCutsTornOnlyLine(t *testing.T) {
	l := NewLog(t.TempDir(), "s")
	big := strings.Repeat("x", 3*scanChunk+5) // the scan crosses chunks
	os.WriteFile(l.Path(), []byte(big), 0o600)
	var rep Repair
	l.OnRepair(func(r Repair) { rep = r })
	if err := l.Append([]byte(`{"a":1}`)); err != nil {
		t.Fatal(err)
	}
	l.Close()
	if b, _ := os.ReadFile(l.Path()); string(b) != "{\"a\":1}\n" {
		t.Fatalf("log %q", b)
	}
	if qb, _ := os.ReadFile(rep.Quarantine); string(qb) != big {
		t.Fatalf("quarantine holds %d bytes, want %d", len(qb), len(big))
	}
}

// A whole event that lost only its newline keeps its place in the log.
func TestAppendCompletesWholeLastEvent(t *testing.T) {
	l := NewLog(t.TempDir(), "s")
	os.WriteFile(l.Path(), []byte(event1), 0o600)
	var rep Repair
	l.OnRepair(func(r Repair) { rep = r })
	l.Append([]byte(`{"b":2}`))
	l.Close()
	if b, _ := os.ReadFile(l.Path()); string(b) != event1+"\n{\"b\":2}\n" {
		t.Fatalf("log %q", b)
	}
	if rep.Action != RepairCompleted || rep.Quarantine != "" {
		t.Fatalf("repair %+v", rep)
	}
}

func TestLogRefusesLink(t *testing.T) {
	dir := t.TempDir()
	l := NewLog(dir, "s")
	link := safefiletest.Plant(t, l.Path())
	if err := l.Append([]byte(`{"a":1}`)); !errors.Is(err, safefile.ErrLink) {
		t.Fatalf("append through a link: %v", err)
	}
	link.Untouched(t)
}

func TestEpochRefusesLink(t *testing.T) {
	path := filepath.Join(t.TempDir(), "kimi", "epoch")
	link := safefiletest.Plant(t, path)
	if _, err := NextEpoch(path, time.Unix(2_000_000_000, 0)); !errors.Is(err, safefile.ErrLink) {
		t.Fatalf("epoch through a link: %v", err)
	}
	link.Untouched(t)
}

// A log left readable by others is tightened to 0600 when it opens.
func TestAppendTightensMode(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("no Unix modes")
	}
	l := NewLog(t.TempDir(), "s")
	os.WriteFile(l.Path(), []byte(event1+"\n"), 0o644)
	os.Chmod(l.Path(), 0o644)
	if err := l.Append([]byte(`{"b":2}`)); err != nil {
		t.Fatal(err)
	}
	l.Close()
	if st, _ := os.Stat(l.Path()); st.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v", st.Mode().Perm())
	}
}

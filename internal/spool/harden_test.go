package spool

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/aep-kimi/aep-kimi/internal/safefile"
	"github.com/aep-kimi/aep-kimi/internal/testkit/safefiletest"
)

func TestAppendRefusesLinkedLock(t *testing.T) {
	dir := t.TempDir()
	link := safefiletest.Plant(t, filepath.Join(dir, ".lock"))
	if _, _, err := Append(dir, Header{}, []byte("x")); !errors.Is(err, safefile.ErrLink) {
		t.Fatalf("append through a linked lock: %v", err)
	}
	link.Untouched(t)
}

func TestReadRefusesLinkedRecord(t *testing.T) {
	dir := t.TempDir()
	link := safefiletest.Plant(t, recordPath(dir, 7))
	if files, _ := List(dir); len(files) != 0 {
		t.Fatalf("a link listed as a record: %v", files)
	}
	if _, err := Read(link.Path); !errors.Is(err, safefile.ErrLink) {
		t.Fatalf("read through a link: %v", err)
	}
	// Numbering never lands on the link's name either.
	seq, _, err := Append(dir, Header{}, []byte("x"))
	if err != nil || seq == 7 {
		t.Fatalf("seq %d err %v", seq, err)
	}
	link.Untouched(t)
}

// Raw payloads in quarantine are bounded by age, then by bytes, oldest
// first.
func TestPruneQuarantine(t *testing.T) {
	dir := t.TempDir()
	now := time.Now()
	ages := []time.Duration{10 * 24 * time.Hour, 3 * time.Hour, 2 * time.Hour, time.Hour}
	var paths []string
	for i, age := range ages {
		src := recordPath(dir, uint64(i+1))
		os.WriteFile(src, make([]byte, 100), 0o600)
		dst, err := Quarantine(src, fmt.Sprint("reason ", i))
		if err != nil {
			t.Fatal(err)
		}
		os.Chtimes(dst, now.Add(-age), now.Add(-age))
		paths = append(paths, dst)
	}
	p, err := PruneQuarantine(dir, now, 250, 7*24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if p.Aged != 1 || p.OverBytes != 1 || p.Kept != 2 || p.KeptBytes != 200 {
		t.Fatalf("pruned %+v", p)
	}
	qs, _ := ListQuarantine(dir)
	if len(qs) != 2 || qs[0].Path != paths[2] || qs[1].Path != paths[3] || qs[1].Reason != "reason 3" {
		t.Fatalf("left %+v", qs)
	}
	for _, gone := range paths[:2] {
		if _, err := os.Stat(gone + ReasonExt); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("reason note of %s left behind", gone)
		}
	}
}

// Keep syncs a record that stays, never through a link in its place, and
// names a record that is gone.
func TestKeep(t *testing.T) {
	dir := t.TempDir()
	_, rec, err := Append(dir, Header{Reason: "unreachable"}, []byte("payload"))
	if err != nil {
		t.Fatal(err)
	}
	if err := Keep(rec); err != nil {
		t.Fatalf("keep: %v", err)
	}
	if r, err := Read(rec); err != nil || string(r.Payload) != "payload" {
		t.Fatalf("kept record reads %q %v", r.Payload, err)
	}
	link := safefiletest.Plant(t, recordPath(dir, 99))
	if err := Keep(link.Path); !errors.Is(err, safefile.ErrLink) {
		t.Fatalf("keep through a link: %v", err)
	}
	link.Untouched(t)
	if err := Keep(recordPath(dir, 1234)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("keep of a missing record: %v", err)
	}
}

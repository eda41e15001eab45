package spool

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

func TestAppendReadInOrder(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "spool")
	payloads := [][]byte{[]byte(`{"hook_event_name":"A"}`), []byte("not json \x00\xff"), {}}
	for i, p := range payloads {
		seq, _, err := Append(dir, Header{Delivery: "d" + string(rune('0'+i)), Reason: "unreachable"}, p)
		if err != nil {
			t.Fatal(err)
		}
		if seq != uint64(i+1) {
			t.Fatalf("seq %d, want %d", seq, i+1)
		}
	}
	files, err := List(dir)
	if err != nil || len(files) != 3 {
		t.Fatalf("List = %v, %v", files, err)
	}
	for i, f := range files {
		r, err := Read(f)
		if err != nil {
			t.Fatal(err)
		}
		if r.Seq != uint64(i+1) || !bytes.Equal(r.Payload, payloads[i]) {
			t.Fatalf("record %d: seq %d payload %q", i, r.Seq, r.Payload)
		}
	}
	st, _ := os.Stat(dir)
	if st.Mode().Perm() != 0o700 {
		t.Fatalf("spool dir mode %v", st.Mode().Perm())
	}
}

// Concurrent writers (several kimi-hook processes at once) never share a
// sequence number or lose a record.
func TestAppendConcurrent(t *testing.T) {
	dir := t.TempDir()
	const n = 40
	var wg sync.WaitGroup
	seqs := make(chan uint64, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, _, err := Append(dir, Header{}, []byte("x"))
			if err != nil {
				t.Error(err)
			}
			seqs <- s
		}()
	}
	wg.Wait()
	close(seqs)
	seen := map[uint64]bool{}
	for s := range seqs {
		if seen[s] {
			t.Fatalf("sequence %d handed out twice", s)
		}
		seen[s] = true
	}
	files, _ := List(dir)
	if len(files) != n {
		t.Fatalf("%d records on disk, want %d", len(files), n)
	}
}

func TestSeqSurvivesLostCounter(t *testing.T) {
	dir := t.TempDir()
	Append(dir, Header{}, []byte("a"))
	Append(dir, Header{}, []byte("b"))
	os.Remove(filepath.Join(dir, ".lock"))
	s, _, err := Append(dir, Header{}, []byte("c"))
	if err != nil || s != 3 {
		t.Fatalf("seq %d err %v, want 3", s, err)
	}
}

func TestCorruptAndQuarantine(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "00000000000000000001.hook")
	os.WriteFile(bad, []byte("no header"), 0o600)
	if _, err := Read(bad); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Read = %v, want ErrCorrupt", err)
	}
	dst, err := Quarantine(bad, "corrupt spool record: bad header")
	if err != nil {
		t.Fatal(err)
	}
	qs, err := ListQuarantine(dir)
	if err != nil || len(qs) != 1 || qs[0].Path != dst || qs[0].Size != 9 || qs[0].Reason != "corrupt spool record: bad header" {
		t.Fatalf("quarantine lists %+v %v", qs, err)
	}
	files, _ := List(dir)
	if len(files) != 0 {
		t.Fatalf("quarantined record still listed: %v", files)
	}
}

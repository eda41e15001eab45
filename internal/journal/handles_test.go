package journal

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/aep-kimi/aep-kimi/aep"
	"github.com/aep-kimi/aep-kimi/mapping"
)

// Many logs written at once through a small handle bound keep at most that
// many files open, and every line still lands in its own file, in order.
func TestHandlesBoundOpenFiles(t *testing.T) {
	dir := t.TempDir()
	const logs, lines, bound = 40, 25, 5
	h := NewHandles(bound)
	all := make([]*Log, logs)
	for i := range all {
		all[i] = h.NewLog(dir, fmt.Sprintf("s%d", i))
	}
	var wg sync.WaitGroup
	errs := make(chan error, logs)
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 0; n < lines; n++ {
				for i := g; i < logs; i += 8 { // each log has one writer
					if err := all[i].Append([]byte(fmt.Sprintf(`{"n":%d}`, n))); err != nil {
						errs <- err
						return
					}
					if open := h.Open(); open > bound {
						errs <- fmt.Errorf("%d files open, bound %d", open, bound)
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	open := 0
	for i, l := range all {
		if l.IsOpen() {
			open++
		}
		b, err := os.ReadFile(filepath.Join(dir, FileName(fmt.Sprintf("s%d", i))))
		if err != nil {
			t.Fatal(err)
		}
		var want bytes.Buffer
		for n := 0; n < lines; n++ {
			fmt.Fprintf(&want, "{\"n\":%d}\n", n)
		}
		if !bytes.Equal(b, want.Bytes()) {
			t.Fatalf("log %d:\n%s", i, b)
		}
	}
	if open > bound || h.Open() != open {
		t.Fatalf("%d logs open, Handles counts %d, bound %d", open, h.Open(), bound)
	}
	for _, l := range all {
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if h.Open() != 0 {
		t.Fatalf("%d still counted after Close", h.Open())
	}
}

// A batch whose append fails leaves no trace: nothing published or counted
// as emitted, the seqs handed out again; the next batch lands whole.
func TestStreamBatchWholeOrNothing(t *testing.T) {
	dir := t.TempDir()
	log := NewLog(dir, "s")
	// A directory where the log file should be: every open fails.
	if err := os.Mkdir(log.Path(), 0o700); err != nil {
		t.Fatal(err)
	}
	rec := &recorder{}
	s := testStream(t, log, rec)
	p := mapping.DefaultPosture()
	at := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	s.Begin()
	s.Emit(Entry{Event: mapping.RunStarted(mapping.TriggerUser, p), At: at, Run: "r1"})
	s.Emit(Entry{Event: mapping.RunDrained(p), At: at, Run: "r1"})
	if err := s.Commit(); err == nil {
		t.Fatal("commit onto an unopenable log succeeded")
	}
	if len(rec.published) != 0 || len(rec.emitted) != 0 || rec.failed != 2 {
		t.Fatalf("published %d emitted %d failed %d, want 0 0 2", len(rec.published), len(rec.emitted), rec.failed)
	}
	if err := os.Remove(log.Path()); err != nil {
		t.Fatal(err)
	}
	s.Begin()
	a := s.Emit(Entry{Event: mapping.RunStarted(mapping.TriggerUser, p), At: at, Run: "r1"})
	b := s.Emit(Entry{Event: mapping.RunDrained(p), At: at, Run: "r1"})
	if len(rec.published) != 0 {
		t.Fatal("published before the batch was durable")
	}
	if err := s.Commit(); err != nil {
		t.Fatal(err)
	}
	if *a.Seq != 0 || *b.Seq != 1 || len(rec.published) != 2 {
		t.Fatalf("seqs %d %d, published %d", *a.Seq, *b.Seq, len(rec.published))
	}
	raw, _ := os.ReadFile(log.Path())
	if n := bytes.Count(raw, []byte("\n")); n != 2 {
		t.Fatalf("%d lines in the log", n)
	}
	// Recovered from a log holding this epoch's seqs 0 and 1, a stream
	// continues at 2.
	s2 := testStream(t, NewLog(dir, "s"), &recorder{})
	s2.Recover(1<<20, func(*aep.Event) {})
	if ev := s2.Emit(Entry{Event: mapping.RunDrained(p), At: at}); *ev.Seq != 2 {
		t.Fatalf("seq %d after recovering seqs 0 and 1", *ev.Seq)
	}
}

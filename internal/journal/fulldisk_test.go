package journal

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aep-kimi/aep-kimi/aep"
	"github.com/aep-kimi/aep-kimi/internal/syncmode"
	"github.com/aep-kimi/aep-kimi/internal/testkit/fulldisk"
	"github.com/aep-kimi/aep-kimi/mapping"
)

// partWay is a disk that fills in the middle of the next write: half of it
// reaches the file, then ENOSPC; and, when noCut, the cut back fails too.
type partWay struct {
	armed, noCut bool
}

func (p *partWay) Write(f *os.File, b []byte) (int, error) {
	if !p.armed {
		return f.Write(b)
	}
	p.armed = false
	n, err := f.Write(b[:len(b)/2])
	if err == nil {
		err = &os.PathError{Op: "write", Path: f.Name(), Err: syscall.ENOSPC}
	}
	return n, err
}

func (p *partWay) Truncate(f *os.File, size int64) error {
	if p.noCut {
		p.noCut = false
		return errors.New("injected: truncate refused")
	}
	return f.Truncate(size)
}

// wholeLines fails unless every line of the log parses as an event and the
// log ends in a newline; it returns the events' ids.
func wholeLines(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) > 0 && b[len(b)-1] != '\n' {
		t.Fatalf("log ends in a partial line: %q", b[max(len(b)-80, 0):])
	}
	var ids []string
	for _, line := range bytes.Split(bytes.TrimSuffix(b, []byte("\n")), []byte("\n")) {
		if len(line) == 0 {
			continue
		}
		ev, err := aep.ParseEvent(line)
		if err != nil {
			t.Fatalf("a torn line in the log: %v\n%.300s", err, line)
		}
		ids = append(ids, ev.ID)
	}
	return ids
}

// A disk that fills mid-append: the batch is refused (nothing published,
// its seqs handed out again), the log still ends at its last whole line,
// and the next batch starts a line of its own, whether the partial line
// was cut back at once or, when that failed too, by the next open.
func TestPartWayAppendLeavesWholeLines(t *testing.T) {
	for _, noCut := range []bool{false, true} {
		rec := &recorder{}
		l := NewLog(t.TempDir(), "s")
		faults := &partWay{}
		l.faults = faults
		s := testStream(t, l, rec)
		at := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
		emit := func(id string) error {
			s.Begin()
			s.Emit(Entry{Event: mapping.RunStarted(mapping.TriggerUser, mapping.DefaultPosture()), ID: id, At: at, Run: "r-" + id})
			return s.Commit()
		}
		if err := emit("01A"); err != nil {
			t.Fatal(err)
		}
		faults.armed, faults.noCut = true, noCut
		err := emit("01B")
		if !errors.Is(err, syscall.ENOSPC) {
			t.Fatalf("noCut=%v: the part-way append returned %v, want ENOSPC", noCut, err)
		}
		if err := emit("01C"); err != nil {
			t.Fatalf("noCut=%v: the append after the disk freed: %v", noCut, err)
		}
		l.Close()
		ids := wholeLines(t, l.Path())
		if strings.Join(ids, ",") != "01A,01C" {
			t.Fatalf("noCut=%v: log holds %v, want 01A,01C", noCut, ids)
		}
		if len(rec.published) != 2 || *rec.published[1].Seq != 1 || rec.failed != 1 {
			t.Fatalf("noCut=%v: published %d (second seq %v), failed %d", noCut, len(rec.published), rec.published[1].Seq, rec.failed)
		}
	}
}

// The same on a real full disk (a 1 MiB tmpfs, root only): every append
// the full disk refused left nothing behind, every one it took is a whole
// line, and appends work again once space is freed.
func TestFullDiskLeavesWholeLines(t *testing.T) {
	d := fulldisk.Mount(t, 1<<20)
	rec := &recorder{}
	l := NewLog(d.Dir, "s")
	s := testStream(t, l, rec)
	at := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	subject := strings.Repeat("x", 700) // lines of about 1 KiB: some straddle a page
	emit := func() error {
		s.Begin()
		s.Emit(Entry{Event: mapping.RunStarted(mapping.TriggerUser, mapping.DefaultPosture()), At: at, Run: "r", Subject: subject})
		return s.Commit()
	}
	if err := emit(); err != nil {
		t.Fatal(err)
	}
	d.Fill()
	refused, took := 0, 1
	for range 64 {
		if err := emit(); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("append on a full disk: %v", err)
			}
			refused++
		} else {
			took++
		}
	}
	if refused == 0 {
		t.Fatal("the full disk refused nothing")
	}
	d.Free()
	for range 3 {
		if err := emit(); err != nil {
			t.Fatalf("append after freeing space: %v", err)
		}
		took++
	}
	l.Close()
	if ids := wholeLines(t, l.Path()); len(ids) != took || len(rec.published) != took {
		t.Fatalf("log holds %d events, %d published, %d appends took (%d refused)", len(ids), len(rec.published), took, refused)
	}
}

// A new log's name reaches the disk before its first line is acknowledged:
// its directory is synced when the file is made (unless the mode syncs
// nothing), and not again for a log that already has lines.
func TestNewLogSyncsItsDirectory(t *testing.T) {
	for _, mode := range []syncmode.Mode{syncmode.Always, syncmode.Interval, syncmode.None} {
		var synced []string
		h := NewHandles(0).SetSync(mode, func(*os.File) error { return nil }, nil)
		h.syncDirFn = func(dir string) error { synced = append(synced, dir); return nil }
		dir := t.TempDir()
		l := h.NewLog(dir, "s")
		for range 3 {
			if err := l.Append([]byte(event1)); err != nil {
				t.Fatal(err)
			}
		}
		l.Close()
		if err := l.Append([]byte(event1)); err != nil { // reopened
			t.Fatal(err)
		}
		l.Close()
		want := []string{dir}
		if mode == syncmode.None {
			want = nil
		}
		if !slices.Equal(synced, want) {
			t.Errorf("%s: directory syncs %v, want %v", mode, synced, want)
		}
	}
}

// The logs stop being durable at the first failure and are again only when
// every log that failed has taken a write that reached the disk, or was
// closed: a write another log still fits in its last page says nothing of
// the disk, so it does not clear the state (which would flap with every
// hook on a full disk).
func TestDurableStateFollowsTheLogsThatFailed(t *testing.T) {
	var changes []string
	h := NewHandles(0).SetSync(syncmode.None, nil, nil).OnDurable(func(err error) {
		changes = append(changes, fmt.Sprint(err != nil))
	})
	dir := t.TempDir()
	a, b, c := h.NewLog(dir, "a"), h.NewLog(dir, "b"), h.NewLog(dir, "c")
	fa, fb := &partWay{}, &partWay{}
	a.faults, b.faults = fa, fb
	step := func(l *Log, f *partWay, fail bool, want string) {
		t.Helper()
		if f != nil {
			f.armed = fail
		}
		l.Append([]byte(event1)) //nolint:errcheck // the state is what is checked
		if got := strings.Join(changes, ","); got != want {
			t.Fatalf("changes %s, want %s", got, want)
		}
	}
	step(a, fa, false, "")
	step(a, fa, true, "true")
	step(b, fb, true, "true")
	step(c, nil, false, "true")      // another log fits: still not durable
	step(a, fa, false, "true")       // a is back, b is not
	step(b, fb, false, "true,false") // both back
	step(a, fa, true, "true,false,true")
	a.Close() // closed, a waits for nothing
	if got := strings.Join(changes, ","); got != "true,false,true,false" {
		t.Fatalf("changes %s after closing the failed log", got)
	}
	b.Close()
	c.Close()
}

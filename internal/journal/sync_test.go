package journal

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aep-kimi/aep-kimi/aep"
	"github.com/aep-kimi/aep-kimi/internal/syncmode"
	"github.com/aep-kimi/aep-kimi/internal/testkit/poll"
	"github.com/aep-kimi/aep-kimi/mapping"
)

// disk is an injected syncmode.Syncer that models the disk: each sync records the
// file's bytes as they were when it began (what it makes durable), in the
// order the syncs complete, and can be told to fail or to take its time.
type disk struct {
	mu     sync.Mutex
	synced [][]byte // per completed sync, the file's bytes it covered
	fail   int      // the next fail syncs fail
	delay  time.Duration
	order  []string // what happened, in order ("sync", and what tests add)
}

func (d *disk) sync(f *os.File) error {
	b, err := os.ReadFile(f.Name())
	if err != nil {
		return err
	}
	time.Sleep(d.delay) // the modelled disk's latency, not a synchronisation
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.fail > 0 {
		d.fail--
		d.order = append(d.order, "sync-failed")
		return errors.New("injected EIO")
	}
	d.synced = append(d.synced, b)
	d.order = append(d.order, "sync")
	return nil
}

func (d *disk) note(s string) {
	d.mu.Lock()
	d.order = append(d.order, s)
	d.mu.Unlock()
}

// durable is what the last completed sync put on the disk.
func (d *disk) durable() []byte {
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.synced) == 0 {
		return nil
	}
	return d.synced[len(d.synced)-1]
}

func (d *disk) syncs() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.synced)
}

func syncedLog(t *testing.T, mode syncmode.Mode, d *disk) *Log {
	t.Helper()
	h := NewHandles(0).SetSync(mode, d.sync, nil)
	l := h.NewLog(t.TempDir(), "s")
	t.Cleanup(func() { l.Close() })
	return l
}

// Group commit: appends from many writers, each waiting for its mark, are
// all covered by a sync that completed before the wait returned, and the
// writers that arrived while one sync ran shared the next (fewer syncs
// than appends).
func TestGroupCommitCoversEveryAck(t *testing.T) {
	d := &disk{delay: 2 * time.Millisecond}
	l := syncedLog(t, syncmode.Always, d)
	const writers, each = 8, 25
	var wg sync.WaitGroup
	errs := make(chan error, writers*each)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				line := fmt.Sprintf(`{"w":%d,"i":%d}`, w, i)
				if err := l.Append([]byte(line)); err != nil {
					errs <- err
					return
				}
				if err := l.Mark().Wait(); err != nil {
					errs <- err
					return
				}
				// Acknowledged: the line must be in what the disk holds now.
				if !strings.Contains(string(d.durable()), line+"\n") {
					errs <- fmt.Errorf("%s acknowledged before a sync covered it", line)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if n := d.syncs(); n == 0 || n >= writers*each {
		t.Fatalf("%d syncs for %d appends: no group commit", n, writers*each)
	}
	t.Logf("%d syncs served %d appends", d.syncs(), writers*each)
}

// A sync that fails fails every acknowledgement it covered, also one asked
// for after a later sync succeeded (the kernel may have dropped those
// pages); writes after it are acknowledged by the next good sync.
func TestGroupCommitFailureSticksToItsWrites(t *testing.T) {
	d := &disk{fail: 1}
	l := syncedLog(t, syncmode.Always, d)
	l.Append([]byte(`{"a":1}`))
	lost := l.Mark()
	if err := lost.Wait(); err == nil {
		t.Fatal("a failed sync acknowledged the write")
	}
	l.Append([]byte(`{"a":2}`))
	if err := l.Mark().Wait(); err != nil {
		t.Fatalf("the next write after a failed sync: %v", err)
	}
	if err := lost.Wait(); err == nil {
		t.Fatal("a write whose sync failed was acknowledged later")
	}
}

// The modes: none never syncs unless forced; interval acknowledges at once
// and syncs within syncmode.Every; a forced mark syncs in every mode.
func TestSyncModes(t *testing.T) {
	t.Run("none", func(t *testing.T) {
		d := &disk{}
		l := syncedLog(t, syncmode.None, d)
		l.Append([]byte(`{"a":1}`))
		if err := l.Mark().Wait(); err != nil || d.syncs() != 0 {
			t.Fatalf("none synced: %d syncs, %v", d.syncs(), err)
		}
		if err := l.Mark().Forced().Wait(); err != nil || d.syncs() != 1 {
			t.Fatalf("forced mark under none: %d syncs, %v", d.syncs(), err)
		}
	})
	t.Run("interval", func(t *testing.T) {
		d := &disk{}
		l := syncedLog(t, syncmode.Interval, d)
		l.Append([]byte(`{"a":1}`))
		if err := l.Mark().Wait(); err != nil {
			t.Fatal(err)
		}
		poll.Must(t, 5*time.Second, "a background sync", func() bool { return d.syncs() > 0 })
		if !strings.Contains(string(d.durable()), `{"a":1}`) {
			t.Fatalf("the interval sync missed the write: %q", d.durable())
		}
	})
	t.Run("unknown", func(t *testing.T) {
		if _, err := syncmode.Parse("sometimes"); err == nil {
			t.Fatal("an unknown mode parsed")
		}
		if m, err := syncmode.Parse(""); err != nil || m != syncmode.Default {
			t.Fatalf("empty mode: %q %v", m, err)
		}
	})
}

// A log whose handle the bound closed still syncs (through a fresh
// descriptor) what was written through the old one.
func TestSyncAfterHandleClosed(t *testing.T) {
	d := &disk{}
	l := syncedLog(t, syncmode.Always, d)
	l.Append([]byte(`{"a":1}`))
	m := l.Mark()
	l.Close()
	if err := m.Wait(); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(d.durable()), `{"a":1}`) {
		t.Fatalf("disk holds %q", d.durable())
	}
}

// An OS crash keeps what the disk had and may tear what it did not: every
// acknowledged line survives it, and the torn tail is cut on reopen.
func TestCrashKeepsEveryAcknowledgedLine(t *testing.T) {
	d := &disk{}
	l := syncedLog(t, syncmode.Always, d)
	var acked []string
	for i := range 20 {
		line := fmt.Sprintf(`{"i":%d,"pad":"%s"}`, i, strings.Repeat("x", i*7))
		l.Append([]byte(line))
		if i%3 == 0 {
			if err := l.Mark().Wait(); err != nil {
				t.Fatal(err)
			}
			acked = append(acked, line)
		}
	}
	l.Close()
	// The crash: the disk's bytes, then part of the unsynced rest.
	all, _ := os.ReadFile(l.Path())
	kept := d.durable()
	if len(kept) >= len(all) {
		t.Fatal("nothing was left unsynced to tear")
	}
	torn := append(append([]byte{}, kept...), all[len(kept):len(kept)+(len(all)-len(kept))/2]...)
	if err := os.WriteFile(l.Path(), torn, 0o600); err != nil {
		t.Fatal(err)
	}
	again := NewLog(filepath.Dir(l.Path()), "s")
	if err := again.Append([]byte(`{"after":1}`)); err != nil {
		t.Fatal(err)
	}
	again.Close()
	got, _ := os.ReadFile(l.Path())
	for _, line := range acked {
		if !strings.Contains(string(got), line+"\n") {
			t.Fatalf("acknowledged line lost by the crash: %s", line)
		}
	}
	for _, line := range strings.Split(strings.TrimSuffix(string(got), "\n"), "\n") {
		if !strings.HasPrefix(line, "{") || !strings.HasSuffix(line, "}") {
			t.Fatalf("a torn line survived the reopen: %q", line)
		}
	}
}

// A Durable entry (a control ack) is on the disk before it is published,
// whatever the mode; a plain one under none is published without a sync.
func TestDurableEntrySyncedBeforePublished(t *testing.T) {
	d := &disk{}
	l := syncedLog(t, syncmode.None, d)
	pub := publishFunc(func(ev *aep.Event) { d.note("publish " + ev.Type) })
	s := NewStream(StreamConfig{Source: "aep://h/agent/kimi-code/session/s", Agent: mapping.Agent, Session: "s", Epoch: 1, Log: l, Publisher: pub})
	p := mapping.DefaultPosture()
	s.Emit(Entry{Event: mapping.RunStarted(mapping.TriggerUser, p), At: time.Now(), Run: "r1"})
	s.Emit(Entry{Event: mapping.ControlAccepted(p), At: time.Now(), Durable: true})
	s.Begin()
	s.Emit(Entry{Event: mapping.ControlRejected("invalid", "no", p), At: time.Now(), Durable: true})
	if err := s.Commit(); err != nil {
		t.Fatal(err)
	}
	want := []string{"publish run.started", "sync", "publish control.accepted", "sync", "publish control.rejected"}
	if strings.Join(d.order, ",") != strings.Join(want, ",") {
		t.Fatalf("order %v, want %v", d.order, want)
	}
}

type publishFunc func(*aep.Event)

func (f publishFunc) Publish(ev *aep.Event) { f(ev) }

// A durable batch written but not synced is not published, and its seqs
// stay spent: its lines are in the file, so the next event takes the next
// position rather than one the log already holds. Abort hands a batch's
// seqs back, since nothing of it was written.
func TestUnsyncedBatchKeepsItsSeqs(t *testing.T) {
	failing := true
	h := NewHandles(0).SetSync(syncmode.None, func(*os.File) error {
		if failing {
			return errors.New("EIO")
		}
		return nil
	}, nil)
	l := h.NewLog(t.TempDir(), "s")
	t.Cleanup(func() { l.Close() })
	rec := &recorder{}
	s := testStream(t, l, rec)
	p := mapping.DefaultPosture()
	s.Begin()
	s.Emit(Entry{Event: mapping.ControlAccepted(p), At: time.Now(), Durable: true})
	if err := s.Commit(); err == nil {
		t.Fatal("a batch whose sync failed committed")
	}
	if len(rec.published) != 0 {
		t.Fatalf("published %d events of an unsynced batch", len(rec.published))
	}
	failing = false
	s.Begin()
	s.Emit(Entry{Event: mapping.PromptQueued(p), At: time.Now()})
	s.Abort()
	ev := s.Emit(Entry{Event: mapping.ControlAccepted(p), At: time.Now(), Durable: true})
	if ev == nil || *ev.Seq != 1 {
		t.Fatalf("the event after an unsynced batch and an aborted one: %v, want seq 1", ev)
	}
	seqs := map[int64]int{}
	if _, err := Replay(l.Path(), 1<<20, func(e *aep.Event) { seqs[*e.Seq]++ }); err != nil {
		t.Fatal(err)
	}
	for seq, n := range seqs {
		if n > 1 {
			t.Fatalf("seq %d is in the log %d times", seq, n)
		}
	}
}

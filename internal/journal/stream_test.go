package journal

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/aep-kimi/aep-kimi/aep"
	"github.com/aep-kimi/aep-kimi/mapping"
)

// recorder keeps what a stream published and counted.
type recorder struct {
	published     []*aep.Event
	emitted       []string
	failed        int
	recoverMissed int
}

func (r *recorder) Publish(ev *aep.Event) { r.published = append(r.published, ev) }
func (r *recorder) Emitted(typ string)    { r.emitted = append(r.emitted, typ) }
func (r *recorder) AppendFailed()         { r.failed++ }
func (r *recorder) RecoveryIncomplete()   { r.recoverMissed++ }

func testStream(t *testing.T, log *Log, rec *recorder) *Stream {
	t.Helper()
	return NewStream(StreamConfig{
		Source: "aep://h/agent/kimi-code/session/s", Agent: mapping.Agent, Session: "s", Epoch: 7,
		Log: log, Publisher: rec, Counters: rec,
	})
}

func TestStreamOneOrder(t *testing.T) {
	dir := t.TempDir()
	log := NewLog(dir, "s")
	rec := &recorder{}
	s := testStream(t, log, rec)
	p := mapping.DefaultPosture()
	at := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	first := s.Emit(Entry{Event: mapping.RunStarted(mapping.TriggerUser, p), At: at, Run: "r1",
		Ext: []Ext{{Name: "kimidelivery", Value: "d1"}}})
	second := s.Emit(Entry{Event: mapping.RunDrained(p), ID: "01FIXED", At: at.Add(time.Second), Run: "r1",
		Cause: first.ID, Subject: "why"})
	if first == nil || second == nil {
		t.Fatal("emit failed")
	}
	if *first.Seq != 0 || *second.Seq != 1 || *first.Epoch != 7 || second.ID != "01FIXED" || second.Subject != "why" {
		t.Fatalf("identity: %+v %+v", first, second)
	}
	if d, ok := first.ExtString("kimidelivery"); !ok || d != "d1" {
		t.Fatalf("extension %q", d)
	}
	for _, ev := range []*aep.Event{first, second} {
		if err := aep.Validate(ev); err != nil {
			t.Fatalf("invalid event: %v", err)
		}
	}
	raw, err := os.ReadFile(filepath.Join(dir, FileName("s")))
	if err != nil {
		t.Fatal(err)
	}
	lines := bytes.Split(bytes.TrimSuffix(raw, []byte("\n")), []byte("\n"))
	if len(lines) != 2 || len(rec.published) != 2 || len(rec.emitted) != 2 {
		t.Fatalf("%d lines, %d published, %d counted", len(lines), len(rec.published), len(rec.emitted))
	}
	// The log holds the exact bytes the publisher forwards, in seq order.
	for i, ev := range rec.published {
		b, _ := ev.Bytes()
		if !bytes.Equal(b, lines[i]) || *ev.Seq != int64(i) {
			t.Fatalf("line %d differs from the published event:\n%s\n%s", i, lines[i], b)
		}
	}
}

func TestStreamRefusesWithoutSpendingSeq(t *testing.T) {
	rec := &recorder{}
	s := testStream(t, NewLog(t.TempDir(), "s"), rec)
	p := mapping.DefaultPosture()
	bad := s.Emit(Entry{Event: mapping.ControlAccepted(p), Ext: []Ext{{Name: "seq", Value: "collides"}}})
	if bad != nil || len(rec.published) != 0 || len(rec.emitted) != 0 {
		t.Fatalf("an event with a colliding extension was emitted: %+v", bad)
	}
	ok := s.Emit(Entry{Event: mapping.ControlAccepted(p)})
	if ok == nil || *ok.Seq != 0 {
		t.Fatalf("seq spent by a refused event: %+v", ok)
	}
}

func TestStreamLogFailureStillPublishes(t *testing.T) {
	dir := t.TempDir()
	blocker := filepath.Join(dir, "file")
	if err := os.WriteFile(blocker, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	rec := &recorder{}
	s := testStream(t, NewLog(filepath.Join(blocker, "logs"), "s"), rec)
	if ev := s.Emit(Entry{Event: mapping.ControlAccepted(mapping.DefaultPosture())}); ev == nil {
		t.Fatal("emit refused")
	}
	if rec.failed != 1 || len(rec.published) != 1 || len(rec.emitted) != 1 {
		t.Fatalf("failed %d, published %d, counted %d", rec.failed, len(rec.published), len(rec.emitted))
	}
	var nilStream *Stream
	if nilStream.Log() != nil {
		t.Fatal("a nil stream has a log")
	}
}

// Recovery folds what it can read and counts a log it could not read whole,
// so a restarted emitter never misses state silently.
func TestStreamRecoverCountsWhatItMissed(t *testing.T) {
	dir := t.TempDir()
	rec := &recorder{}
	s := testStream(t, NewLog(dir, "s"), rec)
	p := mapping.DefaultPosture()
	at := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	if s.Emit(Entry{Event: mapping.RunStarted(mapping.TriggerUser, p), At: at}) == nil {
		t.Fatal("emit failed")
	}
	if err := s.Log().Close(); err != nil {
		t.Fatal(err)
	}

	var folded int
	fresh := testStream(t, NewLog(dir, "s"), rec)
	fresh.Recover(1<<20, func(*aep.Event) { folded++ })
	if folded != 1 || rec.recoverMissed != 0 {
		t.Fatalf("clean log: folded %d, missed %d", folded, rec.recoverMissed)
	}

	f, err := os.OpenFile(filepath.Join(dir, FileName("s")), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString("not an event\n"); err != nil {
		t.Fatal(err)
	}
	f.Close()
	folded = 0
	fresh.Recover(1<<20, func(*aep.Event) { folded++ })
	if folded != 1 || rec.recoverMissed != 1 {
		t.Fatalf("log with a bad line: folded %d, missed %d", folded, rec.recoverMissed)
	}
}

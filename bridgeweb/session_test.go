package bridgeweb

import (
	"bytes"
	"fmt"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/aep-kimi/aep-kimi/aep"
	"github.com/aep-kimi/aep-kimi/emitter"
	"github.com/aep-kimi/aep-kimi/internal/testkit/emittertest"
	"github.com/aep-kimi/aep-kimi/mapping"
)

func offlineBridge(t *testing.T, mode mapping.Mode, home string) (*Bridge, *emittertest.Recorder) {
	t.Helper()
	pub := &emittertest.Recorder{}
	b, err := NewBridge(Config{Config: emitter.Config{Home: home, Host: "h", Publisher: pub,
		Logger: slog.New(slog.DiscardHandler)}, KimiHome: t.TempDir(), Mode: mode})
	if err != nil {
		t.Fatal(err)
	}
	return b, pub
}

func xEvent(typ string) mapping.Event {
	return mapping.Event{Type: typ, Capture: aep.CaptureMetadata, Data: map[string]any{}}
}

// An idle session's log is closed and reopens, appending, on the next event.
func TestIdleLogReopens(t *testing.T) {
	t.Parallel()
	b, _ := offlineBridge(t, mapping.Companion, t.TempDir())
	s := b.lock("k1")
	s.emit(draft{ev: xEvent("x.kimi-code.web.a.b")}, time.Now(), 1, "A")
	s.Unlock()
	b.core.CloseIdle(time.Now().Add(time.Hour))
	if s.Stream().Log().IsOpen() {
		t.Fatal("idle log still open")
	}
	s.Lock()
	s.emit(draft{ev: xEvent("x.kimi-code.web.a.c")}, time.Now(), 2, "A")
	s.Unlock()
	b.core.CloseAll()
	raw, err := os.ReadFile(s.Stream().Log().Path())
	if err != nil {
		t.Fatal(err)
	}
	if n := bytes.Count(raw, []byte("\n")); n != 2 {
		t.Errorf("%d lines after reopening", n)
	}
}

// A frame name that cannot be an AEP type still lands, under a legal name.
func TestUnexpressibleFrameType(t *testing.T) {
	t.Parallel()
	b, pub := offlineBridge(t, mapping.Companion, t.TempDir())
	s := b.lock("k1")
	s.emit(draft{ev: xEvent("x.kimi-code.web.turn.startp_\u0570")}, time.Now(), 1, "A")
	s.Unlock()
	evs := pub.All()
	if len(evs) != 1 || evs[0].Type != UnrecognizedType {
		t.Fatalf("%v", typesOf(evs))
	}
	if err := aep.Validate(evs[0]); err != nil {
		t.Error(err)
	}
}

// The position recovered from a log is the last event's, gaps included.
func TestRecoverPosition(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	b, _ := offlineBridge(t, mapping.Companion, home)
	s := b.lock("k1")
	s.emit(draft{ev: xEvent("x.kimi-code.web.a.b")}, time.Now(), 7, "A")
	s.emitGap(gap{reason: GapBufferOverflow, from: 8, to: 2000, epoch: "A", nextEpoch: "A", at: 2000})
	s.emit(draft{ev: xEvent("control.accepted")}, time.Now(), -1, "") // no kap position
	s.Unlock()
	b.core.CloseAll()

	b2, _ := offlineBridge(t, mapping.Companion, home)
	s2 := b2.lock("k1")
	seq, epoch, ok := s2.cur.position()
	s2.Unlock()
	if !ok || seq != 2000 || epoch != "A" {
		t.Errorf("recovered %d@%s (%v)", seq, epoch, ok)
	}
	if b2.Epoch() <= b.Epoch() {
		t.Errorf("epoch %d after %d", b2.Epoch(), b.Epoch())
	}
}

// The bridge's session logs share one bound on open files: past it the
// least recently written closes, and reopens, appending, on its next event.
func TestOpenLogsBounded(t *testing.T) {
	t.Parallel()
	const max, n = 4, 40
	home := t.TempDir()
	b, err := NewBridge(Config{Config: emitter.Config{Home: home, Host: "h", MaxOpenLogs: max,
		Logger: slog.New(slog.DiscardHandler)}, KimiHome: t.TempDir(), Mode: mapping.Companion})
	if err != nil {
		t.Fatal(err)
	}
	var sessions []*webSession
	for round := int64(1); round <= 2; round++ {
		for i := 0; i < n; i++ {
			if round == 1 {
				s := b.lock(fmt.Sprintf("k%d", i))
				s.Unlock()
				sessions = append(sessions, s)
			}
			s := sessions[i]
			s.Lock()
			s.emit(draft{ev: xEvent("x.kimi-code.web.a.b")}, time.Now(), round, "A")
			s.Unlock()
			open := 0
			for _, s := range sessions {
				if s.Stream().Log().IsOpen() {
					open++
				}
			}
			if open > max || b.core.OpenLogs() != open {
				t.Fatalf("%d logs open (%d counted), bound %d", open, b.core.OpenLogs(), max)
			}
		}
	}
	b.core.CloseAll()
	for _, s := range sessions {
		raw, err := os.ReadFile(s.Stream().Log().Path())
		if err != nil {
			t.Fatal(err)
		}
		if c := bytes.Count(raw, []byte("\n")); c != 2 {
			t.Fatalf("%s: %d lines, want 2", s.Name(), c)
		}
	}
	mfs, err := b.core.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, mf := range mfs {
		if mf.GetName() == "aepkimi_bridgeweb_open_logs" {
			found = true
			if v := mf.GetMetric()[0].GetGauge().GetValue(); v != 0 {
				t.Fatalf("open logs gauge %v after closing", v)
			}
		}
	}
	if !found {
		t.Fatal("/metrics lacks aepkimi_bridgeweb_open_logs")
	}
}

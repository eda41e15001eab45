package emitter

import (
	"context"
	"errors"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aep-kimi/aep-kimi/aep"
	"github.com/aep-kimi/aep-kimi/internal/journal"
	"github.com/aep-kimi/aep-kimi/internal/syncmode"
	"github.com/aep-kimi/aep-kimi/internal/testkit/emittertest"
	"github.com/aep-kimi/aep-kimi/mapping"
)

// ratePosture keeps the rejections' details, which the tests read.
var ratePosture = mapping.Posture{Capture: aep.CaptureRedacted, AttentionCapture: aep.CaptureRedacted}

func acceptRatings(s *Spec) {
	s.Commands = append(s.Commands, mapping.TypeRate)
	s.Accepts = append(s.Accepts, mapping.TypeRate)
}

// rateFixture is a core that accepts ratings, with session s1 holding run
// r1 (finished) and r2 (still open); it returns r1's terminal.
func rateFixture(t *testing.T) (*fixture, *aep.Event) {
	t.Helper()
	return rateFixtureSync(t, nil)
}

// rateFixtureSync is rateFixture with the logs' syncer.
func rateFixtureSync(t *testing.T, syncer syncmode.Syncer) (*fixture, *aep.Event) {
	t.Helper()
	f := newFixtureSync(t, t.TempDir(), ratePosture, acceptRatings, syncer)
	s := f.core.Lock("s1")
	defer s.Unlock()
	p := mapping.DefaultPosture()
	at := *f.now
	s.Stream().Emit(journal.Entry{Event: mapping.RunStarted(mapping.TriggerUser, p), At: at, Run: "r1"})
	fin := s.Stream().Emit(journal.Entry{Event: mapping.RunDrained(p), At: at, Run: "r1"})
	s.Stream().Emit(journal.Entry{Event: mapping.RunStarted(mapping.TriggerUser, p), At: at, Run: "r2"})
	if fin == nil {
		t.Fatal("the run's terminal was not emitted")
	}
	return f, fin
}

// rate is a rating command as the relay routes it: the person it stamped
// (mapping.ExtBy), and whatever else the sender wrote.
func rate(t *testing.T, run string, data map[string]any, by string) *aep.Event {
	t.Helper()
	cmd := emittertest.Command(t, mapping.TypeRate, "s1", "", data)
	cmd.Run, cmd.Agent = run, mapping.AgentPage
	if by != "" {
		if err := cmd.SetExt(mapping.ExtBy, by); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := cmd.Seal(); err != nil {
		t.Fatal(err)
	}
	return cmd
}

// A rating of a finished run is acked, then recorded as AEP-0009 feedback
// in the run's session, caused by the run's terminal, naming the person the
// relay stamped, not anyone the command's data names.
func TestRatingRecordsFeedback(t *testing.T) {
	f, fin := rateFixture(t)
	cmd := rate(t, "r1", map[string]any{"rating": -1, "comment": "it edited the wrong file",
		"x-kimi-code-by": "mallory", "by": "mallory", "source": "robot"}, "alice")
	f.core.HandleCommand(context.Background(), cmd)
	acks := f.acks(cmd)
	if len(acks) != 1 || acks[0].Type != "control.accepted" {
		t.Fatalf("acks %v", acks)
	}
	fb := f.pub.Find(mapping.TypeFeedback)
	if len(fb) != 1 {
		t.Fatalf("%d feedback events", len(fb))
	}
	ev := fb[0]
	if err := aep.Validate(ev); err != nil {
		t.Fatalf("feedback does not validate: %v", err)
	}
	if ev.Run != "r1" || ev.Cause != fin.ID || ev.Session != "s1" || ev.Seq == nil || *ev.Seq <= *acks[0].Seq {
		t.Fatalf("feedback envelope: run %q cause %q (terminal %s) seq %v after ack %v", ev.Run, ev.Cause, fin.ID, ev.Seq, acks[0].Seq)
	}
	d, _ := ev.DataMap()
	if d[mapping.DataBy] != "alice" || d["source"] != mapping.FeedbackSource || d["label"] != mapping.LabelThumbsDown ||
		d["comment"] != "it edited the wrong file" || d[mapping.DataSurface] != "page" {
		t.Fatalf("feedback data %v", d)
	}
	if _, ok := d["by"]; ok {
		t.Fatalf("the sender's own member reached the record: %v", d)
	}
}

// A rating the run cannot take is rejected with a reason and records
// nothing.
func TestRatingRefused(t *testing.T) {
	for _, tc := range []struct {
		name, run string
		data      map[string]any
		detail    string
	}{
		{"open run", "r2", map[string]any{"rating": 1}, "has not finished"},
		{"unknown run", "r9", map[string]any{"rating": 1}, "not one of this session's"},
		{"no run", "", map[string]any{"rating": 1}, "names the run"},
		{"bad rating", "r1", map[string]any{"rating": 5}, "rating is 1"},
		{"oversize note", "r1", map[string]any{"rating": -1, "comment": strings.Repeat("x", mapping.MaxNoteRunes+1)}, "longer than"},
		{"control characters", "r1", map[string]any{"rating": -1, "comment": "ok\x1b[2J"}, "control character"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, _ := rateFixture(t)
			cmd := rate(t, tc.run, tc.data, "alice")
			f.core.HandleCommand(context.Background(), cmd)
			acks := f.acks(cmd)
			if len(acks) != 1 || acks[0].Type != "control.rejected" {
				t.Fatalf("acks %v", acks)
			}
			d, _ := acks[0].DataMap()
			if detail, _ := d["detail"].(string); d["reason"] != "invalid" || !strings.Contains(detail, tc.detail) {
				t.Fatalf("rejection %v, want invalid with %q", d, tc.detail)
			}
			if fb := f.pub.Find(mapping.TypeFeedback); len(fb) != 0 {
				t.Fatalf("a refused rating was recorded: %v", fb)
			}
		})
	}
}

// A session recovered from its log after a restart (nothing of it in
// memory) still knows which of its runs ended: the log says.
func TestRatingAfterRestart(t *testing.T) {
	f, fin := rateFixture(t)
	home := f.home
	f.core.CloseAll()
	g := newFixtureAt(t, home, ratePosture, acceptRatings)
	*g.now = g.now.Add(time.Hour)
	cmd := rate(t, "r1", map[string]any{"rating": 1}, "bob")
	g.core.HandleCommand(context.Background(), cmd)
	fb := g.pub.Find(mapping.TypeFeedback)
	if len(fb) != 1 || fb[0].Cause != fin.ID {
		t.Fatalf("feedback after a restart: %v", fb)
	}
}

// A rating is acknowledged only with its feedback on the disk: they are
// written and synced together. Here the disk refuses to sync once the log
// holds a feedback event (the old order synced the ack alone, published
// it, then lost the feedback): nothing is acknowledged, and the
// redelivery, once the disk syncs again, records both, once.
func TestRatingAckedOnlyWithItsFeedback(t *testing.T) {
	var broken atomic.Bool
	broken.Store(true)
	syncer := func(f *os.File) error {
		b, err := os.ReadFile(f.Name())
		if err != nil {
			return err
		}
		if broken.Load() && strings.Contains(string(b), mapping.TypeFeedback) {
			return errors.New("EIO")
		}
		return nil
	}
	f, _ := rateFixtureSync(t, syncer)
	cmd := rate(t, "r1", map[string]any{"rating": 1}, "alice")
	f.core.HandleCommand(context.Background(), cmd)
	if acks, fb := f.acks(cmd), f.pub.Find(mapping.TypeFeedback); len(acks) != 0 || len(fb) != 0 {
		t.Fatalf("with the feedback not on the disk: %d acks and %d feedback events published", len(acks), len(fb))
	}
	broken.Store(false)
	f.core.HandleCommand(context.Background(), cmd)
	acks, fb := f.acks(cmd), f.pub.Find(mapping.TypeFeedback)
	if len(acks) != 1 || acks[0].Type != "control.accepted" || len(fb) != 1 || *fb[0].Seq <= *acks[0].Seq {
		t.Fatalf("the redelivery: acks %v, feedback %v", acks, fb)
	}
}

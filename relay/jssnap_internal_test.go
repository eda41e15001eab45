package relay

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aep-kimi/aep-kimi/aep"
	"github.com/aep-kimi/aep-kimi/relay/wire"
)

// fillTricky ingests a history that exercises what the index decides:
// sessions past the cap (evicted), past the depth (trimmed), arrivals out
// of order, commands placed by arrival, redeliveries.
func fillTricky(t *testing.T, js *JetStreamBackend, sessions int) {
	t.Helper()
	r := rand.New(rand.NewPCG(7, 11))
	var sent []*Message
	for round := range 40 {
		var batch []*Message
		for i := range 12 {
			s := fmt.Sprintf("s%d", r.IntN(sessions))
			seq := int64(round*12 + i)
			if r.IntN(5) == 0 {
				seq -= int64(r.IntN(30)) // late
			}
			batch = append(batch, smallEvent(t, s, max(seq, 0)))
		}
		if round%3 == 0 {
			cmd := &aep.Event{AEP: aep.Version, ID: aep.NewID(), Type: "control.cancel", Time: aep.FormatTime(time.Now()),
				Source: "aep://test/agent/sender", Agent: "sender", Session: fmt.Sprintf("s%d", r.IntN(sessions)),
				Capture: "metadata", Data: json.RawMessage(`{"scope":"session"}`)}
			m, err := NewMessage(cmd, time.Now())
			if err != nil {
				t.Fatal(err)
			}
			batch = append(batch, m)
		}
		if len(sent) > 0 {
			batch = append(batch, sent[r.IntN(len(sent))]) // a redelivery
		}
		if res := js.Ingest(batch); res.Err != nil {
			t.Fatal(res.Err)
		}
		sent = append(sent, batch...)
	}
}

// dumpIndex renders what the index holds and answers: sessions in eviction
// order with their counts, every held event's bytes and stream sequence in
// replay order, and what a resume from each session's start is told.
func dumpIndex(t *testing.T, be *JetStreamBackend) string {
	t.Helper()
	var b strings.Builder
	var resumes []wire.Resume
	for _, s := range be.Sessions() {
		fmt.Fprintf(&b, "session %s %d\n", s.Session, s.Events)
		resumes = append(resumes, wire.Resume{Session: s.Session})
	}
	for _, from := range []wire.From{{All: true}, {Positions: resumes}} {
		var r Replay
		cancel, err := be.Subscribe(SubscribeRequest{From: from}, replayTaker{&r})
		if err != nil {
			t.Fatal(err)
		}
		for _, x := range r.Exhausted() {
			fmt.Fprintf(&b, "exhausted %s %v %v\n", x.Session, x.Requested, x.Earliest)
		}
		err = r.Each(context.Background(), func(m *Message) error {
			fmt.Fprintf(&b, "%s %d %s\n", m.Session, m.StoreSeq, m.Raw)
			return nil
		})
		cancel()
		if err != nil {
			t.Fatal(err)
		}
	}
	st := be.Stats()
	fmt.Fprintf(&b, "events %d sessions %d\n", st.Events, st.Sessions)
	return b.String()
}

// copyTree copies a closed store directory.
func copyTree(t *testing.T, from, to string) {
	t.Helper()
	if err := os.CopyFS(to, os.DirFS(from)); err != nil {
		t.Fatal(err)
	}
}

// A restart from the index snapshot holds exactly what a full rebuild of
// the same stream holds, and answers resumes alike; the snapshot is read
// once, and a second restart (no snapshot left by a crash) rebuilds.
func TestSnapshotRestartMatchesRebuild(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := JetStreamConfig{Dir: dir, Buffer: 25, MaxSessions: 6}
	js, err := OpenJetStream(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	fillTricky(t, js, 8)
	want := dumpIndex(t, js)
	if err := js.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, snapshotName)); err != nil {
		t.Fatalf("no snapshot written at close: %v", err)
	}
	rebuildDir := filepath.Join(t.TempDir(), "copy")
	copyTree(t, dir, rebuildDir)
	if err := os.Remove(filepath.Join(rebuildDir, snapshotName)); err != nil {
		t.Fatal(err)
	}
	fast, err := OpenJetStream(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer fast.Close()
	rcfg := cfg
	rcfg.Dir = rebuildDir
	slow, err := OpenJetStream(context.Background(), rcfg)
	if err != nil {
		t.Fatal(err)
	}
	defer slow.Close()
	if fast.fromSnapshot == 0 || slow.fromSnapshot != 0 {
		t.Fatalf("restored from snapshots up to %d and %d", fast.fromSnapshot, slow.fromSnapshot)
	}
	got, rebuilt := dumpIndex(t, fast), dumpIndex(t, slow)
	if got != rebuilt {
		t.Fatalf("the snapshot restart differs from the rebuild:\n--- snapshot\n%s\n--- rebuild\n%s", got, rebuilt)
	}
	if got != want {
		t.Fatalf("the snapshot restart differs from the index before:\n--- after\n%s\n--- before\n%s", got, want)
	}
	if _, err := os.Stat(filepath.Join(dir, snapshotName)); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the snapshot outlived the start that read it: %v", err)
	}
	// Both go on admitting alike.
	next := smallEvent(t, "s1", 10_000)
	for _, be := range []*JetStreamBackend{fast, slow} {
		m := *next
		if res := be.Ingest([]*Message{&m}); res.Err != nil || res.Buffered != 1 {
			t.Fatalf("after restart: %+v", res)
		}
	}
	if a, b := dumpIndex(t, fast), dumpIndex(t, slow); a != b {
		t.Fatalf("the two stores diverged on the next event:\n--- snapshot\n%s\n--- rebuild\n%s", a, b)
	}
}

// A snapshot that does not match the stream, or is torn or corrupt, is
// ignored: the index is rebuilt from the stream and holds what it held.
func TestSnapshotRefusedWhenItDoesNotMatch(t *testing.T) {
	t.Parallel()
	for name, spoil := range map[string]func(t *testing.T, dir string, js *JetStreamBackend){
		"torn": func(t *testing.T, dir string, _ *JetStreamBackend) {
			p := filepath.Join(dir, snapshotName)
			st, _ := os.Stat(p)
			if err := os.Truncate(p, st.Size()/2); err != nil {
				t.Fatal(err)
			}
		},
		"bit flipped": func(t *testing.T, dir string, _ *JetStreamBackend) {
			p := filepath.Join(dir, snapshotName)
			b, _ := os.ReadFile(p)
			b[len(b)/2] ^= 0x10
			os.WriteFile(p, b, 0o600)
		},
		"other limits": nil, // reopened with another buffer depth below
		"stream changed": func(t *testing.T, dir string, _ *JetStreamBackend) {
			// Another start appended to the stream while the snapshot (from
			// before it) stayed: copied back over the one that start wrote.
			p := filepath.Join(dir, snapshotName)
			old, _ := os.ReadFile(p)
			js, err := OpenJetStream(context.Background(), JetStreamConfig{Dir: dir, Buffer: 25, MaxSessions: 6})
			if err != nil {
				t.Fatal(err)
			}
			js.Ingest([]*Message{smallEvent(t, "late", 0)})
			js.Close()
			os.WriteFile(p, old, 0o600)
		},
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			cfg := JetStreamConfig{Dir: dir, Buffer: 25, MaxSessions: 6}
			js, err := OpenJetStream(context.Background(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			fillTricky(t, js, 4)
			js.Close()
			if spoil != nil {
				spoil(t, dir, js)
			} else {
				cfg.Buffer = 24
			}
			again, err := OpenJetStream(context.Background(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer again.Close()
			if again.fromSnapshot != 0 {
				t.Fatalf("a spoiled snapshot (%s) was used", name)
			}
			if again.Stats().Events == 0 {
				t.Fatal("the rebuild found nothing")
			}
			if _, err := os.Stat(filepath.Join(dir, snapshotName)); !errors.Is(err, fs.ErrNotExist) {
				t.Fatalf("a refused snapshot stayed: %v", err)
			}
		})
	}
}

// A store of many events restarts from its snapshot holding every one, in
// order, and a consumer resuming from a position it had gets exactly what
// followed it.
func TestSnapshotRestartManyEvents(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := JetStreamConfig{Dir: dir}
	js, err := OpenJetStream(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	n := 20_000
	if testing.Short() {
		n = 4_000
	}
	for _, batch := range benchBatches(t, n) {
		if res := js.Ingest(batch); res.Err != nil {
			t.Fatal(res.Err)
		}
	}
	want := dumpIndex(t, js)
	if err := js.Close(); err != nil {
		t.Fatal(err)
	}
	again, err := OpenJetStream(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	if again.fromSnapshot == 0 || again.Stats().Events != n {
		t.Fatalf("restarted from snapshot up to %d with %d events", again.fromSnapshot, again.Stats().Events)
	}
	if got := dumpIndex(t, again); got != want {
		t.Fatal("the restarted index differs from the one closed")
	}
	var r Replay
	from := int64(n / 16) // halfway through s3
	cancel, err := again.Subscribe(SubscribeRequest{From: wire.From{Positions: []wire.Resume{{Session: "s3", Position: wire.Position{Seq: from}}}}}, replayTaker{&r})
	if err != nil {
		t.Fatal(err)
	}
	defer cancel()
	var seqs []int64
	r.Each(context.Background(), func(m *Message) error {
		seqs = append(seqs, m.Pos.Seq)
		return nil
	})
	if len(seqs) != n/8-int(from)-1 || seqs[0] != from+1 || seqs[len(seqs)-1] != int64(n/8-1) {
		t.Fatalf("resume after s3's seq %d replayed %d events (%v...)", from, len(seqs), seqs[:min(3, len(seqs))])
	}
}

package relay

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"
)

// storeBatch is the Ingest batch of the store benchmarks: what one NDJSON
// POST or a few socket frames carry.
const storeBatch = 64

// benchStores runs fn against each store, both in the same run.
func benchStores(b *testing.B, fn func(b *testing.B, open func(b *testing.B) Backend)) {
	b.Run(StoreMemory, func(b *testing.B) {
		fn(b, func(*testing.B) Backend { return NewMemoryBackend(0, 0) })
	})
	b.Run(StoreJetStream, func(b *testing.B) {
		fn(b, func(b *testing.B) Backend { return benchJetStream(b, b.TempDir()) })
	})
}

func benchJetStream(b *testing.B, dir string) *JetStreamBackend {
	b.Helper()
	js, err := OpenJetStream(context.Background(), JetStreamConfig{Dir: dir})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = js.Close() })
	return js
}

// benchBatches returns n events in batches of storeBatch over 8 sessions,
// each event with its own id (so none is a duplicate).
func benchBatches(b testing.TB, n int) [][]*Message {
	return benchBatchesFor(b, n, "s")
}

// benchBatchesFor is benchBatches with sessions named prefix0 to prefix7.
func benchBatchesFor(b testing.TB, n int, prefix string) [][]*Message {
	var out [][]*Message
	for i := 0; i < n; i += storeBatch {
		var batch []*Message
		for j := i; j < min(i+storeBatch, n); j++ {
			batch = append(batch, benchEvent(b, fmt.Sprintf("%s%d", prefix, j%8), int64(j/8)))
		}
		out = append(out, batch)
	}
	return out
}

// BenchmarkStoreIngest measures admission on each store in batches of 64:
// on jetstream every event is on disk (the stream acknowledged it) before
// Ingest returns. Parsing is outside the timer (BenchmarkIngestParse).
func BenchmarkStoreIngest(b *testing.B) {
	benchStores(b, func(b *testing.B, open func(*testing.B) Backend) {
		benchIngestSerial(b, open(b))
	})
}

// benchIngestSerial ingests b.N events in batches, one batch at a time.
func benchIngestSerial(b *testing.B, be Backend) {
	batches := benchBatches(b, b.N)
	b.ResetTimer()
	start := time.Now()
	for _, batch := range batches {
		if res := be.Ingest(batch); res.Err != nil {
			b.Fatal(res.Err)
		}
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "events/s")
}

// BenchmarkStoreIngestSyncAlways is BenchmarkStoreIngest on the embedded
// store with every write flushed to the disk before it is acknowledged
// (--store-sync always).
func BenchmarkStoreIngestSyncAlways(b *testing.B) {
	js, err := OpenJetStream(context.Background(), JetStreamConfig{Dir: b.TempDir(), SyncAlways: true})
	if err != nil {
		b.Fatal(err)
	}
	defer js.Close()
	if js.sync == nil {
		b.Fatal("the store does not sync every write")
	}
	benchIngestSerial(b, js)
}

// BenchmarkStoreIngest4 is BenchmarkStoreIngest with four emitters, each
// with its own eight sessions, ingesting at once, as a relay with several
// connected adapters does: on jetstream one batch's publish overlaps
// another's wait for the stream.
func BenchmarkStoreIngest4(b *testing.B) {
	benchStores(b, func(b *testing.B, open func(*testing.B) Backend) {
		benchIngestConcurrent(b, open(b), 4)
	})
}

// benchIngestConcurrent ingests b.N events from writers emitters at once,
// each with its own eight sessions, in batches of storeBatch.
func benchIngestConcurrent(b *testing.B, be Backend, writers int) {
	work := make([][][]*Message, writers)
	for w := range work {
		work[w] = benchBatchesFor(b, b.N/writers, fmt.Sprintf("w%d-s", w))
	}
	b.ResetTimer()
	start := time.Now()
	if err := ingestEach(be, work); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "events/s")
}

// BenchmarkStoreSync compares, in one run, the embedded store syncing
// every batch before admitting it (--store-sync always, the group commit)
// with the server's interval, from one emitter and from four at once.
func BenchmarkStoreSync(b *testing.B) {
	for _, writers := range []int{1, 4, 16} {
		for _, always := range []bool{false, true} {
			name := fmt.Sprintf("%s/emitters=%d", map[bool]string{false: StoreSyncInterval, true: StoreSyncAlways}[always], writers)
			b.Run(name, func(b *testing.B) {
				js, err := OpenJetStream(context.Background(), JetStreamConfig{Dir: b.TempDir(), SyncAlways: always})
				if err != nil {
					b.Fatal(err)
				}
				defer js.Close()
				if (js.sync != nil) != always {
					b.Fatal("the store's sync mode is not the one asked for")
				}
				benchIngestConcurrent(b, js, writers)
			})
		}
	}
}

// BenchmarkStoreFanout100 is BenchmarkFanout100 on each store, ingesting in
// batches of 64.
func BenchmarkStoreFanout100(b *testing.B) {
	benchStores(b, func(b *testing.B, open func(*testing.B) Backend) {
		benchFanout100(b, open(b), storeBatch)
	})
}

// BenchmarkStoreReopen measures restart to serving on the jetstream store
// holding b.N events (over 100 sessions of up to 10,000 each, so the
// default caps keep them all), and the disk bytes per stored event: from
// the index snapshot a clean close leaves, at once (restart-s, of which
// restore-s reading the snapshot) and once NATS's duplicate window of a
// shared stream would have passed (restart-aged-s: a private store keeps
// no message ids, so the two should match; before it, NATS reloaded every
// event's id at once); and, in the same run, rebuilding the
// index from the whole stream as a start after a crash does (rebuild-s).
// The memory store has nothing to reopen: it restarts empty.
func BenchmarkStoreReopen(b *testing.B) {
	n := b.N
	dir := b.TempDir()
	cfg := JetStreamConfig{Dir: dir, BufferBytes: 1 << 30, MaxSessions: 100}
	js, err := OpenJetStream(context.Background(), cfg)
	if err != nil {
		b.Fatal(err)
	}
	for i := 0; i < n; i += storeBatch {
		var batch []*Message
		for j := i; j < min(i+storeBatch, n); j++ {
			batch = append(batch, benchEvent(b, fmt.Sprintf("s%d", j%100), int64(j/100)))
		}
		if res := js.Ingest(batch); res.Err != nil {
			b.Fatal(res.Err)
		}
	}
	written := time.Now()
	closeStart := time.Now()
	if err := js.Close(); err != nil {
		b.Fatal(err)
	}
	closeTook := time.Since(closeStart)
	var disk int64
	_ = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && filepath.Base(path) != snapshotName {
			if fi, err := d.Info(); err == nil {
				disk += fi.Size()
			}
		}
		return nil
	})
	reopen := func(wantSnapshot bool) (took, index time.Duration) {
		start := time.Now()
		again, err := OpenJetStream(context.Background(), cfg)
		took = time.Since(start)
		if err != nil {
			b.Fatal(err)
		}
		if got := again.Stats().Events; got != n {
			b.Fatalf("reopened with %d of %d events", got, n)
		}
		if (again.fromSnapshot != 0) != wantSnapshot {
			b.Fatalf("restored from a snapshot: %v, want %v", again.fromSnapshot != 0, wantSnapshot)
		}
		if err := again.Close(); err != nil {
			b.Fatal(err)
		}
		return took, again.rebuildTime
	}
	b.ResetTimer()
	fast, restore := reopen(true)
	b.StopTimer()
	// Real time passes the stream's duplicate window, a clock NATS keeps:
	// there is no condition to wait on, and this is not a synchronisation.
	time.Sleep(time.Until(written.Add(DefaultDuplicateWindow + time.Second)))
	aged, _ := reopen(true)
	// A start after a crash finds no snapshot.
	if err := os.Remove(filepath.Join(dir, snapshotName)); err != nil {
		b.Fatal(err)
	}
	slow, _ := reopen(false)
	b.ReportMetric(fast.Seconds(), "restart-s")
	b.ReportMetric(restore.Seconds(), "restore-s")
	b.ReportMetric(aged.Seconds(), "restart-aged-s")
	b.ReportMetric(slow.Seconds(), "rebuild-s")
	b.ReportMetric(closeTook.Seconds(), "close-s")
	b.ReportMetric(float64(disk)/float64(n), "disk-bytes/event")
	b.ReportMetric(float64(len(benchEvent(b, "s0", 0).Raw)), "event-bytes")
}

// ingestEach ingests each writer's batches in order, the writers at once.
func ingestEach(be Backend, work [][][]*Message) error {
	var g errgroup.Group
	for _, batches := range work {
		g.Go(func() error {
			for _, batch := range batches {
				if res := be.Ingest(batch); res.Err != nil {
					return res.Err
				}
			}
			return nil
		})
	}
	return g.Wait()
}

package relay

import (
	"context"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"golang.org/x/sync/errgroup"
)

// blockDisk is an injected Syncer over the store's files: per file, the
// bytes its last sync covered, and the files synced in order.
type blockDisk struct {
	mu     sync.Mutex
	synced map[string][]byte
	order  []string
}

func (d *blockDisk) sync(f *os.File) error {
	// Read through the descriptor, as fsync works: the store may sync a
	// block the server has removed meanwhile, through the descriptor it
	// kept open, and that succeeds.
	b, err := io.ReadAll(io.NewSectionReader(f, 0, math.MaxInt64))
	if err != nil {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.synced == nil {
		d.synced = map[string][]byte{}
	}
	d.synced[f.Name()] = b
	d.order = append(d.order, filepath.Base(f.Name()))
	return nil
}

// holds reports whether a synced block holds s.
func (d *blockDisk) holds(s string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	for name, b := range d.synced {
		if strings.HasSuffix(name, blockExt) && strings.Contains(string(b), s) {
			return true
		}
	}
	return false
}

// Under --store-sync always every event a batch admitted from several
// emitters at once is in a block a sync covered before Ingest returned,
// and the batches acknowledged while one sync ran shared the next.
func TestStoreSyncCoversEveryAdmittedEvent(t *testing.T) {
	t.Parallel()
	d := &blockDisk{}
	dir := t.TempDir()
	js, err := OpenJetStream(context.Background(), JetStreamConfig{Dir: dir, SyncAlways: true, Syncer: d.sync})
	if err != nil {
		t.Fatal(err)
	}
	defer js.Close()
	d.mu.Lock()
	d.order = nil
	d.mu.Unlock()
	const writers, events = 4, 200
	var g errgroup.Group
	for w := range writers {
		g.Go(func() error {
			for _, batch := range benchBatchesFor(t, events, "w"+string(rune('a'+w))) {
				if res := js.Ingest(batch); res.Err != nil {
					return res.Err
				}
				for _, m := range batch {
					if !d.holds(m.ID) {
						t.Errorf("event %s admitted before a sync covered it", m.ID)
					}
				}
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
	d.mu.Lock()
	syncs := len(d.order)
	d.mu.Unlock()
	t.Logf("%d syncs for %d batches", syncs, writers*((events+storeBatch-1)/storeBatch))
	if again := reopenSame(t, js, JetStreamConfig{Dir: dir, SyncAlways: true, Syncer: d.sync}); again.sync == nil {
		t.Fatal("reopened without the group commit")
	}
}

// A flush syncs the block being left before the new one, every new block,
// and finds the blocks written since the last flush.
func TestStoreSyncFollowsNewBlocks(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	msgs := filepath.Join(root, "jetstream", "$G", "streams", "AEP", "msgs")
	if err := os.MkdirAll(msgs, 0o700); err != nil {
		t.Fatal(err)
	}
	write := func(name string) {
		if err := os.WriteFile(filepath.Join(msgs, name), []byte(name), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("1.blk")
	write("2.blk")
	d := &blockDisk{}
	s, err := newStoreSync(root, "AEP", d.sync)
	if err != nil {
		t.Fatal(err)
	}
	defer s.close()
	if s.last != 2 {
		t.Fatalf("newest block %d, want 2", s.last)
	}
	d.order = nil
	write("3.blk")
	write("4.blk")
	if err := s.wait(); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(d.order, ","); got != "2.blk,3.blk,4.blk" {
		t.Fatalf("synced %s", got)
	}
	if _, err := newStoreSync(t.TempDir(), "AEP", d.sync); err == nil {
		t.Fatal("a store without the stream's blocks was taken")
	}
}

// The embedded store syncs every batch unless told otherwise; an external
// NATS syncs as its own configuration says.
func TestStoreSyncDefault(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		sync, url string
		want      bool
	}{
		{"", "", true},
		{StoreSyncAlways, "", true},
		{StoreSyncInterval, "", false},
		{"", "nats://127.0.0.1:4222", false},
	} {
		o := StoreOptions{Store: StoreJetStream, Sync: c.sync, URL: c.url, Replicas: 1}
		if err := o.Validate(); err != nil {
			t.Fatalf("%+v: %v", c, err)
		}
		if got := o.syncAlways(); got != c.want {
			t.Errorf("--store-sync %q with --nats %q: sync always %v, want %v", c.sync, c.url, got, c.want)
		}
	}
}

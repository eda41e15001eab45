package syncmode

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Every Wait returns only after a sync that began once its write was done,
// and the writes made while one sync ran share the next.
func TestGroupCoversEveryWrite(t *testing.T) {
	var g Group
	var written atomic.Uint64
	var mu sync.Mutex
	var synced uint64 // what the last completed sync covered
	syncs := 0
	sync1 := func() error {
		covers := written.Load()     // read as the sync begins (Wait's upto already did)
		time.Sleep(time.Millisecond) // a sync's latency, modelled: not a synchronisation
		mu.Lock()
		synced, syncs = max(synced, covers), syncs+1
		mu.Unlock()
		return nil
	}
	const writers, each = 8, 40
	var wg sync.WaitGroup
	var bad atomic.Int32
	for range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range each {
				n := written.Add(1)
				if err := g.Wait(n, written.Load, sync1); err != nil {
					bad.Add(1)
				}
				mu.Lock()
				if synced < n {
					bad.Add(1)
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if bad.Load() != 0 {
		t.Fatalf("%d writes acknowledged before a sync covered them", bad.Load())
	}
	if syncs >= writers*each {
		t.Fatalf("%d syncs for %d writes: no group commit", syncs, writers*each)
	}
	t.Logf("%d syncs for %d writes", syncs, writers*each)
}

// A failed sync fails the writes it covered for good; later ones go on.
func TestGroupFailureSticks(t *testing.T) {
	var g Group
	n := uint64(1)
	fail := errors.New("EIO")
	if err := g.Wait(1, func() uint64 { return n }, func() error { return fail }); !errors.Is(err, fail) {
		t.Fatalf("failed sync: %v", err)
	}
	n = 2
	if err := g.Wait(2, func() uint64 { return n }, func() error { return nil }); err != nil {
		t.Fatalf("write after the failure: %v", err)
	}
	if err := g.Wait(1, func() uint64 { return n }, func() error { return nil }); !errors.Is(err, fail) {
		t.Fatalf("a write whose sync failed was acknowledged later: %v", err)
	}
}

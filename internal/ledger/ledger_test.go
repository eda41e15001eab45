package ledger

import (
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/aep-kimi/aep-kimi/aep"
)

func TestClaimThenPut(t *testing.T) {
	var l Ledger // the zero value is ready
	k := Key{"aep://h/operator/x", "01CMD"}
	if _, known := l.Get(k); known {
		t.Fatal("an empty ledger knows a command")
	}
	if !l.Claim(k) {
		t.Fatal("first claim refused")
	}
	if l.Claim(k) {
		t.Fatal("second claim of a pending command granted")
	}
	if ack, known := l.Get(k); !known || ack != nil {
		t.Fatalf("pending command: got (%v, %v), want (nil, true)", ack, known)
	}
	ack := &aep.Event{ID: "01ACK"}
	l.Put(k, ack)
	if got, _ := l.Get(k); got != ack {
		t.Fatalf("recorded ack %v, want %v", got, ack)
	}
	if l.Claim(k) {
		t.Fatal("claim of a decided command granted")
	}
	if _, known := l.Get(Key{"aep://h/operator/y", "01CMD"}); known {
		t.Fatal("same id from another source treated as the same command")
	}
}

func TestConcurrentClaimHasOneWinner(t *testing.T) {
	var l Ledger
	var wins atomic.Int32
	var wg sync.WaitGroup
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if l.Claim(Key{"s", "c"}) {
				wins.Add(1)
			}
		}()
	}
	wg.Wait()
	if wins.Load() != 1 {
		t.Fatalf("%d goroutines own the decision, want 1", wins.Load())
	}
}

func TestOldestForgottenFirst(t *testing.T) {
	var l Ledger
	for i := range Size + 2 {
		l.Claim(Key{"s", strconv.Itoa(i)})
	}
	for _, id := range []string{"0", "1"} {
		if _, known := l.Get(Key{"s", id}); known {
			t.Errorf("command %s still remembered past the bound", id)
		}
	}
	for _, id := range []string{"2", strconv.Itoa(Size + 1)} {
		if _, known := l.Get(Key{"s", id}); !known {
			t.Errorf("command %s forgotten within the bound", id)
		}
	}
	// Re-recording a remembered command does not count against the bound.
	l.Put(Key{"s", "2"}, &aep.Event{ID: "a"})
	if _, known := l.Get(Key{"s", "3"}); !known {
		t.Error("updating an entry evicted another")
	}
	if len(l.acks) != Size || len(l.order) != Size {
		t.Fatalf("holds %d acks / %d keys, want %d", len(l.acks), len(l.order), Size)
	}
}

func TestReleaseForgetsOnlyPending(t *testing.T) {
	var l Ledger
	k := Key{"s", "c"}
	l.Release(k) // unknown: nothing to do
	if !l.Claim(k) {
		t.Fatal("first claim refused")
	}
	l.Release(k)
	if _, known := l.Get(k); known {
		t.Fatal("a released claim is still known")
	}
	if !l.Claim(k) {
		t.Fatal("a released claim cannot be claimed again")
	}
	ack := &aep.Event{ID: "01ACK"}
	l.Put(k, ack)
	l.Release(k)
	if got, _ := l.Get(k); got != ack {
		t.Fatalf("release dropped a recorded ack: %v", got)
	}
	// The order keeps one entry per key: filling the ledger evicts k on
	// time, not later.
	for i := range Size - 1 {
		l.Put(Key{"s", strconv.Itoa(i)}, ack)
	}
	if _, known := l.Get(k); !known {
		t.Fatal("k evicted early")
	}
	l.Put(Key{"s", "last"}, ack)
	if _, known := l.Get(k); known {
		t.Fatal("k outlived the bound")
	}
}

package relay

import (
	"errors"
	"testing"
	"time"
)

// While the store is down because batches failed, one batch at a time
// tries it (at once, then at most one a second) and the others are refused
// without waiting; a stored batch brings it back. What the server's check
// found, only that check clears, and no batch tries meanwhile.
func TestStoreHealthProbes(t *testing.T) {
	t.Parallel()
	var h storeHealth
	probe, lost, err := h.admit()
	if probe || lost == nil || err != nil {
		t.Fatalf("a healthy store: probe %v lost %v err %v", probe, lost, err)
	}
	h.done(false, true, errors.New("timed out"))
	select {
	case <-lost:
	default:
		t.Fatal("a batch waiting when the store went down was not told")
	}
	if h.status().OK || h.outages.Load() != 1 {
		t.Fatalf("after a failed batch: %+v, %d outages", h.status(), h.outages.Load())
	}
	if probe, _, err := h.admit(); !probe || err != nil {
		t.Fatalf("the batch after a failure: probe %v err %v", probe, err)
	}
	if _, _, err := h.admit(); !errors.Is(err, errStoreUnavailable) {
		t.Fatalf("a batch beside the probe: %v", err)
	}
	h.done(true, true, errors.New("timed out again"))
	if _, _, err := h.admit(); !errors.Is(err, errStoreUnavailable) {
		t.Fatalf("a batch just after a failed probe: %v", err)
	}
	h.probeAt = time.Now() // a second later
	if probe, _, _ := h.admit(); !probe {
		t.Fatal("no probe a second after the last")
	}
	h.done(true, false, nil)
	if h.status().OK {
		t.Fatal("a probe that wrote nothing (redeliveries) brought the store back")
	}
	if probe, _, _ := h.admit(); !probe {
		t.Fatal("no probe after one that wrote nothing")
	}
	h.done(true, true, nil)
	if !h.status().OK || h.refused.Load() != 2 {
		t.Fatalf("after a stored probe: %+v, %d refused", h.status(), h.refused.Load())
	}

	h.fail("jetstream not enabled", true)
	if probe, _, err := h.admit(); probe || !errors.Is(err, errStoreUnavailable) {
		t.Fatalf("a batch while the server says the store is down: probe %v err %v", probe, err)
	}
	h.ok(true)
	if !h.status().OK {
		t.Fatal("the server's check did not clear what it found")
	}
	h.done(false, true, errors.New("timed out"))
	h.ok(true)
	if h.status().OK {
		t.Fatal("the server's check cleared a failed batch")
	}
}

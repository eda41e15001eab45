package periodic

import (
	"context"
	"testing"
	"time"
)

func TestEveryCallsUntilDone(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	calls := 0
	done := make(chan struct{})
	go func() {
		defer close(done)
		Every(ctx, time.Millisecond, func() {
			if calls++; calls == 3 {
				cancel()
			}
		})
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Every did not return after its context ended")
	}
	// Once ctx is done a tick may still be pending beside it: one more call
	// at most.
	if calls < 3 || calls > 4 {
		t.Fatalf("fn ran %d times, want 3 (or 4)", calls)
	}
}

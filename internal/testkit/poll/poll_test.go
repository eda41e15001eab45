package poll

import (
	"testing"
	"time"
)

func TestUntil(t *testing.T) {
	n := 0
	if !Until(5*time.Second, func() bool { n++; return n == 3 }) || n != 3 {
		t.Fatalf("Until stopped after %d checks, want it to hold at the third", n)
	}
	start := time.Now()
	if Until(50*time.Millisecond, func() bool { return false }) {
		t.Fatal("Until reported a condition that never held")
	}
	if waited := time.Since(start); waited < 50*time.Millisecond {
		t.Fatalf("Until gave up after %s, before its bound", waited)
	}
}

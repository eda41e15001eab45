// Package poll waits, in tests, for what another goroutine or process
// brings about: a condition is checked again and again until it holds or a
// bound passes.
package poll

import (
	"testing"
	"time"
)

// Checks a wait makes over its bound, at the most: a short bound is
// checked often, a long one (a process's, a real Kimi's) no more than every
// MaxInterval, so a costly check (reading logs, asking a daemon) does not
// load the machine.
const (
	checksPerBound = 1000
	MinInterval    = 5 * time.Millisecond
	MaxInterval    = 50 * time.Millisecond
)

// Until checks cond until it holds and reports whether it did within d.
func Until(d time.Duration, cond func() bool) bool {
	return Every(d, min(max(d/checksPerBound, MinInterval), MaxInterval), cond)
}

// Every is Until with the checks paced every apart, for a check that is
// costly or disturbs what it reads (a browser's notifications, a terminal's
// screen).
func Every(d, every time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		// The one pause between checks of the test kit's waits: the
		// condition, not this, is what a wait waits on.
		time.Sleep(every)
	}
	return true
}

// Must checks cond until it holds; when it has not within d, it fails the
// test: "timed out waiting for what".
func Must(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	if !Until(d, cond) {
		t.Fatalf("timed out waiting for %s", what)
	}
}

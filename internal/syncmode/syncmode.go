// Package syncmode names when written data must reach the disk (the
// session logs, the spool) and syncs a file. It imports nothing heavy:
// kimi-hook links it through internal/spool.
package syncmode

import (
	"fmt"
	"os"
	"time"
)

// Syncer makes what was written to f durable: FileSync, unless a test
// injects another.
type Syncer func(f *os.File) error

// Mode says when what a log (or the spool) wrote reaches the disk, and so
// what an acknowledgement promises.
type Mode string

const (
	// Always: a hook is acknowledged only once its events are on the disk
	// (they survive a power loss). Appends that arrive while one sync runs
	// share the next (group commit).
	Always Mode = "always"
	// Interval: a hook is acknowledged once its events are written (they
	// survive the process); they reach the disk within Every.
	Interval Mode = "interval"
	// None: written, never synced by us; the operating system flushes them
	// when it will (within about 30 s on Linux).
	None Mode = "none"
)

// Default is the mode when none is configured [AEP_LOG_SYNC]: a synced
// append costs a hook one fdatasync (a fraction of a millisecond on Linux,
// shared by the hooks that arrive meanwhile), small next to the hook's own
// few milliseconds, and an acknowledged hook then survives an OS crash or
// a power loss.
const Default = Always

// Every bounds how long an acknowledged append may wait for the disk under
// Interval (and an append nobody waited for, under Always).
const Every = 200 * time.Millisecond

// Parse reads a mode name; empty is Default.
func Parse(s string) (Mode, error) {
	switch m := Mode(s); m {
	case "":
		return Default, nil
	case Always, Interval, None:
		return m, nil
	}
	return "", fmt.Errorf("sync mode %q: want %s, %s or %s", s, Always, Interval, None)
}

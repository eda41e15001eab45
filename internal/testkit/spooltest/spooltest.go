// Package spooltest is test support for the hook spool: holding its lock,
// as a kimi-hook does while it numbers and writes a record, for as long as
// a test needs a hook to be stuck before its payload is on the disk.
package spooltest

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/aep-kimi/aep-kimi/internal/safefile"
	"github.com/aep-kimi/aep-kimi/internal/spool"
)

// HoldLock takes the lock of the spool under home and returns what
// releases it; the test's end releases it too.
func HoldLock(t testing.TB, home string) (release func()) {
	t.Helper()
	dir := spool.Dir(home)
	if err := safefile.PrivateDir(dir); err != nil {
		t.Fatal(err)
	}
	lock, err := safefile.OpenFile(filepath.Join(dir, ".lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if err := safefile.Lock(lock); err != nil {
		lock.Close()
		t.Fatal(err)
	}
	done := false
	release = func() {
		if !done {
			done = true
			lock.Close() // closing drops the flock
		}
	}
	t.Cleanup(release)
	return release
}

//go:build unix

package safefile

import (
	"io/fs"
	"os"
	"syscall"
)

func openNoFollow(path string, flag int, perm fs.FileMode) (*os.File, error) {
	f, err := os.OpenFile(path, flag|syscall.O_NOFOLLOW, perm)
	if err != nil {
		return nil, linkError(path, err)
	}
	return f, nil
}

// Lock takes an exclusive advisory lock on f (flock(2)), waiting for it.
func Lock(f *os.File) error { return syscall.Flock(int(f.Fd()), syscall.LOCK_EX) }

// Unlock releases Lock; closing f releases it too.
func Unlock(f *os.File) error { return syscall.Flock(int(f.Fd()), syscall.LOCK_UN) }

// TryLock is Lock without waiting: it fails at once when another holds the
// lock.
func TryLock(f *os.File) error { return syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) }

//go:build windows

package safefile

import (
	"io/fs"
	"os"

	"golang.org/x/sys/windows"
)

// openNoFollow checks path with Lstat, then opens it. A link swapped in
// between the two is followed: Windows offers no O_NOFOLLOW through
// os.OpenFile, and creating symbolic links there takes a privilege ordinary
// users lack unless Developer Mode is on.
func openNoFollow(path string, flag int, perm fs.FileMode) (*os.File, error) {
	if st, err := os.Lstat(path); err == nil && st.Mode()&fs.ModeSymlink != 0 {
		return nil, &fs.PathError{Op: "open", Path: path, Err: ErrLink}
	}
	f, err := os.OpenFile(path, flag, perm)
	if err != nil {
		return nil, linkError(path, err)
	}
	return f, nil
}

// Lock takes an exclusive lock on the first byte of f (LockFileEx), waiting
// for it. Unlike flock(2) on Unix the lock is mandatory for other handles.
func Lock(f *os.File) error {
	var ol windows.Overlapped
	return windows.LockFileEx(windows.Handle(f.Fd()), windows.LOCKFILE_EXCLUSIVE_LOCK, 0, 1, 0, &ol)
}

// TryLock is Lock without waiting: it fails at once when another holds the
// lock.
func TryLock(f *os.File) error {
	var ol windows.Overlapped
	return windows.LockFileEx(windows.Handle(f.Fd()), windows.LOCKFILE_EXCLUSIVE_LOCK|windows.LOCKFILE_FAIL_IMMEDIATELY, 0, 1, 0, &ol)
}

// Unlock releases Lock; closing f releases it too.
func Unlock(f *os.File) error {
	var ol windows.Overlapped
	return windows.UnlockFileEx(windows.Handle(f.Fd()), 0, 1, 0, &ol)
}

// Package safefile opens the files aep-kimi keeps under its home (tokens,
// epochs, session logs, spool records) without following links, locks them
// across processes, and keeps their directories private. A link planted
// where one of these files belongs is refused with ErrLink and its target is
// never read, written, truncated or chmod-ed.
//
// On Unix the refusal is O_NOFOLLOW, atomic with the open. Windows has no
// such flag in os.OpenFile: the path is checked with Lstat just before the
// open, which leaves a short window in which a link swapped in is followed.
//
// It imports nothing heavy: kimi-hook links it.
package safefile

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
)

// ErrLink marks a path that is a symbolic link where a regular file was
// expected.
var ErrLink = errors.New("is a symbolic link; refusing to follow it")

// ErrNotRegular marks a path that is a directory, device, pipe or socket
// where a regular file was expected.
var ErrNotRegular = errors.New("is not a regular file")

// OpenFile is os.OpenFile that refuses a link at path (ErrLink) and anything
// but a regular file (ErrNotRegular). With O_CREATE the caller means a file
// of mode perm: one that exists with more permissions for group or others is
// tightened to perm.
func OpenFile(path string, flag int, perm fs.FileMode) (*os.File, error) {
	f, err := openNoFollow(path, flag, perm)
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if !st.Mode().IsRegular() {
		f.Close()
		return nil, &fs.PathError{Op: "open", Path: path, Err: ErrNotRegular}
	}
	if flag&os.O_CREATE != 0 && st.Mode().Perm()&^perm&0o077 != 0 {
		if err := f.Chmod(perm); err != nil {
			f.Close()
			return nil, fmt.Errorf("make %s private: %w", path, err)
		}
	}
	return f, nil
}

// ReadFile reads a whole file through OpenFile.
func ReadFile(path string) ([]byte, error) {
	f, err := OpenFile(path, os.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(f)
}

// linkError reports path as a refused link when it is one; otherwise it
// returns err unchanged. Open flags spell "this was a link" differently
// across kernels (ELOOP on Linux and macOS, EMLINK on FreeBSD), so the path
// is asked directly.
func linkError(path string, err error) error {
	if st, lerr := os.Lstat(path); lerr == nil && st.Mode()&fs.ModeSymlink != 0 {
		return &fs.PathError{Op: "open", Path: path, Err: ErrLink}
	}
	return err
}

// PrivateDir creates dir (and missing parents) mode 0700 and tightens an
// existing dir to 0700: a directory others can read lists session names,
// one others can write lets them plant links. A link in place of dir is
// refused (ErrLink) rather than chmod-ed through.
func PrivateDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	st, err := os.Lstat(dir)
	if err != nil {
		return err
	}
	if st.Mode()&fs.ModeSymlink != 0 {
		return &fs.PathError{Op: "mkdir", Path: dir, Err: ErrLink}
	}
	if st.Mode().Perm()&0o077 != 0 {
		if err := os.Chmod(dir, 0o700); err != nil {
			return fmt.Errorf("make %s private: %w", dir, err)
		}
	}
	return nil
}

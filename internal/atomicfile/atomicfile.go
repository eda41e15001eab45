// Package atomicfile replaces a file so that a reader sees either the old
// bytes or the new ones, never a torn mix: write a temporary file in the same
// directory, fsync it, rename it over the target, fsync the directory. It is
// the one copy of that sequence in the module; kimi-hook links it through
// internal/spool, so it imports nothing heavy.
package atomicfile

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// DefaultPerm is the mode of a written file when Options.Perm is zero: the
// module's files (tokens, state, records) are private.
const DefaultPerm fs.FileMode = 0o600

// ErrDirSync marks a Write whose rename is done but whose directory fsync
// failed: the new file is in place and readable, but a power loss may still
// undo the rename. Some file systems cannot fsync a directory at all.
var ErrDirSync = errors.New("fsync of the directory failed")

// Options adjust Write. The zero value is a durable write of a 0600 file.
type Options struct {
	// Perm is the file's mode, set explicitly so the umask neither narrows
	// nor widens it; zero means DefaultPerm.
	Perm fs.FileMode
	// NoSync skips both fsyncs. The replacement stays atomic for readers and
	// survives the death of any process, but not a power loss; for writers on
	// a latency budget (kimi-hook's spool records).
	NoSync bool
	// Prepare, when set, runs on the written temporary file before it is
	// synced and renamed: to adjust it (its owner) or to refuse the write (a
	// target that changed since it was read). An error leaves the target
	// untouched.
	Prepare func(tmp *os.File) error
	// NoReplace creates path rather than replacing it: when anything is
	// there already (a link included, never followed) the write fails with
	// an error wrapping fs.ErrExist and leaves it alone. For files made once
	// that two processes may race to make (a secret): one wins, the other
	// reads the winner's.
	NoReplace bool
}

// Write replaces path with data. The temporary file is named after path
// with a leading dot (".name.tmp-*") so directory scans that skip dot files
// never see it, and it is removed on any failure. An error wrapping
// ErrDirSync means the rename happened.
func Write(path string, data []byte, o Options) (err error) {
	if o.Perm == 0 {
		o.Perm = DefaultPerm
	}
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	name := tmp.Name()
	renamed := false
	defer func() {
		if !renamed {
			tmp.Close()     //nolint:errcheck // already failed; closing twice is harmless
			os.Remove(name) //nolint:errcheck // best effort: the write failed already
		}
	}()
	if _, err := tmp.Write(data); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := tmp.Chmod(o.Perm); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if o.Prepare != nil {
		if err := o.Prepare(tmp); err != nil {
			return err
		}
	}
	if !o.NoSync {
		if err := tmp.Sync(); err != nil {
			return fmt.Errorf("write %s: %w", path, err)
		}
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := place(name, path, o.NoReplace); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	renamed = true
	if o.NoSync {
		return nil
	}
	if err := SyncDir(dir); err != nil {
		return fmt.Errorf("write %s: %w: %w", path, ErrDirSync, err)
	}
	return nil
}

// place puts the written temporary file name at path: a rename, or with
// noReplace a hard link (which, unlike a rename, fails when path exists)
// and the temporary name removed. Where links are not supported the
// check and the rename are two steps.
func place(name, path string, noReplace bool) error {
	if !noReplace {
		return os.Rename(name, path)
	}
	err := os.Link(name, path)
	if err == nil || errors.Is(err, fs.ErrExist) {
		os.Remove(name) //nolint:errcheck // a leftover dot file at worst
		return err
	}
	if _, lerr := os.Lstat(path); !errors.Is(lerr, fs.ErrNotExist) {
		os.Remove(name) //nolint:errcheck // as above
		return &fs.PathError{Op: "create", Path: path, Err: fs.ErrExist}
	}
	return os.Rename(name, path)
}

// Package safefiletest attacks the files aep-kimi keeps: it plants links
// where they live, for tests that assert a link is refused (or replaced)
// and its target left alone, and races readers against their writers.
package safefiletest

import (
	"bytes"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

// Bait is what a planted link's target holds.
const Bait = "the link's target: must stay as it is\n"

// Link is a planted link and its target.
type Link struct {
	Path, Target string
}

// Plant makes path a symbolic link to a fresh file (mode 0644) holding
// Bait, outside path's directory. It skips the test where the platform
// does not let this user make links (Windows without Developer Mode).
func Plant(t testing.TB, path string) Link {
	t.Helper()
	target := filepath.Join(t.TempDir(), "target")
	if err := os.WriteFile(target, []byte(Bait), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, path); err != nil {
		t.Skipf("cannot make a symbolic link here: %v", err)
	}
	return Link{Path: path, Target: target}
}

// Untouched fails the test unless the target still holds Bait with mode
// 0644 and path is still the link.
func (l Link) Untouched(t testing.TB) {
	t.Helper()
	b, err := os.ReadFile(l.Target)
	if err != nil || !bytes.Equal(b, []byte(Bait)) {
		t.Errorf("link target %s changed: %q %v", l.Target, b, err)
	}
	if st, err := os.Stat(l.Target); err != nil || st.Mode().Perm() != 0o644 {
		t.Errorf("link target %s mode changed: %v %v", l.Target, st.Mode(), err)
	}
	if st, err := os.Lstat(l.Path); err != nil || st.Mode()&os.ModeSymlink == 0 {
		t.Errorf("link %s replaced: %v", l.Path, err)
	}
}

// Replaced plants a hard link, then a symbolic one, at path to a file
// outside it, calls write after each, and fails the test unless write
// replaced the link with a fresh regular file (of mode perm, when not 0)
// and left the target as it was.
func Replaced(t testing.TB, path string, perm os.FileMode, write func()) {
	t.Helper()
	target := filepath.Join(t.TempDir(), "victim")
	if err := os.WriteFile(target, []byte("keep"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name  string
		plant func(string, string) error
	}{{"hard link", os.Link}, {"symlink", os.Symlink}} {
		os.Remove(path)
		if err := c.plant(target, path); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		write()
		if b, _ := os.ReadFile(target); string(b) != "keep" {
			t.Errorf("%s: written through to its target: %q", c.name, b)
		}
		switch st, err := os.Lstat(path); {
		case err != nil || !st.Mode().IsRegular():
			t.Errorf("%s: %s is not a fresh regular file (%v)", c.name, path, err)
		case perm != 0 && st.Mode().Perm() != perm:
			t.Errorf("%s: %s has mode %v, want %v", c.name, path, st.Mode().Perm(), perm)
		}
	}
}

// NeverTorn calls write n times while a reader reads path as fast as it
// can, and fails the test if the reader ever saw a file that is not whole
// (a torn or empty one): what replaces a file must replace it at once.
func NeverTorn(t testing.TB, path string, n int, write func(), whole func([]byte) bool) {
	t.Helper()
	done := make(chan struct{})
	torn := make(chan []byte, 1)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-done:
				return
			default:
			}
			if b, err := os.ReadFile(path); err == nil && !whole(b) {
				select {
				case torn <- b:
				default:
				}
				return
			}
		}
	}()
	for range n {
		write()
	}
	close(done)
	wg.Wait()
	select {
	case b := <-torn:
		t.Errorf("a reader saw a partial %s: %q", filepath.Base(path), b)
	default:
	}
}

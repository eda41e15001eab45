// Package safefiletest plants links where aep-kimi keeps its files, for
// tests that assert a link is refused and its target left alone.
package safefiletest

import (
	"bytes"
	"os"
	"path/filepath"
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

package safefile_test

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/aep-kimi/aep-kimi/internal/safefile"
	"github.com/aep-kimi/aep-kimi/internal/testkit/safefiletest"
)

func TestOpenFileRefusesLinks(t *testing.T) {
	dir := t.TempDir()
	link := safefiletest.Plant(t, filepath.Join(dir, "token"))
	for _, flag := range []int{os.O_RDONLY, os.O_CREATE | os.O_RDWR, os.O_CREATE | os.O_WRONLY | os.O_APPEND, os.O_WRONLY | os.O_TRUNC} {
		f, err := safefile.OpenFile(link.Path, flag, 0o600)
		if !errors.Is(err, safefile.ErrLink) {
			if f != nil {
				f.Close()
			}
			t.Errorf("flag %#x: err %v, want ErrLink", flag, err)
		}
	}
	if _, err := safefile.ReadFile(link.Path); !errors.Is(err, safefile.ErrLink) {
		t.Errorf("ReadFile: %v", err)
	}
	link.Untouched(t)

	// A dangling link would create its target.
	dangling := filepath.Join(dir, "dangling")
	gone := filepath.Join(t.TempDir(), "would-be-created")
	if err := os.Symlink(gone, dangling); err != nil {
		t.Skip(err)
	}
	if _, err := safefile.OpenFile(dangling, os.O_CREATE|os.O_WRONLY, 0o600); !errors.Is(err, safefile.ErrLink) {
		t.Errorf("dangling: %v", err)
	}
	if _, err := os.Lstat(gone); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("dangling link's target created: %v", err)
	}
}

func TestOpenFileRefusesDirectories(t *testing.T) {
	if _, err := safefile.OpenFile(t.TempDir(), os.O_RDONLY, 0); !errors.Is(err, safefile.ErrNotRegular) {
		t.Fatalf("err %v, want ErrNotRegular", err)
	}
}

func TestPrivateDirTightens(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("no Unix modes")
	}
	dir := filepath.Join(t.TempDir(), "logs")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	os.Chmod(dir, 0o777)
	if err := safefile.PrivateDir(dir); err != nil {
		t.Fatal(err)
	}
	if st, _ := os.Stat(dir); st.Mode().Perm() != 0o700 {
		t.Fatalf("mode %v", st.Mode().Perm())
	}
	fresh := filepath.Join(dir, "a", "b")
	if err := safefile.PrivateDir(fresh); err != nil {
		t.Fatal(err)
	}
	if st, _ := os.Stat(fresh); st.Mode().Perm() != 0o700 {
		t.Fatalf("new dir mode %v", st.Mode().Perm())
	}
}

func TestPrivateDirRefusesLink(t *testing.T) {
	target := t.TempDir()
	os.Chmod(target, 0o755)
	link := filepath.Join(t.TempDir(), "spool")
	if err := os.Symlink(target, link); err != nil {
		t.Skip(err)
	}
	if err := safefile.PrivateDir(link); !errors.Is(err, safefile.ErrLink) {
		t.Fatalf("err %v, want ErrLink", err)
	}
	if st, _ := os.Stat(target); runtime.GOOS != "windows" && st.Mode().Perm() != 0o755 {
		t.Fatalf("link target chmod-ed to %v", st.Mode().Perm())
	}
}

func TestLockExcludes(t *testing.T) {
	path := filepath.Join(t.TempDir(), ".lock")
	a, err := safefile.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := safefile.OpenFile(path, os.O_RDWR, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if err := safefile.Lock(a); err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() { got <- safefile.Lock(b) }()
	select {
	case err := <-got:
		t.Fatalf("second lock taken while the first is held: %v", err)
	case <-time.After(200 * time.Millisecond):
	}
	if err := safefile.Unlock(a); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	safefile.Unlock(b)
}

package tokenfile

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/aep-kimi/aep-kimi/internal/testkit/fulldisk"
	"github.com/aep-kimi/aep-kimi/internal/testkit/safefiletest"
)

func TestReadTrimsAndChecksMode(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "token")
	if err := os.WriteFile(p, []byte("\tsecret-secret \r\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if tok, err := Read(p, true); err != nil || tok != "secret-secret" {
		t.Fatalf("Read = %q, %v", tok, err)
	}
	if runtime.GOOS != "windows" {
		os.Chmod(p, 0o644)
		if _, err := Read(p, true); err == nil || !strings.Contains(err.Error(), "chmod 600") {
			t.Fatalf("a world-readable token file was read: %v", err)
		}
	}
	if tok, err := ReadHome(filepath.Join(dir, "missing")); err != nil || tok != "" {
		t.Fatalf("missing home token: %q, %v", tok, err)
	}
	if _, err := Read(filepath.Join(dir, "missing"), true); err == nil {
		t.Fatal("a missing named file read as no token")
	}
}

// A link where a home token belongs is refused and its target untouched; a
// file the operator names is read through a link.
func TestLinks(t *testing.T) {
	dir := t.TempDir()
	link := safefiletest.Plant(t, filepath.Join(dir, "token"))
	if _, err := ReadHome(link.Path); err == nil || !strings.Contains(err.Error(), "symbolic link") {
		t.Fatalf("ReadHome through a link: %v", err)
	}
	if err := Create(link.Path); err == nil {
		t.Fatal("Create wrote through a link")
	}
	link.Untouched(t)

	target := filepath.Join(dir, "secret")
	os.WriteFile(target, []byte("mounted"), 0o600)
	named := filepath.Join(dir, "named")
	if err := os.Symlink(target, named); err != nil {
		t.Fatal(err)
	}
	if tok, err := Read(named, true); err != nil || tok != "mounted" {
		t.Fatalf("a named link: %q, %v", tok, err)
	}
}

func TestCreate(t *testing.T) {
	p := filepath.Join(t.TempDir(), "home", "token")
	if err := Create(p); err != nil {
		t.Fatal(err)
	}
	tok, err := ReadHome(p)
	if err != nil || len(tok) < 40 {
		t.Fatalf("created token %q, %v", tok, err)
	}
	if st, _ := os.Stat(filepath.Dir(p)); runtime.GOOS != "windows" && st.Mode().Perm() != 0o700 {
		t.Errorf("dir mode %v", st.Mode().Perm())
	}
	if err := Create(p); err == nil {
		t.Fatal("Create replaced an existing token")
	}
	if again, _ := ReadHome(p); again != tok {
		t.Fatal("the token changed")
	}
}

// A file that is there but holds no token, or bytes no token has (a crash
// can leave a file its size but zeros), is an error naming the file and
// the fix, never "no token" (which would turn a relay watch-only).
func TestReadRefusesEmptyAndTorn(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		content []byte
		follow  bool
		want    string
	}{
		{nil, false, "is empty: remove it to make a new one, or restore it"},
		{[]byte(" \n"), true, "is empty: write the secret into it, or restore it"},
		{make([]byte, 44), false, "is torn"},
		{[]byte("abc\x00\x00\x00\n"), true, "is torn"},
	} {
		p := filepath.Join(dir, "token")
		if err := os.WriteFile(p, c.content, 0o600); err != nil {
			t.Fatal(err)
		}
		read := func() (string, error) { return Read(p, c.follow) }
		if !c.follow {
			read = func() (string, error) { return ReadHome(p) }
		}
		if tok, err := read(); err == nil || !strings.Contains(err.Error(), p) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q (follow %v): %q, %v; want an error naming it and saying %q", c.content, c.follow, tok, err, c.want)
		}
	}
}

// On a full disk Create fails and leaves nothing: no empty token file that
// a later start would take for one (a real tmpfs, root only).
func TestCreateOnFullDiskLeavesNoFile(t *testing.T) {
	d := fulldisk.Mount(t, 256<<10)
	p := filepath.Join(d.Dir, "home", "token")
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		t.Fatal(err)
	}
	d.Fill()
	if err := Create(p); err == nil {
		t.Fatal("Create succeeded on a full disk")
	}
	if _, err := os.Lstat(p); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a failed Create left %s behind (%v)", p, err)
	}
	if entries, _ := os.ReadDir(filepath.Dir(p)); len(entries) != 0 {
		t.Fatalf("a failed Create left %v", entries)
	}
	d.Free()
	if err := Create(p); err != nil {
		t.Fatal(err)
	}
	if tok, err := ReadHome(p); err != nil || len(tok) != 43 {
		t.Fatalf("created %q, %v", tok, err)
	}
}

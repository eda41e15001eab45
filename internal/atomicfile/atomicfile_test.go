package atomicfile

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

// leftovers lists the directory's entries other than the target.
func leftovers(t *testing.T, dir, target string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		if e.Name() != target {
			out = append(out, e.Name())
		}
	}
	return out
}

func TestWriteReplaces(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "state.json")
	for _, o := range []Options{{}, {NoSync: true}, {Perm: 0o640}} {
		if err := os.WriteFile(path, []byte("old, and longer than the new bytes"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := Write(path, []byte("new"), o); err != nil {
			t.Fatalf("%+v: %v", o, err)
		}
		b, err := os.ReadFile(path)
		if err != nil || string(b) != "new" {
			t.Fatalf("%+v: read %q, %v", o, b, err)
		}
		fi, _ := os.Stat(path)
		want := o.Perm
		if want == 0 {
			want = DefaultPerm
		}
		if fi.Mode().Perm() != want {
			t.Errorf("%+v: mode %v, want %v (explicit, whatever the umask)", o, fi.Mode().Perm(), want)
		}
		if l := leftovers(t, dir, "state.json"); len(l) != 0 {
			t.Errorf("%+v: left %v behind", o, l)
		}
	}
}

func TestWriteRefusedByPrepareLeavesTargetAlone(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "config.toml")
	if err := os.WriteFile(path, []byte("kept"), 0o600); err != nil {
		t.Fatal(err)
	}
	refused := errors.New("changed underneath")
	var seen string
	err := Write(path, []byte("new"), Options{Prepare: func(tmp *os.File) error {
		b, _ := os.ReadFile(tmp.Name())
		seen = string(b)
		return refused
	}})
	if !errors.Is(err, refused) {
		t.Fatalf("err %v, want the Prepare error", err)
	}
	if seen != "new" {
		t.Errorf("Prepare saw %q, want the written bytes", seen)
	}
	if b, _ := os.ReadFile(path); string(b) != "kept" {
		t.Errorf("target is %q after a refusal", b)
	}
	if l := leftovers(t, dir, "config.toml"); len(l) != 0 {
		t.Errorf("left %v behind", l)
	}
}

func TestWriteMissingDirectory(t *testing.T) {
	path := filepath.Join(t.TempDir(), "no", "such", "file")
	err := Write(path, []byte("x"), Options{})
	if !errors.Is(err, fs.ErrNotExist) || errors.Is(err, ErrDirSync) {
		t.Fatalf("err %v, want a not-exist error before any rename", err)
	}
}

// NoReplace makes the file only where nothing is: a file or a link already
// there is left alone (never followed) and the error is fs.ErrExist; no
// temporary file stays behind either way.
func TestWriteNoReplace(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "secret")
	if err := Write(path, []byte("first"), Options{NoReplace: true}); err != nil {
		t.Fatal(err)
	}
	if err := Write(path, []byte("second"), Options{NoReplace: true}); !errors.Is(err, fs.ErrExist) {
		t.Fatalf("a second create: %v, want ErrExist", err)
	}
	if b, _ := os.ReadFile(path); string(b) != "first" {
		t.Fatalf("the first file became %q", b)
	}
	target := filepath.Join(dir, "target")
	if err := os.WriteFile(target, []byte("kept"), 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(target, link); err != nil {
		t.Skip(err)
	}
	if err := Write(link, []byte("through"), Options{NoReplace: true}); !errors.Is(err, fs.ErrExist) {
		t.Fatalf("create over a link: %v, want ErrExist", err)
	}
	if b, _ := os.ReadFile(target); string(b) != "kept" {
		t.Fatalf("the link's target became %q", b)
	}
	if l := leftovers(t, dir, "secret"); len(l) != 2 { // target and link
		t.Fatalf("left %v", l)
	}
}

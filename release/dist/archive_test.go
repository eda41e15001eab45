package main

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/aep-kimi/aep-kimi/internal/testkit/targz"
)

// entry is one file read back from an archive.
type entry struct {
	Name  string
	Mode  fs.FileMode
	MTime time.Time
	Data  []byte
}

// readArchive lists a tar.gz or zip archive's entries, in order, with
// their bytes: for small archives (walkArchive streams large ones).
func readArchive(t *testing.T, path string) []entry {
	t.Helper()
	var out []entry
	walkArchive(t, path, func(e entry, r io.Reader) {
		b, err := io.ReadAll(r)
		if err != nil {
			t.Fatal(err)
		}
		e.Data = b
		out = append(out, e)
	})
	return out
}

// walkArchive calls each for a tar.gz or zip archive's entries, in order,
// with a reader of the entry's bytes (Data is left nil). Nothing holds a
// whole member in memory: under -race every byte a test copies is
// checked, and a release's binaries are hundreds of megabytes.
func walkArchive(t *testing.T, path string, each func(e entry, r io.Reader)) {
	t.Helper()
	if filepath.Ext(path) == ".zip" {
		zr, err := zip.OpenReader(path)
		if err != nil {
			t.Fatal(err)
		}
		defer zr.Close()
		for _, f := range zr.File {
			rc, err := f.Open()
			if err != nil {
				t.Fatal(err)
			}
			each(entry{f.Name, f.Mode(), f.Modified.UTC(), nil}, rc)
			// Reading to the end checks the member's CRC-32.
			_, err = io.Copy(io.Discard, rc)
			rc.Close()
			if err != nil {
				t.Fatalf("%s: %v", f.Name, err)
			}
		}
		return
	}
	err := targz.Walk(path, func(h *tar.Header, r io.Reader) (bool, error) {
		if h.Uid != 0 || h.Gid != 0 || h.Uname != "" || h.Gname != "" {
			t.Errorf("%s: owner %d/%d %q/%q, want root with no names", h.Name, h.Uid, h.Gid, h.Uname, h.Gname)
		}
		each(entry{h.Name, h.FileInfo().Mode(), h.ModTime.UTC(), nil}, r)
		return true, nil
	})
	if err != nil {
		t.Fatal(err) // the gzip stream's CRC-32 is checked at its end
	}
}

// An archive holds its members under one directory with the modes given
// and the release's time, whatever the files' own times, owners and modes
// on disk: two builds of the same bytes give the same archive.
func TestArchiveReproducible(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	prog, doc := filepath.Join(dir, "prog"), filepath.Join(dir, "doc")
	for _, f := range []string{prog, doc} {
		if err := os.WriteFile(f, bytes.Repeat([]byte(filepath.Base(f)), 5000), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	members := []member{{"README.md", doc, 0o644}, {"prog", prog, 0o755}}
	mtime := time.Date(2026, 5, 1, 12, 0, 0, 0, time.FixedZone("x", 3600))
	for _, zipped := range []bool{false, true} {
		a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
		if err := writeArchive(a, "top", members, mtime, zipped); err != nil {
			t.Fatal(err)
		}
		// Another time and mode on disk change nothing.
		if err := os.Chtimes(prog, time.Now(), time.Now().Add(time.Hour)); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(prog, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := writeArchive(b, "top", members, mtime, zipped); err != nil {
			t.Fatal(err)
		}
		ab, _ := os.ReadFile(a)
		bb, _ := os.ReadFile(b)
		if !bytes.Equal(ab, bb) {
			t.Errorf("zip %v: two archives of the same files differ", zipped)
		}
		name := a
		if zipped {
			name = a + ".zip"
			if err := os.Rename(a, name); err != nil {
				t.Fatal(err)
			}
		}
		got := readArchive(t, name)
		want := []entry{{"top/", fs.ModeDir | 0o755, mtime.UTC(), nil}, {"top/README.md", 0o644, mtime.UTC(), nil}, {"top/prog", 0o755, mtime.UTC(), nil}}
		if len(got) != len(want) {
			t.Fatalf("zip %v: %d entries, want %d", zipped, len(got), len(want))
		}
		for i, w := range want {
			g := got[i]
			if g.Name != w.Name || g.Mode != w.Mode || !g.MTime.Equal(w.MTime) {
				t.Errorf("zip %v: entry %d is %s %v %v, want %s %v %v", zipped, i, g.Name, g.Mode, g.MTime, w.Name, w.Mode, w.MTime)
			}
		}
		if src, _ := os.ReadFile(prog); !bytes.Equal(got[2].Data, src) {
			t.Errorf("zip %v: prog's bytes differ", zipped)
		}
	}
}

// A member that cannot be read leaves no archive behind.
func TestArchiveMissingMember(t *testing.T) {
	t.Parallel()
	dst := filepath.Join(t.TempDir(), "a.tar.gz")
	if err := writeArchive(dst, "top", []member{{"x", filepath.Join(t.TempDir(), "absent"), 0o644}}, time.Now(), false); err == nil {
		t.Fatal("archived a missing file")
	}
	if _, err := os.Stat(dst); !os.IsNotExist(err) {
		t.Errorf("a failed archive was left: %v", err)
	}
}

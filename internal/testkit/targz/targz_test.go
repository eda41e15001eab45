package targz

import (
	"bytes"
	"compress/gzip"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func writeGzip(t *testing.T, content []byte) string {
	t.Helper()
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	if _, err := zw.Write(content); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "f.gz")
	if err := os.WriteFile(p, b.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// bothWays runs fn with the system's gzip, then with none on the PATH, so
// Open takes Go's reader.
func bothWays(t *testing.T, fn func(t *testing.T)) {
	t.Run("system", func(t *testing.T) {
		fn(t)
	})
	t.Run("go", func(t *testing.T) {
		t.Setenv("PATH", t.TempDir())
		fn(t)
	})
}

func TestOpenReadsTheStream(t *testing.T) {
	content := bytes.Repeat([]byte("aep-kimi "), 100000)
	p := writeGzip(t, content)
	bothWays(t, func(t *testing.T) {
		r, done, err := Open(p)
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(r)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, content) {
			t.Fatalf("read %d bytes, want %d", len(got), len(content))
		}
		if err := done(); err != nil {
			t.Fatal(err)
		}
		if err := done(); err != nil {
			t.Fatalf("second done: %v", err)
		}
	})
}

// A stream whose CRC does not match is an error from done, whether the
// caller read to the end or stopped early.
func TestOpenCorruptStream(t *testing.T) {
	content := bytes.Repeat([]byte("x"), 1<<16)
	p := writeGzip(t, content)
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)-8] ^= 0xff // the CRC-32 in the trailer
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	bothWays(t, func(t *testing.T) {
		for _, readAll := range []bool{true, false} {
			r, done, err := Open(p)
			if err != nil {
				t.Fatal(err)
			}
			if readAll {
				io.Copy(io.Discard, r) //nolint:errcheck // done reports it
			}
			if err := done(); err == nil {
				t.Fatalf("read all %v: done accepted a stream with a bad CRC", readAll)
			}
		}
	})
}

func TestOpenMissingOrNotGzip(t *testing.T) {
	dir := t.TempDir()
	notGz := filepath.Join(dir, "plain")
	if err := os.WriteFile(notGz, []byte(strings.Repeat("plain text\n", 10)), 0o600); err != nil {
		t.Fatal(err)
	}
	bothWays(t, func(t *testing.T) {
		for _, p := range []string{filepath.Join(dir, "missing.gz"), notGz} {
			r, done, err := Open(p)
			if err == nil {
				io.Copy(io.Discard, r) //nolint:errcheck // done reports it
				err = done()
			}
			if err == nil {
				t.Fatalf("%s: no error", p)
			}
		}
	})
}

package journal

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestNextEpochNeverRepeats(t *testing.T) {
	path := filepath.Join(t.TempDir(), "kimi", "epoch")
	now := time.Unix(2_000_000_000, 0)
	a, err := NextEpoch(path, now)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := NextEpoch(path, now)                           // same second
	c, _ := NextEpoch(path, now.Add(-time.Hour))           // clock stepped back
	d, _ := NextEpoch(path+".wiped", now.Add(time.Second)) // record lost
	if !(a < b && b < c) || a != now.Unix() || d != now.Unix()+1 {
		t.Fatalf("epochs %d %d %d %d", a, b, c, d)
	}
}

func TestLogAppendsLinesPrivately(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "logs")
	l := NewLog(dir, "../escape")
	if l.IsOpen() {
		t.Fatal("open before the first append")
	}
	for _, line := range []string{`{"a":1}`, `{"b":2}`} {
		if err := l.Append([]byte(line)); err != nil {
			t.Fatal(err)
		}
	}
	l.Close()
	l.Append([]byte(`{"c":3}`)) // reopens, appending
	l.Close()
	if filepath.Dir(l.Path()) != dir || strings.Contains(filepath.Base(l.Path()), "/") {
		t.Fatalf("path %s escaped %s", l.Path(), dir)
	}
	b, err := os.ReadFile(l.Path())
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != "{\"a\":1}\n{\"b\":2}\n{\"c\":3}\n" {
		t.Fatalf("log %q", b)
	}
	st, _ := os.Stat(l.Path())
	dst, _ := os.Stat(dir)
	if st.Mode().Perm() != 0o600 || dst.Mode().Perm() != 0o700 {
		t.Fatalf("modes %v %v", st.Mode().Perm(), dst.Mode().Perm())
	}
}

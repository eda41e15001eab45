package logging

import (
	"bytes"
	"strings"
	"testing"
)

func TestLoggerNamesComponentOnce(t *testing.T) {
	var b bytes.Buffer
	log := New(&b, false)
	log.With("component", "adapter").With("k", "v").With("component", "publisher").Info("hello", "n", 1)
	log.With("component", "relay").Info("plain")
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("got %d lines: %q", len(lines), b.String())
	}
	if c := strings.Count(lines[0], "component="); c != 1 || !strings.Contains(lines[0], "component=adapter.publisher k=v n=1") {
		t.Errorf("nested logger line %q: want component=adapter.publisher once, before the other attributes", lines[0])
	}
	if !strings.Contains(lines[1], "msg=plain component=relay") {
		t.Errorf("line %q: want component=relay", lines[1])
	}
}

// A held log writes nothing until released, then what it held, in order,
// and the rest straight through; too much held is written early.
func TestHeld(t *testing.T) {
	var out bytes.Buffer
	h := NewHeld(&out)
	log := New(h, false)
	log.Info("before the banner")
	if out.Len() != 0 {
		t.Fatalf("written before the release: %q", out.String())
	}
	out.WriteString("banner\n")
	h.Release()
	log.Info("after")
	h.Release()
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 3 || lines[0] != "banner" || !strings.Contains(lines[1], "before the banner") || !strings.Contains(lines[2], "after") {
		t.Fatalf("got %q", lines)
	}
	out.Reset()
	h = NewHeld(&out)
	h.Write(bytes.Repeat([]byte("x"), maxHeld+1))
	if out.Len() != maxHeld+1 {
		t.Fatalf("over the bound, %d bytes written", out.Len())
	}
}

package logging

import (
	"bytes"
	"strings"
	"testing"
)

func TestLoggerNamesComponentOnce(t *testing.T) {
	var b bytes.Buffer
	log := New(&b, false)
	log.With("component", "adapter").With("k", "v").With("component", "emitter").Info("hello", "n", 1)
	log.With("component", "relay").Info("plain")
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("got %d lines: %q", len(lines), b.String())
	}
	if c := strings.Count(lines[0], "component="); c != 1 || !strings.Contains(lines[0], "component=adapter.emitter k=v n=1") {
		t.Errorf("nested logger line %q: want component=adapter.emitter once, before the other attributes", lines[0])
	}
	if !strings.Contains(lines[1], "msg=plain component=relay") {
		t.Errorf("line %q: want component=relay", lines[1])
	}
}

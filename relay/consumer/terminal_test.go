package consumer

import (
	"bytes"
	"os"
	"testing"
)

func TestTerminalHelpers(t *testing.T) {
	var b bytes.Buffer
	w := NewWriter(&b)
	if Unwrapped(w) != &b || Unwrapped(&b) != &b {
		t.Error("Unwrapped")
	}
	if IsTerminal(w) || IsTerminal(&b) {
		t.Error("a buffer is no terminal")
	}
	f, err := os.CreateTemp(t.TempDir(), "out")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if IsTerminal(NewWriter(f)) || UseColor(false, func(string) string { return "" }, f) {
		t.Error("a file is no terminal")
	}
}

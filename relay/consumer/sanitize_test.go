package consumer

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

// attacks are what a prompt-injected model can put in a tool command.
var attacks = map[string]string{
	"OSC 52 clipboard write": "\x1b]52;c;ZXZpbA==\x07",
	"erase line":             "\x1b[2K",
	"cursor up":              "\x1b[1A",
	"one-byte CSI":           "\u009b2K",
	"right-to-left override": "\u202eexe.txt",
	"isolate":                "\u2066x\u2069",
	"carriage return":        "safe\rrm -rf /",
	"DEL":                    "a\x7fb",
	"invalid UTF-8":          "\xff\xc2",
}

func TestLineEscapesEachAttack(t *testing.T) {
	for name, a := range attacks {
		got := Line("ls " + a)
		if strings.ContainsAny(got, "\x1b\x07\r\x7f\u009b\u202e\u2066\u2069") || !utf8.ValidString(got) {
			t.Errorf("%s: %q still carries a control", name, got)
		}
		if !strings.HasPrefix(got, "ls ") || !strings.Contains(got, `\`) {
			t.Errorf("%s: %q is not the text with the control shown escaped", name, got)
		}
	}
	for in, want := range map[string]string{
		"\x1b]52;c;ZXZp\x07": `\x1b]52;c;ZXZp\x07`,
		"\u009b1A":           `\u009b1A`,
		"a\u202eb":           `a\u202eb`,
		"a\u200fb\u061c":     `a\u200fb\u061c`,
		"\x7f":               `\u007f`,
		"\xffok":             `\xffok`,
		"one\ntwo\tthree":    `one\x0atwo` + "\tthree",
		"naïve — ✓ 日本":       "naïve — ✓ 日本",
	} {
		if got := Line(in); got != want {
			t.Errorf("Line(%q) = %q, want %q", in, got, want)
		}
	}
	if got := Text("one\ntwo\r\n"); got != "one\ntwo\\x0d\n" {
		t.Errorf("Text keeps newlines only: %q", got)
	}
}

// A JSON document that carries DEL, C1 or bidi raw stays valid JSON with
// the same meaning once escaped: map's and export's output go through the
// same Writer as everything else.
func TestWriterKeepsJSONValid(t *testing.T) {
	doc, _ := json.Marshal(map[string]string{"command": "a\x7f\u009b2K\u202eb\u2066\x1b[1A"})
	var out bytes.Buffer
	w := NewWriter(&out)
	if n, err := w.Write(append(doc, '\n')); err != nil || n != len(doc)+1 {
		t.Fatalf("Write = %d, %v", n, err)
	}
	if strings.ContainsAny(out.String(), "\x7f\u009b\u202e\u2066\x1b") {
		t.Fatalf("raw control written: %q", out.String())
	}
	var before, after map[string]string
	json.Unmarshal(doc, &before)
	if err := json.Unmarshal(out.Bytes(), &after); err != nil || after["command"] != before["command"] {
		t.Fatalf("escaped JSON %s decodes to %q (%v), want %q", out.Bytes(), after["command"], err, before["command"])
	}
	if NewWriter(w) != w || w.Unwrap() != &out {
		t.Fatal("wrapping twice adds a layer, or Unwrap loses the writer")
	}
}

func FuzzSanitize(f *testing.F) {
	for _, a := range attacks {
		f.Add(a)
	}
	f.Add("plain ascii")
	f.Add("multi\nline\ttext")
	f.Fuzz(func(t *testing.T, s string) {
		for _, keep := range []bool{false, true} {
			got := sanitize(s, keep)
			if !utf8.ValidString(got) {
				t.Fatalf("invalid UTF-8 out: %q", got)
			}
			for _, r := range got {
				if unsafeRune(r) && !kept(r, keep) {
					t.Fatalf("%q passed in %q", r, got)
				}
			}
			if again := sanitize(got, keep); again != got {
				t.Fatalf("not idempotent: %q then %q", got, again)
			}
			if firstUnsafe(s, keep) < 0 && got != s {
				t.Fatalf("safe text changed: %q -> %q", s, got)
			}
			if keep && strings.Count(got, "\n") != strings.Count(s, "\n") {
				t.Fatalf("Text changed the line count: %q -> %q", s, got)
			}
			if !keep && strings.ContainsRune(got, '\n') {
				t.Fatalf("Line kept a newline: %q", got)
			}
		}
	})
}

func BenchmarkLine(b *testing.B) {
	plain := strings.Repeat("kubectl get pods -n default ", 8)
	hostile := plain + attacks["OSC 52 clipboard write"]
	b.Run("plain", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			Line(plain)
		}
	})
	b.Run("hostile", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			Line(hostile)
		}
	})
}

package main

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aep-kimi/aep-kimi/aep"
)

// goldenNow is the clock of the golden renderings: a minute after the
// cases' events, so expiry countdowns are fixed.
var goldenNow = time.Date(2026, 7, 3, 10, 14, 0, 0, time.UTC)

// TestTailGolden pins tail's rendering of each event family: every
// testdata/tail/CASE.jsonl renders (as on a non-terminal: no colour) to
// CASE.golden. Run with -update to rewrite the golden files.
func TestTailGolden(t *testing.T) {
	inputs, err := filepath.Glob(filepath.Join("testdata", "tail", "*.jsonl"))
	if err != nil || len(inputs) == 0 {
		t.Fatalf("no golden cases under testdata/tail (%v)", err)
	}
	for _, in := range inputs {
		name := strings.TrimSuffix(filepath.Base(in), ".jsonl")
		t.Run(name, func(t *testing.T) {
			var out bytes.Buffer
			p := &tailPrinter{w: &out, color: useColor(false, func(string) string { return "" }, &out),
				now: func() time.Time { return goldenNow }, loc: time.UTC}
			for _, ev := range readEvents(t, in) {
				p.print(ev)
			}
			golden := strings.TrimSuffix(in, ".jsonl") + ".golden"
			if *update {
				if err := os.WriteFile(golden, out.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run with -update to create it)", err)
			}
			if got := out.String(); got != string(want) {
				t.Errorf("rendering differs from %s:\n--- got\n%s--- want\n%s", golden, got, want)
			}
			if bytes.Contains(out.Bytes(), []byte("\x1b[")) {
				t.Error("colour codes written to a non-terminal")
			}
		})
	}
}

func readEvents(t *testing.T, path string) []*aep.Event {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var evs []*aep.Event
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		ev, err := aep.ParseEvent(sc.Bytes())
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		evs = append(evs, ev)
	}
	return evs
}

// On a terminal, results are green and failures red; --no-color and
// NO_COLOR turn colour off even there, and a pipe never gets it.
func TestTailColours(t *testing.T) {
	p := &tailPrinter{color: true}
	for _, c := range []struct {
		typ, sev, data, colour, text string
	}{
		{"tool.completed", "", `{"tool":{"name":"Bash"},"duration_ms":1500}`, ansiGreen, "Bash · in 1.5s"},
		{"tool.failed", "warning", `{"tool":{"name":"Bash"},"error":{"type":"ToolError"}}`, ansiRed, "Bash: ToolError"},
		{"run.finished", "", `{"duration_ms":61000}`, ansiGreen, "in 1m01s"},
		{"run.failed", "error", `{"reason":"ProviderError"}`, ansiRed, "ProviderError"},
		{"error.raised", "error", `{"message":"boom"}`, ansiRed, "boom"},
	} {
		l := p.line(tailEvent("s", 3, c.typ, c.sev, c.data))
		if !strings.Contains(l, c.colour+c.typ) || !strings.Contains(l, c.text) {
			t.Errorf("%s: line %q lacks colour %q or text %q", c.typ, l, c.colour, c.text)
		}
	}
	env := func(v string) func(string) string {
		return func(k string) string {
			if k == "NO_COLOR" {
				return v
			}
			return ""
		}
	}
	tty, err := os.OpenFile("/dev/tty", os.O_WRONLY, 0)
	if err != nil {
		t.Logf("no terminal to check the positive case on: %v", err)
	} else {
		defer tty.Close()
		if !useColor(false, env(""), tty) {
			t.Error("no colour on a terminal")
		}
		if useColor(false, env("1"), tty) || useColor(true, env(""), tty) {
			t.Error("colour on a terminal despite NO_COLOR or --no-color")
		}
	}
	if useColor(false, env(""), &bytes.Buffer{}) {
		t.Error("colour on a non-terminal")
	}
}

func TestHumanDuration(t *testing.T) {
	for d, want := range map[time.Duration]string{
		0:                        "0ms",
		350 * time.Millisecond:   "350ms",
		4200 * time.Millisecond:  "4.2s",
		49 * time.Second:         "49s",
		59600 * time.Millisecond: "1m00s",
		185 * time.Second:        "3m05s",
		130 * time.Minute:        "2h10m",
	} {
		if got := humanDuration(d); got != want {
			t.Errorf("humanDuration(%v) = %q, want %q", d, got, want)
		}
	}
}

// The pasted command survives the shell: plain ids stay bare, anything else
// is single-quoted, and a tail on another relay repeats --relay.
func TestRespondCommandQuoting(t *testing.T) {
	r := request{session: "it's a/b c", id: "01JZ", options: []string{"allow", "deny"}}
	if got, want := r.command("http://10.0.0.2:8787"), `aep-kimi respond --relay http://10.0.0.2:8787 --option deny 'it'\''s a/b c' 01JZ`; got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
	r = request{session: "s", id: "r"}
	if got, want := r.command(""), `aep-kimi respond --text 'your answer' s r`; got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
}

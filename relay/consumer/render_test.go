package consumer

import (
	"bufio"
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aep-kimi/aep-kimi/aep"
	"github.com/aep-kimi/aep-kimi/internal/testkit/aeptest"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/tail and testdata/fold")

// goldenNow is the clock of the golden renderings: a minute after the
// cases' events, so expiry countdowns are fixed.
var goldenNow = time.Date(2026, 7, 3, 10, 14, 0, 0, time.UTC)

// goldenWidth is the terminal width of the golden renderings.
const goldenWidth = 100

// TestTailGolden pins the timeline rendering of each event family: every
// testdata/tail/CASE.golden is testdata/streams/CASE.jsonl rendered without
// colour in a 100-column terminal, as a replay: the answer lines of the
// requests still waiting come at its end. Run with -update to rewrite the
// golden files.
func TestTailGolden(t *testing.T) {
	goldens, err := filepath.Glob(filepath.Join("testdata", "tail", "*.golden"))
	if err != nil || len(goldens) == 0 {
		t.Fatalf("no golden cases under testdata/tail (%v)", err)
	}
	for _, golden := range goldens {
		name := strings.TrimSuffix(filepath.Base(golden), ".golden")
		t.Run(name, func(t *testing.T) {
			var out bytes.Buffer
			p := &Printer{W: &out, Now: func() time.Time { return goldenNow }, Loc: time.UTC, Width: goldenWidth}
			p.Hold()
			for _, ev := range readEvents(t, streamPath(name)) {
				p.Print(ev)
			}
			p.Live()
			for _, l := range strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n") {
				if w := displayWidth(l); w > goldenWidth {
					t.Errorf("%d columns: %s", w, l)
				}
			}
			textGolden(t, golden, out.String())
			if bytes.Contains(out.Bytes(), []byte("\x1b[")) {
				t.Error("colour codes written to a non-terminal")
			}
		})
	}
}

// textGolden compares got with the golden file at path, which -update
// rewrites first.
func textGolden(t *testing.T, path, got string) {
	t.Helper()
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("output differs from %s:\n--- got\n%s--- want\n%s", path, got, want)
	}
}

func streamPath(name string) string { return filepath.Join("testdata", "streams", name+".jsonl") }

func readEvents(t testing.TB, path string) []*aep.Event {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var evs []*aep.Event
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		ev, err := aep.ParseEvent(append([]byte(nil), sc.Bytes()...)) // the event keeps its bytes; the scanner reuses them
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		evs = append(evs, ev)
	}
	return evs
}

// On a terminal, results are green and failures red, and hostile text in
// any field is escaped before the colour is added.
func TestTailColours(t *testing.T) {
	p := &Printer{Color: true}
	for _, c := range []struct {
		typ, sev, data, colour, text string
	}{
		{"tool.completed", "", `{"tool":{"name":"Bash"},"duration_ms":1500}`, ansiGreen, "ran Bash in 1.5s"},
		{"tool.failed", "warning", `{"tool":{"name":"Bash"},"error":{"type":"ToolError"}}`, ansiRed, "Bash failed: ToolError"},
		{"run.finished", "", `{"duration_ms":61000}`, ansiGreen, "turn finished · in 1m01s"},
		{"run.failed", "error", `{"reason":"ProviderError"}`, ansiRed, "turn failed: ProviderError"},
		{"error.raised", "error", `{"message":"boom"}`, ansiRed, "error: boom"},
		{"tool.requested", "", `{"tool":{"name":"Bash\u001b[2K"},"args":{"command":"a\u009b1A\u202e"}}`, "", `calls Bash\x1b[2K: a\u009b1A\u202e`},
	} {
		l := p.line(aeptest.Event("s", 3, c.typ, c.sev, c.data))
		if !strings.Contains(l, c.colour+c.text) {
			t.Errorf("%s: line %q lacks colour %q or text %q", c.typ, l, c.colour, c.text)
		}
		for _, code := range Colours {
			l = strings.ReplaceAll(l, code, "")
		}
		if Line(l) != l {
			t.Errorf("%s: a control sequence other than our colours in %q", c.typ, l)
		}
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
		if got := HumanDuration(d); got != want {
			t.Errorf("humanDuration(%v) = %q, want %q", d, got, want)
		}
	}
}

// The pasted command survives the shell: plain ids stay bare, anything else
// is single-quoted, and a tail on another relay repeats --relay.
func TestRespondCommandQuoting(t *testing.T) {
	r := &Request{Session: "it's a/b c", ID: "01JZ", Options: []Option{{ID: "allow"}, {ID: "deny"}}}
	if got, want := r.Command("http://10.0.0.2:8787", ""), `aep-kimi respond --relay http://10.0.0.2:8787 --option deny 'it'\''s a/b c' 01JZ`; got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
	r = &Request{Session: "s", ID: "r"}
	if got, want := r.Command("", ""), `aep-kimi respond --text 'your answer' s r`; got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
}

// A respond command too wide for the terminal is continued over lines a
// shell joins back: no line is wider, no quoted word is split, and the
// words are the command's own.
func TestContinuedCommand(t *testing.T) {
	cmd := `aep-kimi respond --relay http://127.0.0.1:8787 --text 'your answer, a long one' session_73700a68-b5bf-48db-a79a-430995754527 01M8S6A6VN9X7P9WWPQYKK84ZY`
	lines := continued(cmd, 60)
	if len(lines) < 3 {
		t.Fatalf("not continued: %q", lines)
	}
	var joined []string
	for i, l := range lines {
		if displayWidth(l) > 60 {
			t.Errorf("line %d is %d wide: %q", i, displayWidth(l), l)
		}
		if last := i == len(lines)-1; last == strings.HasSuffix(l, ` \`) {
			t.Errorf("line %d: continuation mark wrong: %q", i, l)
		}
		joined = append(joined, strings.TrimSpace(strings.TrimSuffix(l, ` \`)))
	}
	if got := strings.Join(joined, " "); got != cmd {
		t.Errorf("joined back:\n got %s\nwant %s", got, cmd)
	}
	if got := continued(cmd, 0); len(got) != 1 || got[0] != cmd {
		t.Errorf("without a width: %q", got)
	}
}

// TestPhrasesGolden phrases every stream's events in order: every
// testdata/phrases/NAME.txt holds one phrase per event of
// testdata/streams/NAME.jsonl. fleetpage's Node test phrases the same
// streams with state.js and compares them to the same files, so the page
// and the terminal say the same words. Run with -update to rewrite them.
func TestPhrasesGolden(t *testing.T) {
	streams, err := filepath.Glob(filepath.Join("testdata", "streams", "*.jsonl"))
	if err != nil || len(streams) == 0 {
		t.Fatalf("no streams (%v)", err)
	}
	for _, path := range streams {
		name := strings.TrimSuffix(filepath.Base(path), ".jsonl")
		t.Run(name, func(t *testing.T) {
			var ph Phraser
			var out strings.Builder
			for _, ev := range readEvents(t, path) {
				out.WriteString(ph.words(ev) + "\n")
			}
			textGolden(t, filepath.Join("testdata", "phrases", name+".txt"), out.String())
		})
	}
}

// A replay that fell short names the session by its short id, seen or not.
func TestExhaustedNamesShortID(t *testing.T) {
	var p Printer
	got := p.describeExhausted("session_73700a68-b5bf-48db-a79a-430995754527 1796137578:12")
	if want := "session 73700a holds nothing older than 1796137578:12"; !strings.HasPrefix(got, want) {
		t.Fatalf("got %q, want it to begin %q", got, want)
	}
}

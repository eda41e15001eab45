package mapping

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/aep-kimi/aep-kimi/aep"
)

var update = flag.Bool("update", false, "rewrite the expected sections of the golden files")

// A golden file is one case: named sections in the txtar shape
// ("-- name --" lines), an input section holding the exact bytes Kimi sent
// and one section per posture holding the expected events, one JSON line
// each (canonical form).
type golden struct {
	order    []string
	sections map[string][]byte
}

func readGolden(t *testing.T, path string) *golden {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	g := &golden{sections: map[string][]byte{}}
	var cur string
	for _, line := range strings.SplitAfter(string(b), "\n") {
		if strings.HasPrefix(line, "-- ") && strings.HasSuffix(strings.TrimRight(line, "\n"), " --") {
			cur = strings.TrimSuffix(strings.TrimPrefix(strings.TrimRight(line, "\n"), "-- "), " --")
			g.order = append(g.order, cur)
			g.sections[cur] = nil
			continue
		}
		if cur == "" {
			continue // comment before the first section
		}
		g.sections[cur] = append(g.sections[cur], line...)
	}
	return g
}

func (g *golden) write(t *testing.T, path string) {
	t.Helper()
	var buf bytes.Buffer
	for _, name := range g.order {
		fmt.Fprintf(&buf, "-- %s --\n", name)
		s := g.sections[name]
		buf.Write(s)
		if len(s) > 0 && s[len(s)-1] != '\n' {
			buf.WriteByte('\n')
		}
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// input returns the exact payload bytes: the section minus the one newline
// the file format adds after it.
// check renders events and compares them with section, or under -update
// records them there; every event's envelope is checked either way.
func (g *golden) check(t *testing.T, section string, events []Event) {
	t.Helper()
	got := render(t, events)
	checkEnvelopes(t, events)
	if *update {
		if err := g.update(section, got); err != nil {
			t.Fatal(err) // nothing is rewritten
		}
		return
	}
	if want := g.sections[section]; !bytes.Equal(got, want) {
		t.Errorf("%s:\ngot:\n%s\nwant:\n%s", section, got, want)
	}
}

func (g *golden) input(name string) []byte {
	return bytes.TrimSuffix(g.sections[name], []byte("\n"))
}

func (g *golden) set(name string, b []byte) {
	if _, ok := g.sections[name]; !ok {
		g.order = append(g.order, name)
	}
	g.sections[name] = b
}

// update records got as a section's expected events (-update), but never
// turns a recorded refusal (an empty section: the input is deliberately
// mapped to no event) into events. Emitting what was dropped is a change of
// behaviour that needs a failing test first; then the section line is
// deleted by hand and -update fills it.
func (g *golden) update(name string, got []byte) error {
	if want, ok := g.sections[name]; ok && len(bytes.TrimSpace(want)) == 0 && len(got) > 0 {
		return fmt.Errorf("-update refused: section %q records no event for this input, and the mapping now emits\n%s"+
			"write a test that fails on the old behaviour, then delete the section by hand", name, got)
	}
	g.set(name, got)
	return nil
}

// render writes mapped events as canonical JSON lines.
func render(t *testing.T, events []Event) []byte {
	t.Helper()
	var buf bytes.Buffer
	for _, e := range events {
		m := map[string]any{"type": e.Type, "capture": e.Capture.String(), "data": e.Data}
		if e.Subject != "" {
			m["subject"] = e.Subject
		}
		if e.Severity != aep.SeverityInfo {
			m["severity"] = e.Severity.String()
		}
		b, err := aep.Canonical(m)
		if err != nil {
			t.Fatal(err)
		}
		buf.Write(b)
		buf.WriteByte('\n')
	}
	return buf.Bytes()
}

// postures are the two capture levels every hook case is pinned at: the
// adapter default, and everything at redacted.
var postures = []struct {
	name string
	p    Posture
}{
	{"metadata", DefaultPosture()},
	{"redacted", Posture{Capture: aep.CaptureRedacted, AttentionCapture: aep.CaptureRedacted, Redactor: aep.NewRedactor(aep.RedactOptions{Home: "/home/dev"})}},
}

func goldenFiles(t *testing.T, dir string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("testdata", dir, "*.txtar"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no golden files in testdata/%s", dir)
	}
	sort.Strings(files)
	return files
}

func TestHookGolden(t *testing.T) {
	for _, path := range goldenFiles(t, "hooks") {
		name := strings.TrimSuffix(filepath.Base(path), ".txtar")
		t.Run(name, func(t *testing.T) {
			g := readGolden(t, path)
			payload := g.input("payload.json")
			for _, ps := range postures {
				r, err := Hook(payload, ps.p)
				if err != nil {
					t.Fatalf("Hook: %v", err)
				}
				g.check(t, ps.name, r.Events)
			}
			if *update {
				g.write(t, path)
			}
		})
	}
}

func TestWebGolden(t *testing.T) {
	for _, path := range goldenFiles(t, "web") {
		name := strings.TrimSuffix(filepath.Base(path), ".txtar")
		t.Run(name, func(t *testing.T) {
			g := readGolden(t, path)
			frame := g.input("frame.json")
			for _, mode := range []Mode{Companion, Primary} {
				for _, ps := range postures {
					r, err := Web(frame, mode, ps.p)
					if err != nil {
						t.Fatalf("Web: %v", err)
					}
					g.check(t, mode.String()+"."+ps.name, r.Events)
				}
			}
			if *update {
				g.write(t, path)
			}
		})
	}
}

// -update keeps a recorded refusal: an empty section stays empty when the
// mapping starts emitting for it, and the file is not rewritten; a missing
// or non-empty section takes the new events.
func TestGoldenUpdateKeepsRefusals(t *testing.T) {
	path := filepath.Join(t.TempDir(), "case.txtar")
	const file = "-- frame.json --\n{}\n-- dropped --\n-- mapped --\n{\"type\":\"old\"}\n"
	if err := os.WriteFile(path, []byte(file), 0o644); err != nil {
		t.Fatal(err)
	}
	g := readGolden(t, path)
	events := []byte("{\"type\":\"new\"}\n")
	if err := g.update("dropped", events); err == nil || !strings.Contains(err.Error(), "dropped") {
		t.Fatalf("update of a recorded refusal: err %v, want a refusal naming the section", err)
	}
	if len(g.sections["dropped"]) != 0 {
		t.Fatalf("the refused section was changed to %q", g.sections["dropped"])
	}
	if err := g.update("dropped", nil); err != nil {
		t.Errorf("still no event: %v", err)
	}
	if err := g.update("mapped", events); err != nil || !bytes.Equal(g.sections["mapped"], events) {
		t.Errorf("changed events: err %v, section %q", err, g.sections["mapped"])
	}
	if err := g.update("new-posture", events); err != nil || !bytes.Equal(g.sections["new-posture"], events) {
		t.Errorf("new section: err %v, section %q", err, g.sections["new-posture"])
	}
}

// checkEnvelopes asserts every mapped event becomes a valid envelope.
func checkEnvelopes(t *testing.T, events []Event) {
	t.Helper()
	for _, m := range events {
		e := &aep.Event{ID: "01TEST", Time: "2026-11-29T00:00:00.000Z", Source: "aep://h/agent/kimi-code/session/s", Agent: Agent, Session: "s", Seq: aep.Int64(0)}
		if aep.ScopeOf(m.Type) == aep.ScopeAgent {
			e.Session, e.Seq = "", nil // agent-scoped: no session position
		}
		if err := m.Envelope(e); err != nil {
			t.Fatalf("Envelope: %v", err)
		}
		if err := aep.Validate(e); err != nil {
			b, _ := json.Marshal(e)
			t.Errorf("mapped event invalid: %v\n%s", err, b)
		}
	}
}

func TestSnakeCase(t *testing.T) {
	cases := map[string]string{
		"SomeNewKimiHook": "some_new_kimi_hook",
		"PreToolUse":      "pre_tool_use",
		"HTTPServerError": "http_server_error",
		"turn.started":    "turn_started",
		"startՀ":          "start",
		"ÀB":              "b",
		"":                "unknown",
		"__x__":           "x",
	}
	for in, want := range cases {
		if got := snakeCase(in); got != want {
			t.Errorf("snakeCase(%q) = %q, want %q", in, got, want)
		}
		if got := xType("web." + in); !aep.ValidType(got) {
			t.Errorf("xType(web.%q) = %q is not a valid type", in, got)
		}
	}
}

// TestWebContext reads the main agent's context window from the frames that
// say it, and from nothing else.
func TestWebContext(t *testing.T) {
	for _, tc := range []struct {
		name, frame string
		want        ContextWindow
		ok          bool
	}{
		{"status pulse", `{"type":"agent.status.updated","seq":2,"session_id":"s","volatile":true,"payload":{"agentId":"main","contextTokens":66,"maxContextTokens":131072}}`, ContextWindow{66, 131072}, true},
		{"status pulse without a limit", `{"type":"agent.status.updated","seq":2,"session_id":"s","payload":{"contextTokens":66}}`, ContextWindow{66, 0}, true},
		{"a subagent's pulse", `{"type":"agent.status.updated","seq":2,"session_id":"s","payload":{"agentId":"sub-1","contextTokens":66,"maxContextTokens":131072}}`, ContextWindow{}, false},
		{"pulse without context", `{"type":"agent.status.updated","seq":2,"session_id":"s","payload":{"agentId":"main","usage":{}}}`, ContextWindow{}, false},
		{"negative", `{"type":"agent.status.updated","seq":2,"session_id":"s","payload":{"contextTokens":-1,"maxContextTokens":10}}`, ContextWindow{}, false},
		{"not an integer", `{"type":"agent.status.updated","seq":2,"session_id":"s","payload":{"contextTokens":"66"}}`, ContextWindow{}, false},
		{"compaction", `{"type":"compaction.completed","seq":28,"session_id":"s","payload":{"agentId":"main","result":{"tokensBefore":20147,"tokensAfter":20693}}}`, ContextWindow{20693, 0}, true},
		{"another frame", `{"type":"turn.step.completed","seq":19,"session_id":"s","payload":{"agentId":"main","contextTokens":66}}`, ContextWindow{}, false},
	} {
		f, err := ParseFrame([]byte(tc.frame))
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if got, ok := WebContext(f); got != tc.want || ok != tc.ok {
			t.Errorf("%s: WebContext = %+v, %v; want %+v, %v", tc.name, got, ok, tc.want, tc.ok)
		}
	}
}

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/aep-kimi/aep-kimi/aep"
	"github.com/aep-kimi/aep-kimi/internal/testkit/aeptest"
	"github.com/aep-kimi/aep-kimi/internal/testkit/fixtures"
	"github.com/aep-kimi/aep-kimi/mapping"
)

func runCmd(t *testing.T, stdin []byte, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(args, stdio{in: bytes.NewReader(stdin), out: &out, err: &errb})
	return code, out.String(), errb.String()
}

// runIn runs the named command in-process with a bounded context and
// returns its exit code, stdout and stderr.
func runIn(t *testing.T, name string, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	code := runContext(ctx, append([]string{name}, args...), stdio{in: strings.NewReader(""), out: &out, err: &errb}, os.Getenv)
	return code, out.String(), errb.String()
}

// mapOutput reduces `aep-kimi map` output to the pinned facts, checking each
// line is a valid envelope on the way; a hook's members beyond the pins are
// checked against its input and set aside (aeptest.BeyondPins).
func mapOutput(t *testing.T, out, hook string, input []byte) string {
	t.Helper()
	out = strings.TrimSpace(out)
	if out == "" {
		return (*aeptest.Pin)(nil).Canon(t)
	}
	lines := strings.Split(out, "\n")
	if len(lines) != 1 {
		t.Fatalf("map printed %d events, pins expect one", len(lines))
	}
	e, err := aep.ParseEvent([]byte(lines[0]))
	if err != nil {
		t.Fatal(err)
	}
	if err := aep.Validate(e); err != nil {
		t.Fatalf("map printed an invalid envelope: %v\n%s", err, lines[0])
	}
	data, _ := e.DataMap()
	data = aeptest.BeyondPins(t, hook, data, input, mapping.DataProject, mapping.ProjectName)
	return aeptest.PinOf(e.Type, data, e.Subject).Canon(t)
}

func TestMapReproducesKimiPins(t *testing.T) {
	fx := aeptest.ReadKimiPins(t)
	names := make([]string, 0, len(fx.Hooks))
	for n := range fx.Hooks {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		c := fx.Hooks[name]
		t.Run("hook/"+name, func(t *testing.T) {
			code, out, errOut := runCmd(t, c.Input, "map")
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errOut)
			}
			if got, want := mapOutput(t, out, name, c.Input), c.Expected.Canon(t); got != want {
				t.Errorf("\n got %s\nwant %s", got, want)
			}
		})
	}
	for name, c := range fx.WSModes.Modes {
		for mode, want := range map[string]*aeptest.Pin{"companion": c.Companion, "primary": c.Primary} {
			t.Run("web/"+mode+"/"+name, func(t *testing.T) {
				code, out, errOut := runCmd(t, c.Input, "map", "--web", "--mode", mode)
				if code != 0 {
					t.Fatalf("exit %d: %s", code, errOut)
				}
				if got, w := mapOutput(t, out, "", nil), want.Canon(t); got != w {
					t.Errorf("\n got %s\nwant %s", got, w)
				}
			})
		}
	}
}

func TestMapBadInput(t *testing.T) {
	cases := []struct {
		name  string
		in    []byte
		args  []string
		code  int
		inErr string
	}{
		{"empty", nil, nil, 1, "empty input"},
		{"not json", []byte("hello"), nil, 1, "not a JSON object"},
		{"array", []byte("[1,2]"), nil, 1, "not a JSON object"},
		{"truncated", []byte(`{"hook_event_name":"Stop"`), nil, 1, "not a JSON object"},
		{"no hook name", []byte(`{"session_id":"s"}`), nil, 1, "hook_event_name"},
		{"oversize", bytes.Repeat([]byte(" "), 4<<20+10), nil, 1, "too large"},
		{"bad capture", []byte(`{}`), []string{"--capture", "everything"}, 2, "unknown capture"},
		{"bad mode", []byte(`{}`), []string{"--web", "--mode", "solo"}, 2, "unknown mode"},
		{"web frame without type", []byte(`{"seq":1}`), []string{"--web"}, 1, "no type"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, out, errOut := runCmd(t, c.in, append([]string{"map"}, c.args...)...)
			if code != c.code {
				t.Fatalf("exit %d, want %d (stderr %q)", code, c.code, errOut)
			}
			if out != "" {
				t.Fatalf("printed output on bad input: %q", out)
			}
			if !strings.Contains(errOut, c.inErr) || strings.Count(strings.TrimSpace(errOut), "\n") > 0 && c.code == 1 {
				t.Fatalf("stderr %q, want one line mentioning %q", errOut, c.inErr)
			}
		})
	}
}

func TestMapFrameWithoutEventPrintsNothing(t *testing.T) {
	code, out, _ := runCmd(t, []byte(`{"type":"ping","payload":{"nonce":"n"}}`), "map", "--web")
	if code != 0 || out != "" {
		t.Fatalf("exit %d out %q", code, out)
	}
}

func TestValidateGoldenAndInvalid(t *testing.T) {
	dir := fixtures.Require(t)
	golden := filepath.Join(dir, "fixtures", "golden", "golden.jsonl")
	if code, out, _ := runCmd(t, nil, "validate", golden); code != 0 {
		t.Fatalf("golden rejected (exit %d):\n%s", code, out)
	}
	b, err := os.ReadFile(filepath.Join(dir, "fixtures", "invalid", "cases.json"))
	if err != nil {
		t.Fatal(err)
	}
	var corpus struct {
		Cases []struct {
			Name   string            `json:"name"`
			Event  json.RawMessage   `json:"event"`
			Events []json.RawMessage `json:"events"`
		} `json:"cases"`
	}
	if err := json.Unmarshal(b, &corpus); err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir()
	for i, c := range corpus.Cases {
		t.Run(c.Name, func(t *testing.T) {
			events := c.Events
			if events == nil {
				events = []json.RawMessage{c.Event}
			}
			var buf bytes.Buffer
			for _, e := range events {
				var compact bytes.Buffer
				json.Compact(&compact, e)
				buf.Write(compact.Bytes())
				buf.WriteByte('\n')
			}
			path := filepath.Join(tmp, "case"+strings.Repeat("x", i)+".jsonl")
			os.WriteFile(path, buf.Bytes(), 0o600)
			code, out, _ := runCmd(t, nil, "validate", path)
			if code != 1 {
				t.Fatalf("exit %d, want 1:\n%s", code, out)
			}
			if !strings.Contains(out, "violation") {
				t.Fatalf("no summary: %s", out)
			}
		})
	}
}

func TestValidateUsage(t *testing.T) {
	if code, _, _ := runCmd(t, nil, "validate"); code != 2 {
		t.Fatalf("no files: exit %d, want 2", code)
	}
	code, out, _ := runCmd(t, nil, "validate", filepath.Join(t.TempDir(), "missing.jsonl"))
	if code != 1 || !strings.Contains(out, "unreadable") {
		t.Fatalf("missing file: exit %d out %q", code, out)
	}
	code, out, _ = runCmd(t, []byte("{\"aep\":\"0.1\"}\n\nnot json\n"), "validate", "-")
	if code != 1 || !strings.Contains(out, ":2:") || !strings.Contains(out, ":3:") {
		t.Fatalf("stdin stream: exit %d out %q", code, out)
	}
}

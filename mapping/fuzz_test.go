package mapping

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aep-kimi/aep-kimi/aep"
)

// seedFromGolden adds every golden input section as a fuzz seed.
func seedFromGolden(f *testing.F, dir, section string) {
	files, _ := filepath.Glob(filepath.Join("testdata", dir, "*.txtar"))
	for _, p := range files {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		parts := strings.SplitN(string(b), "-- "+section+" --\n", 2)
		if len(parts) == 2 {
			f.Add(strings.SplitN(parts[1], "\n-- ", 2)[0])
		}
	}
}

// FuzzHook: any bytes into the hook mapping never panic; bad input is one of
// the classified errors; every mapped event, at every posture, becomes a
// valid envelope whose data honours its capture level.
func FuzzHook(f *testing.F) {
	seedFromGolden(f, "hooks", "payload.json")
	f.Add(`{"hook_event_name":"\u0000"}`)
	f.Add(`{"hook_event_name":"PermissionResult","decision":"approved","id":7}`)
	postures := []Posture{DefaultPosture(), {Capture: aep.CaptureNone}, {Capture: aep.CaptureFull, AttentionCapture: aep.CaptureFull}}
	f.Fuzz(func(t *testing.T, in string) {
		for _, p := range postures {
			r, err := Hook([]byte(in), p)
			if err != nil {
				if !errors.Is(err, ErrEmpty) && !errors.Is(err, ErrNotJSON) && !errors.Is(err, ErrTooLarge) && !errors.Is(err, ErrNoHookName) {
					t.Fatalf("unclassified error: %v", err)
				}
				return
			}
			if len(r.Events) == 0 {
				t.Fatal("a well-formed payload mapped to nothing (degrade, never drop)")
			}
			for _, m := range r.Events {
				checkMapped(t, m)
			}
		}
	})
}

// FuzzWebFrame: any bytes into the frame mapping, in both modes, never panic
// and yield valid envelopes.
func FuzzWebFrame(f *testing.F) {
	seedFromGolden(f, "web", "frame.json")
	f.Fuzz(func(t *testing.T, in string) {
		for _, mode := range []Mode{Companion, Primary} {
			r, err := Web([]byte(in), mode, DefaultPosture())
			if err != nil {
				return
			}
			for _, m := range r.Events {
				checkMapped(t, m)
			}
			if r.Facts.Type == "tool.result" {
				checkMapped(t, WebToolResult(r.Facts.Frame, "Bash", DefaultPosture()))
			}
			if c, ok := WebContext(r.Facts.Frame); ok {
				if c.Tokens < 0 || c.Limit < 0 {
					t.Fatalf("WebContext = %+v", c)
				}
				for _, m := range r.Events {
					checkMapped(t, WithContext(m, c))
				}
			}
		}
	})
}

func checkMapped(t *testing.T, m Event) {
	t.Helper()
	e := &aep.Event{ID: "01TEST", Time: "2026-11-29T00:00:00.000Z", Source: "aep://h/agent/kimi-code/session/s",
		Agent: Agent, Session: "s", Seq: aep.Int64(0)}
	if err := m.Envelope(e); err != nil {
		t.Fatalf("Envelope: %v", err)
	}
	if err := aep.Validate(e); err != nil {
		b, _ := e.MarshalJSON()
		t.Fatalf("invalid mapped event: %v\n%s", err, b)
	}
}

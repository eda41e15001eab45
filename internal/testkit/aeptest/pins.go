package aeptest

import (
	"encoding/json"
	"maps"
	"path/filepath"
	"testing"

	"github.com/aep-kimi/aep-kimi/internal/testkit/fixtures"
)

// KimiPins is the upstream pin file of the kimi-code mapping
// (fixtures/mappings/kimi-code.json): per hook, and per kap frame and mode,
// the one event the input maps to.
type KimiPins struct {
	Hooks    map[string]PinCase `json:"hooks"`
	Fallback PinCase            `json:"fallback"`
	WSModes  struct {
		Modes map[string]struct {
			Input     json.RawMessage `json:"input"`
			Companion *Pin            `json:"companion"`
			Primary   *Pin            `json:"primary"`
		} `json:"modes"`
	} `json:"ws_modes"`
}

// PinCase is a hook payload and the event it maps to.
type PinCase struct {
	Input    json.RawMessage `json:"input"`
	Expected *Pin            `json:"expected"`
}

// Pin is what a pin fixes of an event: its type, its data and, when
// pinned, its subject. A nil Pin is no event.
type Pin struct {
	Type    string         `json:"type"`
	Data    map[string]any `json:"data"`
	Subject *string        `json:"subject"`
}

// ReadKimiPins reads the pin file from $AEP_FIXTURES (skipping the test
// where there is none).
func ReadKimiPins(t testing.TB) KimiPins {
	t.Helper()
	var p KimiPins
	fixtures.DecodeJSON(t, fixtures.Require(t), filepath.Join("fixtures", "mappings", "kimi-code.json"), &p)
	return p
}

// PinOf is the pin an event of type typ with data and subject ("": none)
// matches.
func PinOf(typ string, data map[string]any, subject string) *Pin {
	p := &Pin{Type: typ, Data: data}
	if subject != "" {
		p.Subject = &subject
	}
	return p
}

// Canon is the pinned facts in canonical JSON, so a pin and what an event
// shows compare as strings; "null" for no event.
func (p *Pin) Canon(t testing.TB) string {
	t.Helper()
	if p == nil {
		return "null"
	}
	v := map[string]any{"type": p.Type, "data": p.Data}
	if p.Subject != nil {
		v["subject"] = *p.Subject
	}
	return Canon(t, v)
}

// BeyondPins returns a pinned hook's mapped data without what the adapter
// adds beyond the upstream pins by design, each checked for its own value:
// SessionStart's project name (key, project of the input's cwd), which the
// pins, carrying no trace of the working directory, do not know.
func BeyondPins(t testing.TB, hook string, data map[string]any, input []byte, key string, project func(string) string) map[string]any {
	t.Helper()
	if hook != "SessionStart" {
		return data
	}
	var in struct {
		Cwd string `json:"cwd"`
	}
	if err := json.Unmarshal(input, &in); err != nil {
		t.Fatal(err)
	}
	if got, want := data[key], project(in.Cwd); got != want {
		t.Errorf("%s = %v, want %q (from cwd %q)", key, got, want, in.Cwd)
	}
	out := maps.Clone(data)
	delete(out, key)
	return out
}

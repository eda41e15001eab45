// Package conformance checks this project against the upstream AEP 0.1
// conformance corpus, read as data from $AEP_FIXTURES (see internal/testkit/fixtures).
// Every fixture case is one named subtest.
package conformance

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/aep-kimi/aep-kimi/aep"
	"github.com/aep-kimi/aep-kimi/internal/testkit/aeptest"
	"github.com/aep-kimi/aep-kimi/internal/testkit/fixtures"
	"github.com/aep-kimi/aep-kimi/mapping"
)

func load(t *testing.T, dir, rel string, v any) {
	t.Helper()
	fixtures.DecodeJSON(t, dir, filepath.Join("fixtures", rel), v)
}

func parseAll(t *testing.T, raws []json.RawMessage) []*aep.Event {
	t.Helper()
	var out []*aep.Event
	for _, r := range raws {
		e, err := aep.ParseEvent(r)
		if err != nil {
			return nil
		}
		out = append(out, e)
	}
	return out
}

// streamErrors validates events as one stream: envelope, payload and the
// cross-event rules.
func streamErrors(events []*aep.Event) []aep.Violation {
	var sv aep.StreamValidator
	var vs []aep.Violation
	for _, e := range events {
		vs = append(vs, aep.ValidateEnvelope(e)...)
		vs = append(vs, aep.ValidatePayload(e)...)
		vs = append(vs, sv.Add(e)...)
	}
	return vs
}

func TestGoldenValid(t *testing.T) {
	var sv aep.StreamValidator
	lines := fixtures.Lines(t, fixtures.Require(t), filepath.Join("fixtures", "golden", "golden.jsonl"))
	for i, line := range lines {
		e, err := aep.ParseEvent(line)
		if err != nil {
			t.Fatalf("line %d: %v", i+1, err)
		}
		t.Run(e.Type+"/"+e.ID, func(t *testing.T) {
			if err := aep.Validate(e); err != nil {
				t.Errorf("golden event invalid: %v", err)
			}
			if vs := aep.ValidatePayload(e); len(vs) > 0 {
				t.Errorf("payload violations: %v", vs)
			}
			if vs := sv.Add(e); len(vs) > 0 {
				t.Errorf("stream rules: %v", vs)
			}
			// Every golden event survives every hop ceiling cleanly.
			for c := aep.CaptureNone; c <= aep.CaptureFull; c++ {
				out, err := aep.Downlevel(e, c)
				if err != nil {
					t.Fatalf("Downlevel(%s): %v", c, err)
				}
				if vs := aep.ValidatePayload(out); len(vs) > 0 {
					t.Errorf("after Downlevel(%s): %v", c, vs)
				}
			}
			// Byte identity: the parsed event keeps its wire bytes, and a
			// re-serialization is the same JSON value.
			if !bytes.Equal(e.Raw(), line) {
				t.Error("Raw() differs from the input line")
			}
			out, _ := e.MarshalJSON()
			a, _ := aep.CanonicalRaw(line)
			b, _ := aep.CanonicalRaw(out)
			if !bytes.Equal(a, b) {
				t.Errorf("round trip changed the event:\n%s\n%s", a, b)
			}
		})
	}
	if len(lines) < 60 {
		t.Fatalf("golden corpus has only %d events", len(lines))
	}
}

func TestInvalidRejected(t *testing.T) {
	dir := fixtures.Require(t)
	var corpus struct {
		Cases []struct {
			Name   string            `json:"name"`
			Rule   string            `json:"rule"`
			Event  json.RawMessage   `json:"event"`
			Events []json.RawMessage `json:"events"`
		} `json:"cases"`
	}
	load(t, dir, "invalid/cases.json", &corpus)
	if len(corpus.Cases) == 0 {
		t.Fatal("no invalid cases")
	}
	for _, c := range corpus.Cases {
		t.Run(c.Name, func(t *testing.T) {
			raws := c.Events
			if raws == nil {
				raws = []json.RawMessage{c.Event}
			}
			events := parseAll(t, raws)
			if events == nil {
				return // rejected at parse: a wrong JSON type on a core attribute
			}
			// A payload-schema case must be caught by ValidatePayload itself.
			if c.Event != nil && (strings.Contains(c.Rule, "payload schema") || strings.Contains(c.Rule, "field_spec")) {
				if vs := aep.ValidatePayload(events[0]); len(vs) == 0 {
					t.Errorf("ValidatePayload accepts a %s violation", c.Rule)
				}
			}
			if len(streamErrors(events)) == 0 {
				t.Errorf("violates %s but validated", c.Rule)
			}
		})
	}
}

func TestAttrMatch(t *testing.T) {
	dir := fixtures.Require(t)
	var corpus struct {
		Match []struct {
			Name   string          `json:"name"`
			Filter json.RawMessage `json:"filter"`
			Event  json.RawMessage `json:"event"`
			Match  bool            `json:"match"`
		} `json:"match"`
		Invalid []struct {
			Name   string          `json:"name"`
			Filter json.RawMessage `json:"filter"`
		} `json:"invalid"`
	}
	load(t, dir, "attr-match/cases.json", &corpus)
	for _, c := range corpus.Match {
		t.Run("match/"+c.Name, func(t *testing.T) {
			f, err := aep.ParseFilter(c.Filter)
			if err != nil {
				t.Fatalf("valid filter rejected: %v", err)
			}
			e, err := aep.ParseEvent(c.Event)
			if err != nil {
				t.Fatal(err)
			}
			if got := f.Match(e); got != c.Match {
				t.Errorf("Match = %v, want %v", got, c.Match)
			}
		})
	}
	for _, c := range corpus.Invalid {
		t.Run("invalid/"+c.Name, func(t *testing.T) {
			if _, err := aep.ParseFilter(c.Filter); err == nil {
				t.Errorf("filter %s accepted; must fail closed", c.Filter)
			}
		})
	}
}

func TestDownlevel(t *testing.T) {
	dir := fixtures.Require(t)
	var corpus struct {
		Cases []struct {
			Name          string          `json:"name"`
			Ceiling       string          `json:"ceiling"`
			Event         json.RawMessage `json:"event"`
			ExpectCapture string          `json:"expect_capture"`
			ExpectData    json.RawMessage `json:"expect_data"`
		} `json:"cases"`
	}
	load(t, dir, "downlevel/cases.json", &corpus)
	if len(corpus.Cases) == 0 {
		t.Fatal("no downlevel cases")
	}
	for _, c := range corpus.Cases {
		t.Run(c.Name, func(t *testing.T) {
			e, err := aep.ParseEvent(c.Event)
			if err != nil {
				t.Fatal(err)
			}
			ceiling, err := aep.ParseCapture(c.Ceiling)
			if err != nil {
				t.Fatal(err)
			}
			out, err := aep.Downlevel(e, ceiling)
			if err != nil {
				t.Fatal(err)
			}
			if out.Capture != c.ExpectCapture {
				t.Errorf("capture %q, want %q", out.Capture, c.ExpectCapture)
			}
			if got := out.CaptureLevel().String(); got != c.ExpectCapture {
				t.Errorf("capture level %s, want %s", got, c.ExpectCapture)
			}
			if vs := aep.ValidatePayload(out); len(vs) > 0 {
				t.Errorf("down-leveled event fails payload validation: %v", vs)
			}
			if string(c.ExpectData) == "null" {
				if out.Data != nil {
					t.Errorf("data %s, want none", out.Data)
				}
				return
			}
			got, err := aep.CanonicalRaw(out.Data)
			if err != nil {
				t.Fatalf("result data %s: %v", out.Data, err)
			}
			want, _ := aep.CanonicalRaw(c.ExpectData)
			if !bytes.Equal(got, want) {
				t.Errorf("data\n got %s\nwant %s", got, want)
			}
		})
	}
}

type redactionCase struct {
	Name           string          `json:"name"`
	Opts           json.RawMessage `json:"opts"`
	Input          json.RawMessage `json:"input"`
	MustContain    []string        `json:"must_contain"`
	MustNotContain []string        `json:"must_not_contain"`
}

func redactorFor(t *testing.T, raw json.RawMessage) *aep.Redactor {
	t.Helper()
	var o struct {
		Home         *string  `json:"home"`
		SecretValues []string `json:"secretValues"`
		PII          *bool    `json:"pii"`
	}
	if len(raw) > 0 {
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields() // an option this runner does not know would be ignored
		if err := dec.Decode(&o); err != nil {
			t.Fatalf("redaction options %s: %v", raw, err)
		}
	}
	opts := aep.RedactOptions{Home: "/nonexistent-home", SecretValues: o.SecretValues}
	if o.Home != nil {
		opts.Home = *o.Home
	}
	if o.PII != nil && !*o.PII {
		opts.NoPII = true
	}
	return aep.NewRedactor(opts)
}

func checkRedaction(t *testing.T, c redactionCase, out string) {
	t.Helper()
	for _, s := range c.MustNotContain {
		if strings.Contains(out, s) {
			t.Errorf("output still contains %q: %s", s, out)
		}
	}
	for _, s := range c.MustContain {
		if !strings.Contains(out, s) {
			t.Errorf("output lacks %q: %s", s, out)
		}
	}
}

func TestRedaction(t *testing.T) {
	dir := fixtures.Require(t)
	var corpus struct {
		Text  []redactionCase `json:"text_cases"`
		Value []redactionCase `json:"value_cases"`
	}
	load(t, dir, "redaction/cases.json", &corpus)
	if len(corpus.Text) == 0 || len(corpus.Value) == 0 {
		t.Fatal("redaction corpus has no cases")
	}
	for _, c := range corpus.Text {
		t.Run("text/"+c.Name, func(t *testing.T) {
			var in string
			if err := json.Unmarshal(c.Input, &in); err != nil {
				t.Fatal(err)
			}
			checkRedaction(t, c, redactorFor(t, c.Opts).Text(in))
		})
	}
	for _, c := range corpus.Value {
		t.Run("value/"+c.Name, func(t *testing.T) {
			var in any
			dec := json.NewDecoder(bytes.NewReader(c.Input))
			dec.UseNumber()
			if err := dec.Decode(&in); err != nil {
				t.Fatal(err)
			}
			out, err := json.Marshal(redactorFor(t, c.Opts).Value(in))
			if err != nil {
				t.Fatal(err)
			}
			checkRedaction(t, c, string(out))
		})
	}
}

func TestCaptureGating(t *testing.T) {
	dir := fixtures.Require(t)
	var corpus struct {
		Cases []struct {
			Name    string         `json:"name"`
			Fields  []any          `json:"fields"`
			Values  map[string]any `json:"values"`
			Ceiling string         `json:"ceiling"`
			Expect  map[string]any `json:"expect"`
		} `json:"cases"`
	}
	load(t, dir, "capture-gating/cases.json", &corpus)
	if len(corpus.Cases) == 0 {
		t.Fatal("no capture-gating cases")
	}
	red := aep.NewRedactor(aep.RedactOptions{Home: "/nonexistent-home"})
	for _, c := range corpus.Cases {
		t.Run(c.Name, func(t *testing.T) {
			ceiling, err := aep.ParseCapture(c.Ceiling)
			if err != nil {
				t.Fatal(err)
			}
			if g, w := aeptest.Canon(t, aep.GateFormValues(c.Fields, c.Values, ceiling, nil)), aeptest.Canon(t, c.Expect); g != w {
				t.Errorf("got %s want %s", g, w)
			}
			// The redaction-neutral samples survive the real pipeline too.
			if g, w := aeptest.Canon(t, aep.GateFormValues(c.Fields, c.Values, ceiling, red.Text)), aeptest.Canon(t, c.Expect); g != w {
				t.Errorf("with the redaction pipeline: got %s want %s", g, w)
			}
		})
	}
}

// pinned is what a pin fixes of a mapped event (nil: none).
func pinned(t *testing.T, m *mapping.Event) string {
	t.Helper()
	if m == nil {
		return (*aeptest.Pin)(nil).Canon(t)
	}
	return aeptest.PinOf(m.Type, m.Data, m.Subject).Canon(t)
}

func TestKimiHookPins(t *testing.T) {
	fx := aeptest.ReadKimiPins(t)
	cases := map[string]aeptest.PinCase{"fallback": fx.Fallback}
	for k, v := range fx.Hooks {
		cases[k] = v
	}
	names := make([]string, 0, len(cases))
	for k := range cases {
		names = append(names, k)
	}
	sort.Strings(names)
	covered := map[string]bool{}
	for _, name := range names {
		c := cases[name]
		t.Run(name, func(t *testing.T) {
			r, err := mapping.Hook(c.Input, mapping.DefaultPosture())
			if err != nil {
				t.Fatal(err)
			}
			if name != "fallback" {
				covered[r.Facts.Hook] = true
			}
			if len(r.Events) != 1 {
				t.Fatalf("mapped to %d events, pins expect one", len(r.Events))
			}
			ev := r.Events[0]
			ev.Data = aeptest.BeyondPins(t, name, ev.Data, c.Input, mapping.DataProject, mapping.ProjectName)
			if got, want := pinned(t, &ev), c.Expected.Canon(t); got != want {
				t.Errorf("\n got %s\nwant %s", got, want)
			}
		})
	}
	t.Run("covers-the-16-hook-enum", func(t *testing.T) {
		for _, h := range mapping.HooksKimi0_28() {
			if !covered[h] {
				t.Errorf("no pin exercised %s", h)
			}
		}
		if len(covered) != len(mapping.HooksKimi0_28()) {
			t.Errorf("pins cover %d hooks, the pinned enum has %d", len(covered), len(mapping.HooksKimi0_28()))
		}
	})
}

func TestKimiWebPins(t *testing.T) {
	fx := aeptest.ReadKimiPins(t)
	names := make([]string, 0, len(fx.WSModes.Modes))
	for k := range fx.WSModes.Modes {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, name := range names {
		c := fx.WSModes.Modes[name]
		for _, mode := range []mapping.Mode{mapping.Companion, mapping.Primary} {
			want := c.Companion
			if mode == mapping.Primary {
				want = c.Primary
			}
			t.Run(mode.String()+"/"+name, func(t *testing.T) {
				r, err := mapping.Web(c.Input, mode, mapping.DefaultPosture())
				if err != nil {
					t.Fatal(err)
				}
				if len(r.Events) > 1 {
					t.Fatalf("mapped to %d events", len(r.Events))
				}
				var got *mapping.Event
				if len(r.Events) == 1 {
					got = &r.Events[0]
				}
				if g, w := pinned(t, got), want.Canon(t); g != w {
					t.Errorf("\n got %s\nwant %s", g, w)
				}
			})
		}
	}
}

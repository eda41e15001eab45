package aep

import (
	"encoding/json"
	"slices"
	"sort"
	"strings"
	"testing"
)

func violationPaths(vs []Violation) []string {
	var out []string
	for _, v := range vs {
		out = append(out, v.Path)
	}
	sort.Strings(out)
	return out
}

func TestValidatePayload(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		typ     string
		capture string // "" = absent
		data    string // "" = no data
		want    []string
	}{
		{"no data", "tool.completed", "", "", nil},
		{"valid metadata", "tool.completed", "metadata", `{"tool":{"name":"B","call_id":"c"},"duration_ms":3,"status":"success","cost":{"currency":"USD","total":0.1}}`, nil},
		{"missing required", "tool.completed", "", `{"status":"success"}`, []string{"data.tool"}},
		{"missing nested required", "tool.completed", "", `{"tool":{"call_id":"c"}}`, []string{"data.tool.name"}},
		{"wrong kind", "tool.completed", "", `{"tool":{"name":3}}`, []string{"data.tool.name"}},
		{"integer accepts 3.0 and 1e2", "session.ended", "", `{"duration_ms":3.0,"runs":1e2}`, nil},
		{"integer rejects 2.5", "session.ended", "", `{"duration_ms":2.5}`, []string{"data.duration_ms"}},
		{"integer minimum", "session.ended", "", `{"runs":-1}`, []string{"data.runs"}},
		{"enum", "session.ended", "", `{"reason":"bored"}`, []string{"data.reason"}},
		{"number bounds", "progress.status", "", `{"percent":100.5}`, []string{"data.percent"}},
		{"null is not a string", "progress.status", "", `{"phase":null}`, []string{"data.phase"}},
		{"array items kind", "state.delta", "redacted", `{"delta":[{"op":"add"},"x"]}`, []string{"data.delta[1]"}},
		{"array item enum", "attention.requested", "", `{"kind":"input","prompt":"p","respond_via":["control","pigeon"]}`, []string{"data.respond_via[1]"}},
		{"nested array object", "attention.requested", "", `{"kind":"input","prompt":"p","options":[{"id":"a","label":"A"},{"id":"b"}]}`, []string{"data.options[1].label"}},
		{"date-time", "attention.requested", "", `{"kind":"input","prompt":"p","expires_at":"tomorrow"}`, []string{"data.expires_at"}},
		{"string or object", "tool.completed", "full", `{"tool":{"name":"B"},"result":[1]}`, []string{"data.result"}},
		{"unknown members are fine", "run.finished", "", `{"vendor_thing":{"deep":"text"},"duration_ms":1}`, nil},
		{"honesty: full field at metadata", "tool.completed", "metadata", `{"tool":{"name":"B"},"result":"out"}`, []string{"data.result"}},
		{"honesty: redacted field at default capture", "run.started", "", `{"prompt":"do it"}`, []string{"data.prompt"}},
		{"honesty: nested field", "tool.failed", "metadata", `{"tool":{"name":"B"},"error":{"message":"m"}}`, []string{"data.error.message"}},
		{"honesty: array item field", "resource.retrieval.returned", "redacted", `{"documents":[{"id":"d","content":"c"}]}`, []string{"data.documents[0].content"}},
		{"honesty: redacted field at redacted", "tool.failed", "redacted", `{"tool":{"name":"B"},"error":{"message":"m"}}`, nil},
		{"honesty: star field at metadata", "attention.requested", "metadata", `{"kind":"permission","prompt":"a requests permission: B"}`, nil},
		{"capture none with data", "run.started", "none", `{"trigger":"user","prompt":"p"}`, []string{"data"}},
		{"capture none with empty data", "run.started", "none", `{}`, nil},
		{"capture none on a vendor type", "x.acme.run.thing", "none", `{"a":1}`, []string{"data"}},
		{"vendor types are not checked", "x.acme.run.thing", "", `{"prompt":1}`, nil},
		{"unknown category members are not checked", "progress.future_thing", "", `{"x":1}`, nil},
		{"reserved types are not checked", "message.user.submitted", "", `{"text":"hi"}`, nil},
		{"form: select needs choices", "attention.requested", "redacted", `{"kind":"form","prompt":"p","fields":[{"id":"1","type":"select","label":"L"}]}`, []string{"data.fields[0].choices"}},
		{"form: fields only with kind form", "attention.requested", "redacted", `{"kind":"input","prompt":"p","fields":[{"id":"1","type":"string","label":"L"}]}`, []string{"data.fields"}},
		{"form: valid", "attention.requested", "redacted", `{"kind":"form","prompt":"p","fields":[{"id":"1","type":"select","label":"L","multi":true,"choices":[{"id":"a","label":"A"}]},{"id":"2","type":"number","label":"N","min":0}]}`, nil},
		{"form: field_spec kinds", "attention.requested", "redacted", `{"kind":"form","prompt":"p","fields":[{"id":"1","type":"date","label":"L","required":"yes"}]}`, []string{"data.fields[0].required", "data.fields[0].type"}},
		{"command payload", "control.cancel", "", `{"scope":"everything"}`, []string{"data.scope"}},
		{"answer values must be an object", "control.attention.respond", "", `{"answer":{"values":["a"]}}`, []string{"data.answer.values"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := &Event{Type: c.typ, Capture: c.capture}
			if c.data != "" {
				e.Data = json.RawMessage(c.data)
			}
			got := violationPaths(ValidatePayload(e))
			want := append([]string(nil), c.want...)
			sort.Strings(want)
			if !slices.Equal(got, want) {
				t.Errorf("violation paths %v, want %v\n%v", got, want, ValidatePayload(e))
			}
		})
	}
}

func TestValidatePayloadMessages(t *testing.T) {
	t.Parallel()
	e := &Event{Type: "tool.completed", Capture: "metadata", Data: json.RawMessage(`{"tool":{"name":"B"},"result":"x","duration_ms":"slow"}`)}
	vs := ValidatePayload(e)
	var msgs []string
	for _, v := range vs {
		msgs = append(msgs, v.Error())
	}
	joined := strings.Join(msgs, "\n")
	for _, want := range []string{
		"data.duration_ms: must be an integer, not a string (AEP-0002 §5.3)",
		"data.result: gated full but the event declares capture metadata (AEP-0001 §8.2(a))",
	} {
		if !strings.Contains(joined, want) {
			t.Errorf("messages lack %q:\n%s", want, joined)
		}
	}
}

func TestIntegerLiteral(t *testing.T) {
	t.Parallel()
	cases := map[string]bool{
		"0": true, "-0": true, "42": true, "3.0": true, "3.10": false, "1e2": true, "1.5e1": true,
		"1.25e1": false, "1E+2": true, "1e-2": false, "0.0e-5": true, "100e-2": true, "120e-2": false,
		"1.0000000000000001": false, "12345678901234567890": true, "1e99999999999999999999": true,
		"1e-99999999999999999999": false, "0e-99999999999999999999": true,
	}
	for lit, want := range cases {
		if got := integerLiteral(lit); got != want {
			t.Errorf("integerLiteral(%s) = %v, want %v", lit, got, want)
		}
	}
}

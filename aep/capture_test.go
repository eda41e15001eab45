package aep

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// decodeJSON decodes generic JSON the way DataMap does (numbers exact).
func decodeJSON(t testing.TB, s string) map[string]any {
	t.Helper()
	v, err := decodeGeneric([]byte(s))
	if err != nil {
		t.Fatalf("bad test JSON %s: %v", s, err)
	}
	m, _ := v.(map[string]any)
	return m
}

func canonString(t testing.TB, v any) string {
	t.Helper()
	b, err := Canonical(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestSynthesizePrompt(t *testing.T) {
	t.Parallel()
	cases := []struct{ agent, kind, subject, want string }{
		{"kimi-code", "permission", "Shell", "kimi-code requests permission: Shell"},
		{"kimi-code", "form", "", "kimi-code requests form"},
		{"", "", "", "agent requests attention"},
	}
	for _, c := range cases {
		if got := SynthesizePrompt(c.agent, c.kind, c.subject); got != c.want {
			t.Errorf("SynthesizePrompt(%q, %q, %q) = %q, want %q", c.agent, c.kind, c.subject, got, c.want)
		}
	}
}

func TestGateData(t *testing.T) {
	t.Parallel()
	toolCompleted := `{"tool":{"name":"Bash","call_id":"t1","vendor":"x"},"status":"success","result_digest":"d",
		"result":"verbatim","result_redacted":"scrubbed","extra":{"k":1},"cost":{"currency":"USD","total":0.5}}`
	cases := []struct {
		name, typ, data string
		level           Capture
		want            string // canonical JSON, or "null"
	}{
		{"full keeps everything", "tool.completed", toolCompleted, CaptureFull,
			`{"cost":{"currency":"USD","total":0.5},"extra":{"k":1},"result":"verbatim","result_digest":"d","result_redacted":"scrubbed","status":"success","tool":{"call_id":"t1","name":"Bash","vendor":"x"}}`},
		{"redacted drops full fields", "tool.completed", toolCompleted, CaptureRedacted,
			`{"cost":{"currency":"USD","total":0.5},"extra":{"k":1},"result_digest":"d","result_redacted":"scrubbed","status":"success","tool":{"call_id":"t1","name":"Bash","vendor":"x"}}`},
		{"metadata drops redacted fields, keeps unannotated members", "tool.completed", toolCompleted, CaptureMetadata,
			`{"cost":{"currency":"USD","total":0.5},"extra":{"k":1},"result_digest":"d","status":"success","tool":{"call_id":"t1","name":"Bash","vendor":"x"}}`},
		{"none is nil", "tool.completed", toolCompleted, CaptureNone, "null"},
		{"nested object pruned", "tool.failed", `{"tool":{"name":"W"},"error":{"type":"io","message":"disk /home/u full"}}`, CaptureMetadata,
			`{"error":{"type":"io"},"tool":{"name":"W"}}`},
		{"array items pruned", "resource.retrieval.returned",
			`{"documents":[{"id":"a","content":"c","content_redacted":"r","metadata":{"rank":1}},"stray"],"count":1}`, CaptureRedacted,
			`{"count":1,"documents":[{"content_redacted":"r","id":"a","metadata":{"rank":1}},"stray"]}`},
		{"deep nesting: citation source", "resource.citation.recorded",
			`{"citations":[{"source":{"id":"d","uri":"u","title":"t"},"cited_text":"x","offset":{"char":{"start":1,"end":2}}}]}`, CaptureMetadata,
			`{"citations":[{"offset":{"char":{"end":2,"start":1}},"source":{"id":"d"}}]}`},
		{"wrong shape still pruned", "tool.failed", `{"tool":{"name":"W"},"error":[{"message":"secret"}]}`, CaptureMetadata,
			`{"error":[{}],"tool":{"name":"W"}}`},
		{"star fields kept at metadata as given", "attention.requested",
			`{"kind":"permission","prompt":"a requests permission: X","options":[{"id":"1","label":"1"}],"context":{"c":1}}`, CaptureMetadata,
			`{"kind":"permission","options":[{"id":"1","label":"1"}],"prompt":"a requests permission: X"}`},
		{"vendor type keeps data", "x.kimi.session.hook", `{"anything":"goes"}`, CaptureMetadata, `{"anything":"goes"}`},
		{"vendor type at none", "x.kimi.session.hook", `{"anything":"goes"}`, CaptureNone, "null"},
		{"reserved type keeps data", "message.user.submitted", `{"text":"hi"}`, CaptureRedacted, `{"text":"hi"}`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			in := decodeJSON(t, c.data)
			before := canonString(t, in)
			got := GateData(c.typ, in, c.level)
			if c.want == "null" {
				if got != nil {
					t.Errorf("GateData(%s, %s) = %v, want nil", c.typ, c.level, got)
				}
			} else if s := canonString(t, got); s != c.want {
				t.Errorf("GateData(%s, %s)\n got %s\nwant %s", c.typ, c.level, s, c.want)
			}
			if after := canonString(t, in); after != before {
				t.Errorf("input modified: %s", after)
			}
		})
	}
}

func TestGateDataCopies(t *testing.T) {
	t.Parallel()
	in := map[string]any{"anything": map[string]any{"k": "v"}}
	out := GateData("x.kimi.session.hook", in, CaptureMetadata)
	out["anything"].(map[string]any)["k"] = "changed"
	if in["anything"].(map[string]any)["k"] != "v" {
		t.Error("GateData shares nested maps with its input")
	}
}

func TestGateDataTypedValues(t *testing.T) {
	t.Parallel()
	type errInfo struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	}
	in := map[string]any{
		"tool":  map[string]any{"name": "W"},
		"error": errInfo{Type: "io", Message: "private detail"},
	}
	got := canonString(t, GateData("tool.failed", in, CaptureMetadata))
	if want := `{"error":{"type":"io"},"tool":{"name":"W"}}`; got != want {
		t.Errorf("typed value not pruned: got %s want %s", got, want)
	}
}

func mustEvent(t testing.TB, s string) *Event {
	t.Helper()
	e, err := ParseEvent([]byte(s))
	if err != nil {
		t.Fatalf("ParseEvent(%s): %v", s, err)
	}
	return e
}

const envelope = `"aep":"0.1","id":"E1","time":"2026-07-03T10:00:00Z","source":"aep://h/agent/a","agent":"kimi","session":"s1","seq":1`

func TestDownlevel(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name     string
		event    string
		ceiling  Capture
		wantCap  string
		wantData string // canonical JSON, or "" for absent
		same     bool   // the very same *Event comes back
	}{
		{"at the ceiling: same event", `{` + envelope + `,"type":"tool.completed","capture":"redacted","data":{"tool":{"name":"B"},"result_redacted":"r"}}`,
			CaptureRedacted, "redacted", `{"result_redacted":"r","tool":{"name":"B"}}`, true},
		{"absent capture is metadata", `{` + envelope + `,"type":"run.started","data":{"trigger":"user"}}`,
			CaptureMetadata, "", `{"trigger":"user"}`, true},
		{"full to redacted lands on metadata", `{` + envelope + `,"type":"run.started","capture":"full","data":{"trigger":"user","prompt":"do it"}}`,
			CaptureRedacted, "metadata", `{"trigger":"user"}`, false},
		{"full to full untouched", `{` + envelope + `,"type":"run.started","capture":"full","data":{"prompt":"do it"}}`,
			CaptureFull, "full", `{"prompt":"do it"}`, true},
		{"redacted to metadata", `{` + envelope + `,"type":"session.started","capture":"redacted","data":{"label":"L","cwd":"/w","client":{"name":"kimi"}}}`,
			CaptureMetadata, "metadata", `{"client":{"name":"kimi"}}`, false},
		{"to none", `{` + envelope + `,"type":"run.started","capture":"metadata","data":{"trigger":"user"}}`,
			CaptureNone, "none", "", false},
		{"unknown capture is treated as full", `{` + envelope + `,"type":"run.started","capture":"everything","data":{"trigger":"user","prompt":"p"}}`,
			CaptureRedacted, "metadata", `{"trigger":"user"}`, false},
		{"no data stays without data", `{` + envelope + `,"type":"run.started","capture":"full"}`,
			CaptureMetadata, "metadata", "", false},
		{"type without annotations loses data", `{` + envelope + `,"type":"control.accepted","capture":"redacted","data":{"note":"n"}}`,
			CaptureMetadata, "metadata", "", false},
		{"prompt synthesized without subject", `{` + envelope + `,"type":"attention.requested","capture":"redacted","data":{"kind":"input","prompt":"What now?"}}`,
			CaptureMetadata, "metadata", `{"kind":"input","prompt":"kimi requests input"}`, false},
		{"labels fall back to the 1-based index", `{` + envelope + `,"type":"attention.requested","subject":"S","capture":"redacted","data":{"kind":"permission","prompt":"p","options":[{"label":"Yes"},{"id":7,"label":"No"},"junk"]}}`,
			CaptureMetadata, "metadata", `{"kind":"permission","options":[{"label":"1"},{"id":7,"label":"7"}],"prompt":"kimi requests permission: S"}`, false},
		{"values not an object is dropped", `{` + envelope + `,"type":"attention.answered","capture":"redacted","data":{"answer":{"option":"1","values":"free text"}}}`,
			CaptureMetadata, "metadata", `{"answer":{"option":"1"}}`, false},
		{"redacted values keep strings at redacted", `{` + envelope + `,"type":"attention.answered","capture":"full","data":{"answer":{"values":{"a":"x","b":2}}}}`,
			CaptureRedacted, "metadata", `{"answer":{"values":{"b":2}}}`, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := mustEvent(t, c.event)
			raw := append([]byte(nil), e.Raw()...)
			out, err := Downlevel(e, c.ceiling)
			if err != nil {
				t.Fatal(err)
			}
			if (out == e) != c.same {
				t.Errorf("same event returned = %v, want %v", out == e, c.same)
			}
			if out.Capture != c.wantCap {
				t.Errorf("capture %q, want %q", out.Capture, c.wantCap)
			}
			if c.wantData == "" {
				if out.Data != nil {
					t.Errorf("data %s, want none", out.Data)
				}
			} else if got, _ := CanonicalRaw(out.Data); string(got) != c.wantData {
				t.Errorf("data\n got %s\nwant %s", got, c.wantData)
			}
			if !bytes.Equal(e.Raw(), raw) {
				t.Error("Downlevel changed the input's Raw bytes")
			}
			if out.CaptureLevel() > c.ceiling {
				t.Errorf("result capture %s above ceiling %s", out.CaptureLevel(), c.ceiling)
			}
			if !c.same && out.Raw() != nil {
				t.Error("rewritten event still claims the original bytes")
			}
		})
	}
}

func TestDownlevelDoesNotMutate(t *testing.T) {
	t.Parallel()
	e := mustEvent(t, `{`+envelope+`,"type":"attention.requested","subject":"S","capture":"redacted","acmex":"y","data":{"kind":"form","prompt":"p","fields":[{"id":"f","type":"select","label":"L","choices":[{"id":"c","label":"C"}]}]}}`)
	before, _ := e.MarshalJSON()
	if _, err := Downlevel(e, CaptureMetadata); err != nil {
		t.Fatal(err)
	}
	after, _ := e.MarshalJSON()
	if !bytes.Equal(before, after) {
		t.Errorf("event changed:\n%s\n%s", before, after)
	}
}

func TestDownlevelUnencodableData(t *testing.T) {
	t.Parallel()
	e := mustEvent(t, `{`+envelope+`,"type":"run.started","capture":"full","data":{"trigger":"user","n":1e400}}`)
	if _, err := Downlevel(e, CaptureMetadata); err == nil {
		t.Error("want an error for data that cannot be re-encoded")
	}
}

var gatingFields = `[
	{"id":"name","type":"string","label":"Name","required":true},
	{"id":"n","type":"number","label":"N","min":1,"max":5},
	{"id":"ok","type":"boolean","label":"OK"},
	{"id":"pick","type":"select","label":"Pick","choices":[{"id":"a","label":"A"},{"id":"b","label":"B"}]},
	{"id":"many","type":"select","label":"Many","multi":true,"choices":[{"id":"a","label":"A"},{"id":"b","label":"B"}]},
	{"id":"else","type":"select","label":"Else","other":true,"choices":[{"id":"a","label":"A"}]}
]`

func gatingSpec(t *testing.T) []any {
	var v []any
	dec := json.NewDecoder(strings.NewReader(gatingFields))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		t.Fatal(err)
	}
	return v
}

func TestGateFormValues(t *testing.T) {
	t.Parallel()
	fields := gatingSpec(t)
	values := `{"name":"billing at a@example.com","n":3,"ok":false,"pick":"b","many":["a","b"],"else":"call me","stray":1}`
	upper := func(s string) string { return strings.ToUpper(s) }
	cases := []struct {
		name    string
		values  string
		ceiling Capture
		redact  func(string) string
		want    string
	}{
		{"metadata keeps structure only", values, CaptureMetadata, upper, `{"many":["a","b"],"n":3,"ok":false,"pick":"b"}`},
		{"none keeps structure too (data drop is the caller's)", values, CaptureNone, upper, `{"many":["a","b"],"n":3,"ok":false,"pick":"b"}`},
		{"redacted passes free text through redact", values, CaptureRedacted, upper, `{"else":"CALL ME","many":["a","b"],"n":3,"name":"BILLING AT A@EXAMPLE.COM","ok":false,"pick":"b"}`},
		{"redacted without redact keeps text", values, CaptureRedacted, nil, `{"else":"call me","many":["a","b"],"n":3,"name":"billing at a@example.com","ok":false,"pick":"b"}`},
		{"full never redacts", values, CaptureFull, upper, `{"else":"call me","many":["a","b"],"n":3,"name":"billing at a@example.com","ok":false,"pick":"b"}`},
		{"other choice id is structural", `{"else":"a"}`, CaptureMetadata, nil, `{"else":"a"}`},
		{"kind mismatch is not trusted", `{"n":"3 people","ok":"yes","pick":{"id":"b"}}`, CaptureMetadata, nil, `{}`},
		{"kind mismatch is free text at redacted", `{"n":"3 people","ok":"yes","pick":{"id":"b"},"name":7}`, CaptureRedacted, upper, `{"n":"3 PEOPLE","name":7,"ok":"YES"}`},
		{"kind mismatch is kept at full", `{"n":"3 people","pick":{"id":"b"}}`, CaptureFull, upper, `{"n":"3 people","pick":{"id":"b"}}`},
		{"closed select text kept at redacted", `{"pick":"zzz"}`, CaptureRedacted, upper, `{"pick":"ZZZ"}`},
		{"multi with free text at metadata", `{"many":["a","zzz"]}`, CaptureMetadata, nil, `{}`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			in := decodeJSON(t, c.values)
			before := canonString(t, in)
			got := GateFormValues(fields, in, c.ceiling, c.redact)
			if got == nil {
				t.Fatal("nil result")
			}
			if s := canonString(t, got); s != c.want {
				t.Errorf("got %s want %s", s, c.want)
			}
			if canonString(t, in) != before {
				t.Error("input modified")
			}
		})
	}
}

func TestFormValuesError(t *testing.T) {
	t.Parallel()
	fields := gatingSpec(t)
	cases := []struct {
		name, values string
		wantErr      string // substring, "" for valid
	}{
		{"complete", `{"name":"x","n":2,"ok":true,"pick":"a","many":["b"],"else":"free"}`, ""},
		{"only required", `{"name":"x"}`, ""},
		{"missing required", `{"n":2}`, `missing required field "name"`},
		{"closed select free text", `{"name":"x","pick":"c"}`, `"c" is not a choices[].id`},
		{"multi with unknown id", `{"name":"x","many":["a","c"]}`, `"c" is not a choices[].id`},
		{"multi not an array", `{"name":"x","many":"a"}`, "array of choice ids"},
		{"other allows text", `{"name":"x","else":"anything"}`, ""},
		{"number kind", `{"name":"x","n":"2"}`, "number field"},
		{"number below min", `{"name":"x","n":0}`, "below the minimum"},
		{"number above max", `{"name":"x","n":6}`, "above the maximum"},
		{"boolean kind", `{"name":"x","ok":"true"}`, "boolean field"},
		{"string kind", `{"name":3}`, "string field"},
		{"undeclared keys are not errors", `{"name":"x","stray":1}`, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := FormValuesError(fields, decodeJSON(t, c.values))
			switch {
			case c.wantErr == "" && err != nil:
				t.Errorf("unexpected error: %v", err)
			case c.wantErr != "" && (err == nil || !strings.Contains(err.Error(), c.wantErr)):
				t.Errorf("error %v, want one containing %q", err, c.wantErr)
			}
		})
	}
}

// --- fuzzing -----------------------------------------------------------------------

func FuzzDownlevel(f *testing.F) {
	seeds := []string{
		`{` + envelope + `,"type":"attention.requested","subject":"S","capture":"redacted","data":{"kind":"form","prompt":"p","fields":[{"id":"1","type":"select","label":"L","choices":[{"id":"1","label":"A"}]}],"options":[{"id":"y","label":"Y"}]}}`,
		`{` + envelope + `,"type":"attention.answered","capture":"full","data":{"answer":{"text":"t","values":{"a":"x","b":1,"c":true}}}}`,
		`{` + envelope + `,"type":"tool.completed","capture":"full","data":{"tool":{"name":"B"},"result":"r","result_redacted":{"k":"v"}}}`,
		`{` + envelope + `,"type":"resource.citation.recorded","capture":"full","data":{"citations":[{"source":{"id":"d","uri":"u"},"cited_text":"x"}]}}`,
		`{` + envelope + `,"type":"x.acme.session.blob","capture":"full","data":{"x":1}}`,
		`{` + envelope + `,"type":"run.failed","capture":"bogus","data":{"reason":"e","error":{"message":"m"}}}`,
		`{` + envelope + `,"type":"control.cancel","capture":"none","data":{"scope":"run"}}`,
		`{"aep":"0.1"}`,
	}
	for i, s := range seeds {
		f.Add([]byte(s), uint8(0))
		f.Add([]byte(s), uint8(i*7+1))
	}
	types := RegisteredTypes()
	f.Fuzz(func(t *testing.T, b []byte, typeIndex uint8) {
		e, err := ParseEvent(b)
		if err != nil {
			return
		}
		// typeIndex > 0 swaps in a registered type, so mutated data meets
		// every schema rather than only the seeds' types.
		if typeIndex > 0 {
			e.Type = types[int(typeIndex-1)%len(types)].Type
			e.ClearRaw()
		}
		inVs := countViolations(e)
		for c := CaptureNone; c <= CaptureFull; c++ {
			out, err := Downlevel(e, c)
			if err != nil {
				continue
			}
			if out.CaptureLevel() > c {
				t.Fatalf("capture %s above ceiling %s", out.CaptureLevel(), c)
			}
			if wireCapture(e) == CaptureFull && out != e && out.Capture == "redacted" {
				t.Fatalf("a full event was relabelled redacted")
			}
			// MarshalJSON writes extension names unescaped (event.go), so
			// only events with legal names are expected to round-trip.
			if out != e && legalExtNames(e) {
				if _, err := ParseEvent(mustBytes(t, out)); err != nil {
					t.Fatalf("result does not parse: %v", err)
				}
			}
			if outVs := countViolations(out); outVs > inVs {
				t.Fatalf("down-leveling to %s made the event worse: %d violations, input had %d\nin:  %s\nout: %s\n%v",
					c, outVs, inVs, b, mustBytes(t, out), Validate(out))
			}
		}
	})
}

func legalExtNames(e *Event) bool {
	for name := range e.Ext {
		if !validExtName(name) {
			return false
		}
	}
	return true
}

func countViolations(e *Event) int {
	err := Validate(e)
	if err == nil {
		return 0
	}
	return len(err.(*ValidationError).Violations)
}

func mustBytes(t *testing.T, e *Event) []byte {
	b, err := e.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

package aep

import (
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

// validatePayloadOracle is ValidatePayload as it was before it read data as
// text: data decoded into generic values with encoding/json, then walked. It
// is kept here only as the differential fuzz test's oracle.
func validatePayloadOracle(e *Event) []Violation {
	if e.Data == nil {
		return nil
	}
	data, err := e.DataMap()
	if err != nil {
		return []Violation{{Rule: "AEP-0001 §5.1 #17", Path: AttrData, Msg: fmt.Sprintf("not a JSON object: %v", err)}}
	}
	pv := oracleValidator{capture: e.CaptureLevel()}
	if pv.capture == CaptureNone && len(data) > 0 {
		pv.add("AEP-0001 §8.2(a)", AttrData, "capture none carries no payload content, but data has %d member(s)", len(data))
		// Every member is above none: one violation says it all.
		pv.skipHonesty = true
	}
	spec, ok := LookupType(e.Type)
	if !ok || !spec.HasSchema {
		return pv.vs
	}
	pv.rule = schemaRule(spec)
	pv.object(AttrData, data, spec.Fields)
	if e.Type == "attention.requested" {
		pv.formRules(data)
	}
	return pv.vs
}

type oracleValidator struct {
	capture     Capture
	skipHonesty bool
	rule        string
	vs          []Violation
}

func (pv *oracleValidator) add(rule, path, format string, args ...any) {
	pv.vs = append(pv.vs, Violation{Rule: rule, Path: path, Msg: fmt.Sprintf(format, args...)})
}

// object checks the declared properties of m; undeclared members are legal
// and default to metadata capture, so they need no check.
func (pv *oracleValidator) object(path string, m map[string]any, fields []Field) {
	for i := range fields {
		f := &fields[i]
		v, ok := m[f.Name]
		p := path + "." + f.Name
		if !ok {
			if f.Required {
				pv.add(pv.rule, p, "required member missing")
			}
			continue
		}
		if f.Capture > pv.capture && !pv.skipHonesty {
			pv.add("AEP-0001 §8.2(a)", p, "gated %s but the event declares capture %s", f.Capture, pv.capture)
		}
		pv.value(p, v, f)
	}
}

// value checks one present value against its field.
func (pv *oracleValidator) value(path string, v any, f *Field) {
	if !kindMatches(v, f.Kind) {
		pv.add(pv.rule, path, "must be %s, not %s", kindArticle(f.Kind), jsonKindName(v))
		return
	}
	if f.Enum != nil && !inEnum(v, f.Enum) {
		pv.add(pv.rule, path, "must be one of %s", strings.Join(f.Enum, ", "))
	}
	if f.Min != nil || f.Max != nil {
		if n, ok := numberOf(v); ok {
			if f.Min != nil && n < *f.Min {
				pv.add(pv.rule, path, "must be >= %s", formatBound(*f.Min))
			}
			if f.Max != nil && n > *f.Max {
				pv.add(pv.rule, path, "must be <= %s", formatBound(*f.Max))
			}
		}
	}
	switch x := v.(type) {
	case map[string]any:
		if len(f.Fields) > 0 {
			pv.object(path, x, f.Fields)
		}
	case []any:
		for i, item := range x {
			ip := path + "[" + strconv.Itoa(i) + "]"
			if f.Items != KindAny && !kindMatches(item, f.Items) {
				pv.add(pv.rule, ip, "must be %s, not %s", kindArticle(f.Items), jsonKindName(item))
				continue
			}
			if f.ItemEnum != nil && !inEnum(item, f.ItemEnum) {
				pv.add(pv.rule, ip, "must be one of %s", strings.Join(f.ItemEnum, ", "))
			}
			if m, ok := item.(map[string]any); ok && len(f.Fields) > 0 {
				pv.object(ip, m, f.Fields)
			}
		}
	}
}

// formRules applies the AEP-0006 rules the schema states conditionally or in
// prose: a select field carries choices, and fields belong to kind "form".
func (pv *oracleValidator) formRules(data map[string]any) {
	fields, present := data["fields"]
	if !present {
		return
	}
	if kind, _ := data["kind"].(string); kind != "form" {
		pv.add("AEP-0006", "data.fields", `present only when kind is "form"`)
	}
	list, _ := fields.([]any)
	for i, item := range list {
		fs, ok := item.(map[string]any)
		if !ok {
			continue
		}
		if fs["type"] == "select" {
			if _, ok := fs["choices"]; !ok {
				pv.add("AEP-0006", "data.fields["+strconv.Itoa(i)+"].choices", `required when type is "select"`)
			}
		}
	}
}

// isInteger reports whether v is a number with no fractional part, judged on
// the literal for json.Number so 1.0000000000000001 is not an integer.
func isInteger(v any) bool {
	switch x := v.(type) {
	case json.Number:
		return integerLiteral(string(x))
	case float64:
		return !math.IsInf(x, 0) && x == math.Trunc(x)
	case float32:
		return !math.IsInf(float64(x), 0) && float64(x) == math.Trunc(float64(x))
	}
	_, ok := numberOf(v)
	return ok
}

func kindMatches(v any, k Kind) bool {
	switch k {
	case KindAny:
		return true
	case KindString:
		_, ok := v.(string)
		return ok
	case KindDateTime:
		s, ok := v.(string)
		return ok && ValidTime(s)
	case KindInteger:
		return isInteger(v)
	case KindNumber:
		return isNumber(v)
	case KindBool:
		_, ok := v.(bool)
		return ok
	case KindObject:
		_, ok := v.(map[string]any)
		return ok
	case KindArray:
		_, ok := v.([]any)
		return ok
	case KindStringOrObject:
		switch v.(type) {
		case string, map[string]any:
			return true
		}
		return false
	}
	return false
}

// jsonKindName names what v is, for messages.
func jsonKindName(v any) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case string:
		return "a string"
	case bool:
		return "a boolean"
	case map[string]any:
		return "an object"
	case []any:
		return "an array"
	default:
		if isInteger(x) {
			return "an integer"
		}
		if isNumber(x) {
			return "a number"
		}
	}
	return fmt.Sprintf("%T", v)
}

func inEnum(v any, allowed []string) bool {
	s, ok := v.(string)
	if !ok {
		return false
	}
	for _, a := range allowed {
		if a == s {
			return true
		}
	}
	return false
}

// FuzzValidatePayloadOracle holds ValidatePayload to the decoding validator
// it replaced: the same violations (rules, paths, messages, order) for any
// data under any type and capture.
func FuzzValidatePayloadOracle(f *testing.F) {
	for _, c := range payloadOracleSeeds {
		f.Add(c.typ, c.capture, []byte(c.data))
	}
	f.Fuzz(func(t *testing.T, typ, capture string, data []byte) {
		checkPayloadAgainstOracle(t, typ, capture, data)
	})
}

func TestValidatePayloadOracle(t *testing.T) {
	t.Parallel()
	for _, c := range payloadOracleSeeds {
		checkPayloadAgainstOracle(t, c.typ, c.capture, []byte(c.data))
	}
	// Every registered type with an empty object, a wrong kind in every
	// field, and each field holding each kind of value.
	values := []string{`null`, `true`, `"s"`, `"form"`, `"select"`, `"2026-07-03T10:15:04.221Z"`, `3`, `3.5`, `-1`, `1e400`, `{}`, `[]`, `[1,"a",{}]`, `{"a":1}`}
	for _, spec := range RegisteredTypes() {
		for _, capture := range []string{"", "none", "metadata", "redacted", "full"} {
			checkPayloadAgainstOracle(t, spec.Type, capture, []byte(`{}`))
			for _, fd := range spec.Fields {
				for _, v := range values {
					checkPayloadAgainstOracle(t, spec.Type, capture, []byte(`{"`+fd.Name+`":`+v+`}`))
					for _, sub := range fd.Fields {
						checkPayloadAgainstOracle(t, spec.Type, capture, []byte(`{"`+fd.Name+`":{"`+sub.Name+`":`+v+`}}`))
						checkPayloadAgainstOracle(t, spec.Type, capture, []byte(`{"`+fd.Name+`":[{"`+sub.Name+`":`+v+`},`+v+`]}`))
					}
				}
			}
		}
	}
}

func checkPayloadAgainstOracle(t *testing.T, typ, capture string, data []byte) {
	t.Helper()
	e := &Event{Type: typ, Capture: capture, Data: data}
	got, want := ValidatePayload(e), validatePayloadOracle(e)
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("type %q capture %q data %q:\ngot    %v\noracle %v", typ, capture, data, got, want)
	}
}

var payloadOracleSeeds = []struct{ typ, capture, data string }{
	{"tool.completed", "metadata", `{"tool":{"name":"B","call_id":"c"},"duration_ms":3,"status":"success","cost":{"currency":"USD","total":0.1}}`},
	{"tool.completed", "", `{"status":"success"}`},
	{"tool.completed", "", `{"tool":{"name":3}}`},
	{"session.ended", "", `{"duration_ms":3.0,"runs":1e2,"reason":"bored"}`},
	{"session.ended", "", `{"duration_ms":2.5,"runs":-1}`},
	{"progress.status", "", `{"percent":100.5,"phase":null}`},
	{"state.delta", "redacted", `{"delta":[{"op":"add"},"x"]}`},
	{"attention.requested", "", `{"kind":"input","prompt":"p","respond_via":["control","pigeon"],"options":[{"id":"a","label":"A"},{"id":"b"}],"expires_at":"tomorrow"}`},
	{"attention.requested", "redacted", `{"kind":"form","prompt":"p","fields":[{"id":"1","type":"select","label":"L"},{"id":"2","type":"date","label":"L","required":"yes"},3]}`},
	{"attention.requested", "redacted", `{"kind":"input","fields":"x","kind":"form"}`},
	{"attention.requested", "redacted", `{"k\u0069nd":"f\u006frm","fields":[{"type":"sel\u0065ct","ch\u006fices":null}]}`},
	{"tool.completed", "full", `{"tool":{"name":"B"},"result":[1]}`},
	{"tool.completed", "metadata", `{"tool":{"name":"B"},"result":"out","tool":{"name":"C"}}`},
	{"run.started", "none", `{"trigger":"user","prompt":"p","trigger":"x"}`},
	{"run.started", "none", ` {} `},
	{"run.started", "", ` null `},
	{"run.started", "", `[1]`},
	{"run.started", "", `{"prompt":`},
	{"run.started", "", `{"prompt":"a"} trailing`},
	{"run.started", "", "{\"pr\xffompt\":\"\xff\"}"},
	{"run.started", "", ``},
	{"x.acme.run.thing", "none", `{"a":1}`},
	{"control.cancel", "", `{"scope":"everything"}`},
	{"control.attention.respond", "", `{"answer":{"values":["a"]}}`},
	{"resource.retrieval.returned", "redacted", `{"documents":[{"id":"d","content":"c"}]}`},
	{"session.ended", "", `{"duration_ms":1e99999999999999999999,"runs":-0.0e-5}`},
}

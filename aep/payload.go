package aep

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// ValidatePayload checks e's data against its registered payload schema
// (AEP-0002 §5): required members, JSON kinds, enums, bounds, nested objects
// and arrays; unknown members are allowed (the schemas are open). It also
// checks capture honesty (AEP-0001 §8.2(a), AEP-0002 §5.1 rule 1: no field
// above the event's declared capture, no data member at all at capture none)
// and the AEP-0006 form rules (a select field_spec carries choices; fields
// appear only with kind "form"). Unregistered types and the reserved types
// without a schema get only the capture-none check. Events without data pass.
func ValidatePayload(e *Event) []Violation {
	if e.Data == nil {
		return nil
	}
	data, err := e.DataMap()
	if err != nil {
		return []Violation{{Rule: "AEP-0001 §5.1 #17", Path: AttrData, Msg: fmt.Sprintf("not a JSON object: %v", err)}}
	}
	pv := payloadValidator{capture: e.CaptureLevel()}
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

// schemaRule names the section that defines spec's payload schema.
func schemaRule(spec *TypeSpec) string {
	switch {
	case strings.HasPrefix(spec.Type, "control."):
		return "AEP-0004 §5"
	case spec.Status == "mandatory":
		return "AEP-0002 §5.3"
	}
	return "AEP-0002 §5.4"
}

type payloadValidator struct {
	capture     Capture
	skipHonesty bool
	rule        string
	vs          []Violation
}

func (pv *payloadValidator) add(rule, path, format string, args ...any) {
	pv.vs = append(pv.vs, Violation{Rule: rule, Path: path, Msg: fmt.Sprintf(format, args...)})
}

// object checks the declared properties of m; undeclared members are legal
// and default to metadata capture, so they need no check.
func (pv *payloadValidator) object(path string, m map[string]any, fields []Field) {
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
func (pv *payloadValidator) value(path string, v any, f *Field) {
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
func (pv *payloadValidator) formRules(data map[string]any) {
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

// --- JSON value helpers (shared with capture.go) --------------------------------

// numberOf returns v as a float64 when it is a JSON number in any of the
// forms decoded or hand-built data uses.
func numberOf(v any) (float64, bool) {
	switch x := v.(type) {
	case json.Number:
		f, err := strconv.ParseFloat(string(x), 64)
		return f, err == nil || isRangeErr(err)
	case float64:
		return x, true
	case float32:
		return float64(x), true
	case int:
		return float64(x), true
	case int8:
		return float64(x), true
	case int16:
		return float64(x), true
	case int32:
		return float64(x), true
	case int64:
		return float64(x), true
	case uint:
		return float64(x), true
	case uint8:
		return float64(x), true
	case uint16:
		return float64(x), true
	case uint32:
		return float64(x), true
	case uint64:
		return float64(x), true
	}
	return 0, false
}

func isRangeErr(err error) bool {
	ne, ok := err.(*strconv.NumError)
	return ok && ne.Err == strconv.ErrRange
}

// isNumber reports whether v is a JSON number.
func isNumber(v any) bool {
	_, ok := numberOf(v)
	return ok
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

// integerLiteral decides integer-ness of a JSON number literal exactly: the
// value is D×10^(exp-len(frac)) for the digit string D, an integer when D is
// zero or its trailing zeros cover the negative power.
func integerLiteral(s string) bool {
	s = strings.TrimPrefix(s, "-")
	mant, expStr, hasExp := strings.Cut(strings.ToLower(s), "e")
	intPart, frac, _ := strings.Cut(mant, ".")
	digits := strings.TrimLeft(intPart+frac, "0")
	if digits == "" {
		return true
	}
	exp := 0
	if hasExp {
		e, err := strconv.Atoi(strings.TrimPrefix(expStr, "+"))
		if err != nil {
			// Too many exponent digits: a huge positive power leaves no
			// fraction, a huge negative one leaves nothing else.
			return !strings.HasPrefix(expStr, "-")
		}
		exp = e
	}
	need := len(frac) - exp
	if need <= 0 {
		return true
	}
	return len(digits)-len(strings.TrimRight(digits, "0")) >= need
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

func kindArticle(k Kind) string {
	switch k {
	case KindInteger, KindObject, KindArray, KindAny:
		return "an " + k.String()
	}
	return "a " + k.String()
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

func formatBound(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }

package aep

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// ValidatePayload checks e's data against its registered payload schema
// (AEP-0002 §5): required members, JSON kinds, enums, bounds, nested objects
// and arrays; unknown members are allowed (the schemas are open). It also
// checks capture honesty (AEP-0001 §8.2(a), AEP-0002 §5.1 rule 1: no field
// above the event's declared capture, no data member at all at capture none)
// and the AEP-0006 form rules (a select field_spec carries choices; fields
// appear only with kind "form"). Unregistered types and the reserved types
// without a schema get only the capture-none check. Events without data pass.
//
// It reads data as JSON text where it lies, decoding nothing it need not
// compare (a member name or string with escapes, a number against a bound),
// and judges it as encoding/json would have decoded it: the last of
// duplicate members wins, text that is not UTF-8 reads as U+FFFD, anything
// after the object is not looked at, and null reads as an empty object.
func ValidatePayload(e *Event) []Violation {
	if e.Data == nil {
		return nil
	}
	pv := payloadValidator{s: scanner{b: e.Data, badUTF8: -1}, capture: e.CaptureLevel()}
	// The path of a violation is built in place, and turned into a string
	// only for a violation.
	var pathBuf [64]byte
	path := append(pathBuf[:0], AttrData...)
	i := pv.s.space(0)
	if i >= len(e.Data) || e.Data[i] != '{' || pv.s.object(i, 1) < 0 {
		// Not an object (or not JSON): encoding/json says what it is, or
		// takes it (null) as no members at all.
		m, err := e.DataMap()
		if err != nil {
			return []Violation{{Rule: "AEP-0001 §5.1 #17", Path: AttrData, Msg: fmt.Sprintf("not a JSON object: %v", err)}}
		}
		if m != nil {
			// Unreachable: what encoding/json decodes to a map, the
			// scanner takes as an object.
			return []Violation{{Rule: "AEP-0001 §5.1 #17", Path: AttrData, Msg: "data could not be read"}}
		}
		pv.s.b, i = []byte("{}"), 0
	}
	if pv.capture == CaptureNone && pv.s.b[pv.s.space(i+1)] != '}' {
		// Members are counted as decoded (duplicates once); this is the
		// rejection path, so decoding is fine here.
		m, _ := e.DataMap()
		pv.add("AEP-0001 §8.2(a)", path, "capture none carries no payload content, but data has %d member(s)", len(m))
		// Every member is above none: one violation says it all.
		pv.skipHonesty = true
	}
	spec, ok := LookupType(e.Type)
	if !ok || !spec.HasSchema {
		return pv.vs
	}
	pv.rule = schemaRule(spec)
	pv.object(i, path, spec.Fields)
	if e.Type == "attention.requested" {
		pv.formRules(i, path)
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

// payloadValidator walks data's JSON text (already known to be valid from
// the object it starts at) against the fields of a schema.
type payloadValidator struct {
	s           scanner // over data; its grammar checks are done once up front
	capture     Capture
	skipHonesty bool
	rule        string
	vs          []Violation
}

// add records a violation at path ("data.tool.name", "data.options[1]").
func (pv *payloadValidator) add(rule string, path []byte, format string, args ...any) {
	pv.vs = append(pv.vs, Violation{Rule: rule, Path: string(path), Msg: fmt.Sprintf(format, args...)})
}

// valueSpan is where a value lies in data (end 0: absent).
type valueSpan struct{ start, end int }

// maxInlineFields is how many declared fields an object's walk tracks
// without allocating (the registry's largest object has 9).
const maxInlineFields = 16

// members calls fn with each member of the object at b[i] ('{'): its raw
// key with quotes (esc when the key has escapes) and where its value lies.
func (pv *payloadValidator) members(i int, fn func(key []byte, esc bool, v valueSpan)) {
	b := pv.s.b
	i = pv.s.space(i + 1)
	if b[i] == '}' {
		return
	}
	for {
		kend, esc := pv.s.str(i)
		key := b[i:kend]
		vstart := pv.s.space(pv.s.space(kend) + 1)
		// Nesting was checked up front: any depth will do.
		vend := pv.s.value(vstart, 1)
		fn(key, esc, valueSpan{vstart, vend})
		i = pv.s.space(vend)
		if b[i] == '}' {
			return
		}
		i = pv.s.space(i + 1)
	}
}

// keyIs reports whether a raw member key (with quotes) decodes to name.
func keyIs(key []byte, esc bool, name string) bool {
	if !esc {
		// Bytes that are not UTF-8 decode to U+FFFD, which no name has.
		return string(key[1:len(key)-1]) == name
	}
	var k string
	return json.Unmarshal(key, &k) == nil && k == name
}

// object checks the declared properties of the object at b[i] (at path);
// undeclared members are legal and default to metadata capture, so they need
// no check. A later duplicate member overrides an earlier one, as in decoding.
func (pv *payloadValidator) object(i int, path []byte, fields []Field) {
	var inline [maxInlineFields]valueSpan
	found := inline[:0]
	if len(fields) > maxInlineFields {
		found = make([]valueSpan, len(fields))
	}
	found = found[:len(fields)]
	pv.members(i, func(key []byte, esc bool, v valueSpan) {
		for fi := range fields {
			if keyIs(key, esc, fields[fi].Name) {
				found[fi] = v
				return
			}
		}
	})
	n := len(path)
	for fi := range fields {
		f := &fields[fi]
		path = append(append(path[:n], '.'), f.Name...)
		v := found[fi]
		if v.end == 0 {
			if f.Required {
				pv.add(pv.rule, path, "required member missing")
			}
			continue
		}
		if f.Capture > pv.capture && !pv.skipHonesty {
			pv.add("AEP-0001 §8.2(a)", path, "gated %s but the event declares capture %s", f.Capture, pv.capture)
		}
		pv.value(v, path, f)
	}
}

// value checks one present value against its field.
func (pv *payloadValidator) value(v valueSpan, path []byte, f *Field) {
	raw := pv.s.b[v.start:v.end]
	if !rawKindMatches(raw, f.Kind) {
		pv.add(pv.rule, path, "must be %s, not %s", kindArticle(f.Kind), rawKindName(raw))
		return
	}
	if f.Enum != nil && !rawInEnum(raw, f.Enum) {
		pv.add(pv.rule, path, "must be one of %s", strings.Join(f.Enum, ", "))
	}
	if f.Min != nil || f.Max != nil {
		if n, ok := rawNumber(raw); ok {
			if f.Min != nil && n < *f.Min {
				pv.add(pv.rule, path, "must be >= %s", formatBound(*f.Min))
			}
			if f.Max != nil && n > *f.Max {
				pv.add(pv.rule, path, "must be <= %s", formatBound(*f.Max))
			}
		}
	}
	switch raw[0] {
	case '{':
		if len(f.Fields) > 0 {
			pv.object(v.start, path, f.Fields)
		}
	case '[':
		if f.Items != KindAny || f.ItemEnum != nil || len(f.Fields) > 0 {
			pv.items(v.start, path, f)
		}
	}
}

// items checks each item of the array at b[i] against f's item rules.
func (pv *payloadValidator) items(i int, path []byte, f *Field) {
	n := len(path)
	pv.elements(i, func(k int, v valueSpan) {
		item := pv.s.b[v.start:v.end]
		path = append(strconv.AppendInt(append(path[:n], '['), int64(k), 10), ']')
		if f.Items != KindAny && !rawKindMatches(item, f.Items) {
			pv.add(pv.rule, path, "must be %s, not %s", kindArticle(f.Items), rawKindName(item))
			return
		}
		if f.ItemEnum != nil && !rawInEnum(item, f.ItemEnum) {
			pv.add(pv.rule, path, "must be one of %s", strings.Join(f.ItemEnum, ", "))
		}
		if item[0] == '{' && len(f.Fields) > 0 {
			pv.object(v.start, path, f.Fields)
		}
	})
}

// elements calls fn with the index and place of each item of the array at
// b[i] ('[').
func (pv *payloadValidator) elements(i int, fn func(k int, v valueSpan)) {
	b := pv.s.b
	i = pv.s.space(i + 1)
	for k := 0; b[i] != ']'; k++ {
		end := pv.s.value(i, 1)
		fn(k, valueSpan{i, end})
		if i = pv.s.space(end); b[i] == ',' {
			i = pv.s.space(i + 1)
		}
	}
}

// lookup returns where the members named a and z of the object at b[i] lie
// (the last of duplicates; end 0 when absent).
func (pv *payloadValidator) lookup(i int, a, z string) (va, vz valueSpan) {
	pv.members(i, func(key []byte, esc bool, v valueSpan) {
		switch {
		case keyIs(key, esc, a):
			va = v
		case keyIs(key, esc, z):
			vz = v
		}
	})
	return va, vz
}

// formRules applies the AEP-0006 rules the schema states conditionally or in
// prose: a select field carries choices, and fields belong to kind "form".
func (pv *payloadValidator) formRules(i int, path []byte) {
	kind, fields := pv.lookup(i, "kind", "fields")
	if fields.end == 0 {
		return
	}
	b := pv.s.b
	if kind.end == 0 || !rawStringIs(b[kind.start:kind.end], "form") {
		pv.add("AEP-0006", append(path, ".fields"...), `present only when kind is "form"`)
	}
	if b[fields.start] != '[' {
		return
	}
	pv.elements(fields.start, func(k int, v valueSpan) {
		if b[v.start] != '{' {
			return
		}
		if typ, choices := pv.lookup(v.start, "type", "choices"); typ.end != 0 && rawStringIs(b[typ.start:typ.end], "select") && choices.end == 0 {
			pv.add("AEP-0006", append(strconv.AppendInt(append(path, ".fields["...), int64(k), 10), "].choices"...), `required when type is "select"`)
		}
	})
}

// --- JSON text helpers: a value's raw text, judged as decoded ---------------

// rawString decodes a JSON string literal; plain is true when its contents
// are the string as they stand (no escapes, all UTF-8), and s is then empty.
func rawString(raw []byte) (s string, plain bool) {
	inner := raw[1 : len(raw)-1]
	if bytes.IndexByte(inner, '\\') < 0 && utf8.Valid(inner) {
		return "", true
	}
	_ = json.Unmarshal(raw, &s)
	return s, false
}

// rawStringIs reports whether raw is a JSON string that decodes to want.
func rawStringIs(raw []byte, want string) bool {
	if raw[0] != '"' {
		return false
	}
	s, plain := rawString(raw)
	if plain {
		return string(raw[1:len(raw)-1]) == want
	}
	return s == want
}

func rawInEnum(raw []byte, allowed []string) bool {
	for _, a := range allowed {
		if rawStringIs(raw, a) {
			return true
		}
	}
	return false
}

func isNumberStart(c byte) bool { return c == '-' || '0' <= c && c <= '9' }

// rawNumber is a number's value (±Inf beyond float64's range).
func rawNumber(raw []byte) (float64, bool) {
	if !isNumberStart(raw[0]) {
		return 0, false
	}
	// Up to 15 digits without a fraction or exponent (most bounded
	// fields) are exact in a float64: no strconv.
	digits, neg := bytes.CutPrefix(raw, []byte{'-'})
	if n, ok := plainUint(digits); ok && len(digits) <= 15 {
		if neg {
			return -float64(n), true
		}
		return float64(n), true
	}
	f, err := strconv.ParseFloat(string(raw), 64)
	return f, err == nil || isRangeErr(err)
}

func rawKindMatches(raw []byte, k Kind) bool {
	c := raw[0]
	switch k {
	case KindAny:
		return true
	case KindString:
		return c == '"'
	case KindDateTime:
		if c != '"' {
			return false
		}
		if s, plain := rawString(raw); !plain {
			return ValidTime(s)
		}
		return ValidTime(string(raw[1 : len(raw)-1]))
	case KindInteger:
		return isNumberStart(c) && integerLiteral(string(raw))
	case KindNumber:
		return isNumberStart(c)
	case KindBool:
		return c == 't' || c == 'f'
	case KindObject:
		return c == '{'
	case KindArray:
		return c == '['
	case KindStringOrObject:
		return c == '"' || c == '{'
	}
	return false
}

// rawKindName names what raw is, for messages.
func rawKindName(raw []byte) string {
	switch raw[0] {
	case 'n':
		return "null"
	case '"':
		return "a string"
	case 't', 'f':
		return "a boolean"
	case '{':
		return "an object"
	case '[':
		return "an array"
	}
	if integerLiteral(string(raw)) {
		return "an integer"
	}
	return "a number"
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

// integerLiteral decides integer-ness of a JSON number literal exactly: the
// value is D×10^(exp-len(frac)) for the digit string D, an integer when D is
// zero or its trailing zeros cover the negative power. It allocates nothing.
func integerLiteral(s string) bool {
	s = strings.TrimPrefix(s, "-")
	// Digits alone (the common case) are an integer, without the search
	// for an exponent and a fraction below.
	digits := len(s) > 0
	for i := 0; i < len(s) && digits; i++ {
		digits = isDigit(s[i])
	}
	if digits {
		return true
	}
	mant, expStr, hasExp := s, "", false
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		mant, expStr, hasExp = s[:i], s[i+1:], true
	}
	intPart, frac, _ := strings.Cut(mant, ".")
	if strings.Trim(intPart, "0") == "" && strings.Trim(frac, "0") == "" {
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
	// The trailing zeros of intPart+frac, which has a digit other than 0.
	zeros := len(frac) - len(strings.TrimRight(frac, "0"))
	if zeros == len(frac) {
		zeros += len(intPart) - len(strings.TrimRight(intPart, "0"))
	}
	return zeros >= need
}

func kindArticle(k Kind) string {
	switch k {
	case KindInteger, KindObject, KindArray, KindAny:
		return "an " + k.String()
	}
	return "a " + k.String()
}

func formatBound(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }

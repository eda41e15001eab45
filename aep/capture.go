package aep

import (
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
)

// SynthesizePrompt renders the AEP-0003 §9.2 metadata synthesis of an
// attention prompt, "{agent} requests {kind}: {subject}", leaving out
// ": {subject}" when there is no subject. It uses structural values only, so
// its result is legal at capture metadata.
func SynthesizePrompt(agent, kind, subject string) string {
	if agent == "" {
		agent = "agent"
	}
	if kind == "" {
		kind = "attention"
	}
	if subject == "" {
		return agent + " requests " + kind
	}
	return agent + " requests " + kind + ": " + subject
}

// GateData is source-side gating (AEP-0002 §5.1 rule 1, AEP-0003 §9.1): it
// returns a copy of data without every field whose capture annotation is
// above level, recursing through nested objects and arrays by the registry
// table; members the table does not name default to metadata. At level none
// it returns nil. Types without a schema (x.*, reserved types) keep their data
// above none: the mapping that built it answers for it. The input is never
// modified. The [metadata*] fields are kept as given: synthesizing them is
// the caller's job at the source.
func GateData(typ string, data map[string]any, level Capture) map[string]any {
	if level <= CaptureNone || data == nil {
		return nil
	}
	spec, ok := LookupType(typ)
	if !ok || !spec.HasSchema {
		return copyMap(data)
	}
	return pruneMap(data, spec.Fields, level)
}

// pruneMap copies m without the fields above level.
func pruneMap(m map[string]any, fields []Field, level Capture) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		f := findField(fields, k)
		switch {
		case f == nil:
			out[k] = copyValue(v)
		case f.Capture <= level:
			out[k] = pruneValue(v, f, level)
		}
	}
	return out
}

// pruneValue copies v, pruning the sub-fields of f wherever an object sits:
// the value itself, or each item of an array. A value of an unexpected shape
// is pruned by the same annotations rather than trusted.
func pruneValue(v any, f *Field, level Capture) any {
	if len(f.Fields) == 0 {
		return copyValue(v)
	}
	switch x := v.(type) {
	case map[string]any:
		return pruneMap(x, f.Fields, level)
	case []any:
		out := make([]any, len(x))
		for i, item := range x {
			out[i] = pruneValue(item, f, level)
		}
		return out
	case []map[string]any:
		out := make([]any, len(x))
		for i, item := range x {
			out[i] = pruneMap(item, f.Fields, level)
		}
		return out
	case nil, string, bool, json.Number, float64, float32, int, int64, int32, uint64:
		return x
	}
	// A typed Go value (a struct from a mapping): prune its JSON form.
	if g, err := toGeneric(v); err == nil {
		return pruneValue(g, f, level)
	}
	return nil
}

func toGeneric(v any) (any, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return decodeGeneric(b)
}

// copyMap deep-copies generic JSON maps and slices; other values are
// shared (they are immutable scalars or the caller's own typed values).
func copyMap(m map[string]any) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = copyValue(v)
	}
	return out
}

func copyValue(v any) any {
	switch x := v.(type) {
	case map[string]any:
		return copyMap(x)
	case []any:
		out := make([]any, len(x))
		for i, item := range x {
			out[i] = copyValue(item)
		}
		return out
	}
	return v
}

// wireCapture reads e's capture for down-leveling: absent means metadata,
// and an unknown value counts as full, the only reading that cannot leak.
func wireCapture(e *Event) Capture {
	c, err := ParseCapture(e.Capture)
	if err != nil {
		return CaptureFull
	}
	return c
}

// Downlevel applies a hop's capture ceiling (AEP-0001 §8.2(b)(e), AEP-0002
// §5.1 rule 3). When the ceiling is at or above the event's capture it
// returns e itself, untouched (Raw intact, so the hop forwards the original
// bytes). Otherwise it returns a new event whose capture is the ceiling, with
// one exception: a full event at a redacted ceiling lands on metadata,
// because a mechanical hop never mints the redacted provenance claim. At none
// data is removed; a type without capture annotations loses its data
// wholesale; otherwise fields above the new level are pruned by the registry
// table and, below redacted, the [metadata*] fields degrade structurally: an
// attention.requested prompt becomes SynthesizePrompt(agent, kind, subject),
// option, field and choice labels become their ids, and answer.values of
// attention.answered and control.attention.respond keep only number and
// boolean entries. e is never modified. The error reports data that cannot be
// decoded or re-encoded.
func Downlevel(e *Event, ceiling Capture) (*Event, error) {
	ceiling = max(CaptureNone, min(ceiling, CaptureFull))
	src := wireCapture(e)
	if ceiling >= src {
		return e, nil
	}
	target := ceiling
	if ceiling == CaptureRedacted && src == CaptureFull {
		target = CaptureMetadata
	}
	out := e.Clone()
	out.Capture = target.String()
	if target == CaptureNone || e.Data == nil {
		out.Data = nil
		return out, nil
	}
	spec, ok := LookupType(e.Type)
	if !ok || !spec.HasSchema || len(spec.Fields) == 0 {
		// No annotations to prune by: dropping everything is the only
		// direction that cannot leak.
		out.Data = nil
		return out, nil
	}
	data, err := e.DataMap()
	if err != nil {
		return nil, fmt.Errorf("downlevel %s %s: %w", e.Type, e.ID, err)
	}
	kept := pruneMap(data, spec.Fields, target)
	if target < CaptureRedacted {
		degradeStarFields(e, kept)
	}
	if err := out.SetData(kept); err != nil {
		return nil, fmt.Errorf("downlevel %s %s: %w", e.Type, e.ID, err)
	}
	return out, nil
}

// degradeStarFields rewrites the [metadata*] fields of data (already a
// private copy) for a level below redacted. A hop has no source context to
// synthesize or classify them, so it keeps only what is structural by
// construction; dropping more than required is always legal (§8.2(b)).
func degradeStarFields(e *Event, data map[string]any) {
	switch e.Type {
	case "attention.requested":
		if _, ok := data["prompt"]; ok {
			kind, _ := data["kind"].(string)
			data["prompt"] = SynthesizePrompt(e.Agent, kind, e.Subject)
		}
		if opts, ok := data["options"]; ok {
			if list, ok := relabel(opts); ok {
				data["options"] = list
			} else {
				delete(data, "options")
			}
		}
		if fields, ok := data["fields"]; ok {
			list, ok := relabel(fields)
			if !ok {
				delete(data, "fields")
				break
			}
			for _, item := range list {
				fs := item.(map[string]any)
				if choices, ok := fs["choices"]; ok {
					if cl, ok := relabel(choices); ok {
						fs["choices"] = cl
					} else {
						delete(fs, "choices")
					}
				}
			}
			data["fields"] = list
		}
	case "attention.answered", "control.attention.respond":
		ans, ok := data["answer"].(map[string]any)
		if !ok {
			return
		}
		vals, present := ans["values"]
		if !present {
			return
		}
		m, ok := vals.(map[string]any)
		if !ok {
			delete(ans, "values")
			return
		}
		for k, v := range m {
			if _, isBool := v.(bool); !isBool && !isNumber(v) {
				delete(m, k)
			}
		}
	}
}

// relabel sets each item's label to a structural placeholder, its id (or its
// 1-based index when the id is not a scalar), dropping items that are not
// objects. It reports false when v is not an array.
func relabel(v any) ([]any, bool) {
	list, ok := v.([]any)
	if !ok {
		return nil, false
	}
	out := make([]any, 0, len(list))
	for i, item := range list {
		m, ok := item.(map[string]any)
		if !ok {
			continue
		}
		m["label"] = placeholderLabel(m["id"], i)
		out = append(out, m)
	}
	return out, true
}

func placeholderLabel(id any, index int) string {
	switch x := id.(type) {
	case string:
		return x
	case json.Number:
		return string(x)
	case bool:
		return strconv.FormatBool(x)
	}
	if n, ok := numberOf(id); ok {
		return strconv.FormatFloat(n, 'f', -1, 64)
	}
	return strconv.Itoa(index + 1)
}

// --- AEP-0006 form values ---------------------------------------------------------

// formField is the part of a field_spec the values rules read.
type formField struct {
	id      string
	typ     string
	multi   bool
	other   bool
	hasMin  bool
	hasMax  bool
	min     float64
	max     float64
	choices map[any]bool
}

// parseFormFields reads field_spec objects from generic JSON, skipping items
// that are not objects or have no string id.
func parseFormFields(fields []any) map[string]*formField {
	out := make(map[string]*formField, len(fields))
	for _, item := range fields {
		m, ok := item.(map[string]any)
		if !ok {
			continue
		}
		id, ok := m["id"].(string)
		if !ok {
			continue
		}
		ff := &formField{id: id, choices: map[any]bool{}}
		ff.typ, _ = m["type"].(string)
		ff.multi, _ = m["multi"].(bool)
		ff.other, _ = m["other"].(bool)
		if n, ok := numberOf(m["min"]); ok {
			ff.hasMin, ff.min = true, n
		}
		if n, ok := numberOf(m["max"]); ok {
			ff.hasMax, ff.max = true, n
		}
		if choices, ok := m["choices"].([]any); ok {
			for _, c := range choices {
				if cm, ok := c.(map[string]any); ok {
					if cid, ok := cm["id"].(string); ok {
						ff.choices[cid] = true
					}
				}
			}
		}
		out[id] = ff
	}
	return out
}

// closedChoice reports whether v (one id or, for multi, an array of ids) names
// only declared choices.
func (ff *formField) closedChoice(v any) bool {
	if list, ok := v.([]any); ok {
		for _, e := range list {
			if s, ok := e.(string); !ok || !ff.choices[s] {
				return false
			}
		}
		return true
	}
	if list, ok := v.([]string); ok {
		for _, s := range list {
			if !ff.choices[s] {
				return false
			}
		}
		return true
	}
	s, ok := v.(string)
	return ok && ff.choices[s]
}

// FormValuesError applies the AEP-0006 MUST-reject rule (AEP-0002 §5.3
// attention.answered) to an answer's values against the request's fields:
// every required field is answered, and a select answer names only
// choices[].id unless the field allows other text. It also refuses a value
// of the wrong JSON kind for its field type (a string, number, boolean, one
// id, or for multi an array of ids) and a number outside the field's min/max.
// Keys the form does not declare are not an error; gating drops them.
func FormValuesError(fields []any, values map[string]any) error {
	specs := parseFormFields(fields)
	// Walk fields in request order so the first error is deterministic.
	for _, item := range fields {
		m, _ := item.(map[string]any)
		id, _ := m["id"].(string)
		ff := specs[id]
		if ff == nil {
			continue
		}
		v, ok := values[id]
		if !ok {
			if req, _ := m["required"].(bool); req {
				return fmt.Errorf("missing required field %q", id)
			}
			continue
		}
		if err := ff.check(v); err != nil {
			return fmt.Errorf("field %q: %w", id, err)
		}
	}
	return nil
}

func (ff *formField) check(v any) error {
	switch ff.typ {
	case "string":
		if _, ok := v.(string); !ok {
			return errors.New("a string field takes a string")
		}
	case "boolean":
		if _, ok := v.(bool); !ok {
			return errors.New("a boolean field takes true or false")
		}
	case "number":
		n, ok := numberOf(v)
		if !ok {
			return errors.New("a number field takes a number")
		}
		if ff.hasMin && n < ff.min {
			return fmt.Errorf("%s is below the minimum %s", formatBound(n), formatBound(ff.min))
		}
		if ff.hasMax && n > ff.max {
			return fmt.Errorf("%s is above the maximum %s", formatBound(n), formatBound(ff.max))
		}
	case "select":
		items := []any{v}
		if ff.multi {
			list, ok := v.([]any)
			if !ok {
				return errors.New("a multi select takes an array of choice ids")
			}
			items = list
		}
		for _, e := range items {
			s, ok := e.(string)
			if !ok {
				return errors.New("a select takes choice id strings")
			}
			if !ff.choices[s] && !ff.other {
				return fmt.Errorf("%q is not a choices[].id and the field does not allow other text", s)
			}
		}
	}
	return nil
}

// GateFormValues applies the AEP-0006 type-dependent gating to an answer's
// values: number and boolean answers and closed select ids are structural
// and stay at any ceiling (at none the caller drops data wholesale); string
// answers, select "other" text, and any value whose JSON kind does not fit
// its field (it cannot be classified, so it counts as free text) need
// redacted or above. Keys with no field_spec are dropped. At exactly
// redacted, kept free-text strings pass through redact when it is non-nil,
// and a free-text object or array other than select ids is kept only at
// full, since redact cannot vouch for it. The result is a new map, never nil.
func GateFormValues(fields []any, values map[string]any, ceiling Capture, redact func(string) string) map[string]any {
	specs := parseFormFields(fields)
	scrub := func(s string) string {
		if redact != nil && ceiling == CaptureRedacted {
			return redact(s)
		}
		return s
	}
	out := make(map[string]any, len(values))
	// Sorted keys keep redact calls in a stable order.
	keys := make([]string, 0, len(values))
	for k := range values {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		v := values[k]
		ff := specs[k]
		if ff == nil {
			continue
		}
		var structural bool
		switch ff.typ {
		case "number":
			structural = isNumber(v)
		case "boolean":
			_, structural = v.(bool)
		case "select":
			structural = ff.closedChoice(v)
		}
		switch {
		case structural:
			out[k] = copyValue(v)
		case ceiling >= CaptureRedacted:
			if kept, ok := freeText(v, ff, ceiling, scrub); ok {
				out[k] = kept
			}
		}
	}
	return out
}

// freeText renders a value gated as free text at redacted or full: strings
// through scrub (choice ids stay as they are), scalars as they are, and
// anything else only at full.
func freeText(v any, ff *formField, ceiling Capture, scrub func(string) string) (any, bool) {
	switch x := v.(type) {
	case string:
		if ff.choices[x] {
			return x, true
		}
		return scrub(x), true
	case bool, nil:
		return x, true
	case []any:
		out := make([]any, 0, len(x))
		for _, e := range x {
			kept, ok := freeText(e, ff, ceiling, scrub)
			if !ok {
				return nil, false
			}
			out = append(out, kept)
		}
		return out, true
	}
	if isNumber(v) {
		return v, true
	}
	if ceiling == CaptureFull {
		return copyValue(v), true
	}
	return nil, false
}

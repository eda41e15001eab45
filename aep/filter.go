package aep

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// ErrInvalidFilter wraps every filter rejection (AEP-0003 §6.2: fail closed).
var ErrInvalidFilter = errors.New("invalid-filter")

// filterable reports whether a filter may name the core attribute (AEP-0003 §6.2 rule 1).
func filterable(attr string) bool {
	switch attr {
	case AttrID, AttrType, AttrSubject, AttrSource, AttrAgent, AttrSession, AttrRun, AttrStep,
		AttrEpoch, AttrCause, AttrSeverity, AttrCapture:
		return true
	}
	return false
}

// Filter is a parsed attr-match filter (AEP-0003 §6). The zero value (and the
// empty filter {}) matches every event.
type Filter struct {
	preds []predicate
}

type predicate struct {
	attr string
	// alts are the accepted scalar values; patterns are type prefixes that
	// end in a dot ("attention." for "attention.*").
	alts     []scalar
	patterns []string
	// severity comparison bounds, inclusive; -1 when unset.
	gte, lte Severity
	sevCmp   bool
}

// scalar is a JSON string, integer or boolean.
type scalar struct {
	kind byte // 's', 'i', 'b'
	s    string
	i    int64
	b    bool
}

// ParseFilter parses a filter from JSON. Empty input means the empty filter.
func ParseFilter(b []byte) (*Filter, error) {
	b = bytes.TrimSpace(b)
	if len(b) == 0 {
		return &Filter{}, nil
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("%w: not JSON: %v", ErrInvalidFilter, err)
	}
	if dec.More() {
		return nil, fmt.Errorf("%w: trailing data", ErrInvalidFilter)
	}
	return NewFilter(v)
}

// NewFilter builds a filter from a decoded JSON value (numbers as json.Number
// or float64).
func NewFilter(v any) (*Filter, error) {
	m, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("%w: a filter is a JSON object", ErrInvalidFilter)
	}
	f := &Filter{}
	for key, pred := range m {
		p, err := parsePredicate(key, pred)
		if err != nil {
			return nil, fmt.Errorf("%w: %s: %v", ErrInvalidFilter, key, err)
		}
		f.preds = append(f.preds, p)
	}
	return f, nil
}

func parsePredicate(key string, pred any) (predicate, error) {
	p := predicate{attr: key}
	if !filterable(key) {
		if IsCoreAttr(key) {
			return p, errors.New("not filterable")
		}
		if !validExtName(key) {
			return p, errors.New("neither a filterable attribute nor a legal extension attribute name")
		}
	}
	if key == AttrSeverity {
		if m, ok := pred.(map[string]any); ok {
			return parseSeverityCmp(p, m)
		}
	}
	alts, isList := pred.([]any)
	if !isList {
		alts = []any{pred}
	} else if len(alts) == 0 {
		return p, errors.New("empty inclusion array")
	}
	for _, a := range alts {
		sc, err := toScalar(a)
		if err != nil {
			return p, err
		}
		if sc.kind == 's' && strings.Contains(sc.s, "*") {
			if key != AttrType {
				return p, errors.New("patterns are only allowed on type")
			}
			prefix, ok := typePatternPrefix(sc.s)
			if !ok {
				return p, fmt.Errorf("bad type pattern %q", sc.s)
			}
			p.patterns = append(p.patterns, prefix)
			continue
		}
		if key == AttrSeverity {
			if sc.kind != 's' {
				return p, errors.New("severity values are strings")
			}
			if _, err := ParseSeverity(sc.s); err != nil || sc.s == "" {
				return p, fmt.Errorf("unknown severity %q", sc.s)
			}
		}
		if key == AttrCapture && sc.kind == 's' {
			if _, err := ParseCapture(sc.s); err != nil || sc.s == "" {
				return p, fmt.Errorf("unknown capture level %q", sc.s)
			}
		}
		p.alts = append(p.alts, sc)
	}
	return p, nil
}

// typePatternPrefix accepts "seg(.seg)*.*" with lowercase segments and returns
// the prefix including the final dot.
func typePatternPrefix(s string) (string, bool) {
	if !strings.HasSuffix(s, ".*") || len(s) < 3 {
		return "", false
	}
	prefix := s[:len(s)-1]
	for _, seg := range strings.Split(prefix[:len(prefix)-1], ".") {
		if seg == "" {
			return "", false
		}
		for i := 0; i < len(seg); i++ {
			c := seg[i]
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
				return "", false
			}
		}
	}
	return prefix, true
}

func parseSeverityCmp(p predicate, m map[string]any) (predicate, error) {
	if len(m) == 0 {
		return p, errors.New("empty severity comparison")
	}
	p.sevCmp = true
	p.gte, p.lte = SeverityDebug, SeverityCritical
	for op, v := range m {
		s, ok := v.(string)
		if !ok {
			return p, errors.New("severity bound must be a string")
		}
		lvl, err := ParseSeverity(s)
		if err != nil || s == "" {
			return p, fmt.Errorf("unknown severity %q", s)
		}
		switch op {
		case "gte":
			p.gte = lvl
		case "lte":
			p.lte = lvl
		default:
			return p, fmt.Errorf("unknown severity operator %q (want gte or lte)", op)
		}
	}
	return p, nil
}

func toScalar(v any) (scalar, error) {
	switch x := v.(type) {
	case string:
		return scalar{kind: 's', s: x}, nil
	case bool:
		return scalar{kind: 'b', b: x}, nil
	case json.Number:
		n, err := x.Int64()
		if err != nil {
			return scalar{}, fmt.Errorf("number %s is not an integer", x)
		}
		return scalar{kind: 'i', i: n}, nil
	case float64:
		if x != float64(int64(x)) {
			return scalar{}, fmt.Errorf("number %v is not an integer", x)
		}
		return scalar{kind: 'i', i: int64(x)}, nil
	}
	return scalar{}, fmt.Errorf("predicate values are strings, integers or booleans, not %T", v)
}

// Match reports whether every predicate of f holds for e.
func (f *Filter) Match(e *Event) bool {
	if f == nil {
		return true
	}
	for i := range f.preds {
		if !f.preds[i].match(e) {
			return false
		}
	}
	return true
}

// Empty reports whether f matches everything.
func (f *Filter) Empty() bool { return f == nil || len(f.preds) == 0 }

func (p *predicate) match(e *Event) bool {
	if p.sevCmp {
		s := e.SeverityLevel()
		return s >= p.gte && s <= p.lte
	}
	v, ok := attrScalar(e, p.attr)
	if !ok {
		return false
	}
	for _, a := range p.alts {
		if a == v {
			return true
		}
	}
	if v.kind == 's' {
		for _, prefix := range p.patterns {
			if strings.HasPrefix(v.s, prefix) {
				return true
			}
		}
	}
	return false
}

// attrScalar reads an attribute for matching, applying the AEP defaults for
// severity, capture and epoch (AEP-0003 §6.2 rule 5).
func attrScalar(e *Event, attr string) (scalar, bool) {
	switch attr {
	case AttrEpoch:
		return scalar{kind: 'i', i: e.EpochOrZero()}, true
	case AttrSeverity:
		if e.Severity == "" {
			return scalar{kind: 's', s: "info"}, true
		}
		return scalar{kind: 's', s: e.Severity}, true
	case AttrCapture:
		if e.Capture == "" {
			return scalar{kind: 's', s: "metadata"}, true
		}
		return scalar{kind: 's', s: e.Capture}, true
	}
	if s, ok := e.stringAttr(attr); ok {
		if s == "" {
			return scalar{}, false
		}
		return scalar{kind: 's', s: s}, true
	}
	raw, ok := e.Ext[attr]
	if !ok || len(raw) == 0 {
		return scalar{}, false
	}
	var v any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if dec.Decode(&v) != nil {
		return scalar{}, false
	}
	sc, err := toScalar(v)
	if err != nil {
		return scalar{}, false
	}
	return sc, true
}

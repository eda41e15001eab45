package aep

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/aep-kimi/aep-kimi/internal/testkit/fixtures"
)

func TestRegisteredTypesSortedAndComplete(t *testing.T) {
	t.Parallel()
	types := RegisteredTypes()
	if len(types) != 46 {
		t.Errorf("%d registered types, want the 46 of AEP 0.1", len(types))
	}
	if !sort.SliceIsSorted(types, func(i, j int) bool { return types[i].Type < types[j].Type }) {
		t.Error("RegisteredTypes is not sorted by name")
	}
	// The caller's slice is its own.
	types[0] = nil
	if RegisteredTypes()[0] == nil {
		t.Error("RegisteredTypes shares its backing array")
	}
	for _, s := range RegisteredTypes() {
		if !ValidType(s.Type) {
			t.Errorf("%s is not a valid type name", s.Type)
		}
		if s.Scope != ScopeOf(s.Type) {
			t.Errorf("%s: scope %d, but the envelope rules say %d", s.Type, s.Scope, ScopeOf(s.Type))
		}
		if got, ok := LookupType(s.Type); !ok || got != s {
			t.Errorf("LookupType(%s) disagrees with RegisteredTypes", s.Type)
		}
	}
}

func TestLookupType(t *testing.T) {
	t.Parallel()
	cases := []struct {
		typ          string
		ok           bool
		status       string
		scope        Scope
		experimental bool
		hasSchema    bool
	}{
		{"tool.completed", true, "mandatory", ScopeSession, false, true},
		{"agent.heartbeat", true, "optional", ScopeAgent, false, true},
		{"control.attention.respond", true, "optional", ScopeForeign, true, true},
		{"control.accepted", true, "optional", ScopeSession, true, true},
		{"attention.routed", true, "optional", ScopeForeign, false, true},
		{"resource.citation.recorded", true, "optional", ScopeSession, true, true},
		{"message.agent.replied", true, "reserved", ScopeSession, false, false},
		{"x.kimi.session.hook", false, "", 0, false, false},
		{"progress.some_future_member", false, "", 0, false, false},
	}
	for _, c := range cases {
		s, ok := LookupType(c.typ)
		if ok != c.ok {
			t.Errorf("LookupType(%s) ok=%v, want %v", c.typ, ok, c.ok)
			continue
		}
		if !ok {
			continue
		}
		if s.Status != c.status || s.Scope != c.scope || s.Experimental != c.experimental || s.HasSchema != c.hasSchema {
			t.Errorf("%s: got status=%s scope=%d experimental=%v schema=%v", c.typ, s.Status, s.Scope, s.Experimental, s.HasSchema)
		}
	}
}

func TestFieldAnnotations(t *testing.T) {
	t.Parallel()
	get := func(typ string, path ...string) *Field {
		s, ok := LookupType(typ)
		if !ok {
			t.Fatalf("%s not registered", typ)
		}
		fields := s.Fields
		var f *Field
		for _, p := range path {
			if f = findField(fields, p); f == nil {
				t.Fatalf("%s: no field %s", typ, strings.Join(path, "."))
			}
			fields = f.Fields
		}
		return f
	}
	cases := []struct {
		typ      string
		path     []string
		capture  Capture
		star     bool
		required bool
	}{
		{"tool.completed", []string{"result"}, CaptureFull, false, false},
		{"tool.completed", []string{"result_redacted"}, CaptureRedacted, false, false},
		{"tool.completed", []string{"tool"}, CaptureMetadata, false, true},
		{"tool.completed", []string{"tool", "name"}, CaptureMetadata, false, true},
		{"tool.completed", []string{"cost", "currency"}, CaptureMetadata, false, true},
		{"tool.failed", []string{"error"}, CaptureMetadata, false, true},
		{"tool.failed", []string{"error", "message"}, CaptureRedacted, false, false},
		{"attention.requested", []string{"prompt"}, CaptureMetadata, true, true},
		{"attention.requested", []string{"options", "label"}, CaptureMetadata, true, true},
		{"attention.requested", []string{"fields", "label"}, CaptureMetadata, true, true},
		{"attention.requested", []string{"fields", "choices", "label"}, CaptureMetadata, true, true},
		{"attention.requested", []string{"context"}, CaptureFull, false, false},
		{"attention.answered", []string{"answer", "values"}, CaptureMetadata, true, false},
		{"attention.answered", []string{"answer", "text"}, CaptureRedacted, false, false},
		{"control.attention.respond", []string{"answer", "values"}, CaptureMetadata, true, false},
		{"session.started", []string{"parent", "session"}, CaptureMetadata, false, true},
		{"resource.retrieval.reranked", []string{"output_documents", "content"}, CaptureFull, false, false},
		{"resource.citation.recorded", []string{"citations", "source", "uri"}, CaptureRedacted, false, false},
		{"resource.citation.recorded", []string{"citations", "offset", "page", "page"}, CaptureMetadata, false, false},
		{"assessment.guardrail.recorded", []string{"guardrail", "explanation"}, CaptureRedacted, false, false},
		{"state.delta", []string{"delta"}, CaptureRedacted, false, false},
	}
	for _, c := range cases {
		f := get(c.typ, c.path...)
		if f.Capture != c.capture || f.Star != c.star || f.Required != c.required {
			t.Errorf("%s %s: capture=%s star=%v required=%v, want %s %v %v",
				c.typ, strings.Join(c.path, "."), f.Capture, f.Star, f.Required, c.capture, c.star, c.required)
		}
	}
}

// TestRegistryMatchesSchemas cross-checks the hand-written table against the
// upstream registry and payload schemas, so drift in either is caught.
func TestRegistryMatchesSchemas(t *testing.T) {
	t.Parallel()
	dir := fixtures.Require(t)
	schemas := fixtures.Schemas(dir)
	var reg struct {
		Types []struct {
			Type   string  `json:"type"`
			Status string  `json:"status"`
			Scope  string  `json:"scope"`
			Schema *string `json:"schema"`
		} `json:"types"`
	}
	readJSON(t, filepath.Join(schemas, "registry", "types.json"), &reg)
	if len(reg.Types) == 0 {
		t.Fatal("registry lists no types")
	}
	listed := map[string]bool{}
	for _, rt := range reg.Types {
		listed[rt.Type] = true
		t.Run(rt.Type, func(t *testing.T) {
			spec, ok := LookupType(rt.Type)
			if !ok {
				t.Fatal("missing from the Go table")
			}
			if spec.Status != rt.Status {
				t.Errorf("status %s, registry says %s", spec.Status, rt.Status)
			}
			want := map[string]Scope{"session": ScopeSession, "agent": ScopeAgent, "command": ScopeForeign}[rt.Scope]
			if rt.Type == "attention.routed" {
				// Registry "session", but foreign-emitter per AEP-0002 §7.3.
				want = ScopeForeign
			}
			if spec.Scope != want {
				t.Errorf("scope %d, registry says %s", spec.Scope, rt.Scope)
			}
			if spec.HasSchema != (rt.Schema != nil) {
				t.Fatalf("HasSchema %v, registry schema %v", spec.HasSchema, rt.Schema)
			}
			if rt.Schema == nil {
				return
			}
			var node map[string]any
			readJSON(t, filepath.Join(schemas, "types", *rt.Schema), &node)
			compareProperties(t, "data", node, spec.Fields)
		})
	}
	for _, s := range RegisteredTypes() {
		if !listed[s.Type] {
			t.Errorf("%s is in the Go table but not in the registry", s.Type)
		}
	}
}

func readJSON(t *testing.T, path string, into any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, into); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// compareProperties checks an object schema node's properties against fields.
func compareProperties(t *testing.T, path string, node map[string]any, fields []Field) {
	t.Helper()
	props, _ := node["properties"].(map[string]any)
	required := map[string]bool{}
	for _, r := range asSlice(node["required"]) {
		required[r.(string)] = true
	}
	var names []string
	for name := range props {
		names = append(names, name)
	}
	sort.Strings(names)
	var goNames []string
	for _, f := range fields {
		goNames = append(goNames, f.Name)
	}
	sort.Strings(goNames)
	if !slices.Equal(names, goNames) {
		t.Errorf("%s: schema properties %v, Go fields %v", path, names, goNames)
	}
	for _, name := range names {
		f := findField(fields, name)
		if f == nil {
			continue
		}
		compareField(t, path+"."+name, props[name].(map[string]any), f, required[name])
	}
}

func compareField(t *testing.T, path string, p map[string]any, f *Field, required bool) {
	t.Helper()
	if want := schemaCapture(t, path, p); f.Capture != want {
		t.Errorf("%s: capture %s, schema says %s", path, f.Capture, want)
	}
	if f.Required != required {
		t.Errorf("%s: required %v, schema says %v", path, f.Required, required)
	}
	comment, _ := p["$comment"].(string)
	if want := strings.Contains(comment, "exception") || strings.Contains(comment, "type-dependent"); f.Star != want {
		t.Errorf("%s: star %v, schema comment %q", path, f.Star, comment)
	}
	if want := schemaKind(p); f.Kind != want {
		t.Errorf("%s: kind %s, schema says %s", path, f.Kind, want)
	}
	if !slices.Equal(f.Enum, stringsOf(p["enum"])) {
		t.Errorf("%s: enum %v, schema says %v", path, f.Enum, p["enum"])
	}
	compareBound(t, path+" minimum", f.Min, p["minimum"])
	compareBound(t, path+" maximum", f.Max, p["maximum"])
	if len(f.Fields) > 0 && f.Kind != KindObject && f.Kind != KindArray {
		t.Errorf("%s: sub-fields on a %s", path, f.Kind)
	}
	switch f.Kind {
	case KindObject:
		if _, ok := p["properties"]; ok || len(f.Fields) > 0 {
			compareProperties(t, path, p, f.Fields)
		}
	case KindArray:
		items, _ := p["items"].(map[string]any)
		if items == nil {
			if f.Items != KindAny {
				t.Errorf("%s: items %s, schema has none", path, f.Items)
			}
			return
		}
		if want := schemaKind(items); f.Items != want {
			t.Errorf("%s[]: kind %s, schema says %s", path, f.Items, want)
		}
		if !slices.Equal(f.ItemEnum, stringsOf(items["enum"])) {
			t.Errorf("%s[]: enum %v, schema says %v", path, f.ItemEnum, items["enum"])
		}
		if _, ok := items["x-aep-capture"]; ok && schemaCapture(t, path, items) != f.Capture {
			t.Errorf("%s[]: item capture differs from the array's", path)
		}
		if _, ok := items["properties"]; ok || len(f.Fields) > 0 {
			compareProperties(t, path+"[]", items, f.Fields)
		}
	}
}

func schemaCapture(t *testing.T, path string, p map[string]any) Capture {
	s, _ := p["x-aep-capture"].(string)
	c, err := ParseCapture(s) // absent means metadata (AEP-0002 §5.1 rule 4)
	if err != nil {
		t.Errorf("%s: %v", path, err)
	}
	return c
}

func schemaKind(p map[string]any) Kind {
	switch ty := p["type"].(type) {
	case string:
		switch ty {
		case "string":
			if p["format"] == "date-time" {
				return KindDateTime
			}
			return KindString
		case "integer":
			return KindInteger
		case "number":
			return KindNumber
		case "boolean":
			return KindBool
		case "object":
			return KindObject
		case "array":
			return KindArray
		}
	case []any:
		got := stringsOf(ty)
		sort.Strings(got)
		if slices.Equal(got, []string{"object", "string"}) {
			return KindStringOrObject
		}
	case nil:
		// An untyped enum of strings.
		if _, ok := p["enum"]; ok {
			return KindString
		}
		return KindAny
	}
	return Kind(255)
}

func compareBound(t *testing.T, path string, got *float64, want any) {
	t.Helper()
	w, ok := want.(float64)
	switch {
	case got == nil && !ok:
	case got == nil || !ok || *got != w:
		t.Errorf("%s: Go %v, schema %v", path, got, want)
	}
}

func asSlice(v any) []any { s, _ := v.([]any); return s }

func stringsOf(v any) []string {
	var out []string
	for _, e := range asSlice(v) {
		out = append(out, e.(string))
	}
	return out
}

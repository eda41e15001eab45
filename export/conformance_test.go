package export

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"github.com/aep-kimi/aep-kimi/internal/testkit/aeptest"
	"regexp"
	"strconv"
	"testing"

	"github.com/aep-kimi/aep-kimi/aep"
	"github.com/aep-kimi/aep-kimi/internal/testkit/fixtures"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	logspb "go.opentelemetry.io/proto/otlp/logs/v1"
	"google.golang.org/protobuf/proto"
)

// corpusLines reads a JSONL fixture under the corpus.
func corpusLines(t *testing.T, rel string) [][]byte {
	t.Helper()
	return fixtures.Lines(t, fixtures.Require(t), rel)
}

// corpusJSON decodes a JSON fixture under the corpus, numbers kept exact.
func corpusJSON(t *testing.T, rel string, v any) {
	t.Helper()
	fixtures.DecodeJSON(t, fixtures.Require(t), rel, v)
}

func golden(t *testing.T) []*aep.Event {
	t.Helper()
	var out []*aep.Event
	for i, l := range corpusLines(t, "fixtures/golden/golden.jsonl") {
		e, err := aep.ParseEvent(l)
		if err != nil {
			t.Fatalf("golden %d: %v", i, err)
		}
		out = append(out, e)
	}
	return out
}

func TestCEForwardAndRoundTrip(t *testing.T) {
	lines := corpusLines(t, "fixtures/golden/golden.jsonl")
	want := corpusLines(t, "fixtures/ce-roundtrip/ce-expected.jsonl")
	if len(lines) != len(want) {
		t.Fatalf("%d golden events but %d CE expectations", len(lines), len(want))
	}
	nameRe := regexp.MustCompile(`^[a-z0-9]{1,20}$`)
	for i, l := range lines {
		e, err := aep.ParseEvent(l)
		if err != nil {
			t.Fatalf("golden %d: %v", i, err)
		}
		ce := ToCE(e)
		if got, exp := aeptest.Canon(t, ce), aeptest.Canon(t, want[i]); got != exp {
			t.Errorf("golden %d forward:\n got %s\nwant %s", i, got, exp)
		}
		var attrs map[string]any
		if err := json.Unmarshal(ce, &attrs); err != nil {
			t.Fatalf("golden %d: forward output is not JSON: %v", i, err)
		}
		for k := range attrs {
			if !nameRe.MatchString(k) {
				t.Errorf("golden %d: CE attribute name %q is not legal", i, k)
			}
		}
		back, dropped, err := FromCE(ce)
		if err != nil || len(dropped) > 0 {
			t.Fatalf("golden %d inverse: %v %v", i, err, dropped)
		}
		bb, _ := back.MarshalJSON()
		if got, exp := aeptest.Canon(t, bb), aeptest.Canon(t, l); got != exp {
			t.Errorf("golden %d round trip:\n got %s\nwant %s", i, got, exp)
		}
	}
}

func TestCEInboundCases(t *testing.T) {
	var f struct {
		Cases []struct {
			Name     string          `json:"name"`
			CE       json.RawMessage `json:"ce"`
			Expected json.RawMessage `json:"expected"`
		} `json:"cases"`
	}
	corpusJSON(t, "fixtures/ce-roundtrip/inbound-cases.json", &f)
	if len(f.Cases) == 0 {
		t.Fatal("no inbound cases")
	}
	for _, c := range f.Cases {
		e, dropped, err := FromCE(c.CE)
		if err != nil {
			t.Fatalf("%s: %v", c.Name, err)
		}
		b, _ := e.MarshalJSON()
		if got, exp := aeptest.Canon(t, b), aeptest.Canon(t, []byte(c.Expected)); got != exp {
			t.Errorf("%s:\n got %s\nwant %s", c.Name, got, exp)
		}
		var in, out map[string]any
		_ = json.Unmarshal(c.CE, &in)
		_ = json.Unmarshal(c.Expected, &out)
		// Every CE attribute either maps (the table), is a B1 constant, or
		// rides as an extension; anything else must have a diagnostic.
		lost := 0
		for k := range in {
			if _, ok := out[k]; !ok && !mappedCE(k) {
				lost++
			}
		}
		if len(dropped) != lost {
			t.Errorf("%s: %d diagnostics %v for %d dropped attributes", c.Name, len(dropped), dropped, lost)
		}
	}
}

func mappedCE(k string) bool {
	switch k {
	case "specversion", "datacontenttype", "type", "id", "source", "subject", "time", "data", "aepsequence", "aepepoch":
		return true
	}
	for _, p := range ceAttrs() {
		if p[1] == k {
			return true
		}
	}
	return false
}

func TestCEInverseRejects(t *testing.T) {
	for name, in := range map[string]string{
		"foreign type":  `{"specversion":"1.0","id":"x","source":"s","type":"com.example.thing"}`,
		"wrong version": `{"specversion":"0.3","id":"x","source":"s","type":"dev.aep.run.started"}`,
		"not object":    `[1]`,
		"base64 data":   `{"specversion":"1.0","id":"01JX9YB0AAAA0000000000GOLD","source":"aep://h/agent/a","type":"dev.aep.agent.idle","time":"2026-07-03T10:14:00.000Z","aepversion":"0.1","aepagentid":"a","data_base64":"AA=="}`,
		"bad sequence":  `{"specversion":"1.0","id":"01JX9YB0AAAA0000000000GOLD","source":"aep://h/agent/a","type":"dev.aep.agent.idle","time":"2026-07-03T10:14:00.000Z","aepversion":"0.1","aepagentid":"a","aepsequence":"1"}`,
		"missing id":    `{"specversion":"1.0","source":"aep://h/agent/a","type":"dev.aep.agent.idle","time":"2026-07-03T10:14:00.000Z","aepversion":"0.1","aepagentid":"a"}`,
	} {
		if _, _, err := FromCE([]byte(in)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// pinForm projects a LogRecord and its resource onto the plain JSON shape
// the OTLP fixtures pin (ids hex, attributes as objects).
func pinForm(lr *logspb.LogRecord, resource []*commonpb.KeyValue) map[string]any {
	out := map[string]any{
		"time_unix_nano":  lr.TimeUnixNano,
		"event_name":      lr.EventName,
		"severity_text":   lr.SeverityText,
		"severity_number": int(lr.SeverityNumber),
		"resource":        kvMap(resource),
		"attributes":      kvMap(lr.Attributes),
	}
	if len(lr.TraceId) > 0 {
		out["trace_id"] = hex.EncodeToString(lr.TraceId)
		out["span_id"] = hex.EncodeToString(lr.SpanId)
		out["flags"] = lr.Flags
	}
	if lr.Body != nil {
		out["body"] = plainValue(lr.Body)
	}
	return out
}

func kvMap(kvs []*commonpb.KeyValue) map[string]any {
	m := make(map[string]any, len(kvs))
	for _, kv := range kvs {
		m[kv.Key] = plainValue(kv.Value)
	}
	return m
}

func plainValue(v *commonpb.AnyValue) any {
	switch x := v.GetValue().(type) {
	case *commonpb.AnyValue_StringValue:
		return x.StringValue
	case *commonpb.AnyValue_IntValue:
		return x.IntValue
	case *commonpb.AnyValue_DoubleValue:
		return x.DoubleValue
	case *commonpb.AnyValue_BoolValue:
		return x.BoolValue
	case *commonpb.AnyValue_KvlistValue:
		return kvMap(x.KvlistValue.Values)
	case *commonpb.AnyValue_ArrayValue:
		a := make([]any, 0, len(x.ArrayValue.Values))
		for _, e := range x.ArrayValue.Values {
			a = append(a, plainValue(e))
		}
		return a
	}
	return nil
}

func TestOTLPPins(t *testing.T) {
	events := golden(t)
	var pins map[string]json.RawMessage
	corpusJSON(t, "fixtures/otlp/otlp-expected.json", &pins)
	if len(pins) == 0 {
		t.Fatal("no OTLP pins")
	}
	for k, pin := range pins {
		i, err := strconv.Atoi(k)
		if err != nil || i < 0 || i >= len(events) {
			t.Fatalf("pin %q names no golden event", k)
		}
		e := events[i]
		var b LogsBatch
		lr, err := LogRecord(e, DefaultMaxCapture)
		if err != nil {
			t.Fatal(err)
		}
		b.Add(e.Agent, lr)
		// Through the protobuf wire and back with the official types, so
		// the pin holds for what a receiver decodes.
		wire, err := proto.Marshal(b.Data())
		if err != nil {
			t.Fatal(err)
		}
		var got logspb.LogsData
		if err := proto.Unmarshal(wire, &got); err != nil {
			t.Fatal(err)
		}
		rl := got.ResourceLogs[0]
		form := pinForm(rl.ScopeLogs[0].LogRecords[0], rl.Resource.Attributes)
		if g, w := aeptest.Canon(t, form), aeptest.Canon(t, []byte(pin)); g != w {
			t.Errorf("golden %d:\n got %s\nwant %s", i, g, w)
		}
	}
}

func TestOTLPCaptureAndSeverity(t *testing.T) {
	events := golden(t)
	failed := events[15] // tool.failed at capture redacted
	for _, c := range []struct {
		max  aep.Capture
		body bool
	}{{aep.CaptureNone, false}, {aep.CaptureMetadata, false}, {aep.CaptureRedacted, true}, {aep.CaptureFull, true}} {
		lr, err := LogRecord(failed, c.max)
		if err != nil {
			t.Fatal(err)
		}
		if (lr.Body != nil) != c.body {
			t.Errorf("max %s: body %v, want %v", c.max, lr.Body != nil, c.body)
		}
	}
	completed := events[3] // carries gen_ai.* members at metadata
	if lr, _ := LogRecord(completed, aep.CaptureNone); len(lr.Attributes) != 11 {
		t.Errorf("capture none kept %d attributes, want the 11 envelope ones", len(lr.Attributes))
	}
	for s, want := range map[string]int32{"debug": 5, "info": 9, "notice": 10, "warning": 13, "error": 17, "critical": 21, "": 9} {
		text, n := otlpSeverity(s)
		if int32(n) != want || text == "" {
			t.Errorf("severity %q: %s %d, want %d", s, text, n, want)
		}
		if s != "" && SeverityFromOTLP(want).String() != s {
			t.Errorf("inverse of %d: %s", want, SeverityFromOTLP(want))
		}
	}
	for n, want := range map[int32]string{1: "debug", 8: "debug", 10: "notice", 12: "notice", 16: "warning", 20: "error", 24: "critical"} {
		if got := SeverityFromOTLP(n).String(); got != want {
			t.Errorf("inverse of %d: %s, want %s", n, got, want)
		}
	}
}

func TestOTLPJSONLine(t *testing.T) {
	e := golden(t)[3]
	var b LogsBatch
	lr, _ := LogRecord(e, DefaultMaxCapture)
	b.Add(e.Agent, lr)
	line, err := MarshalLogsJSON(b.Data())
	if err != nil {
		t.Fatal(err)
	}
	if bytes.ContainsAny(line, "\n") {
		t.Fatal("not one line")
	}
	var doc struct {
		ResourceLogs []struct {
			ScopeLogs []struct {
				LogRecords []struct {
					TraceID        string `json:"traceId"`
					SpanID         string `json:"spanId"`
					SeverityNumber int    `json:"severityNumber"`
					TimeUnixNano   string `json:"timeUnixNano"`
				} `json:"logRecords"`
			} `json:"scopeLogs"`
		} `json:"resourceLogs"`
	}
	if err := json.Unmarshal(line, &doc); err != nil {
		t.Fatal(err)
	}
	r := doc.ResourceLogs[0].ScopeLogs[0].LogRecords[0]
	if r.TraceID != "4bf92f3577b34da6a3ce929d0e0e4736" || r.SpanID != "00f067aa0ba902b7" || r.SeverityNumber != 9 || r.TimeUnixNano != "1783073704221000000" {
		t.Errorf("OTLP/JSON record %+v", r)
	}
}

// ocsfSubset is the pinned OCSF class subset.
type ocsfSubset struct {
	Version string `json:"version"`
	Classes map[string]struct {
		CategoryUID json.Number       `json:"category_uid"`
		Attributes  []string          `json:"attributes"`
		Activity    map[string]string `json:"activity"`
		Severity    map[string]string `json:"severity"`
		Status      map[string]string `json:"status"`
		Disposition map[string]string `json:"disposition"`
	} `json:"classes"`
}

func checkOCSFClass(t *testing.T, subset *ocsfSubset, i int, rec map[string]any) {
	t.Helper()
	num := func(k string) string {
		n, _ := rec[k].(json.Number)
		return n.String()
	}
	cls, ok := subset.Classes[num("class_uid")]
	if !ok {
		t.Errorf("golden %d: class %s outside the pinned subset", i, num("class_uid"))
		return
	}
	attrs := make(map[string]bool, len(cls.Attributes))
	for _, a := range cls.Attributes {
		attrs[a] = true
	}
	for k := range rec {
		if !attrs[k] {
			t.Errorf("golden %d: attribute %q not in class %s", i, k, num("class_uid"))
		}
	}
	if num("category_uid") != cls.CategoryUID.String() {
		t.Errorf("golden %d: category %s, want %s", i, num("category_uid"), cls.CategoryUID)
	}
	for k, enum := range map[string]map[string]string{"activity_id": cls.Activity, "severity_id": cls.Severity, "status_id": cls.Status, "disposition_id": cls.Disposition} {
		if _, present := rec[k]; present {
			if _, legal := enum[num(k)]; !legal {
				t.Errorf("golden %d: %s=%s not in the pinned enum", i, k, num(k))
			}
		}
	}
	cu, _ := strconv.Atoi(num("class_uid"))
	ac, _ := strconv.Atoi(num("activity_id"))
	if num("type_uid") != strconv.Itoa(cu*100+ac) {
		t.Errorf("golden %d: type_uid %s not derived", i, num("type_uid"))
	}
	meta, _ := rec["metadata"].(map[string]any)
	if meta["version"] != subset.Version {
		t.Errorf("golden %d: metadata.version %v, want %s", i, meta["version"], subset.Version)
	}
	if _, ok := rec["disposition_id"]; ok {
		if p, _ := meta["profiles"].([]any); len(p) != 1 || p[0] != "security_control" {
			t.Errorf("golden %d: disposition without the security_control profile", i)
		}
	}
}

func TestOCSFPins(t *testing.T) {
	events := golden(t)
	var pins map[string]json.RawMessage
	corpusJSON(t, "fixtures/ocsf/ocsf-expected.json", &pins)
	var subset ocsfSubset
	corpusJSON(t, "fixtures/ocsf/ocsf-classes.json", &subset)
	if len(pins) == 0 || len(subset.Classes) == 0 {
		t.Fatal("empty OCSF fixtures")
	}
	projected := 0
	for i, e := range events {
		rec, ok, err := OCSF(e, DefaultMaxCapture)
		if err != nil {
			t.Fatalf("golden %d: %v", i, err)
		}
		pin, pinned := pins[strconv.Itoa(i)]
		if !ok {
			if pinned {
				t.Errorf("golden %d (%s) is pinned but produced no record", i, e.Type)
			}
			continue
		}
		projected++
		if pinned {
			if g, w := aeptest.Canon(t, rec), aeptest.Canon(t, []byte(pin)); g != w {
				t.Errorf("golden %d:\n got %s\nwant %s", i, g, w)
			}
		}
		var m map[string]any
		dec := json.NewDecoder(bytes.NewReader(rec))
		dec.UseNumber()
		if err := dec.Decode(&m); err != nil {
			t.Fatal(err)
		}
		checkOCSFClass(t, &subset, i, m)
	}
	if projected < len(pins) {
		t.Errorf("%d records for %d pins", projected, len(pins))
	}
	for typ, want := range map[string]bool{"progress.status": false, "control.cancel": false, "x.acme.foo": false, "tool.denied": true} {
		if OCSFProjects(typ) != want {
			t.Errorf("OCSFProjects(%s) != %v", typ, want)
		}
	}
}

func TestOCSFDismissedDisposition(t *testing.T) {
	e := golden(t)[9].Clone() // attention.resolved, answered
	if err := e.SetData(map[string]any{"resolution": "dismissed"}); err != nil {
		t.Fatal(err)
	}
	rec, _, err := OCSF(e, DefaultMaxCapture)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	_ = json.Unmarshal(rec, &m)
	if m["disposition_id"] != float64(16) {
		t.Errorf("dismissed: disposition %v, want 16", m["disposition_id"])
	}
}

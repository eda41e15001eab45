package export

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/aep-kimi/aep-kimi/aep"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	logspb "go.opentelemetry.io/proto/otlp/logs/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
	"google.golang.org/protobuf/encoding/protojson"
)

// ScopeName names the instrumentation scope of everything this package
// exports.
const ScopeName = "github.com/aep-kimi/aep-kimi/export"

// genAIPrefix marks the payload members hoisted to top-level attributes
// (AEP-0005 §3.2).
const genAIPrefix = "gen_ai."

// otlpSeverity is the §3.4 table.
func otlpSeverity(s string) (string, logspb.SeverityNumber) {
	switch s {
	case "debug":
		return "DEBUG", logspb.SeverityNumber_SEVERITY_NUMBER_DEBUG
	case "notice":
		return "INFO2", logspb.SeverityNumber_SEVERITY_NUMBER_INFO2
	case "warning":
		return "WARN", logspb.SeverityNumber_SEVERITY_NUMBER_WARN
	case "error":
		return "ERROR", logspb.SeverityNumber_SEVERITY_NUMBER_ERROR
	case "critical":
		return "FATAL", logspb.SeverityNumber_SEVERITY_NUMBER_FATAL
	}
	return "INFO", logspb.SeverityNumber_SEVERITY_NUMBER_INFO
}

// SeverityFromOTLP buckets an OTLP severity number back to an AEP severity
// (AEP-0005 §3.4 inverse); 0 (unspecified) reads as info.
func SeverityFromOTLP(n int32) aep.Severity {
	switch {
	case n <= 0:
		return aep.SeverityInfo
	case n <= 8:
		return aep.SeverityDebug
	case n == 9:
		return aep.SeverityInfo
	case n <= 12:
		return aep.SeverityNotice
	case n <= 16:
		return aep.SeverityWarning
	case n <= 20:
		return aep.SeverityError
	}
	return aep.SeverityCritical
}

// unixNanos parses an AEP time (RFC 3339); an unparsable time is 0, which
// OTLP reads as unknown.
func unixNanos(s string) uint64 {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil || t.UnixNano() < 0 {
		return 0
	}
	return uint64(t.UnixNano())
}

// traceparent holds the parsed W3C fields of a traceparent attribute.
type traceparent struct {
	traceID [16]byte
	spanID  [8]byte
	flags   byte
}

// parseTraceparent parses version-00 style "vv-trace-span-ff"; it reports
// false for anything else or for the all-zero ids W3C declares invalid.
func parseTraceparent(s string) (traceparent, bool) {
	var tp traceparent
	parts := strings.Split(s, "-")
	if len(parts) < 4 || len(parts[0]) != 2 || len(parts[1]) != 32 || len(parts[2]) != 16 || len(parts[3]) != 2 {
		return tp, false
	}
	var f [1]byte
	if _, err := hex.Decode(tp.traceID[:], []byte(parts[1])); err != nil {
		return tp, false
	}
	if _, err := hex.Decode(tp.spanID[:], []byte(parts[2])); err != nil {
		return tp, false
	}
	if _, err := hex.Decode(f[:], []byte(parts[3])); err != nil {
		return tp, false
	}
	if tp.traceID == ([16]byte{}) || tp.spanID == ([8]byte{}) {
		return tp, false
	}
	tp.flags = f[0]
	return tp, true
}

func strKV(k, v string) *commonpb.KeyValue {
	return &commonpb.KeyValue{Key: k, Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: v}}}
}

func intKV(k string, v int64) *commonpb.KeyValue {
	return &commonpb.KeyValue{Key: k, Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_IntValue{IntValue: v}}}
}

// envelopeAttrs is the §3.2 attribute projection of the envelope.
func envelopeAttrs(e *aep.Event) []*commonpb.KeyValue {
	attrs := make([]*commonpb.KeyValue, 0, 12)
	str := func(k, v string) {
		if v != "" {
			attrs = append(attrs, strKV(k, v))
		}
	}
	str("aep.agent_id", e.Agent)
	str("aep.event_id", e.ID)
	capture := e.Capture
	if capture == "" {
		capture = aep.CaptureMetadata.String()
	}
	str("aep.capture", capture)
	str("aep.source", e.Source)
	str("aep.session_id", e.Session)
	str("aep.run_id", e.Run)
	str("aep.step", e.Step)
	if e.Seq != nil {
		attrs = append(attrs, intKV("aep.sequence", *e.Seq))
	}
	if e.Epoch != nil {
		attrs = append(attrs, intKV("aep.epoch", *e.Epoch))
	}
	str("aep.causation_id", e.Cause)
	str("aep.subject", e.Subject)
	return attrs
}

// LogRecord projects e onto an OTLP LogRecord (AEP-0005 §3.2) under the
// capture ceiling max (§3.3): the payload rides only when e's capture is at
// or below it. The resource (service.name) is the caller's: see Resource.
func LogRecord(e *aep.Event, max aep.Capture) (*logspb.LogRecord, error) {
	e = exportedAt(e, max)
	text, num := otlpSeverity(e.Severity)
	lr := &logspb.LogRecord{
		TimeUnixNano:   unixNanos(e.Time),
		EventName:      CETypePrefix + e.Type,
		SeverityText:   text,
		SeverityNumber: num,
		Attributes:     envelopeAttrs(e),
	}
	if tp, ok := parseTraceparent(e.Traceparent); ok {
		lr.TraceId = tp.traceID[:]
		lr.SpanId = tp.spanID[:]
		lr.Flags = uint32(tp.flags)
	}
	data := survivingData(e, max)
	if data == nil {
		return lr, nil
	}
	members, err := decodeObject(data)
	if err != nil {
		return nil, fmt.Errorf("%s %s: data: %w", e.Type, e.ID, err)
	}
	body := &commonpb.KeyValueList{}
	for _, m := range members {
		if strings.HasPrefix(m.Key, genAIPrefix) {
			lr.Attributes = append(lr.Attributes, m)
		} else {
			body.Values = append(body.Values, m)
		}
	}
	if len(body.Values) > 0 {
		lr.Body = &commonpb.AnyValue{Value: &commonpb.AnyValue_KvlistValue{KvlistValue: body}}
	}
	return lr, nil
}

// Resource is the OTLP resource of an agent's records: service.name is the
// agent (AEP-0005 §3.2), unless serviceName overrides it for a shared relay.
func Resource(agent, serviceName string) *resourcepb.Resource {
	if serviceName == "" {
		serviceName = agent
	}
	return &resourcepb.Resource{Attributes: []*commonpb.KeyValue{strKV("service.name", serviceName)}}
}

// scope is the instrumentation scope of exported records.
func scope() *commonpb.InstrumentationScope {
	return &commonpb.InstrumentationScope{Name: ScopeName}
}

// LogsBatch groups log records by agent into one OTLP logs payload. The
// zero value is empty and ready; it is not safe for concurrent use.
type LogsBatch struct {
	// ServiceName overrides service.name for every resource when set.
	ServiceName string
	byAgent     map[string]*logspb.ResourceLogs
	order       []string
	n           int
}

// Add appends one record under agent's resource.
func (b *LogsBatch) Add(agent string, lr *logspb.LogRecord) {
	if b.byAgent == nil {
		b.byAgent = make(map[string]*logspb.ResourceLogs)
	}
	rl, ok := b.byAgent[agent]
	if !ok {
		rl = &logspb.ResourceLogs{
			Resource:  Resource(agent, b.ServiceName),
			ScopeLogs: []*logspb.ScopeLogs{{Scope: scope()}},
		}
		b.byAgent[agent] = rl
		b.order = append(b.order, agent)
	}
	rl.ScopeLogs[0].LogRecords = append(rl.ScopeLogs[0].LogRecords, lr)
	b.n++
}

// Len is the number of records added since the last Reset.
func (b *LogsBatch) Len() int { return b.n }

// Data returns the payload: LogsData, which is wire-identical to the
// OTLP/HTTP ExportLogsServiceRequest (both are field 1, repeated
// ResourceLogs).
func (b *LogsBatch) Data() *logspb.LogsData {
	out := &logspb.LogsData{}
	for _, a := range b.order {
		out.ResourceLogs = append(out.ResourceLogs, b.byAgent[a])
	}
	return out
}

// Reset empties the batch.
func (b *LogsBatch) Reset() {
	clear(b.byAgent)
	b.order = b.order[:0]
	b.n = 0
}

// otlpJSON is the OTLP/JSON encoding of the protobuf messages: camelCase
// names, enums as numbers, and (fixed below) ids as hex, which is where
// OTLP/JSON departs from the protobuf JSON mapping.
func otlpJSON() protojson.MarshalOptions {
	return protojson.MarshalOptions{UseEnumNumbers: true}
}

// MarshalLogsJSON encodes a logs payload as one line of OTLP/JSON (the
// ExportLogsServiceRequest JSON the OTLP file exporter writes).
func MarshalLogsJSON(d *logspb.LogsData) ([]byte, error) {
	b, err := otlpJSON().Marshal(d)
	if err != nil {
		return nil, err
	}
	var ids [][]byte
	for _, rl := range d.ResourceLogs {
		for _, sl := range rl.ScopeLogs {
			for _, lr := range sl.LogRecords {
				ids = append(ids, lr.TraceId, lr.SpanId)
			}
		}
	}
	return hexIDs(b, []string{"traceId", "spanId"}, ids)
}

// hexIDs compacts protojson output (which varies its whitespace on purpose)
// and rewrites the base64 of each id under the given member names as hex.
func hexIDs(b []byte, names []string, ids [][]byte) ([]byte, error) {
	var out bytes.Buffer
	if err := json.Compact(&out, b); err != nil {
		return nil, err
	}
	b = out.Bytes()
	done := make(map[string]bool)
	for _, id := range ids {
		if len(id) == 0 || done[string(id)] {
			continue
		}
		done[string(id)] = true
		b64 := base64.StdEncoding.EncodeToString(id)
		hx := hex.EncodeToString(id)
		for _, n := range names {
			b = bytes.ReplaceAll(b, []byte(`"`+n+`":"`+b64+`"`), []byte(`"`+n+`":"`+hx+`"`))
		}
	}
	return b, nil
}

// decodeObject decodes a JSON object into OTLP key-values in member order.
func decodeObject(b []byte) ([]*commonpb.KeyValue, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	v, err := anyValue(dec)
	if err != nil {
		return nil, err
	}
	kv, ok := v.Value.(*commonpb.AnyValue_KvlistValue)
	if !ok {
		return nil, fmt.Errorf("not a JSON object")
	}
	return kv.KvlistValue.Values, nil
}

// anyValue reads one JSON value as an OTLP AnyValue: integers as int,
// other numbers as double, null as the empty value.
func anyValue(dec *json.Decoder) (*commonpb.AnyValue, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			kvs := &commonpb.KeyValueList{}
			for dec.More() {
				k, err := dec.Token()
				if err != nil {
					return nil, err
				}
				v, err := anyValue(dec)
				if err != nil {
					return nil, err
				}
				kvs.Values = append(kvs.Values, &commonpb.KeyValue{Key: k.(string), Value: v})
			}
			if _, err := dec.Token(); err != nil {
				return nil, err
			}
			return &commonpb.AnyValue{Value: &commonpb.AnyValue_KvlistValue{KvlistValue: kvs}}, nil
		case '[':
			arr := &commonpb.ArrayValue{}
			for dec.More() {
				v, err := anyValue(dec)
				if err != nil {
					return nil, err
				}
				arr.Values = append(arr.Values, v)
			}
			if _, err := dec.Token(); err != nil {
				return nil, err
			}
			return &commonpb.AnyValue{Value: &commonpb.AnyValue_ArrayValue{ArrayValue: arr}}, nil
		}
		return nil, fmt.Errorf("unexpected %v", t)
	case string:
		return &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: t}}, nil
	case bool:
		return &commonpb.AnyValue{Value: &commonpb.AnyValue_BoolValue{BoolValue: t}}, nil
	case json.Number:
		if n, err := t.Int64(); err == nil {
			return &commonpb.AnyValue{Value: &commonpb.AnyValue_IntValue{IntValue: n}}, nil
		}
		f, err := t.Float64()
		if err != nil {
			return nil, err
		}
		return &commonpb.AnyValue{Value: &commonpb.AnyValue_DoubleValue{DoubleValue: f}}, nil
	case nil:
		return &commonpb.AnyValue{}, nil
	}
	return nil, fmt.Errorf("unexpected token %v", tok)
}

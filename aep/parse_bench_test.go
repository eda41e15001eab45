package aep

import "testing"

var benchLine = []byte(`{"aep":"0.1","id":"01JX9YB3P4T90000000000GOLD","type":"tool.completed","subject":"Bash","time":"2026-07-03T10:15:04.221Z","source":"aep://host-a/agent/claude-code/session/s_8f2c","agent":"claude-code","session":"s_8f2c","run":"r_0042","step":"turn-3","seq":3,"epoch":0,"cause":"01JX9YB2Z1QK0000000000GOLD","severity":"info","capture":"metadata","traceparent":"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01","data":{"tool":{"name":"Bash","call_id":"t_91"},"status":"success","duration_ms":1240,"gen_ai.usage.input_tokens":142,"gen_ai.usage.output_tokens":87}}`)

func BenchmarkParseEvent(b *testing.B) {
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if _, err := ParseEvent(benchLine); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkCheckEnvelope(b *testing.B) {
	e, _ := ParseEvent(benchLine)
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if err := CheckEnvelope(e); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkValidatePayload reads benchLine's data against its schema;
// BenchmarkValidatePayloadOracle is the decoding validator it replaced.
func BenchmarkValidatePayload(b *testing.B) { benchValidatePayload(b, ValidatePayload) }

func BenchmarkValidatePayloadOracle(b *testing.B) { benchValidatePayload(b, validatePayloadOracle) }

func benchValidatePayload(b *testing.B, validate func(*Event) []Violation) {
	e, err := ParseEvent(benchLine)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if vs := validate(e); len(vs) > 0 {
			b.Fatal(vs)
		}
	}
}

package export

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/aep-kimi/aep-kimi/aep"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
)

func spansOf(td *tracepb.TracesData) []*tracepb.Span {
	var out []*tracepb.Span
	for _, rs := range td.ResourceSpans {
		for _, ss := range rs.ScopeSpans {
			out = append(out, ss.Spans...)
		}
	}
	return out
}

// TestTracerGolden synthesizes the golden corpus's runs: each run one
// invoke_agent span, tool calls its children paired by call id, failures
// and denials with error status, attention arcs as span events, and no
// payload text above the ceiling.
func TestTracerGolden(t *testing.T) {
	events := golden(t)
	var tr Tracer
	tr.MaxCapture = DefaultMaxCapture
	spans := spansOf(tr.Add(events))
	byRun := map[string]*tracepb.Span{}
	var tools []*tracepb.Span
	for _, sp := range spans {
		a := kvMap(sp.Attributes)
		switch a["gen_ai.operation.name"] {
		case "invoke_agent":
			if r, ok := a["aep.run_id"].(string); ok {
				byRun[a["session.id"].(string)+"/"+r] = sp
			}
		case "execute_tool":
			tools = append(tools, sp)
		}
		for _, kv := range sp.Attributes {
			if s := kv.Value.GetStringValue(); len(s) > 64 {
				t.Errorf("span %s carries long text %q", sp.Name, s)
			}
		}
	}
	r42 := byRun["s_8f2c/r_0042"]
	if r42 == nil {
		t.Fatalf("no span for run r_0042 in %d spans", len(spans))
	}
	if r42.Name != "invoke_agent claude-code" || r42.EndTimeUnixNano-r42.StartTimeUnixNano != 69e9 {
		t.Errorf("run span %s lasted %d", r42.Name, r42.EndTimeUnixNano-r42.StartTimeUnixNano)
	}
	var names []string
	for _, ev := range r42.Events {
		names = append(names, ev.Name)
	}
	if len(names) < 3 || names[0] != "attention.requested" {
		t.Errorf("run r_0042 span events %v", names)
	}
	r43 := byRun["s_8f2c/r_0043"]
	if r43 == nil || r43.Status.GetCode() != tracepb.Status_STATUS_CODE_ERROR {
		t.Errorf("failed run r_0043: %v", r43)
	}
	found := map[string]*tracepb.Span{}
	for _, sp := range tools {
		if id, ok := kvMap(sp.Attributes)["gen_ai.tool.call.id"].(string); ok {
			found[id] = sp
		}
	}
	t91 := found["t_91"]
	if t91 == nil || !bytes.Equal(t91.ParentSpanId, r42.SpanId) || !bytes.Equal(t91.TraceId, r42.TraceId) {
		t.Fatalf("tool t_91 is not a child of run r_0042: %v", t91)
	}
	if d := t91.EndTimeUnixNano - t91.StartTimeUnixNano; d != 1221e6 {
		t.Errorf("tool t_91 lasted %dns, want the events' 1.221s", d)
	}
	if t92 := found["t_92"]; t92 == nil || t92.Status.GetCode() != tracepb.Status_STATUS_CODE_ERROR {
		t.Errorf("denied tool t_92: %v", t92)
	}

	if r42.ParentSpanId == nil {
		t.Errorf("run of a delegated session (session.started names its parent run) is a root span")
	}

	// A restarted tracer that sees only a run's end derives the same ids.
	re := byRun["s_epoch/r_e1"]
	var fresh Tracer
	var end *aep.Event
	for _, e := range events {
		if e.Run == "r_e1" && aep.IsRunTerminal(e.Type) {
			end = e
		}
	}
	again := spansOf(fresh.Add([]*aep.Event{end}))
	if re == nil || len(again) != 1 || !bytes.Equal(again[0].TraceId, re.TraceId) || !bytes.Equal(again[0].SpanId, re.SpanId) {
		t.Errorf("restart split the run: %v vs %v", again, re)
	}
}

// TestTracerSubagent nests the work between a subagent's start and stop
// under a span for the subagent.
func TestTracerSubagent(t *testing.T) {
	in := []*aep.Event{
		ev("d1", "r1", 0, "run.started", "", ""),
		ev("d1", "r1", 1, "delegation.subagent.started", "coder", ""),
		ev("d1", "r1", 2, "tool.requested", "Read", `{"tool":{"name":"Read","call_id":"k1"}}`),
		ev("d1", "r1", 3, "tool.completed", "Read", `{"tool":{"name":"Read","call_id":"k1"}}`),
		ev("d1", "r1", 4, "delegation.subagent.stopped", "coder", ""),
		ev("d1", "r1", 5, "session.compacted", "", ""),
		ev("d1", "r1", 6, "run.finished", "", ""),
	}
	var tr Tracer
	spans := spansOf(tr.Add(in))
	byName := map[string]*tracepb.Span{}
	for _, sp := range spans {
		byName[sp.Name] = sp
	}
	run, sub, tool := byName["invoke_agent tester"], byName["invoke_agent coder"], byName["execute_tool Read"]
	if run == nil || sub == nil || tool == nil {
		t.Fatalf("spans %v", spans)
	}
	if !bytes.Equal(sub.ParentSpanId, run.SpanId) || !bytes.Equal(tool.ParentSpanId, sub.SpanId) {
		t.Errorf("nesting: subagent parent %x (run %x), tool parent %x (subagent %x)", sub.ParentSpanId, run.SpanId, tool.ParentSpanId, sub.SpanId)
	}
	if len(run.Events) != 1 || run.Events[0].Name != "session.compacted" {
		t.Errorf("run span events %v", run.Events)
	}
}

// TestTracerTokens: a run's span carries the tokens its steps used (the
// GenAI usage attributes, summed) and how full the context was at its end
// (the latest figure, and its limit), a compaction's size included.
func TestTracerTokens(t *testing.T) {
	step := func(n int64, in, out, ctx int) *aep.Event {
		return ev("s1", "r1", n, "x.kimi-code.web.turn.step.completed", "", fmt.Sprintf(
			`{"gen_ai.usage.input_tokens":%d,"gen_ai.usage.output_tokens":%d,"x-kimi-code-context-tokens":%d,"x-kimi-code-context-limit":131072}`, in, out, ctx))
	}
	for _, tc := range []struct {
		name        string
		events      []*aep.Event
		tokens, lim int64
	}{
		{"steps", []*aep.Event{
			ev("s1", "r1", 0, "run.started", "", `{"trigger":"user"}`),
			step(1, 1200, 80, 1280), step(2, 1400, 120, 32768),
			ev("s1", "r1", 3, "run.finished", "", `{"x-kimi-code-context-tokens":32768}`),
		}, 32768, 131072},
		{"compacted", []*aep.Event{
			ev("s1", "r1", 0, "run.started", "", `{"trigger":"user"}`),
			step(1, 1200, 80, 1280), step(2, 1400, 120, 32768),
			ev("s1", "r1", 3, "session.compacted", "", `{"estimated_token_count":20693}`),
			ev("s1", "r1", 4, "run.finished", "", ``),
		}, 20693, 131072},
	} {
		var tr Tracer
		tr.MaxCapture = DefaultMaxCapture
		var run *tracepb.Span
		for _, sp := range spansOf(tr.Add(tc.events)) {
			if kvMap(sp.Attributes)["aep.run_id"] == "r1" {
				run = sp
			}
		}
		if run == nil {
			t.Fatalf("%s: no run span", tc.name)
		}
		a := kvMap(run.Attributes)
		if a["gen_ai.usage.input_tokens"] != int64(2600) || a["gen_ai.usage.output_tokens"] != int64(200) {
			t.Errorf("%s: run span usage %v/%v, want the steps' 2600/200", tc.name, a["gen_ai.usage.input_tokens"], a["gen_ai.usage.output_tokens"])
		}
		if a[AttrContextTokens] != tc.tokens || a[AttrContextLimit] != tc.lim {
			t.Errorf("%s: run span context %v of %v, want %d of %d", tc.name, a[AttrContextTokens], a[AttrContextLimit], tc.tokens, tc.lim)
		}
	}
}

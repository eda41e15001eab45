package main

import (
	"fmt"
	"testing"
	"time"

	"github.com/aep-kimi/aep-kimi/aep"
	"github.com/aep-kimi/aep-kimi/internal/jaegertest"
	"github.com/aep-kimi/aep-kimi/internal/kimiharness"
)

// TestE2EJaeger sends a real Kimi session (the subagent scenario: a run, a
// delegation, tool calls) through `aep-kimi up --otlp` into a real Jaeger and
// reads it back from Jaeger's query API: one invoke_agent span per run with
// its execute_tool children (nested under the subagent's span where the
// subagent made the call), each as long as its events say.
func TestE2EJaeger(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: builds Jaeger and runs Kimi")
	}
	kimi := kimiharness.Require(t)
	j := jaegertest.Start(t)
	st := &stack{home: t.TempDir(), token: "e2e-" + aep.NewID()}
	rport, aport := freePort(t), freePort(t)
	st.relayURL = fmt.Sprintf("http://127.0.0.1:%d", rport)
	st.hookTo = fmt.Sprintf("http://127.0.0.1:%d", aport)
	st.relay = startDaemon(t, st.hookTo, []string{"AEP_TOKEN=" + st.token, "AEP_HOME=" + st.home}, "up",
		"--relay-listen", fmt.Sprintf("127.0.0.1:%d", rport), "--adapter-listen", fmt.Sprintf("127.0.0.1:%d", aport),
		"--web=false", "--otlp", j.OTLP, "--otlp-signal", "traces")
	scenario(t, kimi, "subagent", st.hookCmd(t))
	st.waitQuiet(t)
	_, _, ev := st.oneSession(t)

	type run struct{ start, end time.Time }
	runs := map[string]*run{}
	calls := map[string]bool{}
	agent := ev[0].Agent
	for _, e := range ev {
		at, _ := time.Parse(time.RFC3339Nano, e.Time)
		switch {
		case e.Type == "run.started":
			runs[e.Run] = &run{start: at}
		case aep.IsRunTerminal(e.Type) && runs[e.Run] != nil:
			runs[e.Run].end = at
		case e.Type == "tool.requested":
			d := dataOf(e)
			if tool, ok := d["tool"].(map[string]any); ok {
				if id, ok := tool["call_id"].(string); ok {
					calls[id] = true
				}
			}
		}
	}
	if len(runs) == 0 || len(calls) == 0 {
		t.Fatalf("the scenario produced %d runs and %d tool calls", len(runs), len(calls))
	}

	var traces []jaegertest.Trace
	deadline := time.Now().Add(30 * time.Second)
	for {
		var err error
		traces, err = j.Traces(agent)
		spans := 0
		for _, tr := range traces {
			spans += len(tr.Spans)
		}
		if err == nil && spans >= len(runs)+len(calls) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("jaeger holds %d spans (%v), want %d runs and %d tool calls\n%s", spans, err, len(runs), len(calls), st.relay.logs.String())
		}
		time.Sleep(200 * time.Millisecond)
	}
	runSpans, toolCalls := 0, len(calls)
	for _, tr := range traces {
		byID := map[string]jaegertest.Span{}
		for _, sp := range tr.Spans {
			byID[sp.SpanID] = sp
		}
		for _, sp := range tr.Spans {
			switch sp.Tag("gen_ai.operation.name") {
			case "invoke_agent":
				id, _ := sp.Tag("aep.run_id").(string)
				if id == "" {
					continue // a subagent's span
				}
				runSpans++
				r := runs[id]
				if r == nil || sp.OperationName != "invoke_agent "+agent || sp.Tag("session.id") != ev[0].Session {
					t.Errorf("run span %s (%s) matches no run", sp.OperationName, id)
					continue
				}
				if d := time.Duration(sp.Duration)*time.Microsecond - r.end.Sub(r.start); d < -3*time.Millisecond || d > 3*time.Millisecond {
					t.Errorf("run %s span lasts %dµs, events %v", id, sp.Duration, r.end.Sub(r.start))
				}
			case "execute_tool":
				id, _ := sp.Tag("gen_ai.tool.call.id").(string)
				if !calls[id] {
					t.Errorf("tool span %s has call id %q, not one of the session's", sp.OperationName, id)
				}
				delete(calls, id)
				// Its ancestors lead to a run span within the trace.
				p, ok := byID[sp.Parent()]
				for ok && p.Tag("aep.run_id") == nil {
					p, ok = byID[p.Parent()]
				}
				if !ok {
					t.Errorf("tool span %s does not descend from a run span", sp.OperationName)
				}
			}
		}
	}
	t.Logf("jaeger: %d trace(s), %d run span(s), %d tool span(s) for %d call(s)", len(traces), runSpans, toolCalls-len(calls), toolCalls)
	if runSpans != len(runs) {
		t.Errorf("%d invoke_agent run spans, want %d", runSpans, len(runs))
	}
	if len(calls) > 0 {
		t.Errorf("tool calls without a span: %v", calls)
	}
}

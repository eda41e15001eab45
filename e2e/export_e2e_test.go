// Exporters against real sessions: a trace in Jaeger's OTLP form and an
// exporter killed -9 mid-stream that resumes without loss.

package e2e

import (
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aep-kimi/aep-kimi/aep"
	"github.com/aep-kimi/aep-kimi/export"
	"github.com/aep-kimi/aep-kimi/internal/testkit/exporttest"
	"github.com/aep-kimi/aep-kimi/internal/testkit/jaegertest"
	"github.com/aep-kimi/aep-kimi/internal/testkit/kimiharness"
	"github.com/aep-kimi/aep-kimi/internal/testkit/netaddr"
	"github.com/aep-kimi/aep-kimi/internal/testkit/poll"
	"github.com/aep-kimi/aep-kimi/internal/testkit/proctest"
	"github.com/aep-kimi/aep-kimi/internal/testkit/relaycall"
	"github.com/aep-kimi/aep-kimi/internal/testkit/stacktest"
)

// TestE2EJaeger sends a real Kimi session (the subagent scenario: a run, a
// delegation, tool calls) through `aep-kimi up --otlp` with its default
// signals into a real Jaeger and reads it back from Jaeger's query API: one
// invoke_agent span per run with its execute_tool children (nested under the
// subagent's span where the subagent made the call), each as long as its
// events say. Jaeger takes no logs (404): the exporter drops them with one
// warning and nothing else.
func TestE2EJaeger(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("end-to-end: builds Jaeger and runs Kimi")
	}
	kimi := kimiharness.Require(t)
	j := jaegertest.Start(t)
	st := stacktest.NewUpStack(t)
	st.Up(t, nil, "--web=false", "--otlp", j.OTLP)
	stacktest.Scenario(t, kimi, "subagent", st.HookCmd(t))
	st.WaitQuiet(t)
	_, _, ev := st.OneSession(t)

	type run struct{ Start, end time.Time }
	runs := map[string]*run{}
	calls := map[string]bool{}
	agent := ev[0].Agent
	for _, e := range ev {
		at, _ := time.Parse(time.RFC3339Nano, e.Time)
		switch {
		case e.Type == "run.started":
			runs[e.Run] = &run{Start: at}
		case aep.IsRunTerminal(e.Type) && runs[e.Run] != nil:
			runs[e.Run].end = at
		case e.Type == "tool.requested":
			d := stacktest.DataOf(e)
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
	var err error
	spans := 0
	if !poll.Until(30*time.Second, func() bool {
		traces, err = j.Traces(agent)
		spans = 0
		for _, tr := range traces {
			spans += len(tr.Spans)
		}
		return err == nil && spans >= len(runs)+len(calls)
	}) {
		t.Fatalf("jaeger holds %d spans (%v), want %d runs and %d tool calls\n%s", spans, err, len(runs), len(calls), st.Relay.Logs.String())
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
				if d := time.Duration(sp.Duration)*time.Microsecond - r.end.Sub(r.Start); d < -3*time.Millisecond || d > 3*time.Millisecond {
					t.Errorf("run %s span lasts %dµs, events %v", id, sp.Duration, r.end.Sub(r.Start))
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
	var refused []string
	for line := range strings.Lines(st.Relay.Logs.String()) {
		if strings.Contains(line, "otlp-export") && (strings.Contains(line, "level=WARN") || strings.Contains(line, "level=ERROR")) {
			refused = append(refused, line)
		}
	}
	if len(refused) != 1 || !strings.Contains(refused[0], "refuses logs") {
		t.Errorf("the exporter's warnings and errors, want one saying Jaeger refuses logs:\n%s", strings.Join(refused, ""))
	}
}

// TestE2EExportKill9 kills a live OTLP exporter with SIGKILL while it
// delivers, adds a session it has never seen, and restarts it: every event
// reaches the receiver, and at most the batch in flight twice.
func TestE2EExportKill9(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("end-to-end: builds the binaries")
	}
	token := "e2e-" + aep.NewID()
	rport := netaddr.FreePort(t)
	relayURL := fmt.Sprintf("http://127.0.0.1:%d", rport)
	stacktest.StartDaemon(t, relayURL, []string{"AEP_TOKEN=" + token}, "relay", "--listen", fmt.Sprintf("127.0.0.1:%d", rport))
	rcv := exporttest.NewReceiver(0)
	defer rcv.Close()
	post := func(session string, n int) {
		evs := make([]*aep.Event, n)
		for i := range n {
			evs[i] = &aep.Event{AEP: aep.Version, ID: aep.NewID(), Type: "progress.status", Time: aep.FormatTime(time.Now()),
				Source: "aep://t/agent/tester/session/" + session, Agent: "tester", Session: session,
				Seq: aep.Int64(int64(i)), Epoch: aep.Int64(0), Data: []byte(`{"message":"step"}`)}
		}
		relaycall.Post(t, relayURL, token, evs...)
	}
	const first, second = 8000, 500
	post("k1", first)
	state := filepath.Join(t.TempDir(), "export-state.json")
	mport := netaddr.FreePort(t)
	metricsURL := fmt.Sprintf("http://127.0.0.1:%d", mport)
	start := func() *proctest.Proc {
		return stacktest.StartDaemon(t, metricsURL, []string{"AEP_TOKEN=" + token}, "export", "otlp", "--relay", relayURL,
			"--endpoint", rcv.URL, "--state", state, "--metrics", fmt.Sprintf("127.0.0.1:%d", mport))
	}
	exp := start()
	if !poll.Until(60*time.Second, func() bool { return len(rcv.Logs()) >= 1000 }) {
		t.Fatalf("the exporter delivered %d events in a minute\n%s", len(rcv.Logs()), exp.Logs.String())
	}
	exp.Kill()
	killedAt := len(rcv.Logs())
	post("k2", second)
	exp = start()
	distinct := func() (map[string]int, int) {
		seen := map[string]int{}
		logs := rcv.Logs()
		for _, lr := range logs {
			for _, kv := range lr.Attributes {
				if kv.Key == "aep.event_id" {
					seen[kv.Value.GetStringValue()]++
				}
			}
		}
		return seen, len(logs)
	}
	if !poll.Until(60*time.Second, func() bool { seen, _ := distinct(); return len(seen) >= first+second }) {
		seen, _ := distinct()
		t.Fatalf("%d of %d events delivered\n%s", len(seen), first+second, exp.Logs.String())
	}
	resp, err := http.Get(metricsURL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	exp.Stop(t)
	seen, total := distinct()
	dups := total - len(seen)
	t.Logf("killed after %d deliveries; %d events, %d records, %d sent twice", killedAt, len(seen), total, dups)
	if len(seen) != first+second {
		t.Errorf("%d distinct events, want %d", len(seen), first+second)
	}
	if dups > export.DefaultBatchSize {
		t.Errorf("%d events sent twice, more than one batch (%d)", dups, export.DefaultBatchSize)
	}
	if !strings.Contains(string(metrics), "aepkimi_export_delivered_total") {
		t.Errorf("/metrics lacks the delivery counter:\n%s", metrics)
	}
}

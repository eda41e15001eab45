package adapter

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/aep-kimi/aep-kimi/internal/testkit/syncbuf"
)

// A session that ends with a tool call whose PostToolUse never came (Kimi
// ended the hook at turn end before it had the payload) says so: once,
// in a counter and a line, and with no event made up for the call.
func TestSessionEndCountsToolsWithoutResult(t *testing.T) {
	t.Parallel()
	logs := &syncbuf.Buffer{}
	s := newTestServer(t, t.TempDir(), func(c *Config) { c.Logger = slog.New(slog.NewTextHandler(logs, nil)) })
	for _, p := range []string{
		`{"hook_event_name":"PreToolUse","session_id":"nr","tool_name":"Bash","tool_input":{},"tool_call_id":"c1"}`,
		`{"hook_event_name":"PostToolUse","session_id":"nr","tool_name":"Bash","tool_input":{},"tool_call_id":"c1","tool_output":"ok"}`,
		`{"hook_event_name":"PreToolUse","session_id":"nr","tool_name":"Bash","tool_input":{},"tool_call_id":"c2"}`,
		`{"hook_event_name":"SessionEnd","session_id":"nr","reason":"exit"}`,
		// Kimi can end a session twice: the call is not counted again.
		`{"hook_event_name":"SessionEnd","session_id":"nr","reason":"exit"}`,
	} {
		out, _, err := s.ingest(&delivery{payload: []byte(p), at: time.Now()}, false)
		if err != nil {
			t.Fatal(err)
		}
		out.durable()
	}
	if got := counterValue(t, s, "aepkimi_adapter_tools_without_result_total"); got != 1 {
		t.Fatalf("tools without a result: %v, want 1 (c2)", got)
	}
	if n := strings.Count(logs.String(), "never had a result"); n != 1 {
		t.Fatalf("%d warnings, want 1:\n%s", n, logs.String())
	}
	if !strings.Contains(logs.String(), "first=c2") {
		t.Fatalf("the warning does not name c2:\n%s", logs.String())
	}
}

// counterValue reads one unlabelled counter from the server's registry.
func counterValue(t *testing.T, s *Server, name string) float64 {
	t.Helper()
	mfs, err := s.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) == 1 {
			return mf.GetMetric()[0].GetCounter().GetValue()
		}
	}
	t.Fatalf("no counter %s", name)
	return 0
}

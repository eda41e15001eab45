package adapter

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/aep-kimi/aep-kimi/aep"
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
	if got := testutil.ToFloat64(s.metrics.noResult); got != 1 {
		t.Fatalf("tools without a result: %v, want 1 (c2)", got)
	}
	if n := strings.Count(logs.String(), "never had a result"); n != 1 {
		t.Fatalf("%d warnings, want 1:\n%s", n, logs.String())
	}
	if !strings.Contains(logs.String(), "first=c2") {
		t.Fatalf("the warning does not name c2:\n%s", logs.String())
	}
}

// A prompt's TurnStarted is fire-and-forget: held up (a loaded machine,
// the spool's lock), it can arrive after the turn's Stop closed the run
// the prompt opened. It is that run's turn, not a run of its own (which
// the session's end would then drain as cancelled).
func TestLateTurnStartedJoinsItsRun(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	s := newTestServer(t, home, nil)
	for _, p := range []string{
		`{"hook_event_name":"SessionStart","session_id":"lt","source":"startup"}`,
		`{"hook_event_name":"UserPromptSubmit","session_id":"lt","prompt":"run it"}`,
		`{"hook_event_name":"PreToolUse","session_id":"lt","tool_name":"Bash","tool_input":{},"tool_call_id":"c1"}`,
		`{"hook_event_name":"PostToolUse","session_id":"lt","tool_name":"Bash","tool_input":{},"tool_call_id":"c1","tool_output":"ok"}`,
		`{"hook_event_name":"Stop","session_id":"lt","stop_hook_active":false}`,
		`{"hook_event_name":"TurnStarted","session_id":"lt","turn_id":0,"origin_kind":"user","prompt":"run it"}`,
		`{"hook_event_name":"SessionEnd","session_id":"lt","reason":"exit"}`,
	} {
		out, _, err := s.ingest(&delivery{payload: []byte(p), at: time.Now()}, false)
		if err != nil {
			t.Fatal(err)
		}
		if out.wait != nil {
			out = <-out.wait
		}
		out.durable()
	}
	ev := readLog(t, home, "lt")
	assertValidStream(t, ev)
	var started []string
	var turn *aep.Event
	for _, e := range ev {
		switch e.Type {
		case "run.started":
			started = append(started, e.Run)
		case "run.cancelled":
			t.Errorf("a run was cancelled: %v", types(ev))
		case "x.kimi-code.run.turn_started":
			turn = e
		}
	}
	if len(started) != 1 {
		t.Fatalf("%d runs started, want 1: %v", len(started), types(ev))
	}
	if turn == nil || turn.Run != started[0] {
		t.Fatalf("the late turn is not the prompt's run's: %+v (run %s)", turn, started[0])
	}
}

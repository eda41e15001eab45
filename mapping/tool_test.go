package mapping

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/aep-kimi/aep-kimi/aep"
)

// TestToolEventsAlikeOnBothSurfaces: a hook and a kap frame about the same
// call, with the same arguments and the same result, say the same about it
// at every capture level (one rule, tool.go, writes both).
func TestToolEventsAlikeOnBothSurfaces(t *testing.T) {
	args := map[string]any{"command": "cat token=sk-live-123456789012345678901234"}
	for _, out := range []any{"done token=sk-live-123456789012345678901234", map[string]any{"lines": "12", "path": "/tmp/x"}} {
		for _, c := range []aep.Capture{aep.CaptureMetadata, aep.CaptureRedacted, aep.CaptureFull} {
			p := Posture{Capture: c, AttentionCapture: c, Redactor: &aep.Redactor{}}
			hookReq := hookEvent(t, p, map[string]any{"hook_event_name": "PreToolUse", "session_id": "s", "tool_name": "Bash", "tool_call_id": "c1", "tool_input": args})
			webReq := mapToolCallStartedFrame(Frame{Type: "tool.call.started", Payload: map[string]any{"name": "Bash", "toolCallId": "c1", "args": args}}, p)[0]
			sameData(t, c, "tool.requested", hookReq, webReq)
			hookDone := hookEvent(t, p, map[string]any{"hook_event_name": "PostToolUse", "session_id": "s", "tool_name": "Bash", "tool_call_id": "c1", "tool_input": args, "tool_output": out})
			webDone := WebToolResult(Frame{Type: "tool.result", Payload: map[string]any{"toolCallId": "c1", "output": out}}, "Bash", p)
			sameData(t, c, "tool.completed", hookDone, webDone)
			if msg, ok := out.(string); ok {
				hookFailed := hookEvent(t, p, map[string]any{"hook_event_name": "PostToolUseFailure", "session_id": "s", "tool_name": "Bash", "tool_call_id": "c1", "tool_input": args, "error": msg})
				webFailed := WebToolResult(Frame{Type: "tool.result", Payload: map[string]any{"toolCallId": "c1", "output": msg, "isError": true}}, "Bash", p)
				sameData(t, c, "tool.failed", hookFailed, webFailed)
			}
		}
	}
}

func hookEvent(t *testing.T, p Posture, payload map[string]any) Event {
	t.Helper()
	b, err := json.Marshal(payload)
	if err != nil {
		t.Fatal(err)
	}
	r, err := Hook(b, p)
	if err != nil {
		t.Fatal(err)
	}
	return r.Events[0]
}

func sameData(t *testing.T, c aep.Capture, typ string, hook, web Event) {
	t.Helper()
	if hook.Type != typ || web.Type != typ {
		t.Fatalf("%s: types %s and %s", c, hook.Type, web.Type)
	}
	if hook.Subject != web.Subject || !reflect.DeepEqual(hook.Data, web.Data) {
		t.Errorf("%s %s differs between the surfaces:\nhook %s %v\nweb  %s %v", c, typ, hook.Subject, hook.Data, web.Subject, web.Data)
	}
}

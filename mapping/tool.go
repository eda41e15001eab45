package mapping

import "github.com/aep-kimi/aep-kimi/aep"

// The tool.* events of both surfaces, hooks and kap frames, say the same
// things about a call the same way; these write them.

// toolRef is data.tool: the tool's name and, when known, the call's id.
func toolRef(name, callID string) map[string]any {
	ref := map[string]any{"name": name}
	if callID != "" {
		ref["call_id"] = callID
	}
	return ref
}

// toolEvent is an event about one tool call: the tool is its subject and
// data.tool names it and the call.
func toolEvent(p Posture, typ string, sev aep.Severity, name, callID string) Event {
	e := newEvent(p, typ, sev)
	e.Subject = name
	e.Data["tool"] = toolRef(name, callID)
	return e
}

// putArgs records a call's arguments (nil: none): their digest, an
// object's redacted form at redacted and above, and the object itself at
// full.
func (e Event) putArgs(p Posture, args any) {
	if args == nil {
		return
	}
	if d, err := aep.Digest(args); err == nil {
		e.Data["args_digest"] = d
	}
	if am, ok := args.(map[string]any); ok {
		if v, ok := p.value(e.Capture, am); ok {
			e.Data["args_redacted"] = v
		}
		if e.Capture == aep.CaptureFull {
			e.Data["args"] = am
		}
	}
}

// putResult records a call's result (nil: none): its digest, a text's or
// an object's redacted form at redacted and above, and the result itself at
// full.
func (e Event) putResult(p Posture, out any) {
	if out == nil {
		return
	}
	if d, err := aep.Digest(out); err == nil {
		e.Data["result_digest"] = d
	}
	switch v := out.(type) {
	case string:
		if s, ok := p.text(e.Capture, v); ok {
			e.Data["result_redacted"] = s
		}
	case map[string]any:
		if r, ok := p.value(e.Capture, v); ok {
			e.Data["result_redacted"] = r
		}
	}
	if e.Capture == aep.CaptureFull {
		e.Data["result"] = out
	}
}

// errorData is data.error of a failure (a run's or a tool call's): the
// structural type when known, the message at redacted and above. Either
// may be missing, so it may be empty.
func (e Event) errorData(p Posture, typ, msg string) map[string]any {
	info := map[string]any{}
	if typ != "" {
		info["type"] = typ
	}
	if s, ok := p.text(e.Capture, msg); ok {
		info["message"] = s
	}
	return info
}

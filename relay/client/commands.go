package client

import (
	"errors"
	"fmt"
	"strings"

	"github.com/aep-kimi/aep-kimi/aep"
	"github.com/aep-kimi/aep-kimi/mapping"
)

// The commands the CLI sends (AEP-0004), and the one Kimi extension.
const (
	TypeRespond  = "control.attention.respond"
	TypeCancel   = "control.cancel"
	TypeInstruct = "x.kimi-code.control.instruct"
)

// Cancel scopes.
const (
	ScopeRun     = "run"
	ScopeSession = "session"
)

// Respond answers attention request in session with an option id, free
// text, or both. Text makes the command capture redacted: it is authored,
// and may say anything.
func Respond(session, request, option, text string) (*aep.Event, error) {
	if option == "" && text == "" {
		return nil, errors.New("give --option, --text or both")
	}
	answer := map[string]any{}
	if option != "" {
		answer["option"] = option
	}
	if text != "" {
		answer["text"] = text
	}
	cmd, err := NewCommand(TypeRespond, session, map[string]any{"answer": answer})
	if err != nil {
		return nil, err
	}
	cmd.Subject, cmd.Cause = request, request
	if text != "" {
		cmd.Capture = aep.CaptureRedacted.String()
	}
	return cmd, nil
}

// RespondValues answers a form request (AEP-0006) in session with values
// keyed by field id. The command is capture redacted: a value may be the
// person's own words.
func RespondValues(session, request string, values map[string]any) (*aep.Event, error) {
	if len(values) == 0 {
		return nil, errors.New("the answer has no values")
	}
	cmd, err := NewCommand(TypeRespond, session, map[string]any{"answer": map[string]any{"values": values}})
	if err != nil {
		return nil, err
	}
	cmd.Subject, cmd.Cause = request, request
	cmd.Capture = aep.CaptureRedacted.String()
	return cmd, nil
}

// Cancel cancels session's run (the target's current one when run is
// empty), or the whole session with ScopeSession; a reason makes the
// command capture redacted.
func Cancel(session, run, scope, reason string) (*aep.Event, error) {
	if scope != ScopeRun && scope != ScopeSession {
		return nil, fmt.Errorf("--scope %q: want %s or %s", scope, ScopeRun, ScopeSession)
	}
	data := map[string]any{"scope": scope}
	if reason != "" {
		data["reason"] = reason
	}
	cmd, err := NewCommand(TypeCancel, session, data)
	if err != nil {
		return nil, err
	}
	cmd.Run = run
	if reason != "" {
		cmd.Capture = aep.CaptureRedacted.String()
	}
	return cmd, nil
}

// Instruct queues text for session's next prompt.
func Instruct(session, text string) (*aep.Event, error) {
	if strings.TrimSpace(text) == "" {
		return nil, errors.New("the instruction text is empty")
	}
	cmd, err := NewCommand(TypeInstruct, session, map[string]any{"text": text})
	if err != nil {
		return nil, err
	}
	cmd.Capture = aep.CaptureRedacted.String()
	return cmd, nil
}

// Rate rates a finished run of session: a thumbs up or down (verdict,
// mapping.VerdictUp or VerdictDown) with an optional note, which makes the
// command capture redacted: it is authored, and may say anything.
func Rate(session, run, verdict, note string) (*aep.Event, error) {
	if run == "" {
		return nil, errors.New("a rating names the run it rates")
	}
	data, err := mapping.Rating{Verdict: verdict, Note: note}.CommandData()
	if err != nil {
		return nil, err
	}
	cmd, err := NewCommand(mapping.TypeRate, session, data)
	if err != nil {
		return nil, err
	}
	cmd.Run = run
	if note != "" {
		cmd.Capture = aep.CaptureRedacted.String()
	}
	return cmd, nil
}

// Rejection says who rejected a command that was not accepted, and why.
func (r SendResult) Rejection() string {
	who := "target"
	if r.Refused {
		who = "relay"
	}
	msg := fmt.Sprintf("rejected by the %s: %s", who, r.Reason)
	if r.Detail != "" {
		msg += ": " + r.Detail
	}
	return msg
}

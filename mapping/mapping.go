// Package mapping holds the pure tables that say what each Kimi Code hook
// payload and each kap-server (kimi web) WebSocket frame means in AEP.
//
// Nothing here does I/O, reads a clock or keeps state between calls: identity
// (id, time, source, seq, run, cause) is assigned by the adapter or the bridge.
// A mapped Event carries only type, subject, severity, the capture level it
// honours and its data, already gated and redacted for the posture it was
// mapped at.
package mapping

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/aep-kimi/aep-kimi/aep"
)

// Agent is the envelope agent of every event this project emits for Kimi.
const Agent = "kimi-code"

// Vendor is the x.{vendor} token of this project's extension types.
const Vendor = "kimi-code"

// MaxPayloadBytes bounds one hook payload or frame the mapping will decode.
// Kimi slices tool output to 2000 characters, so real payloads are a few KiB;
// tool_input can be larger (a Write of a big file), hence the headroom.
const MaxPayloadBytes = 4 << 20

// Posture is the capture posture events are mapped at (AEP-0003 §9.1): a
// ceiling for every type and an override for attention.*, plus the §9.4
// pipeline applied to redacted-level text.
type Posture struct {
	Capture          aep.Capture
	AttentionCapture aep.Capture
	// Redactor is the redaction pipeline; nil means the default pipeline.
	Redactor *aep.Redactor
}

// DefaultPosture is the adapter's default: metadata, with attention.* at
// redacted so a person can read what they are asked.
func DefaultPosture() Posture {
	return Posture{Capture: aep.CaptureMetadata, AttentionCapture: aep.CaptureRedacted}
}

// ParsePosture builds a posture from capture level names (a flag's or an
// environment variable's): an unset attention level is redacted, except
// under an explicit capture none.
func ParsePosture(capture, attention string, ro aep.RedactOptions) (Posture, error) {
	p := DefaultPosture()
	c, err := aep.ParseCapture(capture)
	if err != nil {
		return p, err
	}
	p.Capture = c
	switch {
	case attention != "":
		a, err := aep.ParseCapture(attention)
		if err != nil {
			return p, fmt.Errorf("attention capture: %w", err)
		}
		p.AttentionCapture = a
	case c == aep.CaptureNone:
		p.AttentionCapture = aep.CaptureNone
	}
	p.Redactor = aep.NewRedactor(ro)
	return p, nil
}

// Level returns the capture level an event of type typ is mapped at.
func (p Posture) Level(typ string) aep.Capture {
	if strings.HasPrefix(typ, "attention.") {
		return p.AttentionCapture
	}
	if strings.HasPrefix(typ, "x.") {
		// Extension types carry only structural data, so they never claim
		// more than metadata; a hop at metadata then keeps their data.
		return min(p.Capture, aep.CaptureMetadata)
	}
	return p.Capture
}

func (p Posture) redactor() *aep.Redactor {
	if p.Redactor == nil {
		return &aep.Redactor{}
	}
	return p.Redactor
}

// text renders free text for a field gated at redacted: verbatim at full,
// through the pipeline at redacted, absent below.
func (p Posture) text(level aep.Capture, s string) (string, bool) {
	switch {
	case s == "" || level < aep.CaptureRedacted:
		return "", false
	case level == aep.CaptureFull:
		return s, true
	}
	return p.redactor().Text(s), true
}

// argsText renders a tool permission prompt (ToolPrompt) as text does,
// with the argument text redacted as a command line: no redaction takes a
// shell operator, and a text cut short keeps its Cut, so a rule reading it
// sees every command in it and that it is partial.
func (p Posture) argsText(level aep.Capture, s string) (string, bool) {
	if level != aep.CaptureRedacted || s == "" {
		return p.text(level, s)
	}
	body, cut := strings.CutSuffix(s, Cut)
	s = p.redactor().Command(body)
	if cut {
		s += Cut
	}
	return s, true
}

// value renders a structured value gated at redacted (the *_redacted fields).
func (p Posture) value(level aep.Capture, v any) (any, bool) {
	if v == nil || level < aep.CaptureRedacted {
		return nil, false
	}
	return p.redactor().Value(v), true
}

// Event is one mapped event: everything but identity.
type Event struct {
	Type     string
	Subject  string
	Severity aep.Severity
	Capture  aep.Capture
	Data     map[string]any
}

// Envelope fills an aep.Event with this mapping; the caller sets identity.
func (m Event) Envelope(e *aep.Event) error {
	e.AEP = aep.Version
	e.Type = m.Type
	e.Subject = m.Subject
	e.Capture = m.Capture.String()
	e.Severity = ""
	if m.Severity != aep.SeverityInfo {
		e.Severity = m.Severity.String()
	}
	if m.Capture == aep.CaptureNone {
		return e.SetData(nil) // envelope only: no payload at all
	}
	data := aep.GateData(m.Type, m.Data, m.Capture)
	if data == nil {
		data = map[string]any{}
	}
	return e.SetData(data)
}

func newEvent(p Posture, typ string, sev aep.Severity) Event {
	return Event{Type: typ, Severity: sev, Capture: p.Level(typ), Data: map[string]any{}}
}

// ErrEmpty, ErrNotJSON and ErrTooLarge classify bad input.
var (
	ErrEmpty    = errors.New("empty input")
	ErrNotJSON  = errors.New("not a JSON object")
	ErrTooLarge = fmt.Errorf("input larger than %d bytes", MaxPayloadBytes)
)

// decodeObject decodes one JSON object with numbers kept exact.
func decodeObject(b []byte) (map[string]any, error) {
	b = bytes.TrimSpace(b)
	if len(b) == 0 {
		return nil, ErrEmpty
	}
	if len(b) > MaxPayloadBytes {
		return nil, ErrTooLarge
	}
	if b[0] != '{' {
		return nil, ErrNotJSON
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNotJSON, err)
	}
	if dec.More() {
		return nil, fmt.Errorf("%w: trailing data after the object", ErrNotJSON)
	}
	return m, nil
}

// str reads a string member; numbers render in their JSON form so ids that
// changed type between vendor versions (turn_id) still read.
func str(m map[string]any, key string) string {
	switch v := m[key].(type) {
	case string:
		return v
	case json.Number:
		return v.String()
	case bool:
		if v {
			return "true"
		}
		return "false"
	}
	return ""
}

// obj reads an object member.
func obj(m map[string]any, key string) map[string]any {
	v, _ := m[key].(map[string]any)
	return v
}

// integer reads an integer member.
func integer(m map[string]any, key string) (int64, bool) {
	n, ok := m[key].(json.Number)
	if !ok {
		return 0, false
	}
	i, err := n.Int64()
	if err != nil {
		f, ferr := n.Float64()
		if ferr != nil || f != float64(int64(f)) {
			return 0, false
		}
		return int64(f), true
	}
	return i, true
}

// boolean reads a boolean member.
func boolean(m map[string]any, key string) bool {
	v, _ := m[key].(bool)
	return v
}

// joinTextParts joins the text parts of a Kimi content-part array (the
// UserPromptSubmit prompt); a plain string passes through.
func joinTextParts(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case []any:
		var parts []string
		for _, p := range x {
			if pm, ok := p.(map[string]any); ok && pm["type"] == "text" {
				if s, ok := pm["text"].(string); ok {
					parts = append(parts, s)
				}
			}
		}
		return strings.Join(parts, "\n")
	}
	return ""
}

// snakeCase turns a vendor name into a type token: ASCII CamelCase words
// split by underscores, anything outside [a-z0-9_] replaced (non-ASCII
// letters included, whatever their case), never empty.
func snakeCase(s string) string {
	var b strings.Builder
	runes := []rune(s)
	upper := func(r rune) bool { return r >= 'A' && r <= 'Z' }
	lower := func(r rune) bool { return r >= 'a' && r <= 'z' || r >= '0' && r <= '9' }
	for i, r := range runes {
		switch {
		case upper(r):
			if i > 0 && (lower(runes[i-1]) ||
				(i+1 < len(runes) && lower(runes[i+1]) && upper(runes[i-1]))) {
				b.WriteByte('_')
			}
			b.WriteRune(r - 'A' + 'a')
		case lower(r), r == '_':
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	out := strings.Trim(b.String(), "_")
	for strings.Contains(out, "__") {
		out = strings.ReplaceAll(out, "__", "_")
	}
	if out == "" {
		return "unknown"
	}
	return out
}

// xType builds x.kimi-code.{rest}, forcing each dotted token into the type
// grammar so a vendor name can never produce an invalid type.
func xType(rest string) string {
	toks := strings.Split(rest, ".")
	for i, t := range toks {
		toks[i] = snakeCase(t)
	}
	if len(toks) < 2 {
		toks = append([]string{"session"}, toks...)
	}
	return "x." + Vendor + "." + strings.Join(toks, ".")
}

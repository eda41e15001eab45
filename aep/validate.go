package aep

import (
	"fmt"
	"strings"
)

// Violation is one broken rule.
type Violation struct {
	// Rule cites the spec section, e.g. "AEP-0001 §5.2".
	Rule string
	// Path names the attribute or data field, when there is one.
	Path string
	Msg  string
}

func (v Violation) Error() string {
	if v.Path != "" {
		return fmt.Sprintf("%s: %s (%s)", v.Path, v.Msg, v.Rule)
	}
	return fmt.Sprintf("%s (%s)", v.Msg, v.Rule)
}

// ValidationError carries every violation found in one event.
type ValidationError struct{ Violations []Violation }

func (e *ValidationError) Error() string {
	if len(e.Violations) == 1 {
		return e.Violations[0].Error()
	}
	parts := make([]string, len(e.Violations))
	for i, v := range e.Violations {
		parts[i] = v.Error()
	}
	return strings.Join(parts, "; ")
}

// The type, source, traceparent and command grammars below are matched by hand: they
// run for every event a relay admits, where the equivalent regular
// expressions (kept as the tests' oracle) took a quarter of the parse.

// ValidType reports whether t is a legal AEP type name (AEP-0001 §6):
// {category}.{rest} with a registered category, or x.{vendor}.{category}.{rest},
// every segment of lower-case letters, digits and _ (a vendor also -).
func ValidType(t string) bool {
	cat, rest, ok := strings.Cut(t, ".")
	if !ok {
		return false
	}
	if cat == "x" {
		vendor, rest, ok := strings.Cut(rest, ".")
		return ok && vendor != "" && allOf(vendor, typeChar, '-') && segments(rest) >= 2
	}
	switch cat {
	case "agent", "session", "run", "progress", "tool", "delegation", "attention",
		"resource", "error", "state", "assessment", "message", "control":
		return segments(rest) >= 1
	}
	return false
}

// segments counts the dot-separated segments of s, each non-empty and of
// typeChar only; -1 when one is not. One pass, byte by byte.
func segments(s string) int {
	n, seg := 0, 0 // segments before this one, bytes in this one
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '.':
			if seg == 0 {
				return -1
			}
			n, seg = n+1, 0
		case typeChar(c):
			seg++
		default:
			return -1
		}
	}
	if seg == 0 {
		return -1
	}
	return n + 1
}

func typeChar(c byte) bool { return 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '_' }

// allOf reports whether every byte of s is ok or extra (0: none).
func allOf(s string, ok func(byte) bool, extra byte) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; !ok(c) && (extra == 0 || c != extra) {
			return false
		}
	}
	return true
}

// validURI reports whether s is scheme:rest with no white space
// (RFC 3986's scheme, then anything but space, tab, CR, LF or FF).
func validURI(s string) bool {
	scheme, rest, ok := strings.Cut(s, ":")
	if !ok || scheme == "" || !isLetter(scheme[0]) {
		return false
	}
	for i := 1; i < len(scheme); i++ {
		if c := scheme[i]; !isLetter(c) && !('0' <= c && c <= '9') && c != '+' && c != '.' && c != '-' {
			return false
		}
	}
	// Not strings.ContainsAny, which builds its set on every call: eight
	// bytes at a time, looking closer only at a word with a byte <= ' '.
	i := 0
	for ; i+8 <= len(rest); i += 8 {
		if below8(le64(rest, i), ' '+1) != 0 && !noSpace(rest[i:i+8]) {
			return false
		}
	}
	return noSpace(rest[i:])
}

// noSpace reports whether s holds none of space, tab, CR, LF or FF.
func noSpace(s string) bool {
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case ' ', '\t', '\n', '\r', '\f':
			return false
		}
	}
	return true
}

// validTraceparent reports whether s is a W3C traceparent as the envelope
// carries it: version-traceid-parentid-flags, 2, 32, 16 and 2 lower-case hex
// digits.
func validTraceparent(s string) bool {
	if len(s) != 55 || s[2] != '-' || s[35] != '-' || s[52] != '-' {
		return false
	}
	// The trace id (3-34) and parent id (36-51) eight digits at a time.
	for _, i := range [...]int{3, 11, 19, 27, 36, 44} {
		if !lowerHex8(le64(s, i)) {
			return false
		}
	}
	for _, i := range [...]int{0, 1, 53, 54} {
		if c := s[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// le64 is the eight bytes of s at i as a little-endian word.
func le64(s string, i int) uint64 {
	s = s[i : i+8]
	return uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
		uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
}

// below8 marks (with its high bit) each byte of w below n (n <= 128), and
// is zero when there is none.
func below8(w uint64, n byte) uint64 { return (w - uint64(n)*ones8) &^ w & highs8 }

// lowerHex8 reports whether each byte of w is 0-9 or a-f.
func lowerHex8(w uint64) bool {
	if w&highs8 != 0 {
		return false
	}
	// Below 0x80 no byte carries into the next: the high bit of c+0x50 is
	// c >= '0', of c+0x46 c > '9', of c+0x1f c >= 'a', of c+0x19 c > 'f'.
	digit := (w + 0x50*ones8) &^ (w + 0x46*ones8)
	letter := (w + 0x1f*ones8) &^ (w + 0x19*ones8)
	return (digit|letter)&highs8 == highs8
}

func isLetter(c byte) bool { return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' }

// isForeignType reports whether t is a foreign emitter's type: a control
// command (AEP-0004 §2, a vendor's x.{vendor}.control.{rest} included) or
// attention.routed.
func isForeignType(t string) bool {
	switch t {
	case "control.attention.respond", "control.cancel", "control.pause", "control.resume", "attention.routed":
		return true
	}
	rest, ok := strings.CutPrefix(t, "x.")
	if !ok {
		return false
	}
	vendor, rest, ok := strings.Cut(rest, ".")
	if !ok || vendor == "" || !allOf(vendor, typeChar, '-') {
		return false
	}
	rest, ok = strings.CutPrefix(rest, "control.")
	return ok && rest != "" && !strings.Contains(rest, "\n")
}

// Scope is how an event relates to session order (AEP-0001 §5.2).
type Scope uint8

const (
	// ScopeSession events carry session and seq.
	ScopeSession Scope = iota
	// ScopeAgent events describe the emitter and carry neither.
	ScopeAgent
	// ScopeForeign events (commands, attention.routed) carry session, never seq.
	ScopeForeign
)

// ScopeOf classifies a type.
func ScopeOf(t string) Scope {
	switch {
	case strings.HasPrefix(t, "agent."):
		return ScopeAgent
	case isForeignType(t):
		return ScopeForeign
	}
	return ScopeSession
}

// IsCommand reports whether t is a control command (a foreign-emitter control
// type, AEP-0004 §2), as opposed to an ack or attention.routed.
func IsCommand(t string) bool {
	return ScopeOf(t) == ScopeForeign && t != "attention.routed"
}

// ValidateEnvelope checks the envelope rules of AEP-0001 §5–§6.
func ValidateEnvelope(e *Event) []Violation {
	var vs []Violation
	add := func(rule, path, format string, args ...any) {
		vs = append(vs, Violation{Rule: rule, Path: path, Msg: fmt.Sprintf(format, args...)})
	}
	// By index into coreAttrs, not by name, from a copy of the strings
	// and a mask of what is present: this runs for every event a relay
	// admits, and a name is a search.
	strs, has := e.coreStrings(), e.presentMask()
	for _, i := range [...]int{idxAEP, idxID, idxType, idxTime, idxSource, idxAgent} {
		if strs[i] == "" && has&(1<<i) == 0 {
			add("AEP-0001 §5.1", coreAttrs[i], "required attribute missing")
		}
	}
	// A present attribute with an empty value is a string one: seq, epoch
	// and data are never "".
	for i := range coreAttrs {
		if strs[i] == "" && has&(1<<i) != 0 && i != idxSeq && i != idxEpoch && i != idxData {
			add("AEP-0001 §5.1", coreAttrs[i], "must be a non-empty string")
		}
	}
	if e.AEP != "" && e.AEP != Version {
		add("AEP-0001 §5.1 #1", AttrAEP, "unsupported envelope version %q (this is %s)", e.AEP, Version)
	}
	if e.Type != "" && !ValidType(e.Type) {
		add("AEP-0001 §6", AttrType, "%q is not {category}.{rest} with a registered category, nor x.{vendor}.{category}.{rest}", e.Type)
	}
	if e.Time != "" && !ValidTime(e.Time) {
		add("AEP-0001 §5.1 #5", AttrTime, "%q is not an RFC 3339 timestamp with a timezone", e.Time)
	}
	if e.Source != "" && !validURI(e.Source) {
		add("AEP-0001 §5.1 #6", AttrSource, "%q is not a URI", e.Source)
	}
	if e.Seq != nil && *e.Seq < 0 {
		add("AEP-0001 §5.1 #11", AttrSeq, "must be >= 0")
	}
	if e.Epoch != nil && *e.Epoch < 0 {
		add("AEP-0001 §5.1 #12", AttrEpoch, "must be >= 0")
	}
	if e.Traceparent != "" && !validTraceparent(e.Traceparent) {
		add("AEP-0001 §5.1 #14", AttrTraceparent, "%q is not a W3C traceparent", e.Traceparent)
	}
	if e.Severity != "" {
		if _, err := ParseSeverity(e.Severity); err != nil {
			add("AEP-0001 §8.1", AttrSeverity, "unknown severity %q", e.Severity)
		}
	}
	if e.Capture != "" {
		if _, err := ParseCapture(e.Capture); err != nil {
			add("AEP-0001 §8.2", AttrCapture, "unknown capture level %q", e.Capture)
		}
	}
	for name, v := range e.Ext {
		if !validExtName(name) {
			add("AEP-0001 §5.4", name, "extension attribute names match [a-z0-9]{1,20}")
		}
		if !scalarJSON(v) {
			add("AEP-0001 §5.4", name, "extension attributes carry a string, integer or boolean")
		}
	}
	if e.Type != "" {
		switch ScopeOf(e.Type) {
		case ScopeAgent:
			for _, i := range [...]int{idxSession, idxRun, idxStep, idxSeq} {
				if has&(1<<i) != 0 {
					add("AEP-0001 §5.2", coreAttrs[i], "agent-scoped events omit %s", coreAttrs[i])
				}
			}
		case ScopeForeign:
			if has&(1<<idxSession) == 0 {
				add("AEP-0001 §5.2", AttrSession, "foreign-emitter session events carry session")
			}
			if has&(1<<idxSeq) != 0 {
				add("AEP-0004 §2.2", AttrSeq, "commands and attention.routed omit seq: the sender does not own the session's order")
			}
		default:
			if has&(1<<idxSession) == 0 {
				add("AEP-0001 §5.2", AttrSession, "session-scoped events carry session")
			}
			if has&(1<<idxSeq) == 0 {
				add("AEP-0001 §5.2", AttrSeq, "session-scoped events carry seq")
			}
		}
	}
	return vs
}

// scalarJSON reports whether raw is a JSON string, integer or boolean.
func scalarJSON(raw []byte) bool {
	if len(raw) == 0 {
		return false
	}
	switch raw[0] {
	case '"':
		return true
	case 't', 'f':
		s := string(raw)
		return s == "true" || s == "false"
	case '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
		_, err := parseInt(raw)
		return err == nil
	}
	return false
}

// CheckEnvelope checks only the envelope (AEP-0001 §5–§6): what a relay
// must verify at ingest, never parsing data (relays route on the context
// attributes alone). It returns a *ValidationError or nil.
func CheckEnvelope(e *Event) error {
	if vs := ValidateEnvelope(e); len(vs) > 0 {
		return &ValidationError{Violations: vs}
	}
	return nil
}

// Validate checks one event's envelope and, for registered types, its
// payload; it returns a *ValidationError or nil.
func Validate(e *Event) error {
	vs := ValidateEnvelope(e)
	vs = append(vs, ValidatePayload(e)...)
	if len(vs) == 0 {
		return nil
	}
	return &ValidationError{Violations: vs}
}

// StreamValidator checks the rules that span events (AEP-0001 §7, AEP-0002 §2
// convention 5 and §7.2, AEP-0004 §3, AEP-0006): (epoch, seq) monotonic per
// (source, session), (source, id) never naming two different events, one
// terminal per run, one session.ended per session, attention closed before
// session.ended, one ack decision per command, and form answers that fit their
// request. Feed it events in stream order. The zero value is ready to use.
type StreamValidator struct {
	lastPos   map[sessKey][2]int64
	seen      map[idKey]string
	terminals map[runKey]bool
	ended     map[sessKey]string
	pending   map[sessKey]map[string]bool
	acks      map[idKey]string
	forms     map[string][]any
}

type sessKey struct{ source, session string }
type idKey struct{ source, id string }
type runKey struct {
	sessKey
	run string
}

// IsRunTerminal reports whether t ends a run.
func IsRunTerminal(t string) bool {
	switch t {
	case "run.finished", "run.failed", "run.cancelled":
		return true
	}
	return false
}

// Add checks e against everything seen so far and records it.
func (v *StreamValidator) Add(e *Event) []Violation {
	if v.lastPos == nil {
		v.lastPos = map[sessKey][2]int64{}
		v.seen = map[idKey]string{}
		v.terminals = map[runKey]bool{}
		v.ended = map[sessKey]string{}
		v.pending = map[sessKey]map[string]bool{}
		v.acks = map[idKey]string{}
		v.forms = map[string][]any{}
	}
	var vs []Violation
	add := func(rule, format string, args ...any) {
		vs = append(vs, Violation{Rule: rule, Msg: fmt.Sprintf(format, args...)})
	}
	canon := canonicalEvent(e)

	idk := idKey{e.Source, e.ID}
	if prev, ok := v.seen[idk]; ok {
		if prev != canon {
			add("AEP-0001 §7.4", "(source, id) %q names two different events", e.ID)
		}
		// A byte-identical repeat is legal redelivery: nothing else to check.
		return vs
	}
	v.seen[idk] = canon

	sk := sessKey{e.Source, e.Session}
	if e.Session != "" && e.Seq != nil {
		pos := [2]int64{e.EpochOrZero(), *e.Seq}
		if last, ok := v.lastPos[sk]; ok {
			switch {
			case pos[0] < last[0]:
				add("AEP-0001 §7.2", "epoch regression in session %q: %d after %d", e.Session, pos[0], last[0])
			case pos[0] == last[0] && pos[1] <= last[1]:
				add("AEP-0001 §7.2", "seq not monotonic in session %q: %d after %d (epoch %d)", e.Session, pos[1], last[1], pos[0])
			}
		}
		v.lastPos[sk] = pos
	}

	if e.Session != "" {
		switch t := e.Type; {
		case IsRunTerminal(t) && e.Run != "":
			rk := runKey{sk, e.Run}
			if v.terminals[rk] {
				add("AEP-0002 §2 convention 5", "second terminal for run %q in session %q", e.Run, e.Session)
			}
			v.terminals[rk] = true
		case t == "attention.requested":
			if v.pending[sk] == nil {
				v.pending[sk] = map[string]bool{}
			}
			v.pending[sk][e.ID] = true
		case t == "attention.resolved" || t == "attention.timeout":
			delete(v.pending[sk], e.Subject)
		case t == "session.ended":
			if len(v.pending[sk]) > 0 {
				add("AEP-0002 §7.2", "session %q ended with %d attention request(s) still pending", e.Session, len(v.pending[sk]))
			}
			if _, ok := v.ended[sk]; ok {
				add("AEP-0002 §2 convention 5", "second session.ended for session %q", e.Session)
			}
			v.ended[sk] = canon
		}
	}

	if (e.Type == "control.accepted" || e.Type == "control.rejected") && e.Cause != "" {
		ak := idKey{e.Source, e.Cause}
		if prev, ok := v.acks[ak]; ok && prev != canon {
			add("AEP-0004 §3", "second ack decision for command %q", e.Cause)
		}
		v.acks[ak] = canon
	}

	v.checkForm(e, add)
	return vs
}

// checkForm applies the AEP-0006 cross-event rules: an answer to a form covers
// every required field, uses choice ids for closed selects, and keeps free
// text out of metadata-level events.
func (v *StreamValidator) checkForm(e *Event, add func(rule, format string, args ...any)) {
	if e.Type != "attention.requested" && e.Type != "attention.answered" {
		return
	}
	data, err := e.DataMap()
	if err != nil || data == nil {
		return
	}
	if e.Type == "attention.requested" {
		if data["kind"] == "form" {
			fields, _ := data["fields"].([]any)
			v.forms[e.ID] = fields
		}
		return
	}
	fields, ok := v.forms[e.Subject]
	if !ok {
		return
	}
	answer, _ := data["answer"].(map[string]any)
	values, ok := answer["values"].(map[string]any)
	if !ok {
		return
	}
	if err := FormValuesError(fields, values); err != nil {
		add("AEP-0002 §5.3 (AEP-0006)", "form answer: %v", err)
	}
	kept := GateFormValues(fields, values, e.CaptureLevel(), nil)
	for k := range values {
		if _, ok := kept[k]; !ok && fieldDeclared(fields, k) {
			add("AEP-0002 §5.3 (AEP-0006)", "form answer value %q is free text above the event's capture %s", k, e.CaptureLevel())
		}
	}
}

func fieldDeclared(fields []any, id string) bool {
	for _, f := range fields {
		if m, ok := f.(map[string]any); ok && m["id"] == id {
			return true
		}
	}
	return false
}

func canonicalEvent(e *Event) string {
	b, err := e.MarshalJSON()
	if err != nil {
		return ""
	}
	c, err := CanonicalRaw(b)
	if err != nil {
		return string(b)
	}
	return string(c)
}

package aep

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math/bits"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Event is one AEP envelope (AEP-0001 §5): sixteen context attributes, any
// extension attributes, and an optional data object.
//
// String attributes are absent when empty; Seq and Epoch are absent when nil.
// Extension attributes and data are kept as the exact JSON they arrived as, so
// an event round-trips unknown members unchanged. An event parsed from bytes
// remembers them (Raw) so a hop can forward it byte-identically; code that
// changes a parsed event must call ClearRaw before re-serializing it.
type Event struct {
	AEP         string
	ID          string
	Type        string
	Subject     string
	Time        string
	Source      string
	Agent       string
	Session     string
	Run         string
	Step        string
	Seq         *int64
	Epoch       *int64
	Cause       string
	Traceparent string
	Severity    string
	Capture     string
	// Ext holds extension attributes by name, each as its raw JSON value.
	Ext map[string]json.RawMessage
	// Data is the payload object as raw JSON, or nil when absent.
	Data json.RawMessage

	raw []byte
	// present records which core attributes appeared on the wire (parsed
	// events only), so validation can tell "" from absent.
	present uint32
	// multiline: raw holds a line break (in a parsed event, whitespace
	// between tokens: a JSON string cannot hold one).
	multiline bool
	// seq and epoch hold a parsed event's Seq and Epoch, which point here:
	// the event is one allocation, not three.
	seq, epoch int64
}

// Core attribute names in wire order.
const (
	AttrAEP         = "aep"
	AttrID          = "id"
	AttrType        = "type"
	AttrSubject     = "subject"
	AttrTime        = "time"
	AttrSource      = "source"
	AttrAgent       = "agent"
	AttrSession     = "session"
	AttrRun         = "run"
	AttrStep        = "step"
	AttrSeq         = "seq"
	AttrEpoch       = "epoch"
	AttrCause       = "cause"
	AttrTraceparent = "traceparent"
	AttrSeverity    = "severity"
	AttrCapture     = "capture"
	AttrData        = "data"
)

// coreAttrs lists the core attribute names in the order Marshal writes them
// (data goes last, after extensions).
var coreAttrs = [...]string{
	AttrAEP, AttrID, AttrType, AttrSubject, AttrTime, AttrSource, AttrAgent,
	AttrSession, AttrRun, AttrStep, AttrSeq, AttrEpoch, AttrCause,
	AttrTraceparent, AttrSeverity, AttrCapture, AttrData,
}

// Indexes into coreAttrs, for the per-event paths, which go by index
// rather than by name.
const (
	idxAEP = iota
	idxID
	idxType
	idxSubject
	idxTime
	idxSource
	idxAgent
	idxSession
	idxRun
	idxStep
	idxSeq
	idxEpoch
	idxCause
	idxTraceparent
	idxSeverity
	idxCapture
	idxData
)

func coreIndex(name string) int {
	for i, n := range coreAttrs {
		if n == name {
			return i
		}
	}
	return -1
}

// coreIndexBytes is coreIndex without converting the key (the switch on
// string(b) does not allocate).
func coreIndexBytes(b []byte) int {
	switch string(b) {
	case AttrAEP:
		return 0
	case AttrID:
		return 1
	case AttrType:
		return 2
	case AttrSubject:
		return 3
	case AttrTime:
		return 4
	case AttrSource:
		return 5
	case AttrAgent:
		return 6
	case AttrSession:
		return 7
	case AttrRun:
		return 8
	case AttrStep:
		return 9
	case AttrSeq:
		return 10
	case AttrEpoch:
		return 11
	case AttrCause:
		return 12
	case AttrTraceparent:
		return 13
	case AttrSeverity:
		return 14
	case AttrCapture:
		return 15
	case AttrData:
		return 16
	}
	return -1
}

// IsCoreAttr reports whether name is one of the seventeen core members.
func IsCoreAttr(name string) bool { return coreIndex(name) >= 0 }

// Int64 returns a pointer to v, for Seq and Epoch.
func Int64(v int64) *int64 { return &v }

// Raw returns the bytes the event was parsed from, or nil for an event built
// in code or changed since (ClearRaw).
func (e *Event) Raw() []byte { return e.raw }

// Seal serializes a complete event once and keeps the bytes as its Raw form,
// so every later hop (log, publisher) writes the same bytes. Call it when the
// event will not change again: a sequenced event is immutable.
func (e *Event) Seal() ([]byte, error) {
	b, err := e.MarshalJSON()
	if err != nil {
		return nil, err
	}
	e.raw, e.multiline = b, bytes.ContainsAny(b, "\r\n")
	return b, nil
}

// ClearRaw forgets the parsed bytes; call it after changing a parsed event.
func (e *Event) ClearRaw() { e.raw = nil; e.present = 0; e.multiline = false }

// Multiline reports whether Raw holds a line break (CR or LF): for a parsed
// event, that it was pretty-printed. It is known without a scan of Raw;
// false when there is no Raw.
func (e *Event) Multiline() bool { return e.raw != nil && e.multiline }

// Bytes returns the wire form: the parsed bytes when the event is unchanged,
// otherwise a fresh serialization.
func (e *Event) Bytes() ([]byte, error) {
	if e.raw != nil {
		return e.raw, nil
	}
	return e.MarshalJSON()
}

// Has reports whether a core attribute is present. For parsed events it
// reflects the wire; for built events, non-empty strings and non-nil numbers.
func (e *Event) Has(attr string) bool {
	if e.present != 0 {
		i := coreIndex(attr)
		return i >= 0 && e.present&(1<<uint(i)) != 0
	}
	switch attr {
	case AttrSeq:
		return e.Seq != nil
	case AttrEpoch:
		return e.Epoch != nil
	case AttrData:
		return e.Data != nil
	}
	v, ok := e.stringAttr(attr)
	return ok && v != ""
}

// presentMask has bit i set when Has(coreAttrs[i]) holds.
func (e *Event) presentMask() uint32 {
	if e.present != 0 {
		return e.present
	}
	var m uint32
	for i, s := range e.coreStrings() {
		if s != "" {
			m |= 1 << i
		}
	}
	if e.Seq != nil {
		m |= 1 << idxSeq
	}
	if e.Epoch != nil {
		m |= 1 << idxEpoch
	}
	if e.Data != nil {
		m |= 1 << idxData
	}
	return m
}

// stringPtrs points at the string core attributes by index of coreAttrs,
// nil at seq, epoch and data: the one map from an index to its field.
func (e *Event) stringPtrs() [len(coreAttrs)]*string {
	return [len(coreAttrs)]*string{
		idxAEP: &e.AEP, idxID: &e.ID, idxType: &e.Type, idxSubject: &e.Subject,
		idxTime: &e.Time, idxSource: &e.Source, idxAgent: &e.Agent,
		idxSession: &e.Session, idxRun: &e.Run, idxStep: &e.Step,
		idxCause: &e.Cause, idxTraceparent: &e.Traceparent,
		idxSeverity: &e.Severity, idxCapture: &e.Capture,
	}
}

// coreStrings copies the string core attributes by index of coreAttrs
// ("" at seq, epoch and data).
// It spells the fields out again, not through stringPtrs: the envelope
// check reads them for every event, and the copy through pointers costs
// it a fifth more (TestAttrByIndex holds the two to one map).
func (e *Event) coreStrings() [len(coreAttrs)]string {
	return [len(coreAttrs)]string{
		idxAEP: e.AEP, idxID: e.ID, idxType: e.Type, idxSubject: e.Subject,
		idxTime: e.Time, idxSource: e.Source, idxAgent: e.Agent,
		idxSession: e.Session, idxRun: e.Run, idxStep: e.Step,
		idxCause: e.Cause, idxTraceparent: e.Traceparent,
		idxSeverity: e.Severity, idxCapture: e.Capture,
	}
}

// stringAt is stringAttr for the core attribute at index i of coreAttrs.
func (e *Event) stringAt(i int) (string, bool) {
	if p := e.stringPtrAt(i); p != nil {
		return *p, true
	}
	return "", false
}

// stringAttr returns a string core attribute by name.
func (e *Event) stringAttr(name string) (string, bool) { return e.stringAt(coreIndex(name)) }

func (e *Event) stringPtr(name string) *string { return e.stringPtrAt(coreIndex(name)) }

// stringPtrAt is the string core attribute at index i of coreAttrs, nil for
// another index: the scanner sets them by index, without comparing names.
func (e *Event) stringPtrAt(i int) *string {
	if i < 0 || i >= len(coreAttrs) {
		return nil
	}
	return e.stringPtrs()[i]
}

// EpochOrZero applies the AEP default for an absent epoch.
func (e *Event) EpochOrZero() int64 {
	if e.Epoch == nil {
		return 0
	}
	return *e.Epoch
}

// CaptureLevel applies the AEP default for an absent capture; an unknown value
// reads as metadata (validation reports it).
func (e *Event) CaptureLevel() Capture {
	c, _ := ParseCapture(e.Capture)
	return c
}

// SeverityLevel applies the AEP default for an absent severity; an unknown
// value reads as info (validation reports it).
func (e *Event) SeverityLevel() Severity {
	s, _ := ParseSeverity(e.Severity)
	return s
}

// ErrNotObject is returned when an event's bytes are not one JSON object.
var ErrNotObject = errors.New("event is not a JSON object")

// ErrNotUTF8 is returned for an event that is not UTF-8 (AEP-0001: an event
// is RFC 8259 JSON in UTF-8), or whose core string attributes escape an
// unpaired UTF-16 surrogate. Either would decode lossily (as U+FFFD), so two
// different ids or sessions would read back as one; the event is refused
// instead of being renamed.
var ErrNotUTF8 = errors.New("event is not valid UTF-8")

// ParseEvent decodes one event. It fails when the bytes are not a single JSON
// object or when a core attribute has the wrong JSON type (a string attribute
// that is not a string, seq or epoch that is not an integer, data that is not
// an object, any core attribute that is null) or not UTF-8 (ErrNotUTF8: bytes
// anywhere, or an unpaired surrogate escape in a core string attribute; data
// may escape one, since it is forwarded as bytes). Everything else, including
// grammar and payload rules, is Validate's job. The event keeps b as Raw.
//
// It is the relay's per-event ingest cost, so it reads the bytes once: one
// scan checks the JSON grammar and UTF-8 while it collects the top-level
// members in place, stepping over nested values (data) without allocating.
// A malformed event is reported as the JSON grammar's error first, then as
// bad UTF-8, then as a bad attribute, whichever comes first in the bytes.
func ParseEvent(b []byte) (*Event, error) {
	e := new(Event)
	if err := ParseEventInto(e, b); err != nil {
		return nil, err
	}
	return e, nil
}

// ParseEventInto is ParseEvent into e, which must be a zero Event: a caller
// that keeps the event inside a larger value (the relay's message) allocates
// both at once. On error e holds part of the event and must not be used.
func ParseEventInto(e *Event, b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) == 0 || b[0] != '{' {
		return ErrNotObject
	}
	e.raw = b
	s := scanner{b: b, badUTF8: -1, ev: e}
	if end := s.object(0, 1); end < 0 || end != len(b) {
		var m map[string]json.RawMessage
		err := json.Unmarshal(b, &m) // for its precise message
		if err == nil {
			err = errors.New("trailing data after the event object")
		}
		return fmt.Errorf("event is not valid JSON: %w", err)
	}
	if s.badUTF8 >= 0 {
		return fmt.Errorf("%w: invalid byte sequence at offset %d", ErrNotUTF8, s.badUTF8)
	}
	if s.err != nil {
		return s.err
	}
	s.plainStrings()
	e.multiline = s.newline
	return nil
}

// maxDepth is encoding/json's nesting limit: deeper input is not valid JSON.
const maxDepth = 10000

// scanner checks JSON (RFC 8259, as json.Valid does) and UTF-8 in one pass.
// Every method returns the index just past what it read, or -1 when the
// grammar fails there. Members of the outermost object go to ev until the
// first bad attribute (err) or bad UTF-8 byte, after which it only checks;
// without ev it only checks.
type scanner struct {
	b       []byte
	badUTF8 int // offset of the first byte that is not UTF-8, or -1
	ev      *Event
	err     error
	newline bool // whitespace held a line break
	// plain holds where each string attribute without escapes sits in b
	// (its contents, without the quotes; end 0: not plain or absent):
	// plainStrings copies them all out in one allocation once the scan
	// has succeeded, instead of one allocation per attribute.
	plain [len(coreAttrs)]struct{ start, end int }
}

// plainStrings sets the string attributes recorded in plain. They share
// one backing string, so keeping any of them keeps all of their bytes
// (a few hundred at most; the event's Raw holds them all anyway).
func (s *scanner) plainStrings() {
	n := 0
	for _, p := range s.plain {
		n += p.end - p.start
	}
	var sb strings.Builder
	sb.Grow(n)
	for _, p := range s.plain {
		sb.Write(s.b[p.start:p.end])
	}
	all := sb.String()
	// Through one table of the fields, not stringPtrAt per attribute:
	// this runs for every event.
	ptrs, off := s.ev.stringPtrs(), 0
	for i, p := range s.plain {
		if p.end != 0 { // set only for string attributes
			l := p.end - p.start
			*ptrs[i] = all[off : off+l]
			off += l
		}
	}
}

func (s *scanner) space(i int) int {
	b := s.b
	for ; i < len(b) && b[i] <= ' '; i++ {
		switch b[i] {
		case ' ', '\t':
		case '\n', '\r':
			s.newline = true
		default:
			return i
		}
	}
	return i
}

func (s *scanner) value(i, depth int) int {
	if i >= len(s.b) {
		return -1
	}
	switch c := s.b[i]; {
	case c == '{':
		return s.object(i, depth+1)
	case c == '[':
		return s.array(i, depth+1)
	case c == '"':
		end, _ := s.str(i)
		return end
	case c == 't':
		return s.literal(i, "true")
	case c == 'f':
		return s.literal(i, "false")
	case c == 'n':
		return s.literal(i, "null")
	case c == '-' || c >= '0' && c <= '9':
		return s.number(i)
	}
	return -1
}

// object reads the object at b[i] ('{'), collecting its members when it is
// the outermost one (depth 1).
func (s *scanner) object(i, depth int) int {
	if depth > maxDepth {
		return -1
	}
	b := s.b
	i = s.space(i + 1)
	if i < len(b) && b[i] == '}' {
		return i + 1
	}
	for {
		if i >= len(b) || b[i] != '"' {
			return -1
		}
		kend, esc := s.str(i)
		if kend < 0 {
			return -1
		}
		key := b[i:kend]
		i = s.space(kend)
		if i >= len(b) || b[i] != ':' {
			return -1
		}
		vstart := s.space(i + 1)
		vesc := false
		if depth == 1 && vstart < len(b) && b[vstart] == '"' {
			i, vesc = s.str(vstart) // whether it has escapes, for member
		} else {
			i = s.value(vstart, depth)
		}
		if i < 0 {
			return -1
		}
		if depth == 1 && s.ev != nil && s.err == nil && s.badUTF8 < 0 {
			s.err = s.member(key, esc, vstart, i, vesc)
		}
		i = s.space(i)
		if i >= len(b) {
			return -1
		}
		switch b[i] {
		case '}':
			return i + 1
		case ',':
			i = s.space(i + 1)
		default:
			return -1
		}
	}
}

func (s *scanner) array(i, depth int) int {
	if depth > maxDepth {
		return -1
	}
	b := s.b
	i = s.space(i + 1)
	if i < len(b) && b[i] == ']' {
		return i + 1
	}
	for {
		if i = s.value(i, depth); i < 0 {
			return -1
		}
		i = s.space(i)
		if i >= len(b) {
			return -1
		}
		switch b[i] {
		case ']':
			return i + 1
		case ',':
			i = s.space(i + 1)
		default:
			return -1
		}
	}
}

// str reads the string at b[i] ('"') and reports whether it has escapes.
// Bytes that are not UTF-8 are JSON (json.Valid takes them); the first one
// is noted for ErrNotUTF8.
func (s *scanner) str(i int) (int, bool) {
	b := s.b
	esc := false
	for j := i + 1; j < len(b); {
		// Plain ASCII eight bytes at a time, straight to the first byte
		// that needs a look.
		if j+8 <= len(b) {
			m := special8(binary.LittleEndian.Uint64(b[j:]))
			if m == 0 {
				j += 8
				continue
			}
			j += bits.TrailingZeros64(m) >> 3
		}
		switch c := b[j]; {
		case c == '"':
			return j + 1, esc
		case c == '\\':
			esc = true
			if j+1 >= len(b) {
				return -1, esc
			}
			switch b[j+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				j += 2
			case 'u':
				if j+6 > len(b) || !isHex(b[j+2]) || !isHex(b[j+3]) || !isHex(b[j+4]) || !isHex(b[j+5]) {
					return -1, esc
				}
				j += 6
			default:
				return -1, esc
			}
		case c < 0x20:
			return -1, esc
		case c < utf8.RuneSelf:
			j++
		default:
			r, n := utf8.DecodeRune(b[j:])
			if r == utf8.RuneError && n == 1 && s.badUTF8 < 0 {
				s.badUTF8 = j
			}
			j += n
		}
	}
	return -1, esc
}

// Word-at-a-time masks: a byte of ones and the high bit of every byte.
const (
	ones8  = 0x0101010101010101
	highs8 = 0x8080808080808080
)

// special8 marks (with its high bit) each of the eight bytes of w, read
// little-endian, that str must look at: '"', '\\', a control byte (< 0x20)
// or a non-ASCII one (>= 0x80). A plain byte above a marked one may be
// marked too (a borrow), never a plain byte below the first special one:
// the lowest mark is the first byte to look at, and zero means none.
func special8(w uint64) uint64 {
	// Below 0x20 (w - 0x20 borrows into the high bit of such a byte), a
	// byte equal to '"' or '\\' (a zero byte once xored with it), or a high
	// bit set in w itself.
	return (w | (w - 0x20*ones8) | zeroBytes(w^('"'*ones8)) | zeroBytes(w^('\\'*ones8))) & highs8
}

// zeroBytes has the high bit set in each zero byte of x (and perhaps in a
// byte above one, by the borrow).
func zeroBytes(x uint64) uint64 { return (x - ones8) &^ x }

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

func (s *scanner) literal(i int, lit string) int {
	if len(s.b)-i < len(lit) || string(s.b[i:i+len(lit)]) != lit {
		return -1
	}
	return i + len(lit)
}

// number reads -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?; what follows
// it is the caller's to check.
func (s *scanner) number(i int) int {
	b := s.b
	if b[i] == '-' {
		i++
	}
	switch {
	case i >= len(b):
		return -1
	case b[i] == '0':
		i++
	case b[i] >= '1' && b[i] <= '9':
		i = s.digits(i + 1)
	default:
		return -1
	}
	if i < len(b) && b[i] == '.' {
		if i+1 >= len(b) || !isDigit(b[i+1]) {
			return -1
		}
		i = s.digits(i + 1)
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if i >= len(b) || !isDigit(b[i]) {
			return -1
		}
		i = s.digits(i)
	}
	return i
}

func (s *scanner) digits(i int) int {
	for i < len(s.b) && isDigit(s.b[i]) {
		i++
	}
	return i
}

// member records one top-level member: key is the raw key with its quotes
// (esc when it has escapes), b[vstart:vend] the raw value (vesc: a string
// with escapes). A later duplicate key overrides an earlier one, as
// encoding/json does.
func (s *scanner) member(key []byte, esc bool, vstart, vend int, vesc bool) error {
	e, v := s.ev, s.b[vstart:vend]
	if esc {
		var k string
		if err := json.Unmarshal(key, &k); err != nil {
			return err
		}
		key = []byte(k)
	} else {
		key = key[1 : len(key)-1]
	}
	i := coreIndexBytes(key)
	if i < 0 {
		if e.Ext == nil {
			e.Ext = make(map[string]json.RawMessage)
		}
		e.Ext[string(key)] = v
		return nil
	}
	k := coreAttrs[i]
	if isNull(v) {
		return fmt.Errorf("attribute %q is null: absent attributes are omitted, never null", k)
	}
	e.present |= 1 << uint(i)
	switch i {
	case idxSeq:
		n, err := parseInt(v)
		if err != nil {
			return fmt.Errorf("attribute %q: %w", k, err)
		}
		e.seq, e.Seq = n, &e.seq
	case idxEpoch:
		n, err := parseInt(v)
		if err != nil {
			return fmt.Errorf("attribute %q: %w", k, err)
		}
		e.epoch, e.Epoch = n, &e.epoch
	case idxData:
		if v[0] != '{' {
			return errors.New(`attribute "data" must be an object`)
		}
		e.Data = v
	default:
		if v[0] != '"' {
			return fmt.Errorf("attribute %q must be a string", k)
		}
		// No bad UTF-8 so far (or member would not run): without escapes
		// the contents are the string, which plainStrings sets (over an
		// escaped duplicate's) once the scan is done.
		if !vesc {
			s.plain[i].start, s.plain[i].end = vstart+1, vend-1
			return nil
		}
		if unpairedSurrogate(v) {
			return fmt.Errorf("%w: attribute %q escapes an unpaired UTF-16 surrogate", ErrNotUTF8, k)
		}
		str, ok := jsonString(v)
		if !ok {
			return fmt.Errorf("attribute %q must be a string", k)
		}
		s.plain[i].start, s.plain[i].end = 0, 0
		*e.stringPtrAt(i) = str
	}
	return nil
}

// jsonString decodes a JSON string value, without allocating beyond the
// result when it has no escapes.
func jsonString(v []byte) (string, bool) {
	if len(v) < 2 || v[0] != '"' {
		return "", false
	}
	inner := v[1 : len(v)-1]
	if bytes.IndexByte(inner, '\\') < 0 && utf8.Valid(inner) {
		return string(inner), true
	}
	var s string
	if json.Unmarshal(v, &s) != nil {
		return "", false
	}
	return s, true
}

// unpairedSurrogate reports whether a JSON string literal (valid JSON)
// escapes half of a UTF-16 surrogate pair on its own, as in "\ud800".
func unpairedSurrogate(v []byte) bool {
	for i := 0; i < len(v); i++ {
		if v[i] != '\\' {
			continue
		}
		if v[i+1] != 'u' {
			i++ // a two-byte escape such as \\ or \"
			continue
		}
		r := hex4(v[i+2 : i+6])
		i += 5
		switch {
		case r >= 0xdc00 && r <= 0xdfff:
			return true // a low half with no high half before it
		case r >= 0xd800 && r <= 0xdbff:
			if i+6 >= len(v) || v[i+1] != '\\' || v[i+2] != 'u' {
				return true
			}
			if lo := hex4(v[i+3 : i+7]); lo < 0xdc00 || lo > 0xdfff {
				return true
			}
			i += 6
		}
	}
	return false
}

// hex4 decodes four hex digits (already validated as JSON).
func hex4(h []byte) rune {
	var r rune
	for _, c := range h {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c = c - 'a' + 10
		default:
			c = c - 'A' + 10
		}
		r = r<<4 | rune(c)
	}
	return r
}

func isNull(v json.RawMessage) bool { return len(v) == 4 && string(v) == "null" }

// plainUint reads v when it is 1 to 18 decimal digits and nothing else
// (too few to overflow).
func plainUint(v []byte) (int64, bool) {
	if len(v) == 0 || len(v) > 18 {
		return 0, false
	}
	n := int64(0)
	for _, c := range v {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	return n, true
}

func parseInt(v json.RawMessage) (int64, error) {
	if n, ok := plainUint(v); ok { // the common case, without strconv
		return n, nil
	}
	s := string(v)
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		return n, nil
	}
	// 3.0 and 1e2 are integers in JSON Schema's sense.
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || f != float64(int64(f)) {
		return 0, errors.New("must be an integer")
	}
	return int64(f), nil
}

// MarshalJSON writes the event with core attributes in a fixed order,
// extension attributes sorted by name, and data last. Absent attributes are
// omitted.
func (e *Event) MarshalJSON() ([]byte, error) {
	var buf bytes.Buffer
	buf.Grow(256 + len(e.Data))
	buf.WriteByte('{')
	first := true
	key := func(k string) {
		if !first {
			buf.WriteByte(',')
		}
		first = false
		buf.WriteByte('"')
		buf.WriteString(k)
		buf.WriteString(`":`)
	}
	str := func(k, v string) {
		if v == "" {
			return
		}
		key(k)
		writeJSONString(&buf, v)
	}
	str(AttrAEP, e.AEP)
	str(AttrID, e.ID)
	str(AttrType, e.Type)
	str(AttrSubject, e.Subject)
	str(AttrTime, e.Time)
	str(AttrSource, e.Source)
	str(AttrAgent, e.Agent)
	str(AttrSession, e.Session)
	str(AttrRun, e.Run)
	str(AttrStep, e.Step)
	if e.Seq != nil {
		key(AttrSeq)
		buf.WriteString(strconv.FormatInt(*e.Seq, 10))
	}
	if e.Epoch != nil {
		key(AttrEpoch)
		buf.WriteString(strconv.FormatInt(*e.Epoch, 10))
	}
	str(AttrCause, e.Cause)
	str(AttrTraceparent, e.Traceparent)
	str(AttrSeverity, e.Severity)
	str(AttrCapture, e.Capture)
	if len(e.Ext) > 0 {
		names := make([]string, 0, len(e.Ext))
		for k := range e.Ext {
			names = append(names, k)
		}
		sort.Strings(names)
		for _, k := range names {
			v := e.Ext[k]
			if len(v) == 0 {
				continue
			}
			// Parsed names may be anything (validation reports them); the
			// output must stay JSON whatever they are.
			if !first {
				buf.WriteByte(',')
			}
			first = false
			writeJSONString(&buf, k)
			buf.WriteByte(':')
			buf.Write(compactJSON(v))
		}
	}
	if e.Data != nil {
		key(AttrData)
		buf.Write(compactJSON(e.Data))
	}
	buf.WriteByte('}')
	return buf.Bytes(), nil
}

// Compact returns v without insignificant whitespace (v itself when it
// already is compact or is not JSON), so a serialized value stays one line.
func Compact(v json.RawMessage) []byte { return compactJSON(v) }

// compactJSON strips insignificant whitespace so a serialized event is one
// line; it returns v unchanged when it already is compact or is not JSON.
func compactJSON(v json.RawMessage) []byte {
	if !bytes.ContainsAny(v, " \t\r\n") {
		return v
	}
	var out bytes.Buffer
	if json.Compact(&out, v) != nil {
		return v
	}
	return out.Bytes()
}

// Clone returns a deep copy without the parsed bytes.
func (e *Event) Clone() *Event {
	c := *e
	c.raw = nil
	c.present = 0
	c.multiline = false
	if e.Seq != nil {
		c.seq, c.Seq = *e.Seq, &c.seq
	}
	if e.Epoch != nil {
		c.epoch, c.Epoch = *e.Epoch, &c.epoch
	}
	if e.Ext != nil {
		c.Ext = make(map[string]json.RawMessage, len(e.Ext))
		for k, v := range e.Ext {
			c.Ext[k] = v
		}
	}
	return &c
}

// SetExt sets an extension attribute, refusing (AEP-0001 §5.4) a name that
// collides with a core attribute or is not [a-z0-9]{1,20}, and a value that is
// not a string, integer or boolean.
func (e *Event) SetExt(name string, value any) error {
	if IsCoreAttr(name) {
		return fmt.Errorf("extension attribute %q collides with a core attribute", name)
	}
	if !validExtName(name) {
		return fmt.Errorf("extension attribute name %q must match [a-z0-9]{1,20}", name)
	}
	var raw []byte
	switch v := value.(type) {
	case string:
		var buf bytes.Buffer
		writeJSONString(&buf, v)
		raw = buf.Bytes()
	case bool:
		raw = []byte(strconv.FormatBool(v))
	case int:
		raw = []byte(strconv.Itoa(v))
	case int64:
		raw = []byte(strconv.FormatInt(v, 10))
	default:
		return fmt.Errorf("extension attribute %q must be a string, integer or boolean, not %T", name, value)
	}
	if e.Ext == nil {
		e.Ext = make(map[string]json.RawMessage)
	}
	e.Ext[name] = raw
	e.raw = nil
	return nil
}

// ExtString returns a string extension attribute.
func (e *Event) ExtString(name string) (string, bool) {
	v, ok := e.Ext[name]
	if !ok || len(v) == 0 || v[0] != '"' {
		return "", false
	}
	var s string
	if json.Unmarshal(v, &s) != nil {
		return "", false
	}
	return s, true
}

func validExtName(name string) bool {
	if len(name) < 1 || len(name) > 20 {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

// DataMap decodes data into a generic map (numbers as json.Number), or returns
// nil when data is absent.
func (e *Event) DataMap() (map[string]any, error) {
	if e.Data == nil {
		return nil, nil
	}
	var m map[string]any
	dec := json.NewDecoder(bytes.NewReader(e.Data))
	dec.UseNumber()
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("data: %w", err)
	}
	return m, nil
}

// SetData replaces data with the canonical JSON of m (nil removes it).
func (e *Event) SetData(m map[string]any) error {
	e.raw = nil
	if m == nil {
		e.Data = nil
		return nil
	}
	b, err := Canonical(m)
	if err != nil {
		return err
	}
	e.Data = b
	return nil
}

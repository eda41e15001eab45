package relay

import (
	"strconv"
	"strings"

	"github.com/aep-kimi/aep-kimi/aep"
	"github.com/aep-kimi/aep-kimi/relay/wire"
)

// The index header of a stored event holds, space-separated, what the index
// keeps of it besides its bytes and session (the subject names that):
//
//	<epoch> <seq or -> <severity> <capture> <type> <id> <source>
//
// for example "0 42 notice metadata tool.completed 01JX… kimi-code://host/s1".
// An event whose type, id or source is not printable ASCII without spaces
// gets no header and is parsed on rebuild instead.

// indexValue renders m's index header; ok is false when m's strings cannot
// be carried in one.
func indexValue(m *Message) (string, bool) {
	if !headerWord(m.Type) || !headerWord(m.ID) || !headerWord(m.Source) {
		return "", false
	}
	var b strings.Builder
	b.Grow(48 + len(m.Type) + len(m.ID) + len(m.Source))
	if m.Kind == KindSession {
		b.WriteString(strconv.FormatInt(m.Pos.Epoch, 10))
		b.WriteByte(' ')
		b.WriteString(strconv.FormatInt(m.Pos.Seq, 10))
	} else {
		b.WriteString("0 -")
	}
	for _, w := range [...]string{m.Severity.String(), m.Capture.String(), m.Type, m.ID, m.Source} {
		b.WriteByte(' ')
		b.WriteString(w)
	}
	return b.String(), true
}

// messageFromIndex rebuilds a stored event's Message (without its parsed
// Event, session or store sequence) from its index header and bytes; ok is
// false when the header is absent or malformed.
func messageFromIndex(v string, raw []byte) (*Message, bool) {
	var f [7]string
	for i := range f {
		var w string
		if i < len(f)-1 {
			var found bool
			w, v, found = strings.Cut(v, " ")
			if !found {
				return nil, false
			}
		} else {
			w = v
		}
		if !headerWord(w) {
			return nil, false
		}
		f[i] = w
	}
	sev, err := aep.ParseSeverity(f[2])
	if err != nil {
		return nil, false
	}
	capt, err := aep.ParseCapture(f[3])
	if err != nil {
		return nil, false
	}
	m := &Message{Raw: raw, Type: f[4], ID: f[5], Source: f[6], Severity: sev, Capture: capt}
	switch aep.ScopeOf(m.Type) {
	case aep.ScopeAgent:
		return nil, false // never stored
	case aep.ScopeForeign:
		m.Kind = KindForeign
		if f[1] != "-" {
			return nil, false
		}
	default:
		m.Kind = KindSession
		if f[1] == "-" {
			break // a positionless session event (tolerated by admission)
		}
		epoch, err1 := strconv.ParseInt(f[0], 10, 64)
		seq, err2 := strconv.ParseInt(f[1], 10, 64)
		if err1 != nil || err2 != nil || epoch < 0 || seq < 0 {
			return nil, false
		}
		m.Pos = wire.Position{Epoch: epoch, Seq: seq}
	}
	return m, true
}

// headerWord reports whether s is non-empty printable ASCII without spaces:
// safe in a NATS header value and unambiguous between separators.
func headerWord(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c <= ' ' || c >= 0x7f {
			return false
		}
	}
	return true
}

package aep

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/oklog/ulid/v2"
)

// NewID returns a new ULID (time-sortable, monotonic within a millisecond in
// one process), the RECOMMENDED event id form.
func NewID() string { return ulid.Make().String() }

// TimeLayout is RFC 3339 in UTC with milliseconds, the form every event this
// project mints carries.
const TimeLayout = "2006-01-02T15:04:05.000Z"

// FormatTime renders t as an event time.
func FormatTime(t time.Time) string { return t.UTC().Format(TimeLayout) }

// ValidTime reports whether s is an RFC 3339 date-time with a zone, as
// time.Parse with time.RFC3339Nano reads one.
func ValidTime(s string) bool {
	// Every event has a time: the common form is checked by hand, and only
	// what that check does not take goes to time.Parse, which takes a few
	// more forms (a comma before the fraction, a zone hour of 24).
	if plainTime(s) {
		return true
	}
	_, err := time.Parse(time.RFC3339Nano, s)
	return err == nil
}

// plainTime reports whether s is YYYY-MM-DDTHH:MM:SS, an optional fraction
// of one or more digits after a dot, then Z or ±HH:MM, every field in
// range: a subset of what time.Parse takes for time.RFC3339Nano.
func plainTime(s string) bool {
	const date = len("2006-01-02T15:04:05")
	if len(s) < date+1 || s[4] != '-' || s[7] != '-' || s[10] != 'T' || s[13] != ':' || s[16] != ':' {
		return false
	}
	year, ok1 := decimal(s[0:4], 0, 9999)
	month, ok2 := decimal(s[5:7], 1, 12)
	day, ok3 := decimal(s[8:10], 1, 31)
	_, ok4 := decimal(s[11:13], 0, 23)
	_, ok5 := decimal(s[14:16], 0, 59)
	_, ok6 := decimal(s[17:19], 0, 59)
	if !(ok1 && ok2 && ok3 && ok4 && ok5 && ok6) || day > daysIn(month, year) {
		return false
	}
	rest := s[date:]
	if len(rest) >= 2 && rest[0] == '.' && isDigit(rest[1]) {
		n := 2
		for n < len(rest) && isDigit(rest[n]) {
			n++
		}
		rest = rest[n:]
	}
	if rest == "Z" {
		return true
	}
	if len(rest) != len("+07:00") || rest[0] != '+' && rest[0] != '-' || rest[3] != ':' {
		return false
	}
	_, ok1 = decimal(rest[1:3], 0, 23)
	_, ok2 = decimal(rest[4:6], 0, 59)
	return ok1 && ok2
}

// decimal reads s, all ASCII digits, as a number in [lo, hi].
func decimal(s string, lo, hi int) (int, bool) {
	n := 0
	for i := 0; i < len(s); i++ {
		if !isDigit(s[i]) {
			return 0, false
		}
		n = n*10 + int(s[i]-'0')
	}
	return n, lo <= n && n <= hi
}

// daysIn is the length of month in year, by the Gregorian calendar.
func daysIn(month, year int) int {
	switch month {
	case 2:
		if year%4 == 0 && (year%100 != 0 || year%400 == 0) {
			return 29
		}
		return 28
	case 4, 6, 9, 11:
		return 30
	}
	return 31
}

// Canonical returns the canonical JSON of v: object keys sorted by code point,
// no insignificant whitespace, strings escaped the way JSON.stringify does
// (no HTML escaping), numbers in their shortest round-trip form. v may be any
// value encoding/json can marshal; json.RawMessage is re-canonicalized.
func Canonical(v any) ([]byte, error) {
	var buf bytes.Buffer
	if err := writeCanonical(&buf, v); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// CanonicalRaw canonicalizes JSON text.
func CanonicalRaw(b []byte) ([]byte, error) {
	v, err := decodeGeneric(b)
	if err != nil {
		return nil, err
	}
	return Canonical(v)
}

// Digest returns the AEP digest of v: hex of the first 16 bytes of SHA-256
// over its canonical JSON (AEP-0003 §9.3). Compute it over the original value,
// before any redaction.
func Digest(v any) (string, error) {
	b, err := Canonical(v)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:16]), nil
}

func decodeGeneric(b []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, fmt.Errorf("trailing data after JSON value")
	}
	return v, nil
}

func writeCanonical(buf *bytes.Buffer, v any) error {
	switch x := v.(type) {
	case nil:
		buf.WriteString("null")
	case bool:
		buf.WriteString(strconv.FormatBool(x))
	case string:
		writeJSONString(buf, x)
	case json.Number:
		return writeNumberLiteral(buf, string(x))
	case float64:
		return writeFloat(buf, x)
	case float32:
		return writeFloat(buf, float64(x))
	case int:
		buf.WriteString(strconv.Itoa(x))
	case int64:
		buf.WriteString(strconv.FormatInt(x, 10))
	case int32:
		buf.WriteString(strconv.FormatInt(int64(x), 10))
	case uint64:
		buf.WriteString(strconv.FormatUint(x, 10))
	case json.RawMessage:
		g, err := decodeGeneric(x)
		if err != nil {
			return err
		}
		return writeCanonical(buf, g)
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		buf.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				buf.WriteByte(',')
			}
			writeJSONString(buf, k)
			buf.WriteByte(':')
			if err := writeCanonical(buf, x[k]); err != nil {
				return err
			}
		}
		buf.WriteByte('}')
	case []any:
		buf.WriteByte('[')
		for i, e := range x {
			if i > 0 {
				buf.WriteByte(',')
			}
			if err := writeCanonical(buf, e); err != nil {
				return err
			}
		}
		buf.WriteByte(']')
	case []string:
		buf.WriteByte('[')
		for i, e := range x {
			if i > 0 {
				buf.WriteByte(',')
			}
			writeJSONString(buf, e)
		}
		buf.WriteByte(']')
	case []map[string]any:
		buf.WriteByte('[')
		for i, e := range x {
			if i > 0 {
				buf.WriteByte(',')
			}
			if err := writeCanonical(buf, e); err != nil {
				return err
			}
		}
		buf.WriteByte(']')
	default:
		// Anything else (structs, typed maps): through encoding/json once.
		b, err := json.Marshal(x)
		if err != nil {
			return err
		}
		g, err := decodeGeneric(b)
		if err != nil {
			return err
		}
		return writeCanonical(buf, g)
	}
	return nil
}

// writeNumberLiteral keeps integer literals exact and renders other numbers in
// the shortest form JavaScript would, so digests agree with other runtimes.
func writeNumberLiteral(buf *bytes.Buffer, s string) error {
	if s == "" {
		return fmt.Errorf("empty number")
	}
	if !strings.ContainsAny(s, ".eE") {
		if _, err := strconv.ParseInt(s, 10, 64); err == nil {
			buf.WriteString(s)
			return nil
		}
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return fmt.Errorf("bad number %q", s)
	}
	return writeFloat(buf, f)
}

func writeFloat(buf *bytes.Buffer, f float64) error {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return fmt.Errorf("number %v has no JSON form", f)
	}
	if f == math.Trunc(f) && math.Abs(f) < 1e21 {
		buf.WriteString(strconv.FormatFloat(f, 'f', -1, 64))
		return nil
	}
	abs := math.Abs(f)
	if abs >= 1e-6 && abs < 1e21 {
		buf.WriteString(strconv.FormatFloat(f, 'f', -1, 64))
		return nil
	}
	s := strconv.FormatFloat(f, 'e', -1, 64)
	// JavaScript writes 1e-7 and 1e+21 where Go writes 1e-07 and 1e+21.
	if i := strings.IndexByte(s, 'e'); i >= 0 {
		mant, exp := s[:i], s[i+1:]
		sign := exp[0]
		digits := strings.TrimLeft(exp[1:], "0")
		if digits == "" {
			digits = "0"
		}
		s = mant + "e" + string(sign) + digits
	}
	buf.WriteString(s)
	return nil
}

const hexDigits = "0123456789abcdef"

// writeJSONString escapes s as JSON.stringify does: quote, backslash and
// control characters only; everything else (including <, >, & and non-ASCII)
// verbatim. Invalid UTF-8 becomes U+FFFD.
func writeJSONString(buf *bytes.Buffer, s string) {
	buf.WriteByte('"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			buf.WriteString(s[start:i])
			switch c {
			case '"':
				buf.WriteString(`\"`)
			case '\\':
				buf.WriteString(`\\`)
			case '\n':
				buf.WriteString(`\n`)
			case '\r':
				buf.WriteString(`\r`)
			case '\t':
				buf.WriteString(`\t`)
			case '\b':
				buf.WriteString(`\b`)
			case '\f':
				buf.WriteString(`\f`)
			default:
				buf.WriteString(`\u00`)
				buf.WriteByte(hexDigits[c>>4])
				buf.WriteByte(hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			buf.WriteString(s[start:i])
			buf.WriteString("\ufffd")
			i += size
			start = i
			continue
		}
		i += size
	}
	buf.WriteString(s[start:])
	buf.WriteByte('"')
}

// Quote returns s as a JSON string literal (JSON.stringify escaping).
func Quote(s string) string {
	var buf bytes.Buffer
	writeJSONString(&buf, s)
	return buf.String()
}

// SourceURI builds the RECOMMENDED source form
// aep://{host}/agent/{agent}/session/{session}, escaping each part so any
// session string yields a valid URI.
func SourceURI(host, agent, session string) string {
	return AgentSourceURI(host, agent) + "/session/" + url.PathEscape(session)
}

// AgentSourceURI is the source of an agent's own events, the ones about no
// session (agent.*): aep://{host}/agent/{agent}.
func AgentSourceURI(host, agent string) string {
	if host == "" {
		host = "localhost"
	}
	return "aep://" + url.PathEscape(host) + "/agent/" + url.PathEscape(agent)
}

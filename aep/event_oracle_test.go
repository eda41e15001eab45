package aep

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math/bits"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzParseEventOracle checks the one-pass ParseEvent against the two-pass
// parser it replaced: the same events accepted (exactly those that are valid
// JSON, UTF-8 and an object, and whose attributes the old path took), with the
// same fields, and the same error otherwise.
func FuzzParseEventOracle(f *testing.F) {
	f.Add(benchLine)
	f.Fuzz(func(t *testing.T, b []byte) { checkAgainstOracle(t, b) })
}

// The scanner recurses per nesting level; encoding/json stops at 10,000.
func TestParseEventNestingLimit(t *testing.T) {
	t.Parallel()
	for _, depth := range []int{9998, 9999, 10000, 10001} {
		for _, open := range []string{"[", `{"a":`} {
			close := "]"
			if open != "[" {
				close = "}"
			}
			ev := `{"id":"x","data":{"v":` + strings.Repeat(open, depth-2) + "1" + strings.Repeat(close, depth-2) + "}}"
			checkAgainstOracle(t, []byte(ev))
		}
	}
}

func checkAgainstOracle(t *testing.T, b []byte) {
	t.Helper()
	got, err := ParseEvent(b)
	want, werr := parseEventOracle(b)
	tb := bytes.TrimSpace(b)
	gate := len(tb) > 0 && tb[0] == '{' && json.Valid(tb) && utf8.Valid(tb)
	if (err == nil) != (gate && werr == nil) {
		t.Fatalf("%q: accepted %v (err %v), oracle %v (err %v, gate %v)", b, err == nil, err, werr == nil, werr, gate)
	}
	if err != nil {
		if err.Error() != werr.Error() {
			t.Fatalf("%q: error %q, oracle %q", b, err, werr)
		}
		for _, class := range []error{ErrNotObject, ErrNotUTF8} {
			if errors.Is(err, class) != errors.Is(werr, class) {
				t.Fatalf("%q: error %v, oracle %v: class %v differs", b, err, werr, class)
			}
		}
		return
	}
	if g, w := eventValue(got), eventValue(want); !reflect.DeepEqual(g, w) {
		t.Fatalf("%q: parsed\n%+v\noracle\n%+v", b, g, w)
	}
}

// eventValue is e with Seq and Epoch compared by value: ParseEvent keeps
// them inside the Event, the oracle apart, and DeepEqual would also compare
// the storage ParseEvent leaves behind.
func eventValue(e *Event) Event {
	c := *e
	c.seq, c.epoch = 0, 0
	return c
}

// parseEventOracle is ParseEvent as it was before the one-pass scanner:
// json.Valid, then utf8.Valid, then a walk over the members. It is kept here
// only as the differential fuzz test's oracle.
func parseEventOracle(b []byte) (*Event, error) {
	b = bytes.TrimSpace(b)
	if len(b) == 0 || b[0] != '{' {
		return nil, ErrNotObject
	}
	if !json.Valid(b) {
		var m map[string]json.RawMessage
		err := json.Unmarshal(b, &m) // for its precise message
		if err == nil {
			err = errors.New("trailing data after the event object")
		}
		return nil, fmt.Errorf("event is not valid JSON: %w", err)
	}
	if !utf8.Valid(b) {
		return nil, fmt.Errorf("%w: invalid byte sequence at offset %d", ErrNotUTF8, invalidUTF8At(b))
	}
	e := &Event{raw: b, multiline: bytes.ContainsAny(b, "\r\n")}
	err := eachMember(b, func(key, v []byte) error {
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
		switch k {
		case AttrSeq, AttrEpoch:
			n, err := parseInt(v)
			if err != nil {
				return fmt.Errorf("attribute %q: %w", k, err)
			}
			if k == AttrSeq {
				e.Seq = &n
			} else {
				e.Epoch = &n
			}
		case AttrData:
			if v[0] != '{' {
				return errors.New(`attribute "data" must be an object`)
			}
			e.Data = v
		default:
			str, ok := jsonString(v)
			if !ok {
				return fmt.Errorf("attribute %q must be a string", k)
			}
			if bytes.IndexByte(v, '\\') >= 0 && unpairedSurrogate(v) {
				return fmt.Errorf("%w: attribute %q escapes an unpaired UTF-16 surrogate", ErrNotUTF8, k)
			}
			*e.stringPtr(k) = str
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return e, nil
}

// eachMember calls fn with each top-level member of a JSON object already
// known to be valid: the decoded key and the raw value. A later duplicate key
// overrides an earlier one, as encoding/json does.
func eachMember(b []byte, fn func(key, val []byte) error) error {
	i := skipSpace(b, 1)
	for i < len(b) && b[i] != '}' {
		kend := stringEnd(b, i)
		key := b[i+1 : kend-1]
		if bytes.IndexByte(key, '\\') >= 0 {
			var s string
			if err := json.Unmarshal(b[i:kend], &s); err != nil {
				return err
			}
			key = []byte(s)
		}
		i = skipSpace(b, kend)
		i = skipSpace(b, i+1) // the colon
		vend := valueEnd(b, i)
		if err := fn(key, b[i:vend]); err != nil {
			return err
		}
		i = skipSpace(b, vend)
		if i < len(b) && b[i] == ',' {
			i = skipSpace(b, i+1)
		}
	}
	return nil
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// stringEnd returns the index just past the string starting at b[i] ('"').
func stringEnd(b []byte, i int) int {
	for j := i + 1; j < len(b); j++ {
		switch b[j] {
		case '\\':
			j++
		case '"':
			return j + 1
		}
	}
	return len(b)
}

// valueEnd returns the index just past the value starting at b[i].
func valueEnd(b []byte, i int) int {
	switch b[i] {
	case '"':
		return stringEnd(b, i)
	case '{', '[':
		depth := 0
		for j := i; j < len(b); j++ {
			switch b[j] {
			case '"':
				j = stringEnd(b, j) - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return j + 1
				}
			}
		}
		return len(b)
	}
	j := i
	for j < len(b) && b[j] != ',' && b[j] != '}' && b[j] != ']' && b[j] != ' ' && b[j] != '\t' && b[j] != '\n' && b[j] != '\r' {
		j++
	}
	return j
}

// invalidUTF8At returns the offset of the first byte that is not part of a
// valid UTF-8 sequence.
func invalidUTF8At(b []byte) int {
	for i := 0; i < len(b); {
		r, n := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && n == 1 {
			return i
		}
		i += n
	}
	return len(b)
}

// special8's lowest mark must be the first byte the string loop must look
// at: each byte value at each position among plain ones, and random words
// (where it may also mark plain bytes above a special one).
func TestSpecial8(t *testing.T) {
	t.Parallel()
	special := func(c byte) bool { return c == '"' || c == '\\' || c < 0x20 || c >= 0x80 }
	for pos := range 8 {
		for c := range 256 {
			w := []byte("abcdefgh")
			w[pos] = byte(c)
			want := uint64(0)
			if special(byte(c)) {
				want = 0x80 << (8 * pos)
			}
			if got := special8(binary.LittleEndian.Uint64(w)); got != want {
				t.Fatalf("%q: special8 %#x, want %#x", w, got, want)
			}
		}
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 1_000_000 {
		var b [8]byte
		for i := range b {
			b[i] = byte(0x20 + r.IntN(0x60)) // mostly plain, like strings
			if r.IntN(8) == 0 {
				b[i] = byte(r.IntN(256))
			}
		}
		first := 8
		for i, c := range b {
			if special(c) {
				first = i
				break
			}
		}
		m := special8(binary.LittleEndian.Uint64(b[:]))
		if got := bits.TrailingZeros64(m) / 8; got != first {
			t.Fatalf("%q: special8 %#x marks byte %d first, want %d", b, m, got, first)
		}
	}
}

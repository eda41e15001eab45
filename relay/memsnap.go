package relay

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/aep-kimi/aep-kimi/aep"
	"github.com/aep-kimi/aep-kimi/relay/wire"
)

// The memory index's snapshot: what a MemoryBackend writes of itself into a
// durable store's snapshot file (jssnap.go, which frames it with the
// stream's state and a checksum) and reads back, in its own terms: its
// limits, then every session's entries with their store sequences,
// positions and bytes. Only the index writes and reads its fields.

type snapEncoder struct {
	w   *bufio.Writer
	buf [binary.MaxVarintLen64]byte
	err error
}

func (e *snapEncoder) uint(v uint64) {
	if e.err == nil {
		_, e.err = e.w.Write(binary.AppendUvarint(e.buf[:0], v))
	}
}

func (e *snapEncoder) int(v int64) {
	if e.err == nil {
		_, e.err = e.w.Write(binary.AppendVarint(e.buf[:0], v))
	}
}

func (e *snapEncoder) bytes(b []byte) {
	e.uint(uint64(len(b)))
	if e.err == nil {
		_, e.err = e.w.Write(b)
	}
}

func (e *snapEncoder) str(s string) {
	e.uint(uint64(len(s)))
	if e.err == nil {
		_, e.err = e.w.WriteString(s)
	}
}

// ref writes a type or source as its place in the session's table (from
// 1), or as 0 and the string when the table does not hold it.
func (e *snapEncoder) ref(s *history, i uint16, v string) {
	if i == noIntern || int(i) >= len(s.strs) {
		e.uint(0)
		e.str(v)
		return
	}
	e.uint(uint64(i) + 1)
}

func (e *snapEncoder) session(s *history) {
	e.str(s.name)
	e.int(s.trimmedMax.Epoch)
	e.int(s.trimmedMax.Seq)
	e.uint(s.maxGseq)
	e.int(s.lastWrite.UnixNano())
	e.uint(uint64(len(s.strs)))
	for _, v := range s.strs {
		e.str(v)
	}
	e.uint(uint64(s.n))
	for ci, c := range s.chunks {
		lo := 0
		if ci == 0 {
			lo = s.head
		}
		for i := lo; i < len(c.ents); i++ {
			en := &c.ents[i]
			typ, src, id := s.entryStrings(en)
			e.uint(en.gseq)
			e.int(en.pos.Epoch)
			e.int(en.pos.Seq)
			flags := uint64(0)
			if en.foreign {
				flags = 1
			}
			e.uint(flags)
			e.uint(uint64(en.sev))
			e.uint(uint64(en.capt))
			e.ref(s, en.typ, typ)
			e.ref(s, en.src, src)
			e.str(id)
			e.bytes(en.raw)
		}
	}
}

// entryStrings are an entry's type, source and id: the first two from the
// session's table when interned, the id read from its bytes (parsing them
// whole only when a quick look cannot tell).
func (s *history) entryStrings(e *entry) (typ, src, id string) {
	id, ok := topLevelString(e.raw, "id")
	if ok && e.typ != noIntern && e.src != noIntern {
		return s.strs[e.typ], s.strs[e.src], id
	}
	ev, err := aep.ParseEvent(e.raw)
	if err != nil {
		return s.strAt(e.typ), s.strAt(e.src), id
	}
	return ev.Type, ev.Source, ev.ID
}

// topLevelString returns the value of key in the JSON object raw when it
// is a string without escapes; ok is false otherwise (or for JSON it
// cannot read), and the caller parses raw whole.
func topLevelString(raw []byte, key string) (string, bool) {
	i := skipSpace(raw, 0)
	if i >= len(raw) || raw[i] != '{' {
		return "", false
	}
	i++
	for {
		i = skipSpace(raw, i)
		if i >= len(raw) || raw[i] != '"' {
			return "", false
		}
		end := stringEnd(raw, i)
		if end < 0 {
			return "", false
		}
		k := raw[i+1 : end-1]
		i = skipSpace(raw, end)
		if i >= len(raw) || raw[i] != ':' {
			return "", false
		}
		i = skipSpace(raw, i+1)
		if string(k) == key {
			if i >= len(raw) || raw[i] != '"' {
				return "", false
			}
			end := stringEnd(raw, i)
			if end < 0 {
				return "", false
			}
			v := raw[i+1 : end-1]
			for _, c := range v {
				if c == '\\' {
					return "", false
				}
			}
			return string(v), true
		}
		if i = valueEnd(raw, i); i < 0 {
			return "", false
		}
		i = skipSpace(raw, i)
		if i >= len(raw) || raw[i] != ',' {
			return "", false // the key is not there
		}
		i++
	}
}

func skipSpace(raw []byte, i int) int {
	for i < len(raw) && (raw[i] == ' ' || raw[i] == '\t' || raw[i] == '\n' || raw[i] == '\r') {
		i++
	}
	return i
}

// stringEnd is the index after the string starting at raw[i] ('"'), or -1.
func stringEnd(raw []byte, i int) int {
	for j := i + 1; j < len(raw); j++ {
		switch raw[j] {
		case '\\':
			j++
		case '"':
			return j + 1
		}
	}
	return -1
}

// valueEnd is the index after the value starting at raw[i], or -1.
func valueEnd(raw []byte, i int) int {
	if i >= len(raw) {
		return -1
	}
	if raw[i] == '"' {
		return stringEnd(raw, i)
	}
	depth := 0
	for j := i; j < len(raw); j++ {
		switch c := raw[j]; c {
		case '"':
			if j = stringEnd(raw, j); j < 0 {
				return -1
			}
			j--
		case '{', '[':
			depth++
		case '}', ']':
			if depth == 0 {
				return j
			}
			depth--
			if depth == 0 {
				return j + 1
			}
		case ',':
			if depth == 0 {
				return j
			}
		}
	}
	return -1
}

// errSnapshot marks a snapshot that cannot be used.
var errSnapshot = errors.New("index snapshot unusable")

// writeIndex writes b's limits and everything it holds, session by
// session in eviction order, each session's types and sources once in a
// table its entries refer to.
func (b *MemoryBackend) writeIndex(e *snapEncoder) {
	b.mu.Lock()
	defer b.mu.Unlock()
	e.int(int64(b.depth))
	e.int(int64(b.maxSessions))
	e.int(b.maxBytes)
	e.uint(uint64(len(b.sessions)))
	for s := b.oldest; s != nil; s = s.next {
		e.session(s)
	}
}

// readIndex restores into b, which must be empty, what writeIndex wrote
// with b's limits, then runs check (the caller's: that the rest of its
// file reads back whole), under b's lock throughout. On any error b is
// left empty again.
func (b *MemoryBackend) readIndex(d *snapDecoder, check func() error) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	err := b.restore(d)
	if err == nil {
		err = check()
	}
	if err != nil {
		b.resetLocked()
	}
	return err
}

func (b *MemoryBackend) restore(d *snapDecoder) error {
	depth, maxSessions, maxBytes := int(d.int()), int(d.int()), d.int()
	if d.err != nil {
		return d.err
	}
	if depth != b.depth || maxSessions != b.maxSessions || maxBytes != b.maxBytes {
		return fmt.Errorf("%w: taken with limits %d/%d/%d; the store has %d/%d/%d",
			errSnapshot, depth, maxSessions, maxBytes, b.depth, b.maxSessions, b.maxBytes)
	}
	sessions := d.uint()
	for i := uint64(0); i < sessions && d.err == nil; i++ {
		b.restoreSession(d)
	}
	return d.err
}

// restoreSession appends one session, as the newest, with its entries in
// their held order.
func (b *MemoryBackend) restoreSession(d *snapDecoder) {
	name := d.str()
	if d.err != nil {
		return
	}
	if _, dup := b.sessions[name]; dup || len(b.sessions) >= b.maxSessions {
		d.fail("session %q twice or past the cap", name)
		return
	}
	s := b.newSession(name, 0)
	s.trimmedMax = wire.Position{Epoch: d.int(), Seq: d.int()}
	s.maxGseq = d.uint()
	s.lastWrite = time.Unix(0, d.int())
	strs := d.uint()
	if strs > maxInterned {
		d.fail("session %q has a table of %d strings", name, strs)
		return
	}
	table := make([]uint16, 0, strs)
	for range strs {
		table = append(table, d.interned(s))
	}
	n := d.uint()
	if n > uint64(b.depth) {
		d.fail("session %q holds %d entries, past the depth", name, n)
		return
	}
	s.ids = make(map[uint64]struct{}, n)
	for range n {
		e := entry{gseq: d.uint(), pos: wire.Position{Epoch: d.int(), Seq: d.int()}}
		e.foreign = d.uint() == 1
		e.sev, e.capt = aep.Severity(d.uint()), aep.Capture(d.uint())
		typ, src := d.ref(s, table), d.ref(s, table)
		e.typ, e.src = typ, src
		id := d.bytes()
		if d.err != nil {
			return
		}
		e.hash = b.keyHashBytes(s.strAt(src), id)
		e.raw = d.into(s)
		if d.err != nil {
			return
		}
		if s.n > 0 && e.pos.Less(s.lastPos()) {
			d.fail("session %q out of order", name)
			return
		}
		b.hold(s, e) // in order: appended
	}
}

// strAt is the interned string i (empty for noIntern).
func (s *history) strAt(i uint16) string {
	if i == noIntern || int(i) >= len(s.strs) {
		return ""
	}
	return s.strs[i]
}

// keyHashBytes is keyHash over an id in bytes.
func (b *MemoryBackend) keyHashBytes(source string, id []byte) uint64 {
	return b.keyHash(source, string(id))
}

// resetLocked empties b. The caller holds b.mu.
func (b *MemoryBackend) resetLocked() {
	b.sessions = make(map[string]*history)
	b.oldest, b.newest = nil, nil
	b.events, b.bytes = 0, 0
}

type snapDecoder struct {
	r   *bufio.Reader
	err error
	buf []byte
}

func (d *snapDecoder) fail(format string, args ...any) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: "+format, append([]any{errSnapshot}, args...)...)
	}
}

func (d *snapDecoder) uint() uint64 {
	if d.err != nil {
		return 0
	}
	v, err := binary.ReadUvarint(d.r)
	if err != nil {
		d.fail("%v", err)
	}
	return v
}

func (d *snapDecoder) int() int64 {
	if d.err != nil {
		return 0
	}
	v, err := binary.ReadVarint(d.r)
	if err != nil {
		d.fail("%v", err)
	}
	return v
}

// length reads a length no larger than the largest event.
func (d *snapDecoder) length() int {
	n := d.uint()
	if n > MaxJetStreamEvent {
		d.fail("a length of %d", n)
		return 0
	}
	return int(n)
}

// bytes reads a length-prefixed field into a buffer reused by the next call.
func (d *snapDecoder) bytes() []byte {
	n := d.length()
	if d.err != nil {
		return nil
	}
	if cap(d.buf) < n {
		d.buf = make([]byte, n)
	}
	d.buf = d.buf[:n]
	if _, err := io.ReadFull(d.r, d.buf); err != nil {
		d.fail("%v", err)
	}
	return d.buf
}

func (d *snapDecoder) str() string { return string(d.bytes()) }

// interned reads a string into s's table.
func (d *snapDecoder) interned(s *history) uint16 {
	v := d.bytes()
	if d.err != nil {
		return noIntern
	}
	if i, ok := s.strIndex[string(v)]; ok {
		return i
	}
	return s.intern(string(v))
}

// ref reads what snapEncoder.ref wrote.
func (d *snapDecoder) ref(s *history, table []uint16) uint16 {
	i := d.uint()
	switch {
	case d.err != nil:
		return noIntern
	case i == 0:
		return d.interned(s)
	case i > uint64(len(table)):
		d.fail("string %d of a table of %d", i, len(table))
		return noIntern
	}
	return table[i-1]
}

// into reads an event's bytes straight into s's arena.
func (d *snapDecoder) into(s *history) []byte {
	n := d.length()
	if d.err != nil {
		return nil
	}
	if cap(s.arena)-len(s.arena) < n {
		s.arena = make([]byte, 0, max(min(2*cap(s.arena), maxArena), minArena, n))
	}
	off := len(s.arena)
	s.arena = s.arena[:off+n]
	if _, err := io.ReadFull(d.r, s.arena[off:]); err != nil {
		d.fail("%v", err)
		s.arena = s.arena[:off]
		return nil
	}
	return s.arena[off : off+n : off+n]
}

package consumer

import (
	"io"
	"strings"
	"unicode/utf8"
)

// Event data is written by agents and, through them, by models: a prompt
// injection can put terminal control sequences into a tool command, a title
// or a prompt. Printed raw they rewrite the operator's screen (ESC [ 2K,
// ESC [ 1A), set the clipboard (ESC ] 52), or reorder what a line seems to
// say (bidi overrides). Everything printed from event data goes through
// Line or Text; commands also wrap their output in a Writer.

// unsafeRune reports whether r must not reach a terminal as itself: C0 and
// DEL, the C1 controls (U+009B is a one-byte CSI), and the bidi embedding,
// override, isolate and mark characters.
func unsafeRune(r rune) bool {
	switch {
	case r < 0x20, r == 0x7f, r >= 0x80 && r <= 0x9f:
		return true
	case r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069:
		return true
	case r == 0x200e, r == 0x200f, r == 0x061c:
		return true
	}
	return false
}

// Line returns s safe to print as part of one line: every control character
// but tab (newlines included), every bidi control and every byte of invalid
// UTF-8 shown escaped. Text without any is returned unchanged, and
// Line(Line(s)) == Line(s).
func Line(s string) string { return sanitize(s, false) }

// Text is Line for text that may span lines: newlines are kept.
func Text(s string) string { return sanitize(s, true) }

func sanitize(s string, keepNewline bool) string {
	i := firstUnsafe(s, keepNewline)
	if i < 0 {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 16)
	b.WriteString(s[:i])
	for i < len(s) {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			writeEscape(&b, 'x', rune(s[i]), 2)
		case !kept(r, keepNewline) && unsafeRune(r):
			writeRuneEscape(&b, r)
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

// kept says whether a control character passes: tab always, newline in
// multi-line text.
func kept(r rune, keepNewline bool) bool {
	return r == '\t' || keepNewline && r == '\n'
}

// firstUnsafe is the byte offset of the first character to escape, or -1.
// Plain ASCII, the common case, is checked without decoding.
func firstUnsafe(s string, keepNewline bool) int {
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x20 && c < 0x7f {
			i++
			continue
		}
		if c < utf8.RuneSelf {
			if !kept(rune(c), keepNewline) {
				return i
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 || unsafeRune(r) {
			return i
		}
		i += size
	}
	return -1
}

// writeRuneEscape writes r visibly: C0 as \xHH, the rest as \uHHHH. DEL,
// C1 and the bidi controls take the \u form because that is also a valid
// JSON string escape: a JSON document (map's output, an export) that
// carries one raw stays valid JSON, meaning the same, once escaped.
// Raw C0 and invalid UTF-8 never occur in JSON an encoder wrote.
func writeRuneEscape(b *strings.Builder, r rune) {
	if r < 0x20 {
		writeEscape(b, 'x', r, 2)
		return
	}
	writeEscape(b, 'u', r, 4)
}

func writeEscape(b *strings.Builder, kind byte, r rune, digits int) {
	const hex = "0123456789abcdef"
	b.WriteByte('\\')
	b.WriteByte(kind)
	for shift := 4 * (digits - 1); shift >= 0; shift -= 4 {
		b.WriteByte(hex[(r>>shift)&0xf])
	}
}

// Writer passes everything written through Text, so a command's whole
// output is safe whatever a message quotes. Each Write is sanitized on its
// own: a rune split across two writes is shown escaped, never passed raw.
// Colour codes a caller means to send must go to Unwrap's writer, after the
// text they colour went through Line.
type Writer struct {
	w io.Writer
}

// NewWriter wraps w; wrapping a Writer again returns it unchanged.
func NewWriter(w io.Writer) *Writer {
	if sw, ok := w.(*Writer); ok {
		return sw
	}
	return &Writer{w: w}
}

// Write writes Text(p) and reports all of p as written.
func (w *Writer) Write(p []byte) (int, error) {
	s := string(p)
	if firstUnsafe(s, true) < 0 {
		return w.w.Write(p)
	}
	if _, err := io.WriteString(w.w, Text(s)); err != nil {
		return 0, err
	}
	return len(p), nil
}

// Unwrap returns the writer underneath, for output that is already safe
// and carries the caller's own control sequences (colour).
func (w *Writer) Unwrap() io.Writer { return w.w }

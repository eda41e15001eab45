package consumer

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// displayWidth is how many terminal columns s takes: wide East Asian
// characters and emoji two, combining marks none, the colour codes a
// Printer adds none.
func displayWidth(s string) int {
	n := 0
	for i := 0; i < len(s); {
		if l := escapeLen(s[i:]); l > 0 {
			i += l
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		n += runeWidth(r)
		i += size
	}
	return n
}

// clipDisplay cuts s to at most n columns, ending in "…" when cut, and
// resets colour if it cut inside a coloured span (n <= 0: no limit).
func clipDisplay(s string, n int) string {
	if n <= 0 || displayWidth(s) <= n {
		return s
	}
	var b strings.Builder
	w, coloured := 0, false
	for i := 0; i < len(s); {
		if l := escapeLen(s[i:]); l > 0 {
			b.WriteString(s[i : i+l])
			coloured = s[i:i+l] != ansiReset
			i += l
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		rw := runeWidth(r)
		if w+rw > n-1 {
			break
		}
		b.WriteString(s[i : i+size])
		w += rw
		i += size
	}
	b.WriteString("…")
	if coloured {
		b.WriteString(ansiReset)
	}
	return b.String()
}

// padDisplay pads s with blanks to n columns.
func padDisplay(s string, n int) string {
	if w := displayWidth(s); w < n {
		return s + strings.Repeat(" ", n-w)
	}
	return s
}

// escapeLen is the length of the colour code s starts with (0: none). Only
// a Printer's own codes are ever in a line: Line escaped every other one.
func escapeLen(s string) int {
	if !strings.HasPrefix(s, "\x1b[") {
		return 0
	}
	if i := strings.IndexByte(s, 'm'); i > 0 {
		return i + 1
	}
	return 0
}

// runeWidth is a rune's columns: 0 for combining marks and zero-width
// characters, 2 for the wide East Asian blocks and emoji, else 1.
func runeWidth(r rune) int {
	switch {
	case unicode.Is(unicode.Mn, r) || unicode.Is(unicode.Me, r) || r == 0x200B || r == 0x200D || r == 0xFEFF:
		return 0
	case r >= 0x1100 && r <= 0x115F, r >= 0x2E80 && r <= 0x303E, r >= 0x3041 && r <= 0x33FF,
		r >= 0x3400 && r <= 0x4DBF, r >= 0x4E00 && r <= 0x9FFF, r >= 0xA000 && r <= 0xA4CF,
		r >= 0xAC00 && r <= 0xD7A3, r >= 0xF900 && r <= 0xFAFF, r >= 0xFE30 && r <= 0xFE4F,
		r >= 0xFF00 && r <= 0xFF60, r >= 0xFFE0 && r <= 0xFFE6, r >= 0x1F300 && r <= 0x1F64F,
		r >= 0x1F900 && r <= 0x1F9FF, r >= 0x20000 && r <= 0x3FFFD:
		return 2
	}
	return 1
}

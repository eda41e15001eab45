package consumer

import (
	"io"
	"os"
	"strconv"
	"strings"
)

// Unwrapped is w without the sanitizing layer of a Writer: for output the
// caller made safe itself (colour codes around sanitized fields).
func Unwrapped(w io.Writer) io.Writer {
	if sw, ok := w.(*Writer); ok {
		return sw.Unwrap()
	}
	return w
}

// IsTerminal reports whether w (under any Writer) is a terminal: where
// colour may go, and where a secret a person asked to see may be shown
// rather than left in a log.
func IsTerminal(w io.Writer) bool {
	f, ok := Unwrapped(w).(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// UseColor reports whether to colour output to w: only on a terminal, and
// never with noColor (--no-color) or NO_COLOR set (any value, per
// no-color.org), which getenv reads.
func UseColor(noColor bool, getenv func(string) string, w io.Writer) bool {
	return !noColor && getenv("NO_COLOR") == "" && IsTerminal(w)
}

// Width is the column count to fit output to w in: COLUMNS when set to a
// positive number (as shells export it, and as a person sets it), else the
// terminal's own width, else 0 (not a terminal: no limit).
func Width(getenv func(string) string, w io.Writer) int {
	if n, err := strconv.Atoi(strings.TrimSpace(getenv("COLUMNS"))); err == nil && n > 0 {
		return n
	}
	if f, ok := Unwrapped(w).(*os.File); ok && IsTerminal(w) {
		return terminalWidth(f)
	}
	return 0
}

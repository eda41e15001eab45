package setup

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
)

// Merge places block (a Render result) into original: in place of the first
// aep-setup block when there is one, else at the very end, where no top-level
// key can land below a [[hooks]] table. Any other aep-setup block and every
// unfenced [[hooks]] table whose command runs kimi-hook (what a
// re-serializing editor leaves of a block) are removed, so our hooks are never
// duplicated. Every other byte of original is kept; the block takes the
// file's line break style and, when needed, claims the line breaks that
// separate it from the content above so Strip can give them back.
//
// Merge refuses (error, nothing returned) when original is not valid TOML,
// defines hooks as something other than [[hooks]] tables, has a key below an
// aep-setup block, or the result would not parse.
func Merge(original, block []byte) ([]byte, error) {
	if err := checkCanonicalBlock(block); err != nil {
		return nil, err
	}
	l, err := analyze(original)
	if err != nil {
		return nil, err
	}
	return l.merge(block)
}

func (l *layout) merge(block []byte) ([]byte, error) {
	if l.conflict != nil {
		return nil, l.conflict
	}
	spans, first := l.cuts(true)
	segs := keptSegments(l.src, spans)
	eol := l.eol(segs)
	var before, after []byte
	if first < 0 {
		before = joinSegments(segs, eol)
	} else {
		before = joinSegments(segs[:first+1], eol)
		after = joinSegments(segs[first+1:], eol)
	}
	lead := leadFor(before)
	out := make([]byte, 0, len(before)+len(block)+len(after)+64)
	out = append(out, before...)
	for range lead {
		out = append(out, eol...)
	}
	out = append(out, adaptBlock(block, lead, eol)...)
	out = append(out, after...)
	if _, err := parseCheck(out); err != nil {
		return nil, fmt.Errorf("the merged file would be invalid (%w); nothing changed", err)
	}
	return out, nil
}

// Strip removes every aep-setup block (with the line breaks each claims)
// and reports whether there was one. It leaves unfenced kimi-hook tables
// alone; Remove takes those out too.
func Strip(content []byte) ([]byte, bool, error) {
	l, err := analyze(content)
	if err != nil {
		return nil, false, err
	}
	if len(l.blocks) == 0 {
		return content, false, nil
	}
	return l.cleansed(false), true, nil
}

// cleansed is the document without our blocks and, when unfenced is set,
// without unfenced kimi-hook tables.
func (l *layout) cleansed(unfenced bool) []byte {
	spans, _ := l.cuts(unfenced)
	segs := keptSegments(l.src, spans)
	return joinSegments(segs, l.eol(segs))
}

// cuts returns the sorted, merged byte spans to remove and the index of the
// merged span holding the first block (-1 when there is no block).
func (l *layout) cuts(unfenced bool) ([]span, int) {
	var spans []span
	for _, b := range l.blocks {
		spans = append(spans, b.span)
	}
	if unfenced {
		for _, e := range l.entries {
			if e.block < 0 && e.ours() {
				spans = append(spans, span{start: e.start, end: l.blankLinesEnd(e.end)})
			}
		}
	}
	slices.SortFunc(spans, func(a, b span) int { return a.start - b.start })
	var merged []span
	for _, s := range spans {
		if n := len(merged); n > 0 && s.start <= merged[n-1].end {
			merged[n-1].end = max(merged[n-1].end, s.end)
			continue
		}
		merged = append(merged, s)
	}
	first := -1
	if len(l.blocks) > 0 {
		for i, s := range merged {
			if l.blocks[0].start >= s.start && l.blocks[0].start < s.end {
				first = i
				break
			}
		}
	}
	return merged, first
}

// blankLinesEnd extends off over following whitespace-only lines, never into
// a block: a removed table takes its separating blank lines with it.
func (l *layout) blankLinesEnd(off int) int {
	limit := len(l.src)
	for _, b := range l.blocks {
		if b.start >= off {
			limit = min(limit, b.start)
		}
	}
	for off < limit {
		nl := bytes.IndexByte(l.src[off:limit], '\n')
		if nl < 0 {
			break
		}
		line := bytes.TrimSuffix(l.src[off:off+nl], []byte{'\r'})
		if len(bytes.Trim(line, " \t")) != 0 {
			break
		}
		off += nl + 1
	}
	return off
}

// keptSegments returns the pieces of src between the (sorted, disjoint)
// spans: always len(spans)+1 of them.
func keptSegments(src []byte, spans []span) [][]byte {
	segs := make([][]byte, 0, len(spans)+1)
	prev := 0
	for _, s := range spans {
		segs = append(segs, src[prev:s.start])
		prev = s.end
	}
	return append(segs, src[prev:])
}

// joinSegments concatenates segments, ending a left part's unterminated last
// line before a non-empty right part so removing a block cannot glue two
// lines together. The rule only looks at the left end and the right part's
// emptiness, so joining is associative: Strip(Merge(x)) == cleansed(x).
func joinSegments(segs [][]byte, eol string) []byte {
	var out []byte
	for _, s := range segs {
		if len(s) == 0 {
			continue
		}
		if len(out) > 0 && out[len(out)-1] != '\n' {
			out = append(out, eol...)
		}
		out = append(out, s...)
	}
	if out == nil {
		out = []byte{}
	}
	return out
}

// eol is the file's line break style: that of the content we keep, else the
// whole file's (our block's), else LF.
func (l *layout) eol(segs [][]byte) string {
	for _, s := range segs {
		if e := detectEOL(s); e != "" {
			return e
		}
	}
	if e := detectEOL(l.src); e != "" {
		return e
	}
	return "\n"
}

// leadFor is how many line breaks go between before and the block: none for
// an empty file or one that already ends in a blank line, one to open a blank
// separator line, two when the last line is also unterminated.
func leadFor(before []byte) int {
	n := len(before)
	switch {
	case n == 0:
		return 0
	case before[n-1] != '\n':
		return maxLead
	}
	rest := before[:n-1]
	rest = bytes.TrimSuffix(rest, []byte{'\r'})
	if len(rest) == 0 || rest[len(rest)-1] == '\n' {
		return 0
	}
	return 1
}

// adaptBlock rewrites a canonical block's begin line to claim lead line
// breaks and converts it to eol.
func adaptBlock(block []byte, lead int, eol string) []byte {
	rest := block[len(fenceBeginText)+1:]
	out := make([]byte, 0, len(block)+64)
	out = append(out, fenceBeginLine(lead)...)
	out = append(out, '\n')
	out = append(out, rest...)
	if eol != "\n" {
		out = bytes.ReplaceAll(out, []byte{'\n'}, []byte(eol))
	}
	return out
}

var errNotBlock = errors.New("not an aep-setup block (use Render)")

// checkCanonicalBlock insists on Render's shape: one fenced block, LF only,
// nothing claimed above it.
func checkCanonicalBlock(block []byte) error {
	if !bytes.HasPrefix(block, []byte(fenceBeginText+"\n")) ||
		!bytes.HasSuffix(block, []byte(fenceEndText+"\n")) ||
		bytes.IndexByte(block, '\r') >= 0 {
		return errNotBlock
	}
	l, err := analyze(block)
	if err != nil {
		return fmt.Errorf("%w: %w", errNotBlock, err)
	}
	if len(l.blocks) != 1 || l.blocks[0].start != 0 || l.blocks[0].end != len(block) || l.conflict != nil {
		return errNotBlock
	}
	return nil
}

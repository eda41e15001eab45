package setup

import (
	"bytes"
	"errors"
	"fmt"
	"strings"

	toml "github.com/pelletier/go-toml/v2"
	"github.com/pelletier/go-toml/v2/unstable"
)

// stmt is one top-level TOML expression (a comment line, key = value, or a
// table header) with the byte span of the whole lines it occupies.
type stmt struct {
	kind    unstable.Kind
	key     []string // decoded key parts (headers and key/values)
	comment string   // comment text including '#', for standalone comments
	valKind unstable.Kind
	str     string // decoded string value of a key/value
	line    int    // 1-based line of the statement's first byte
	start   int    // offset of the start of its first line
	end     int    // offset past the line break ending its last line (or EOF)
}

// keyIs reports whether the statement's key is exactly parts.
func (s stmt) keyIs(parts ...string) bool {
	if len(s.key) != len(parts) {
		return false
	}
	for i := range parts {
		if s.key[i] != parts[i] {
			return false
		}
	}
	return true
}

// firstLine is the statement's first source line, trimmed, for messages.
func (s stmt) firstLine(src []byte) string {
	l := src[s.start:s.end]
	if i := bytes.IndexByte(l, '\n'); i >= 0 {
		l = l[:i]
	}
	t := strings.TrimSpace(string(l))
	const maxShown = 60
	if len(t) > maxShown {
		t = t[:maxShown] + "..."
	}
	return t
}

// parseCheck decodes the whole document the strict way (syntax plus
// duplicate keys and table redefinitions) and returns it.
func parseCheck(src []byte) (map[string]any, error) {
	if bytes.HasPrefix(src, []byte("\xef\xbb\xbf")) {
		// Kimi's parser (smol-toml) rejects the byte order mark too.
		return nil, errors.New("not valid TOML: the file starts with a UTF-8 byte order mark; save it without one")
	}
	var doc map[string]any
	if err := toml.Unmarshal(src, &doc); err != nil {
		var de *toml.DecodeError
		if errors.As(err, &de) {
			row, col := de.Position()
			return nil, fmt.Errorf("not valid TOML: line %d, column %d: %s", row, col, strings.TrimPrefix(de.Error(), "toml: "))
		}
		return nil, fmt.Errorf("not valid TOML: %w", err)
	}
	return doc, nil
}

// scanStmts lists the top-level expressions of a document that parseCheck
// accepted. Statements never share a line, so their spans are line-aligned
// and contiguous apart from blank lines.
func scanStmts(src []byte) ([]stmt, error) {
	var p unstable.Parser
	p.KeepComments = true
	p.Reset(src)
	var out []stmt
	lineOff, line := 0, 1
	for p.NextExpression() {
		n := p.Expression()
		s := stmt{kind: n.Kind}
		var first, last int
		switch n.Kind {
		case unstable.Comment:
			first = int(n.Raw.Offset)
			last = first + int(n.Raw.Length)
			s.comment = string(n.Data)
		case unstable.KeyValue:
			s.key = keyParts(n)
			first = int(n.Raw.Offset)
			last = first + int(n.Raw.Length)
			v := n.Value()
			s.valKind = v.Kind
			if v.Kind == unstable.String {
				s.str = string(v.Data)
			}
		case unstable.Table, unstable.ArrayTable:
			it := n.Key()
			for it.Next() {
				k := it.Node()
				if len(s.key) == 0 {
					first = int(k.Raw.Offset)
				}
				s.key = append(s.key, string(k.Data))
				last = int(k.Raw.Offset + k.Raw.Length)
			}
		default:
			return nil, fmt.Errorf("unexpected top-level %s", n.Kind)
		}
		if first < lineOff || last < first || last > len(src) {
			return nil, fmt.Errorf("statement offsets out of order at byte %d", first)
		}
		s.start = bytes.LastIndexByte(src[:first], '\n') + 1
		if i := bytes.IndexByte(src[last:], '\n'); i >= 0 {
			s.end = last + i + 1
		} else {
			s.end = len(src)
		}
		line += bytes.Count(src[lineOff:first], []byte{'\n'})
		lineOff = first
		s.line = line
		out = append(out, s)
	}
	if err := p.Error(); err != nil {
		return nil, fmt.Errorf("not valid TOML: %w", err)
	}
	return out, nil
}

func keyParts(n *unstable.Node) []string {
	var parts []string
	it := n.Key()
	for it.Next() {
		parts = append(parts, string(it.Node().Data))
	}
	return parts
}

type span struct{ start, end int }

// fencedBlock is one aep-setup block: from the line breaks its begin line
// claims above it to past the end line's line break.
type fencedBlock struct {
	span
	bodyStart int // start of the begin line
	beginLine int
	endLine   int
	lead      int // line breaks the begin line claims
}

// hooksEntry is one [[hooks]] table: its header plus the statements that
// belong to it (key/values and its sub-tables).
type hooksEntry struct {
	index   int // position in the hooks array
	line    int
	span    // header line start to the end of its last member
	command string
	hasCmd  bool
	inSub   bool // a sub-table header was seen; later keys are not the entry's own
	block   int  // index into layout.blocks; -1 when outside every block
	// trailing is a member that sits after the block's end line (a key
	// appended below the block, which TOML reads into its last table).
	trailing *stmt
}

func (e hooksEntry) ours() bool { return e.block >= 0 || (e.hasCmd && isOurCommand(e.command)) }

// layout is the structure of a config.toml that parses.
type layout struct {
	src     []byte
	stmts   []stmt
	blocks  []fencedBlock
	entries []hooksEntry
	// conflict is set when the document defines hooks as something other
	// than [[hooks]] tables; only appending is refused, stripping is not.
	conflict error
}

// analyze parses src and locates our blocks, every [[hooks]] table, and any
// definition of hooks that the appended [[hooks]] tables would collide with.
func analyze(src []byte) (*layout, error) {
	if _, err := parseCheck(src); err != nil {
		return nil, err
	}
	stmts, err := scanStmts(src)
	if err != nil {
		return nil, err
	}
	l := &layout{src: src, stmts: stmts}
	if err := l.findBlocks(); err != nil {
		return nil, err
	}
	if err := l.findEntries(); err != nil {
		return nil, err
	}
	return l, nil
}

func (l *layout) findBlocks() error {
	open := -1
	limit := 0 // claimed line breaks never reach into the previous block
	for i, s := range l.stmts {
		if s.kind != unstable.Comment {
			continue
		}
		if _, ok := parseFenceBegin(s.comment); ok {
			if open >= 0 {
				return fmt.Errorf("line %d: a second aep-setup begin line before the end of the block opened at line %d; repair or delete the block by hand", s.line, l.stmts[open].line)
			}
			open = i
			continue
		}
		if !isFenceEnd(s.comment) {
			continue
		}
		if open < 0 {
			return fmt.Errorf("line %d: aep-setup end line without a begin line; delete it or restore %q above the block", s.line, fenceBeginText)
		}
		b := l.stmts[open]
		lead, _ := parseFenceBegin(b.comment)
		start := b.start
		for k := 0; k < lead; k++ {
			switch {
			case start-2 >= limit && l.src[start-1] == '\n' && l.src[start-2] == '\r':
				start -= 2
			case start-1 >= limit && l.src[start-1] == '\n':
				start--
			}
		}
		l.blocks = append(l.blocks, fencedBlock{
			span:      span{start: start, end: s.end},
			bodyStart: b.start,
			beginLine: b.line,
			endLine:   s.line,
			lead:      lead,
		})
		limit = s.end
		open = -1
	}
	if open >= 0 {
		return fmt.Errorf("line %d: aep-setup begin line without an end line; restore %q below the block or delete the block by hand", l.stmts[open].line, fenceEndText)
	}
	return nil
}

// blockAt returns the index of the block whose body holds offset, or -1.
func (l *layout) blockAt(off int) int {
	for i, b := range l.blocks {
		if off >= b.bodyStart && off < b.end {
			return i
		}
	}
	return -1
}

func (l *layout) findEntries() error {
	cur := -1         // index into l.entries of the open [[hooks]] table
	inHeader := false // a table header has been seen (no longer top level)
	for i := range l.stmts {
		s := &l.stmts[i]
		switch s.kind {
		case unstable.Comment:
			continue
		case unstable.KeyValue:
			if !inHeader {
				if s.key[0] == "hooks" && l.conflict == nil {
					l.conflict = l.hooksConflict(*s)
				}
				continue
			}
			if cur < 0 {
				continue
			}
			l.addMember(cur, s)
			if e := &l.entries[cur]; !e.inSub && s.keyIs("command") && s.valKind == unstable.String {
				e.command, e.hasCmd = s.str, true
			}
		case unstable.Table, unstable.ArrayTable:
			inHeader = true
			if s.key[0] != "hooks" {
				cur = -1
				continue
			}
			if s.kind == unstable.ArrayTable && len(s.key) == 1 {
				l.entries = append(l.entries, hooksEntry{
					index: len(l.entries),
					line:  s.line,
					span:  span{start: s.start, end: s.end},
					block: l.blockAt(s.start),
				})
				cur = len(l.entries) - 1
				continue
			}
			if len(s.key) == 1 || len(l.entries) == 0 {
				if l.conflict == nil {
					l.conflict = l.hooksConflict(*s)
				}
				cur = -1
				continue
			}
			// [hooks.x] below a [[hooks]] table is a sub-table of its last
			// element; Kimi's strict schema rejects it, and Validate says so.
			if cur >= 0 {
				l.addMember(cur, s)
				l.entries[cur].inSub = true
			}
		}
	}
	for _, e := range l.entries {
		if e.block >= 0 && e.trailing != nil {
			t := e.trailing
			return fmt.Errorf("line %d: %q sits below the aep-setup block, so TOML reads it into the block's last [[hooks]] table and Kimi would drop every hook; move it above the first [table] header", t.line, t.firstLine(l.src))
		}
		if e.block < 0 && e.ours() {
			for bi, b := range l.blocks {
				if e.start < b.end && e.end > b.bodyStart {
					return fmt.Errorf("line %d: a [[hooks]] table running kimi-hook straddles the aep-setup block of lines %d-%d; repair the file by hand", e.line, l.blocks[bi].beginLine, b.endLine)
				}
			}
		}
	}
	return nil
}

// addMember extends entry cur over s, noting members that fall below the
// entry's block.
func (l *layout) addMember(cur int, s *stmt) {
	e := &l.entries[cur]
	if e.block >= 0 && e.trailing == nil && s.start >= l.blocks[e.block].end {
		e.trailing = s
	}
	e.end = s.end
}

func (l *layout) hooksConflict(s stmt) error {
	what := "a table"
	fix := "rename or delete it"
	if s.kind == unstable.KeyValue && len(s.key) == 1 {
		switch s.valKind {
		case unstable.Array:
			what = "a static array"
			fix = "rewrite its entries as [[hooks]] tables, or delete it if it is empty"
		case unstable.InlineTable:
			what = "an inline table"
		default:
			what = "a plain value"
		}
	}
	return fmt.Errorf("line %d: %q defines hooks as %s, so the [[hooks]] tables aep-setup appends would not parse; %s", s.line, s.firstLine(l.src), what, fix)
}

// detectEOL returns the line break style of src's first line break, or "".
func detectEOL(src []byte) string {
	i := bytes.IndexByte(src, '\n')
	switch {
	case i < 0:
		return ""
	case i > 0 && src[i-1] == '\r':
		return "\r\n"
	}
	return "\n"
}

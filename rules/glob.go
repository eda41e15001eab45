package rules

import (
	"errors"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// MaxPatternBytes bounds one pattern.
const MaxPatternBytes = 1024

// Pattern is a compiled glob: * matches any run of characters (none
// included), ? exactly one, and a backslash makes the next character
// literal (\* \? \\). Everything else matches itself. The zero Pattern
// matches only the empty text.
type Pattern struct {
	src   string
	fold  bool
	toks  []tok
	plain bool   // no wildcard: a string comparison with lit
	lit   string // the text a plain pattern stands for
	// pieces is toks split at the literal shell operators, for Safe.
	pieces [][]tok
	seps   []rune
}

type tokKind uint8

const (
	tokLit tokKind = iota
	tokOne
	tokStar
)

type tok struct {
	kind tokKind
	r    rune
}

// ErrPattern wraps every pattern refusal.
var ErrPattern = errors.New("invalid pattern")

// Compile parses a glob. fold makes it match case-insensitively (names);
// without it case matters (paths, command lines).
func Compile(src string, fold bool) (Pattern, error) {
	if len(src) > MaxPatternBytes {
		return Pattern{}, fmt.Errorf("%w: longer than %d bytes", ErrPattern, MaxPatternBytes)
	}
	if !utf8.ValidString(src) {
		return Pattern{}, fmt.Errorf("%w: not valid UTF-8", ErrPattern)
	}
	p := Pattern{src: src, fold: fold, plain: true}
	s := src
	if fold {
		s = strings.ToLower(s)
	}
	escaped := false
	for i, r := range s {
		if unicode.IsControl(r) {
			return Pattern{}, fmt.Errorf("%w: control character at byte %d", ErrPattern, i)
		}
		switch {
		case escaped:
			p.toks = append(p.toks, tok{kind: tokLit, r: r})
			escaped = false
		case r == '\\':
			escaped = true
		case r == '*':
			p.plain = false
			if n := len(p.toks); n == 0 || p.toks[n-1].kind != tokStar {
				p.toks = append(p.toks, tok{kind: tokStar})
			}
		case r == '?':
			p.plain = false
			p.toks = append(p.toks, tok{kind: tokOne})
		default:
			p.toks = append(p.toks, tok{kind: tokLit, r: r})
		}
	}
	if escaped {
		return Pattern{}, fmt.Errorf("%w: ends in a lone backslash (write \\\\ for a backslash)", ErrPattern)
	}
	if p.plain {
		var b strings.Builder
		for _, t := range p.toks {
			b.WriteRune(t.r)
		}
		p.lit = b.String()
	}
	p.pieces, p.seps = splitPattern(p.toks)
	return p, nil
}

// MustCompile is Compile for patterns known to be valid (tests, constants).
func MustCompile(src string, fold bool) Pattern {
	p, err := Compile(src, fold)
	if err != nil {
		panic(err)
	}
	return p
}

// String is the pattern as written.
func (p Pattern) String() string { return p.src }

// Match reports whether the whole of s matches.
func (p Pattern) Match(s string) bool {
	if p.fold {
		return p.match(lower(s))
	}
	return p.match(newText(s))
}

// Safe is Match for an allow rule's argument text: a wildcard never stands
// for a shell operator (; & | ` < > a line break, or $( ), so `echo *`
// does not allow `echo ok; rm -rf /`. An operator matches only where the
// pattern writes it literally.
func (p Pattern) Safe(s string) bool {
	t := newText(s)
	if p.fold {
		t = lower(s)
	}
	pieces, seps := splitText(t.rs)
	return p.safe(t, pieces, seps)
}

// text is a string and its runes, converted once for many patterns.
type text struct {
	s  string
	rs []rune
}

func newText(s string) text { return text{s: s, rs: []rune(s)} }

func lower(s string) text { return newText(strings.ToLower(s)) }

// match is Match on a prepared text (lowercased for a folding pattern).
func (p Pattern) match(t text) bool {
	if p.plain {
		return t.s == p.lit
	}
	return matchToks(p.toks, t.rs)
}

// safe is Safe on a prepared text cut at its operators (splitText).
func (p Pattern) safe(t text, pieces [][]rune, seps []rune) bool {
	if p.plain {
		return t.s == p.lit
	}
	if len(seps) != len(p.seps) {
		return false
	}
	for i, sep := range seps {
		if sep != p.seps[i] {
			return false
		}
	}
	for i, piece := range pieces {
		if !matchToks(p.pieces[i], piece) {
			return false
		}
	}
	return true
}

// lineBreak is how a line break reads in a one-line argument text
// (mapping.LineBreak): an operator like ;, so Safe treats it as one.
const lineBreak = '⏎'

// operator reports whether rs[i] is a shell operator for Safe: one of the
// listed runes, or the ( of $(.
func operator(rs []rune, i int) bool {
	switch rs[i] {
	case ';', '&', '|', '`', '<', '>', '\n', '\r', lineBreak:
		return true
	case '(':
		return i > 0 && rs[i-1] == '$'
	}
	return false
}

// splitText cuts rs at its operators.
func splitText(rs []rune) (pieces [][]rune, seps []rune) {
	start := 0
	for i := range rs {
		if operator(rs, i) {
			pieces = append(pieces, rs[start:i])
			seps = append(seps, rs[i])
			start = i + 1
		}
	}
	return append(pieces, rs[start:]), seps
}

// splitPattern cuts toks at the literal operators, judged as splitText
// judges text: a literal ( is one only right after a literal $.
func splitPattern(toks []tok) (pieces [][]tok, seps []rune) {
	start := 0
	for i, t := range toks {
		if t.kind != tokLit {
			continue
		}
		op := false
		switch t.r {
		case ';', '&', '|', '`', '<', '>', '\n', '\r', lineBreak:
			op = true
		case '(':
			op = i > 0 && toks[i-1].kind == tokLit && toks[i-1].r == '$'
		}
		if op {
			pieces = append(pieces, toks[start:i])
			seps = append(seps, t.r)
			start = i + 1
		}
	}
	return append(pieces, toks[start:]), seps
}

// matchToks is the classic single-backtrack glob match: linear in the
// usual case, O(len(p)·len(s)) at worst. It is exact for * and ?, since a
// later star can absorb whatever an earlier one would have.
func matchToks(p []tok, s []rune) bool {
	pi, si := 0, 0
	star, mark := -1, 0
	for si < len(s) {
		if pi < len(p) {
			switch t := p[pi]; t.kind {
			case tokStar:
				star, mark = pi, si
				pi++
				continue
			case tokOne:
				pi++
				si++
				continue
			default:
				if t.r == s[si] {
					pi++
					si++
					continue
				}
			}
		}
		if star < 0 {
			return false
		}
		mark++
		si, pi = mark, star+1
	}
	for pi < len(p) && p[pi].kind == tokStar {
		pi++
	}
	return pi == len(p)
}

// ancestors lists dir and every directory above it, deepest first:
// a project pattern covers the tree under the directory it names.
// Backslashes (a Windows path) read as slashes.
func ancestors(dir string) []string {
	dir = strings.ReplaceAll(dir, `\`, "/")
	if t := strings.TrimRight(dir, "/"); t != "" {
		dir = t
	}
	out := []string{dir}
	for {
		i := strings.LastIndexByte(dir, '/')
		if i < 0 {
			return out
		}
		parent := dir[:i]
		if parent == "" {
			parent = "/"
		}
		if parent == dir {
			return out
		}
		out = append(out, parent)
		dir = parent
	}
}

// foldHome writes a leading home directory (/home/USER, /Users/USER,
// X:/Users/USER, /root) as "~", as the redaction pipeline does at capture
// redacted, so one project pattern matches a session's directory at either
// capture. Backslashes read as slashes. A path that starts elsewhere is
// returned as is.
func foldHome(path string) string {
	p := strings.ReplaceAll(path, `\`, "/")
	rest, ok := "", false
	switch {
	case p == "/root" || strings.HasPrefix(p, "/root/"):
		rest, ok = p[len("/root"):], true
	case strings.HasPrefix(p, "/home/"):
		rest, ok = afterUser(p[len("/home/"):])
	case strings.HasPrefix(p, "/Users/"):
		rest, ok = afterUser(p[len("/Users/"):])
	case len(p) > 9 && p[1] == ':' && strings.EqualFold(p[2:9], "/Users/"):
		rest, ok = afterUser(p[9:])
	}
	if !ok {
		return path
	}
	return "~" + rest
}

// afterUser cuts the user component off p: what follows it, and whether
// it was a plain name (no wildcard, not empty).
func afterUser(p string) (string, bool) {
	user, rest, _ := strings.Cut(p, "/")
	if user == "" || strings.ContainsAny(user, `*?\~`) {
		return "", false
	}
	if rest == "" {
		return "", true
	}
	return "/" + rest, true
}

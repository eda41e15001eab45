package rules

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Effect is what a matching rule does with a request.
type Effect string

// The effects, strongest first: deny beats ask beats allow.
const (
	// Deny answers the request with the refusing option.
	Deny Effect = "deny"
	// Ask leaves the request to a person even when an allow rule matches.
	Ask Effect = "ask"
	// Allow answers the request with the permitting option.
	Allow Effect = "allow"
)

// ParseEffect reads an effect word.
func ParseEffect(s string) (Effect, error) {
	switch e := Effect(strings.ToLower(strings.TrimSpace(s))); e {
	case Allow, Deny, Ask:
		return e, nil
	}
	return "", fmt.Errorf("effect %q: want allow, deny or ask", s)
}

// rank orders effects by precedence.
func (e Effect) rank() int {
	switch e {
	case Deny:
		return 3
	case Ask:
		return 2
	case Allow:
		return 1
	}
	return 0
}

// Rule is one line of policy: when a request matches every condition it
// sets, its effect applies. Tool is required ("*" for any tool); Args and
// Project are globs, case-sensitive; Tool and Agent are globs matched
// without regard to case. Project covers the directory it matches and
// every directory under it.
type Rule struct {
	ID      string `json:"id"`
	Effect  Effect `json:"effect"`
	Tool    string `json:"tool"`
	Args    string `json:"args,omitempty"`
	Project string `json:"project,omitempty"`
	Agent   string `json:"agent,omitempty"`
	Note    string `json:"note,omitempty"`
	// Created is when the rule was added (RFC 3339), when known.
	Created string `json:"created,omitempty"`
}

// Limits of a rules file.
const (
	// MaxFileBytes bounds the rules file and one API body.
	MaxFileBytes = 1 << 20
	// MaxRules bounds the rules in one file, and so the rule ids /metrics
	// labels its counters with.
	MaxRules = 2000
	// MaxNoteRunes bounds a rule's note.
	MaxNoteRunes = 500
	// FileVersion is the format this package reads and writes.
	FileVersion = 1
)

var idGrammar = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// file is the rules file on disk.
type file struct {
	Version int    `json:"version"`
	Rules   []Rule `json:"rules"`
}

// compiled is a rule ready to match.
type compiled struct {
	Rule
	index                int
	tool, agent, project Pattern
	args                 Pattern
	hasArgs, hasProject  bool
	hasAgent, anyTool    bool
}

// ParseError is a rules file refusal: where, and why.
type ParseError struct {
	// Line and Col locate a syntax error (1-based; 0 when not located).
	Line, Col int
	// Rule is the 1-based index of the offending rule (0: the file).
	Rule int
	// ID is the offending rule's id, when it has one.
	ID  string
	Msg string
}

func (e *ParseError) Error() string {
	var b strings.Builder
	if e.Line > 0 {
		fmt.Fprintf(&b, "line %d column %d: ", e.Line, e.Col)
	}
	if e.Rule > 0 {
		fmt.Fprintf(&b, "rule %d", e.Rule)
		if e.ID != "" {
			fmt.Fprintf(&b, " (%q)", e.ID)
		}
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// Parse reads a rules file strictly: one JSON object {"version": 1,
// "rules": [...]}, no unknown or repeated member, every rule valid, ids
// unique. An empty file holds no rules.
func Parse(b []byte) (*Set, error) {
	if len(b) > MaxFileBytes {
		return nil, &ParseError{Msg: fmt.Sprintf("larger than %d bytes", MaxFileBytes)}
	}
	if len(bytes.TrimSpace(b)) == 0 {
		return newSet(nil)
	}
	if !utf8.Valid(b) {
		return nil, &ParseError{Msg: "not valid UTF-8"}
	}
	if err := noDuplicateKeys(b); err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var f file
	if err := dec.Decode(&f); err != nil {
		return nil, jsonError(b, err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		line, col := position(b, int(dec.InputOffset()))
		return nil, &ParseError{Line: line, Col: col, Msg: "text after the rules object"}
	}
	if f.Version != FileVersion {
		return nil, &ParseError{Msg: fmt.Sprintf("version %d: this relay reads version %d (write \"version\": %d)", f.Version, FileVersion, FileVersion)}
	}
	return newSet(f.Rules)
}

// Encode renders rules as a rules file, indented, one rule per block.
func Encode(rules []Rule) []byte {
	if rules == nil {
		rules = []Rule{}
	}
	b, _ := json.MarshalIndent(file{Version: FileVersion, Rules: rules}, "", "  ") // strings only: cannot fail
	return append(b, '\n')
}

// check validates one rule and compiles it; i is its 0-based index.
func check(r Rule, i int) (*compiled, error) {
	fail := func(format string, args ...any) error {
		return &ParseError{Rule: i + 1, ID: r.ID, Msg: fmt.Sprintf(format, args...)}
	}
	if !idGrammar.MatchString(r.ID) {
		if r.ID == "" {
			return nil, fail("id is missing")
		}
		return nil, fail("id %q: letters, digits, '.', '_' and '-', starting with a letter or digit, at most 64", r.ID)
	}
	switch r.Effect {
	case Allow, Deny, Ask:
	case "":
		return nil, fail("effect is missing: want allow, deny or ask")
	default:
		return nil, fail("effect %q: want allow, deny or ask", r.Effect)
	}
	if strings.TrimSpace(r.Tool) == "" {
		return nil, fail(`tool is missing: name one, or "*" for any tool`)
	}
	if n := utf8.RuneCountInString(r.Note); n > MaxNoteRunes {
		return nil, fail("note is %d characters; at most %d", n, MaxNoteRunes)
	}
	for _, s := range []string{r.Note, r.Created} {
		if strings.IndexFunc(s, unicode.IsControl) >= 0 {
			return nil, fail("note and created may not hold control characters")
		}
	}
	c := &compiled{Rule: r, index: i}
	var err error
	compile := func(field, src string, fold bool) Pattern {
		if err != nil {
			return Pattern{}
		}
		var p Pattern
		if p, err = Compile(src, fold); err != nil {
			err = fail("%s %q: %v", field, src, err)
		}
		return p
	}
	c.tool = compile("tool", strings.TrimSpace(r.Tool), true)
	c.anyTool = strings.TrimSpace(r.Tool) == "*"
	if c.hasAgent = r.Agent != ""; c.hasAgent {
		c.agent = compile("agent", r.Agent, true)
	}
	if c.hasArgs = r.Args != ""; c.hasArgs {
		c.args = compile("args", r.Args, false)
	}
	if c.hasProject = r.Project != ""; c.hasProject {
		project := foldHome(r.Project)
		if t := strings.TrimRight(project, "/"); t != "" {
			project = t
		}
		c.project = compile("project", project, false)
	}
	if err != nil {
		return nil, err
	}
	return c, nil
}

// NewID returns a fresh rule id: "r-" and eight random characters.
func NewID() string {
	const alphabet = "abcdefghijkmnpqrstuvwxyz23456789"
	var b [8]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	out := []byte("r-")
	for _, c := range b {
		out = append(out, alphabet[int(c)%len(alphabet)])
	}
	return string(out)
}

// jsonError turns a decoder error into a located ParseError.
func jsonError(b []byte, err error) error {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn):
		line, col := position(b, int(syn.Offset))
		return &ParseError{Line: line, Col: col, Msg: syn.Error()}
	case errors.As(err, &typ):
		line, col := position(b, int(typ.Offset))
		field := typ.Field
		if field == "" {
			field = "the document"
		}
		return &ParseError{Line: line, Col: col, Msg: fmt.Sprintf("%s: a JSON %s where %s belongs", field, typ.Value, typeName(typ.Type.Kind().String()))}
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return &ParseError{Msg: "the file ends inside the rules object"}
	}
	// Unknown fields: the decoder names them as `json: unknown field "x"`.
	return &ParseError{Msg: strings.TrimPrefix(err.Error(), "json: ")}
}

func typeName(kind string) string {
	switch kind {
	case "slice":
		return "a list"
	case "struct":
		return "an object"
	case "int":
		return "a whole number"
	}
	return "a " + kind
}

// position converts a byte offset into a 1-based line and column.
func position(b []byte, off int) (line, col int) {
	off = min(max(off, 0), len(b))
	line = 1 + bytes.Count(b[:off], []byte{'\n'})
	col = off - bytes.LastIndexByte(b[:off], '\n')
	return line, col
}

// noDuplicateKeys refuses an object naming a member twice, which the
// decoder would silently resolve to the last.
func noDuplicateKeys(b []byte) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	type frame struct {
		obj  bool
		keys map[string]bool
		key  bool // the next token in an object is a key
	}
	var stack []*frame
	for {
		off := int(dec.InputOffset())
		t, err := dec.Token()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return jsonError(b, err)
		}
		var top *frame
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		if top != nil && top.obj && top.key {
			if k, ok := t.(string); ok {
				if top.keys[k] {
					line, col := position(b, off)
					return &ParseError{Line: line, Col: col, Msg: fmt.Sprintf("member %q appears twice in one object", k)}
				}
				top.keys[k] = true
				top.key = false
				continue
			}
		}
		switch t {
		case json.Delim('{'):
			stack = append(stack, &frame{obj: true, keys: map[string]bool{}, key: true})
			continue
		case json.Delim('['):
			stack = append(stack, &frame{})
			continue
		case json.Delim('}'), json.Delim(']'):
			stack = stack[:len(stack)-1]
		}
		if len(stack) > 0 && stack[len(stack)-1].obj {
			stack[len(stack)-1].key = true
		}
	}
}

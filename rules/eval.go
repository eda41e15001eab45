package rules

import (
	"fmt"
	"sort"
	"strings"

	"github.com/aep-kimi/aep-kimi/aep"
)

// Request is what a rule can match: the facts of one tool permission
// request as the stream carries them.
type Request struct {
	// Agent is the emitter's agent (envelope agent).
	Agent string
	// Tool is the tool's name.
	Tool string
	// Args is the tool's argument text; ArgsCarried says whether the
	// request carries it at all (a request captured at metadata does not).
	// ArgsCut marks a text the emitter cut short: no allow rule reads it.
	Args        string
	ArgsCarried bool
	ArgsCut     bool
	// Project is the session's working directory; ProjectKnown says
	// whether the stream told it (session.started's cwd, captured at
	// redacted or full).
	Project      string
	ProjectKnown bool
}

// Set is a parsed, compiled rule list, in file order. It is immutable and
// safe for concurrent use.
type Set struct {
	rules []*compiled
	// byTool indexes the rules naming a tool without wildcards (lowercase);
	// wild holds the rest. Each list is in file order.
	byTool map[string][]*compiled
	wild   []*compiled
}

func newSet(rules []Rule) (*Set, error) {
	if len(rules) > MaxRules {
		return nil, &ParseError{Msg: fmt.Sprintf("%d rules; at most %d", len(rules), MaxRules)}
	}
	s := &Set{byTool: map[string][]*compiled{}}
	ids := make(map[string]int, len(rules))
	for i, r := range rules {
		c, err := check(r, i)
		if err != nil {
			return nil, err
		}
		if j, dup := ids[r.ID]; dup {
			return nil, &ParseError{Rule: i + 1, ID: r.ID, Msg: fmt.Sprintf("id already used by rule %d", j+1)}
		}
		ids[r.ID] = i
		s.rules = append(s.rules, c)
		if c.tool.plain {
			s.byTool[c.tool.lit] = append(s.byTool[c.tool.lit], c)
		} else {
			s.wild = append(s.wild, c)
		}
	}
	return s, nil
}

// Rules returns the rules in file order (a fresh slice).
func (s *Set) Rules() []Rule {
	if s == nil {
		return nil
	}
	out := make([]Rule, len(s.rules))
	for i, c := range s.rules {
		out[i] = c.Rule
	}
	return out
}

// Len is the number of rules.
func (s *Set) Len() int {
	if s == nil {
		return 0
	}
	return len(s.rules)
}

// Outcome is how one rule relates to a request.
type Outcome string

// Rule outcomes, as Verdict.Trace reports them.
const (
	// Matched: every condition holds.
	Matched Outcome = "matched"
	// Missed: a condition does not hold.
	Missed Outcome = "no match"
	// Unknowable: every condition the request can answer holds, but one
	// needs a fact the request does not carry (argument text below capture
	// redacted, a working directory the stream never told). Such a rule
	// never matches; a deny or ask rule left unknowable keeps every allow
	// rule from answering, so the request goes to a person.
	Unknowable Outcome = "unknowable"
)

// Step is one rule's outcome for a request and why.
type Step struct {
	Rule    Rule    `json:"rule"`
	Outcome Outcome `json:"outcome"`
	Why     string  `json:"why"`
	// Destructive lists the destructive forms this allow rule would answer
	// through a wildcard (WildDestructive), whatever this request is.
	Destructive []DestructiveForm `json:"destructive,omitempty"`

	index int
}

// Verdict is what the rules say about a request.
type Verdict struct {
	// Rule decides the request when Effect is allow or deny; for ask it is
	// the ask rule that keeps a person in the loop. nil when no rule
	// applies.
	Rule *Rule `json:"rule,omitempty"`
	// Effect is the deciding effect, "" when no rule applies (a person
	// answers).
	Effect Effect `json:"effect,omitempty"`
	// Why says in one line how the verdict came about.
	Why string `json:"why"`
	// Held names the deny or ask rule that could not be checked and so
	// kept an allow rule from answering.
	Held *Rule `json:"held,omitempty"`
	// Trace lists the rules about this request's tool, in file order, with
	// their outcomes (Evaluate fills it only when asked to).
	Trace []Step `json:"trace,omitempty"`
	// Hidden says Rule's and Held's argument patterns and projects were
	// blanked, and the trace left out, for a reader below the redacted
	// capture ceiling (API.Hide).
	Hidden bool `json:"hidden,omitempty"`
}

// hide blanks what the verdict quotes of the rules' commands and
// directories.
func (v *Verdict) hide() {
	for _, r := range []**Rule{&v.Rule, &v.Held} {
		if *r != nil {
			c := **r
			c.Args, c.Project = "", ""
			*r = &c
		}
	}
	v.Trace, v.Hidden = nil, true
}

// Decides reports whether the verdict answers the request by itself.
func (v Verdict) Decides() bool { return v.Effect == Allow || v.Effect == Deny }

// Evaluate applies the rules to req: the first matching deny rule, else
// the first matching ask rule, else, unless a deny or ask rule was
// unknowable, the first matching allow rule. trace asks for every
// considered rule's outcome.
func (s *Set) Evaluate(req Request, trace bool) Verdict {
	var v Verdict
	if s == nil || len(s.rules) == 0 {
		v.Why = "no rules"
		return v
	}
	var best, held *compiled
	prep := prepare(req)
	visit := func(c *compiled) {
		out, why := c.test(prep, trace)
		if trace {
			v.Trace = append(v.Trace, Step{Rule: c.Rule, Outcome: out, Why: why, Destructive: WildDestructive(c.Rule), index: c.index})
		}
		switch out {
		case Matched:
			if best == nil || c.Effect.rank() > best.Effect.rank() ||
				c.Effect == best.Effect && c.index < best.index {
				best = c
			}
		case Unknowable:
			if c.Effect != Allow && (held == nil || c.index < held.index) {
				held = c
			}
		}
	}
	s.each(prep.tool.s, visit)
	if trace {
		sortSteps(v.Trace)
	}
	switch {
	case best != nil && best.Effect != Allow:
		v.Rule, v.Effect = &best.Rule, best.Effect
		v.Why = fmt.Sprintf("%s rule %s matches", best.Effect, best.ID)
	case best != nil && held != nil:
		v.Held = &held.Rule
		v.Why = fmt.Sprintf("allow rule %s matches, but %s rule %s cannot be checked (%s): a person answers",
			best.ID, held.Effect, held.ID, held.needs(prep))
	case best != nil:
		v.Rule, v.Effect = &best.Rule, best.Effect
		v.Why = fmt.Sprintf("allow rule %s matches", best.ID)
	case held != nil:
		v.Held = &held.Rule
		v.Why = fmt.Sprintf("no rule matches; %s rule %s cannot be checked (%s): a person answers", held.Effect, held.ID, held.needs(prep))
	default:
		v.Why = "no rule matches: a person answers"
	}
	return v
}

// Redacted reports whether an argument text holds a redaction marker
// ([REDACTED:secret], [REDACTED:pii], ...): part of it is not the tool's
// own input, so no allow rule reads it.
func Redacted(args string) bool { return strings.Contains(args, redactedMarker) }

// redactedMarker opens every redaction marker (AEP-0003 §9.4).
const redactedMarker = "[REDACTED"

// each calls fn for the rules that may concern tool (lowercase): its own and the
// wildcard ones, each list in file order.
func (s *Set) each(tool string, fn func(*compiled)) {
	for _, c := range s.byTool[tool] {
		fn(c)
	}
	for _, c := range s.wild {
		fn(c)
	}
}

// sortSteps puts a trace in file order (each visits two lists in order).
func sortSteps(steps []Step) {
	sort.SliceStable(steps, func(i, j int) bool { return steps[i].index < steps[j].index })
}

// prepared is a request made ready for many rules: each text converted
// once, the argument text split at its operators, the project's directory
// and the ones above it listed in both spellings (foldHome).
type prepared struct {
	Request
	tool, agent text // lowercased: name patterns fold case
	args        text
	redacted    bool // args hold a redaction marker
	argPieces   [][]rune
	argSeps     []rune
	dirs        []text
}

func prepare(req Request) *prepared {
	p := &prepared{Request: req, tool: lower(req.Tool), agent: lower(req.Agent)}
	if req.ArgsCarried {
		p.args = newText(req.Args)
		p.redacted = Redacted(req.Args)
		p.argPieces, p.argSeps = splitText(p.args.rs)
	}
	return p
}

// projectDirs lists the project's directory and those above it in both
// spellings, worked out on the first project rule that asks.
func (p *prepared) projectDirs() []text {
	if p.dirs == nil {
		p.dirs = []text{}
		for i, d := range [2]string{p.Project, foldHome(p.Project)} {
			if i == 1 && d == p.Project {
				break
			}
			for _, a := range ancestors(d) {
				p.dirs = append(p.dirs, newText(a))
			}
		}
	}
	return p.dirs
}

// test checks one rule against req: matched, missed, or unknowable (a
// fact it needs is not carried). explain asks for the reason too: the
// first condition that fails, or the missing fact.
func (c *compiled) test(req *prepared, explain bool) (Outcome, string) {
	// why formats only when asked: boxing its arguments costs more than
	// the rest of a test.
	why := func(f func() string) string {
		if !explain {
			return ""
		}
		return f()
	}
	if !c.tool.match(req.tool) {
		return Missed, why(func() string { return fmt.Sprintf("tool %q is not %q", req.Tool, c.Tool) })
	}
	if c.hasAgent && !c.agent.match(req.agent) {
		return Missed, why(func() string { return fmt.Sprintf("agent %q is not %q", req.Agent, c.Agent) })
	}
	var unknown []string
	if c.hasArgs {
		switch {
		case !req.ArgsCarried:
			unknown = append(unknown, "the request carries no argument text (capture below redacted)")
		case req.ArgsCut && c.Effect == Allow:
			unknown = append(unknown, "the request's argument text was cut short, and an allow rule never reads a partial command")
		case c.Effect == Allow && req.redacted:
			unknown = append(unknown, "the request's argument text was redacted ("+aep.RedactedSecret+" or the like), and an allow rule never reads a command it cannot see whole")
		case c.Effect == Allow && !c.args.safe(req.args, req.argPieces, req.argSeps):
			if explain && c.args.match(req.args) {
				return Missed, why(func() string {
					return fmt.Sprintf("args %q match %q only across a shell operator (; & | ` < > $( or a line break), which an allow rule's wildcard never spans", req.Args, c.Args)
				})
			}
			return Missed, why(func() string { return fmt.Sprintf("args %q do not match %q", req.Args, c.Args) })
		case c.Effect != Allow && !c.args.match(req.args) && req.ArgsCut:
			// What was cut off may hold whole commands this rule is about.
			unknown = append(unknown, "the request's argument text was cut short and what is left does not match, so the rest might")
		case c.Effect != Allow && !c.args.match(req.args):
			return Missed, why(func() string { return fmt.Sprintf("args %q do not match %q", req.Args, c.Args) })
		}
	}
	if c.hasProject {
		switch {
		case !req.ProjectKnown:
			unknown = append(unknown, "the session's working directory is not on the stream (capture below redacted)")
		case !c.inProject(req.projectDirs()):
			return Missed, why(func() string { return fmt.Sprintf("project %q is not under %q", req.Project, c.Project) })
		}
	}
	if len(unknown) > 0 {
		return Unknowable, strings.Join(unknown, "; ")
	}
	return Matched, why(func() string { return "every condition holds" })
}

func (c *compiled) inProject(dirs []text) bool {
	for _, d := range dirs {
		if c.project.match(d) {
			return true
		}
	}
	return false
}

// needs says which fact the rule lacks for req.
func (c *compiled) needs(req *prepared) string {
	_, why := c.test(req, true)
	return why
}

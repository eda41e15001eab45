package rules

import (
	"fmt"
	"strings"
	"time"

	"github.com/aep-kimi/aep-kimi/aep"
	"github.com/aep-kimi/aep-kimi/mapping"
)

// AgentPrefix starts the envelope agent of a command a rule sent: the
// sender is the rule, "rule:<id>", so the emitter's attention.answered
// names it in by and every consumer can tell a rule's answer from a
// person's.
const AgentPrefix = mapping.RuleAgentPrefix

// RuleOfAgent returns the rule id an agent names, when it is a rule's.
func RuleOfAgent(agent string) (string, bool) {
	id, ok := strings.CutPrefix(agent, AgentPrefix)
	return id, ok && id != ""
}

// CommandType is the command a rule answers with: the ordinary answer to
// an attention request (AEP-0004), which the hook gate and bridge-web both
// accept.
const CommandType = "control.attention.respond"

// Asked is an attention request a rule may answer, read from its event:
// what the rules match on, and what the answer needs.
type Asked struct {
	Request
	// Session and ID name the request; Source is its emitter.
	Session, ID, Source string
	// Options are the offered option ids.
	Options []string
	// Deadline is the request's expires_at (zero: none).
	Deadline time.Time
}

// ReadRequest reads an attention.requested as rules see it: a permission
// request offered for control, its tool (data.tool.name, else subject),
// agent, and argument text (the prompt's, see mapping.PromptArgs, only at
// capture redacted or full). ok is false for any other event, which no
// rule answers. The session's project is the caller's to add.
func ReadRequest(ev *aep.Event) (Asked, bool) {
	if ev == nil || ev.Type != "attention.requested" || ev.Session == "" || ev.ID == "" {
		return Asked{}, false
	}
	data, err := ev.DataMap()
	if err != nil || str(data, "kind") != "permission" {
		return Asked{}, false
	}
	if via, ok := data["respond_via"].([]any); ok && !containsString(via, "control") {
		return Asked{}, false
	}
	a := Asked{Session: ev.Session, ID: ev.ID, Source: ev.Source}
	a.Agent = ev.Agent
	if t, ok := data["tool"].(map[string]any); ok {
		a.Tool = str(t, "name")
	}
	if a.Tool == "" {
		a.Tool = ev.Subject
	}
	if a.Tool == "" {
		return Asked{}, false
	}
	if opts, ok := data["options"].([]any); ok {
		for _, o := range opts {
			if om, ok := o.(map[string]any); ok && str(om, "id") != "" {
				a.Options = append(a.Options, str(om, "id"))
			}
		}
	}
	if ev.CaptureLevel() >= aep.CaptureRedacted {
		a.Args, a.ArgsCut, a.ArgsCarried = mapping.PromptArgs(str(data, "prompt"), a.Tool)
	}
	if exp := str(data, "expires_at"); exp != "" {
		a.Deadline, _ = time.Parse(time.RFC3339Nano, exp)
	}
	return a, true
}

// The option words an effect answers with, in order of preference: the
// hook gate's, then kimi web's.
var optionWords = map[Effect][]string{
	Allow: {"allow", "approved", "approve"},
	Deny:  {"deny", "rejected", "reject"},
}

// Option is the offered option that carries out effect, or "" when the
// request offers none (then no rule can answer it).
func (a Asked) Option(e Effect) string {
	for _, w := range optionWords[e] {
		for _, o := range a.Options {
			if strings.EqualFold(o, w) {
				return o
			}
		}
	}
	return ""
}

// Answer builds the command that carries out a deciding verdict: a
// control.attention.respond for the request from the rule (agent
// "rule:<id>", source the caller's), with the option that does what the
// rule says; a deny tells the agent which rule refused it, and why when
// the rule has a note. ok is false when the verdict decides nothing or the
// request offers no fitting option.
func (a Asked) Answer(v Verdict, source string, now time.Time) (*aep.Event, bool) {
	if !v.Decides() || v.Rule == nil {
		return nil, false
	}
	option := a.Option(v.Effect)
	if option == "" {
		return nil, false
	}
	answer := map[string]any{"option": option}
	if v.Effect == Deny {
		text := fmt.Sprintf("Denied by aep-kimi rule %s.", v.Rule.ID)
		if n := strings.TrimSpace(v.Rule.Note); n != "" {
			text = fmt.Sprintf("Denied by aep-kimi rule %s: %s", v.Rule.ID, n)
		}
		answer["text"] = text
	}
	cmd := &aep.Event{
		AEP: aep.Version, ID: aep.NewID(), Type: CommandType, Time: aep.FormatTime(now),
		Source: source, Agent: AgentPrefix + v.Rule.ID, Session: a.Session,
		Subject: a.ID, Cause: a.ID,
	}
	if _, ok := answer["text"]; ok {
		cmd.Capture = aep.CaptureRedacted.String()
	}
	if err := cmd.SetData(map[string]any{"answer": answer}); err != nil {
		return nil, false
	}
	return cmd, true
}

func str(m map[string]any, k string) string {
	s, _ := m[k].(string)
	return s
}

func containsString(list []any, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// Scopes of a rule saved from an answer.
const (
	// ScopeProject: the session's project (its working directory and
	// everything under it).
	ScopeProject = "project"
	// ScopeAll: every project.
	ScopeAll = "all"
)

// Proposal is the args pattern "always allow" suggests for this request:
// Propose's for its argument text, "*" (any arguments) for a request that
// carries none. ok is false when there is no suggestion: Propose has none,
// or the suggestion would allow a destructive form through a wildcard (any
// arguments of a shell tool, when the request does not say what it runs).
func (a Asked) Proposal() (pattern string, ok bool) {
	pattern = "*"
	if a.ArgsCarried {
		p, ok := Propose(a.Tool, a.Args)
		if !ok {
			return "", false
		}
		if p != "" {
			pattern = p
		}
	}
	args := pattern
	if args == "*" {
		args = ""
	}
	if len(WildDestructive(Rule{Effect: Allow, Tool: a.Tool, Args: args})) > 0 {
		return "", false
	}
	return pattern, true
}

// Always turns an answer to this request into a rule that gives the same
// answer from now on: the option's effect (allow, or deny for a refusing
// option), this tool and agent, args the pattern ("*" or "" for any
// arguments), and for ScopeProject the session's working directory cwd.
// It refuses a pattern that would not even match this request's own
// argument text, and a project scope without a known directory.
func (a Asked) Always(option, pattern, scope, cwd string) (Rule, error) {
	r := Rule{Tool: a.Tool, Agent: a.Agent, Note: "saved from an answer to request " + a.ID}
	switch strings.ToLower(option) {
	case "allow", "allow_session", "approved", "approve", "approved_session", "approve_session":
		r.Effect = Allow
	case "deny", "rejected", "reject", "cancel":
		r.Effect = Deny
	case "":
		return Rule{}, fmt.Errorf("a rule needs the answer as an option (--option), not free text")
	default:
		return Rule{}, fmt.Errorf("option %q is neither an allow nor a deny", option)
	}
	if pattern != "*" {
		r.Args = pattern
	}
	if r.Args != "" {
		p, err := Compile(r.Args, false)
		if err != nil {
			return Rule{}, fmt.Errorf("pattern %q: %w", r.Args, err)
		}
		match := p.Match
		if r.Effect == Allow {
			match = p.Safe
		}
		switch {
		case !a.ArgsCarried:
			return Rule{}, fmt.Errorf("this request carries no argument text (captured below redacted), so a rule on its arguments would never match: use '*' for any arguments")
		case !a.ArgsCut && !match(a.Args):
			return Rule{}, fmt.Errorf("pattern %q does not match this request's own arguments (%s)", r.Args, a.Args)
		}
	}
	switch scope {
	case ScopeProject, "":
		if cwd == "" {
			return Rule{}, fmt.Errorf("the session's working directory is not on the stream (its adapter captures below redacted): save it for every project instead (scope %s)", ScopeAll)
		}
		r.Project = escapeGlob(cwd)
	case ScopeAll:
	default:
		return Rule{}, fmt.Errorf("scope %q: want %s or %s", scope, ScopeProject, ScopeAll)
	}
	probe := r
	probe.ID = "new"
	if _, err := check(probe, 0); err != nil {
		return Rule{}, err
	}
	return r, nil
}

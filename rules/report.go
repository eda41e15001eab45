package rules

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"
)

// WriteList prints the rules in force as a table, with a line about the
// file when it is refused (the last good rules stay in force). now dates
// the last uses.
func WriteList(w io.Writer, l Listing, now time.Time) {
	if !l.Status.OK {
		fmt.Fprintf(w, "the rules file is refused, so the last good rules stay in force: %s\n\n", l.Status.Error)
	}
	if len(l.Rules) == 0 {
		fmt.Fprintf(w, "no rules (%s): every permission request waits on a person\n", l.Status.Path)
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tEFFECT\tTOOL\tARGS\tPROJECT\tAGENT\tUSES\tLAST USE\tNOTE")
	for _, r := range l.Rules {
		last := "never"
		if !r.LastUse.IsZero() {
			last = ago(now.Sub(r.LastUse)) + " ago"
		}
		uses := strconv.FormatUint(r.Uses, 10)
		if r.Unknowable > 0 {
			uses += fmt.Sprintf(" (%d unknowable)", r.Unknowable)
		}
		args, project := orAny(r.Args), orAny(r.Project)
		if r.Hidden {
			args, project = hiddenField, hiddenField
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.ID, r.Effect, r.Tool, args, project,
			orAny(r.Agent), uses, last, r.Note)
	}
	_ = tw.Flush()
	// Rules saved before the floor, or by hand, may allow more than their
	// writer meant: say so where they are listed.
	for _, r := range l.Rules {
		if r.Hidden {
			continue // its pattern is not known here; blank reads as "*"
		}
		if fs := WildDestructive(r.Rule); len(fs) > 0 {
			names := make([]string, len(fs))
			for i, f := range fs {
				names[i] = f.Name
			}
			fmt.Fprintf(w, "warning: %s's wildcard also allows destructive commands (%s): aep-kimi rules test shows which\n",
				r.ID, strings.Join(names, ", "))
		}
	}
}

// WriteVerdict prints what the rules would do with the request p
// describes, and why, rule by rule.
func WriteVerdict(w io.Writer, p Probe, v Verdict) {
	switch {
	case v.Effect == Allow || v.Effect == Deny:
		fmt.Fprintf(w, "%s by rule %s: the request would be answered at once, with no person involved\n", v.Effect, v.Rule.ID)
	case v.Effect == Ask:
		fmt.Fprintf(w, "ask (rule %s): the request would wait on a person even where an allow rule matches\n", v.Rule.ID)
	default:
		fmt.Fprintln(w, "no rule decides: the request would wait on a person")
	}
	fmt.Fprintf(w, "why: %s\n", v.Why)
	if p.Args == nil || *p.Args == "" {
		fmt.Fprintln(w, "note: without --args the request carries no argument text (as at capture metadata), so no rule with args can match")
	}
	if v.Hidden {
		fmt.Fprintln(w, "the rules' patterns and projects, and how each rule weighed the request, are hidden at your capture level")
		return
	}
	if len(v.Trace) == 0 {
		fmt.Fprintf(w, "no rule concerns tool %s\n", p.Tool)
		return
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, s := range v.Trace {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", s.Rule.ID, s.Rule.Effect, s.Outcome, s.Why)
	}
	_ = tw.Flush()
	for _, s := range v.Trace {
		if len(s.Destructive) == 0 {
			continue
		}
		fmt.Fprintf(w, "\nwarning: %s (%s) would also allow these destructive commands through its wildcard:\n", s.Rule.ID, Describe(s.Rule))
		for _, f := range s.Destructive {
			fmt.Fprintf(w, "  %-26s e.g. %s\n", f.Name, f.Example)
		}
	}
}

// Describe is a rule in one line: "allow Bash `go test *` in ~/src/x".
func Describe(r Rule) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s", r.Effect, r.Tool)
	if r.Args != "" {
		fmt.Fprintf(&b, " `%s`", r.Args)
	}
	if r.Project != "" {
		fmt.Fprintf(&b, " in %s", r.Project)
	}
	if r.Agent != "" {
		fmt.Fprintf(&b, " for %s", r.Agent)
	}
	return b.String()
}

// hiddenField stands for a rule's pattern or project that the relay did
// not show a reader below the redacted capture ceiling (Listed.Hidden).
const hiddenField = "(hidden)"

func orAny(s string) string {
	if s == "" {
		return "*"
	}
	return s
}

func ago(d time.Duration) string {
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(max(d, 0).Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", int(d.Hours()))
	}
	return fmt.Sprintf("%dd", int(d.Hours()/24))
}

// subcommandTools are programs whose second word picks what they do, so a
// proposed pattern keeps it: `go test *`, not `go *`.
var subcommandTools = map[string]bool{
	"go": true, "git": true, "npm": true, "npx": true, "pnpm": true, "yarn": true, "cargo": true,
	"docker": true, "kubectl": true, "make": true, "pip": true, "uv": true, "gh": true, "bun": true,
}

// Propose suggests an args pattern for "always" from a request's argument
// text: a command's program (and its subcommand, for the programs that have
// them) and then anything, `go test ./...` -> `go test *`; a path's
// directory and anything under it. "" when there is nothing to propose
// (then a rule on the tool alone covers any arguments). For a shell tool
// the suggestion is never wider than the command's risk: a command holding
// a destructive form, or one whose widening could allow one, is proposed
// exactly (`rm -rf ./build` as itself); ok is false when even that cannot
// be, for a text cut short.
func Propose(tool, args string) (pattern string, ok bool) {
	body, cut := strings.CutSuffix(strings.TrimSpace(args), "…")
	body = strings.TrimSpace(body)
	if body == "" {
		return "", !cut
	}
	pattern = widen(body)
	t, err := Compile(tool, true)
	if err != nil || !shellTool(t) {
		return pattern, true
	}
	p, err := Compile(pattern, false)
	switch {
	case err == nil && len(DestructiveIn(body)) == 0 && len(p.destructiveIn()) == 0:
		return pattern, true
	case cut:
		return "", false
	}
	exact := escapeGlob(body)
	if _, err := Compile(exact, false); err != nil {
		return "", false
	}
	return exact, true
}

// widen is Propose's pattern before the floor.
func widen(args string) string {
	words := strings.Fields(args)
	if first := words[0]; strings.HasPrefix(first, "/") || strings.HasPrefix(first, "~/") {
		if i := strings.LastIndexByte(first, '/'); i > 0 && len(words) == 1 {
			return escapeGlob(first[:i]) + "/*"
		}
	}
	keep := 1
	if subcommandTools[words[0]] && len(words) > 1 && plainWord(words[1]) {
		keep = 2
	}
	if !plainWord(words[0]) {
		return escapeGlob(args)
	}
	return escapeGlob(strings.Join(words[:keep], " ")) + " *"
}

// plainWord is a word a pattern may keep as is: a name, not an option, a
// path or anything the shell would treat specially.
func plainWord(w string) bool {
	if w == "" || len(w) > 40 {
		return false
	}
	for _, r := range w {
		if !(unicode.IsLetter(r) || unicode.IsDigit(r) || r == '-' || r == '_' || r == '.' || r == '+') {
			return false
		}
	}
	return !strings.HasPrefix(w, "-") && !strings.HasPrefix(w, ".")
}

// escapeGlob makes s match itself as a pattern.
func escapeGlob(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `*`, `\*`, `?`, `\?`)
	return r.Replace(s)
}

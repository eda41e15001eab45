package rules

import (
	"fmt"
	"strings"
	"testing"

	"github.com/aep-kimi/aep-kimi/aep"
)

func mustSet(t testing.TB, rules ...Rule) *Set {
	t.Helper()
	s, err := newSet(rules)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func bash(args string) Request {
	return Request{Agent: "kimi-code", Tool: "Bash", Args: args, ArgsCarried: true}
}

// The session: echo ok is allowed, rm -rf ./build denied (deny
// beats allow), git push decided by nobody.
func TestEvaluatePrecedence(t *testing.T) {
	s := mustSet(t,
		Rule{ID: "echo", Effect: Allow, Tool: "Bash", Args: "echo *"},
		Rule{ID: "rm", Effect: Allow, Tool: "Bash", Args: "rm *"},
		Rule{ID: "rmrf", Effect: Deny, Tool: "Bash", Args: "rm -rf *"},
		Rule{ID: "push", Effect: Ask, Tool: "bash", Args: "git push --force*"},
		Rule{ID: "anyread", Effect: Allow, Tool: "Read"},
	)
	cases := []struct {
		req    Request
		effect Effect
		rule   string
	}{
		{bash("echo ok"), Allow, "echo"},
		{bash("rm -rf ./build"), Deny, "rmrf"},
		{bash("rm ./build/x"), Allow, "rm"},
		{bash("git push"), "", ""},
		{bash("git push --force origin"), Ask, "push"},
		{Request{Tool: "read", Args: "/etc/hosts", ArgsCarried: true}, Allow, "anyread"},
		{Request{Tool: "Write", Args: "x", ArgsCarried: true}, "", ""},
	}
	for _, c := range cases {
		v := s.Evaluate(c.req, false)
		got := ""
		if v.Rule != nil {
			got = v.Rule.ID
		}
		if v.Effect != c.effect || got != c.rule {
			t.Errorf("%s %q: %s by %q (%s), want %s by %q", c.req.Tool, c.req.Args, v.Effect, got, v.Why, c.effect, c.rule)
		}
	}
	// Ask beats allow; deny beats ask.
	s2 := mustSet(t,
		Rule{ID: "all", Effect: Allow, Tool: "*"},
		Rule{ID: "ask", Effect: Ask, Tool: "Bash"},
	)
	if v := s2.Evaluate(bash("ls"), false); v.Effect != Ask || v.Rule.ID != "ask" {
		t.Fatalf("ask did not beat allow: %+v", v)
	}
	s3 := mustSet(t, Rule{ID: "ask", Effect: Ask, Tool: "Bash"}, Rule{ID: "no", Effect: Deny, Tool: "*"})
	if v := s3.Evaluate(bash("ls"), false); v.Effect != Deny || v.Rule.ID != "no" {
		t.Fatalf("deny did not beat ask: %+v", v)
	}
	// Among equals the first in the file decides, across the tool index
	// and the wildcard list.
	s4 := mustSet(t, Rule{ID: "first", Effect: Deny, Tool: "B*"}, Rule{ID: "second", Effect: Deny, Tool: "Bash"})
	if v := s4.Evaluate(bash("ls"), false); v.Rule.ID != "first" {
		t.Fatalf("file order: %s decided", v.Rule.ID)
	}
}

// A rule needing a fact the request does not carry never matches; a deny
// or ask rule in that state keeps an allow rule from answering.
func TestEvaluateUnknowable(t *testing.T) {
	s := mustSet(t,
		Rule{ID: "any", Effect: Allow, Tool: "Bash"},
		Rule{ID: "rmrf", Effect: Deny, Tool: "Bash", Args: "rm -rf *"},
	)
	metadata := Request{Agent: "kimi-code", Tool: "Bash"} // captured at metadata: no argument text
	v := s.Evaluate(metadata, true)
	if v.Effect != "" || v.Held == nil || v.Held.ID != "rmrf" {
		t.Fatalf("an unknowable deny must leave the request to a person: %+v", v)
	}
	if !strings.Contains(v.Why, "carries no argument text") || !strings.Contains(v.Why, "a person answers") {
		t.Fatalf("why: %q", v.Why)
	}
	if len(v.Trace) != 2 || v.Trace[0].Outcome != Matched || v.Trace[1].Outcome != Unknowable {
		t.Fatalf("trace: %+v", v.Trace)
	}
	// With the text, the deny decides or the allow does.
	if v := s.Evaluate(bash("rm -rf /"), false); v.Effect != Deny {
		t.Fatalf("with text: %+v", v)
	}
	if v := s.Evaluate(bash("ls"), false); v.Effect != Allow {
		t.Fatalf("with text: %+v", v)
	}
	// An unknowable allow rule simply does not match.
	s2 := mustSet(t, Rule{ID: "echo", Effect: Allow, Tool: "Bash", Args: "echo *"})
	if v := s2.Evaluate(metadata, false); v.Effect != "" || v.Held != nil {
		t.Fatalf("unknowable allow: %+v", v)
	}
	// A project rule without the session's directory.
	s3 := mustSet(t, Rule{ID: "here", Effect: Allow, Tool: "Bash", Project: "~/src/x"})
	v = s3.Evaluate(bash("ls"), true)
	if v.Effect != "" || v.Trace[0].Outcome != Unknowable || !strings.Contains(v.Trace[0].Why, "working directory") {
		t.Fatalf("project unknown: %+v", v)
	}
	r := bash("ls")
	r.Project, r.ProjectKnown = "/home/ann/src/x/sub", true
	if v := s3.Evaluate(r, false); v.Effect != Allow {
		t.Fatalf("project known: %+v", v)
	}
}

// A command cut short by the emitter is only its start: no allow rule
// reads it, while a deny rule still may.
func TestEvaluateCut(t *testing.T) {
	s := mustSet(t,
		Rule{ID: "echo", Effect: Allow, Tool: "Bash", Args: "echo *"},
		Rule{ID: "curl", Effect: Deny, Tool: "Bash", Args: "curl *"},
	)
	long := bash("echo " + strings.Repeat("a", 240) + "…")
	long.ArgsCut = true
	if v := s.Evaluate(long, false); v.Effect != "" {
		t.Fatalf("an allow rule answered a cut command: %+v", v)
	}
	cutCurl := bash("curl http://x/" + strings.Repeat("a", 240) + "…")
	cutCurl.ArgsCut = true
	if v := s.Evaluate(cutCurl, false); v.Effect != Deny {
		t.Fatalf("a deny rule must still read a cut command: %+v", v)
	}
}

// A redacted command is not the tool's own input: no allow rule reads it,
// whatever its wildcards, while a deny rule still matches what it shows.
func TestEvaluateRedacted(t *testing.T) {
	s := mustSet(t,
		Rule{ID: "echo", Effect: Allow, Tool: "Bash", Args: "echo *"},
		Rule{ID: "any", Effect: Allow, Tool: "Bash", Args: "*"},
		Rule{ID: "rmrf", Effect: Deny, Tool: "Bash", Args: "*rm -rf*"},
	)
	for _, args := range []string{"echo password=" + aep.RedactedSecret + " -rf /tmp/victim", "echo " + aep.RedactedPII} {
		v := s.Evaluate(bash(args), true)
		if v.Effect != "" {
			t.Fatalf("%q: %+v", args, v)
		}
		if v.Trace[0].Outcome != Unknowable || !strings.Contains(v.Trace[0].Why, "redacted") {
			t.Fatalf("%q: the trace does not say the allow rule cannot read it: %+v", args, v.Trace[0])
		}
	}
	if v := s.Evaluate(bash("echo password="+aep.RedactedSecret+";rm -rf /tmp/victim"), false); v.Effect != Deny {
		t.Fatalf("the deny rule does not see past the marker: %+v", v)
	}
}

// What was cut off a command may hold the command a deny rule is about, so
// a deny rule that misses the rest is unknowable and keeps an allow rule on
// the tool alone from answering.
func TestEvaluateCutHoldsAllow(t *testing.T) {
	s := mustSet(t,
		Rule{ID: "bash", Effect: Allow, Tool: "Bash"},
		Rule{ID: "rmrf", Effect: Deny, Tool: "Bash", Args: "*rm -rf*"},
	)
	cut := bash("echo " + strings.Repeat("a", 240) + "…")
	cut.ArgsCut = true
	if v := s.Evaluate(cut, false); v.Effect != "" || v.Held == nil || v.Held.ID != "rmrf" {
		t.Fatalf("a cut command was allowed past a deny rule that cannot see its end: %+v", v)
	}
	if v := s.Evaluate(bash("echo ok"), false); v.Effect != Allow {
		t.Fatalf("a whole command the deny rule misses: %+v", v)
	}
}

func TestEvaluateSafeAllow(t *testing.T) {
	s := mustSet(t, Rule{ID: "echo", Effect: Allow, Tool: "Bash", Args: "echo *"}, Rule{ID: "semi", Effect: Deny, Tool: "Bash", Args: "*;*"})
	v := s.Evaluate(bash("echo ok; rm -rf /"), true)
	if v.Effect != Deny || v.Rule.ID != "semi" {
		t.Fatalf("%+v", v)
	}
	if !strings.Contains(v.Trace[0].Why, "shell operator") {
		t.Fatalf("the trace does not say why echo * missed: %q", v.Trace[0].Why)
	}
}

func TestEvaluateAgent(t *testing.T) {
	s := mustSet(t, Rule{ID: "k", Effect: Allow, Tool: "Bash", Agent: "kimi-*"})
	if v := s.Evaluate(bash("ls"), false); v.Effect != Allow {
		t.Fatalf("%+v", v)
	}
	other := bash("ls")
	other.Agent = "claude-code"
	if v := s.Evaluate(other, false); v.Effect != "" {
		t.Fatalf("%+v", v)
	}
}

// thousandRules is the benchmark's book: 1,000 rules on one tool, none of
// which matches the request until the last.
func thousandRules(tb testing.TB) *Set {
	rules := make([]Rule, 0, 1000)
	for i := range 999 {
		rules = append(rules, Rule{ID: fmt.Sprintf("r%d", i), Effect: Allow, Tool: "Bash", Args: fmt.Sprintf("tool-%d *", i), Project: "~/src/*"})
	}
	rules = append(rules, Rule{ID: "last", Effect: Deny, Tool: "Bash", Args: "rm -rf *"})
	return mustSet(tb, rules...)
}

func BenchmarkEvaluate1000(b *testing.B) {
	s := thousandRules(b)
	req := bash("rm -rf ./build")
	req.Project, req.ProjectKnown = "/home/ann/src/aep-kimi", true
	b.ReportAllocs()
	for b.Loop() {
		if v := s.Evaluate(req, false); v.Effect != Deny {
			b.Fatal(v)
		}
	}
}

// BenchmarkEvaluate1000Mixed spreads the rules over 50 tools: the index
// visits only the request's own.
func BenchmarkEvaluate1000Mixed(b *testing.B) {
	rules := make([]Rule, 0, 1000)
	for i := range 1000 {
		rules = append(rules, Rule{ID: fmt.Sprintf("r%d", i), Effect: Allow, Tool: fmt.Sprintf("Tool%d", i%50), Args: fmt.Sprintf("x-%d *", i)})
	}
	s := mustSet(b, rules...)
	req := Request{Tool: "Tool7", Args: "x-7 y", ArgsCarried: true}
	b.ReportAllocs()
	for b.Loop() {
		if v := s.Evaluate(req, false); v.Effect != Allow {
			b.Fatal(v)
		}
	}
}

// BenchmarkEvaluate1 is one rule: the evaluation's fixed cost.
func BenchmarkEvaluate1(b *testing.B) {
	s := mustSet(b, Rule{ID: "last", Effect: Deny, Tool: "Bash", Args: "rm -rf *"})
	req := bash("rm -rf ./build")
	req.Project, req.ProjectKnown = "/home/ann/src/aep-kimi", true
	b.ReportAllocs()
	for b.Loop() {
		if v := s.Evaluate(req, false); v.Effect != Deny {
			b.Fatal(v)
		}
	}
}

// BenchmarkParseRequest is the baseline: parsing the gate's request, as the
// relay does for every event it admits, rules or not.
func BenchmarkParseRequest(b *testing.B) {
	raw, err := gateAsk(&testing.T{}, "rm -rf ./build", aep.CaptureRedacted).Bytes()
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := aep.ParseEvent(raw); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkReadRequest is what the relay adds before evaluating: reading
// the request's data as rules see it.
func BenchmarkReadRequest(b *testing.B) {
	raw, err := gateAsk(&testing.T{}, "rm -rf ./build", aep.CaptureRedacted).Bytes()
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		ev, _ := aep.ParseEvent(raw)
		if _, ok := ReadRequest(ev); !ok {
			b.Fatal("not a request")
		}
	}
}

package rules

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/aep-kimi/aep-kimi/aep"
	"github.com/aep-kimi/aep-kimi/mapping"
)

// gateAsk maps a PreToolUse through the real mapping into the gate's
// attention.requested, at attention capture level.
func gateAsk(t testing.TB, command string, level aep.Capture) *aep.Event {
	t.Helper()
	return gateAskWith(t, command, mapping.Posture{Capture: aep.CaptureMetadata, AttentionCapture: level})
}

// gateAskWith is gateAsk at posture p.
func gateAskWith(t testing.TB, command string, p mapping.Posture) *aep.Event {
	t.Helper()
	payload, _ := json.Marshal(map[string]any{"hook_event_name": "PreToolUse", "session_id": "s1", "tool_name": "Bash",
		"tool_call_id": "c1", "tool_input": map[string]any{"command": command}})
	r, err := mapping.Hook(payload, p)
	if err != nil {
		t.Fatal(err)
	}
	opts := []aep.Option{{ID: "allow", Label: "Allow"}, {ID: "allow_session", Label: "Allow for this session"}, {ID: "deny", Label: "Deny"}}
	m := mapping.GateRequest(r, p, aep.FormatTime(time.Now().Add(time.Minute)), "", opts)
	ev := &aep.Event{ID: "REQ1", Source: "aep://h/agent/kimi-code/session/s1", Agent: "kimi-code", Session: "s1", Seq: aep.Int64(3)}
	if err := m.Envelope(ev); err != nil {
		t.Fatal(err)
	}
	b, err := ev.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	out, err := aep.ParseEvent(b)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// What rules read of a request is what the mapping wrote: the tool, and
// the argument text at redacted and full only.
func TestReadRequest(t *testing.T) {
	for _, c := range []struct {
		level   aep.Capture
		carried bool
	}{{aep.CaptureMetadata, false}, {aep.CaptureRedacted, true}, {aep.CaptureFull, true}} {
		a, ok := ReadRequest(gateAsk(t, "go test ./...\n  go vet ./...", c.level))
		if !ok || a.Tool != "Bash" || a.Agent != "kimi-code" || a.Session != "s1" || a.ID != "REQ1" || a.Deadline.IsZero() {
			t.Fatalf("%s: %+v", c.level, a)
		}
		if a.ArgsCarried != c.carried {
			t.Fatalf("%s: args carried %v", c.level, a.ArgsCarried)
		}
		if c.carried && a.Args != "go test ./... "+mapping.LineBreak+" go vet ./..." {
			t.Fatalf("%s: args %q", c.level, a.Args)
		}
		if a.Option(Allow) != "allow" || a.Option(Deny) != "deny" {
			t.Fatalf("options %v", a.Options)
		}
	}
	long, _ := ReadRequest(gateAsk(t, "echo "+strings.Repeat("x", 300), aep.CaptureRedacted))
	if !long.ArgsCut {
		t.Fatal("a summary cut short does not read as cut")
	}
	for name, mutate := range map[string]func(*aep.Event){
		"not a request": func(e *aep.Event) { e.Type = "attention.answered" },
		"no session":    func(e *aep.Event) { e.Session = "" },
	} {
		ev := gateAsk(t, "ls", aep.CaptureRedacted)
		mutate(ev)
		if _, ok := ReadRequest(ev); ok {
			t.Errorf("%s: read as a request", name)
		}
	}
	oob := gateAsk(t, "ls", aep.CaptureRedacted)
	_ = oob.SetData(map[string]any{"kind": "permission", "prompt": "x", "respond_via": []any{"oob"}, "tool": map[string]any{"name": "Bash"}})
	if _, ok := ReadRequest(oob); ok {
		t.Error("a request answered only in the vendor's UI reads as one a rule may answer")
	}
	form := gateAsk(t, "ls", aep.CaptureRedacted)
	_ = form.SetData(map[string]any{"kind": "form", "prompt": "x"})
	if _, ok := ReadRequest(form); ok {
		t.Error("a form reads as a permission request")
	}
}

func TestAnswer(t *testing.T) {
	a, _ := ReadRequest(gateAsk(t, "rm -rf ./build", aep.CaptureRedacted))
	rule := Rule{ID: "rmrf", Effect: Deny, Tool: "Bash", Args: "rm -rf *", Note: "never"}
	cmd, ok := a.Answer(Verdict{Rule: &rule, Effect: Deny}, "aep://relay/agent/aep-kimi-rules", time.Now())
	if !ok {
		t.Fatal("no answer")
	}
	if cmd.Type != CommandType || cmd.Agent != "rule:rmrf" || cmd.Subject != "REQ1" || cmd.Cause != "REQ1" || cmd.Session != "s1" || cmd.Seq != nil {
		t.Fatalf("command %+v", cmd)
	}
	if err := aep.Validate(cmd); err != nil {
		t.Fatalf("the command is not a valid event: %v", err)
	}
	if id, ok := RuleOfAgent(cmd.Agent); !ok || id != "rmrf" {
		t.Fatal(id)
	}
	if _, ok := a.Answer(Verdict{Rule: &rule, Effect: Ask}, "s", time.Now()); ok {
		t.Fatal("an ask verdict answered")
	}
	a.Options = []string{"approved", "rejected"}
	cmd, _ = a.Answer(Verdict{Rule: &rule, Effect: Deny}, "s", time.Now())
	if d, _ := cmd.DataMap(); d["answer"].(map[string]any)["option"] != "rejected" {
		t.Fatalf("kimi web's refusing option not used: %v", d)
	}
	a.Options = []string{"yes"}
	if _, ok := a.Answer(Verdict{Rule: &rule, Effect: Deny}, "s", time.Now()); ok {
		t.Fatal("answered with an option the request does not offer")
	}
}

func TestAlways(t *testing.T) {
	a, _ := ReadRequest(gateAsk(t, "go test ./...", aep.CaptureRedacted))
	r, err := a.Always("allow", "go test *", ScopeProject, "~/src/aep-kimi")
	if err != nil || r.Effect != Allow || r.Tool != "Bash" || r.Args != "go test *" || r.Project != "~/src/aep-kimi" || r.Agent != "kimi-code" {
		t.Fatalf("%+v %v", r, err)
	}
	if r, _ := a.Always("deny", "*", ScopeAll, ""); r.Effect != Deny || r.Args != "" || r.Project != "" {
		t.Fatalf("%+v", r)
	}
	for _, c := range []struct{ option, pattern, scope, cwd, want string }{
		{"allow", "git *", ScopeAll, "", "does not match this request's own arguments"},
		{"allow", "go test *", ScopeProject, "", "working directory is not on the stream"},
		{"", "go test *", ScopeAll, "", "needs the answer as an option"},
		{"maybe", "go test *", ScopeAll, "", "neither an allow nor a deny"},
		{"allow", "go test *", "galaxy", "", `scope "galaxy"`},
		{"allow", `go test \`, ScopeAll, "", "lone backslash"},
	} {
		if _, err := a.Always(c.option, c.pattern, c.scope, c.cwd); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Always(%q, %q, %q): %v, want %q", c.option, c.pattern, c.scope, err, c.want)
		}
	}
	meta, _ := ReadRequest(gateAsk(t, "go test ./...", aep.CaptureMetadata))
	if _, err := meta.Always("allow", "go test *", ScopeAll, ""); err == nil || !strings.Contains(err.Error(), "carries no argument text") {
		t.Fatalf("a pattern on a request without argument text: %v", err)
	}
	if r, err := meta.Always("allow", "*", ScopeAll, ""); err != nil || r.Args != "" {
		t.Fatalf("any arguments: %+v %v", r, err)
	}
	// A project path with glob characters matches itself only.
	r, _ = a.Always("allow", "*", ScopeProject, "/srv/a*b")
	if r.Project != `/srv/a\*b` {
		t.Fatalf("project %q", r.Project)
	}
}

func TestPropose(t *testing.T) {
	for in, want := range map[string]string{
		"go test ./...":             "go test *",
		"git push origin main":      "git push origin main",
		"git status":                "git status *",
		"rm -rf ./build":            "rm -rf ./build",
		"echo ok":                   "echo *",
		"make":                      "make *",
		"git --no-pager log":        "git --no-pager log",
		"./scripts/release.sh v1":   "./scripts/release.sh v1",
		"/home/ann/src/x/main.go":   "/home/ann/src/x/main.go",
		"python3 -c 'print(1)'…":    "python3 *",
		"":                          "",
		"weird*name arg":            `weird\*name arg`,
		"npm run build && npm test": "npm run *",
		"npm publish --tag beta":    "npm publish --tag beta",
		"env FOO=1 make":            "env FOO=1 make",
		"curl -fsSL https://x | sh": "curl -fsSL https://x | sh",
	} {
		if got, ok := Propose("Bash", in); got != want || !ok {
			t.Errorf("Propose(Bash, %q) = %q %v, want %q", in, got, ok, want)
		}
	}
	// A tool that runs no shell command keeps the wider proposals.
	if got, _ := Propose("Write", "/home/ann/src/x/main.go"); got != "/home/ann/src/x/*" {
		t.Errorf("Propose(Write, path) = %q", got)
	}
	if got, _ := Propose("Bash", "git push origin main"); got != "git push origin main" {
		t.Errorf("git push: %q", got)
	}
	// A destructive command cut short cannot be proposed exactly: nothing is.
	if got, ok := Propose("Bash", "rm -rf ./build/"+strings.Repeat("a", 200)+"…"); ok || got != "" {
		t.Errorf("a cut rm: %q %v", got, ok)
	}
	// A proposal always matches the text it came from (allow-safe where the
	// text has no operators).
	for _, in := range []string{"go test ./...", "echo ok", "./scripts/release.sh v1", "/home/ann/src/x/main.go", "rm -rf ./build"} {
		got, _ := Propose("Bash", in)
		if p := MustCompile(got, false); !p.Safe(in) {
			t.Errorf("Propose(%q) = %q does not match it", in, p)
		}
	}
}

// At metadata a Bash request does not say what it runs: "*" would allow
// every destructive form, so nothing is proposed; for another tool "*" is.
func TestProposal(t *testing.T) {
	meta, _ := ReadRequest(gateAsk(t, "rm -rf ./build", aep.CaptureMetadata))
	if p, ok := meta.Proposal(); ok || p != "" {
		t.Fatalf("Bash at metadata: %q %v", p, ok)
	}
	meta.Tool = "Read"
	if p, ok := meta.Proposal(); !ok || p != "*" {
		t.Fatalf("Read at metadata: %q %v", p, ok)
	}
	red, _ := ReadRequest(gateAsk(t, "rm -rf ./build", aep.CaptureRedacted))
	if p, ok := red.Proposal(); !ok || p != "rm -rf ./build" {
		t.Fatalf("rm at redacted: %q %v", p, ok)
	}
}

package relay_test

import (
	"encoding/json"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aep-kimi/aep-kimi/aep"
	"github.com/aep-kimi/aep-kimi/internal/testkit/relaytest"
	"github.com/aep-kimi/aep-kimi/relay"
	"github.com/aep-kimi/aep-kimi/rules"
)

// issueRules are the issue's: echo allowed, rm allowed, rm -rf denied.
var issueRules = []rules.Rule{
	{ID: "echo", Effect: rules.Allow, Tool: "Bash", Args: "echo *"},
	{ID: "rm", Effect: rules.Allow, Tool: "Bash", Args: "rm *"},
	{ID: "rmrf", Effect: rules.Deny, Tool: "Bash", Args: "rm -rf *", Note: "never force-remove"},
}

// rulesBook writes rules into a fresh home and opens them.
func rulesBook(t *testing.T, rs ...rules.Rule) *rules.Book {
	t.Helper()
	path := filepath.Join(t.TempDir(), rules.FileName)
	if rs != nil {
		if err := os.WriteFile(path, rules.Encode(rs), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	b := rules.Open(rules.Config{Path: path, Poll: 10 * time.Millisecond})
	if !b.Status().OK {
		t.Fatal(b.Status().Error)
	}
	return b
}

// gateTarget is an emitter like the hook adapter with its gate on.
func gateTarget(t *testing.T, srv *relaytest.Server, session string) *wsClient {
	return target(t, srv, "emitter", "kimi-code", session, `{"accepts":["control.attention.respond"]}`)
}

// askEvent is the gate's attention.requested for Bash running command, at
// capture (redacted carries the argument text in the prompt).
func askEvent(session string, seq int64, command, capture string) *aep.Event {
	prompt := "Kimi wants to use Bash: " + command
	if capture == "metadata" {
		prompt = "kimi-code requests permission: Bash"
	}
	data, _ := json.Marshal(map[string]any{
		"kind": "permission", "prompt": prompt, "tool": map[string]any{"name": "Bash", "call_id": "c1"},
		"respond_via": []string{"control"},
		"options":     []map[string]string{{"id": "allow", "label": "Allow"}, {"id": "allow_session", "label": "Allow for this session"}, {"id": "deny", "label": "Deny"}, {"id": "cancel", "label": "Cancel"}},
		"expires_at":  aep.FormatTime(time.Now().Add(time.Minute)),
	})
	e := mkEvent(session, seq, withType("attention.requested"), withSeverity("notice"), withData(string(data)))
	e.Agent, e.Source, e.Capture, e.Subject = "kimi-code", "aep://test/agent/kimi-code", capture, "Bash"
	return e
}

// A matching rule answers through the command path: the claimant gets an
// ordinary control.attention.respond from rule:<id>, and every watcher
// sees the request and its answer together, stored in history in order.
func TestRulesAnswerRequests(t *testing.T) {
	t.Parallel()
	book := rulesBook(t, issueRules...)
	srv := relaytest.RunServer(t, relay.Config{Token: testToken, Rules: book})
	tgt := gateTarget(t, srv, "s-rules")
	watcher := openSSE(t, srv, url.Values{"filter": {`{"session":"s-rules"}`}}, nil)

	cases := []struct {
		command, rule, option string
	}{
		{"echo ok", "echo", "allow"},
		{"rm -rf ./build", "rmrf", "deny"},
		{"rm ./build/old", "rm", "allow"},
	}
	for i, c := range cases {
		ask := askEvent("s-rules", int64(i+1), c.command, "redacted")
		tgt.send(t, ask)
		f := tgt.eventFrames(t, 1)[0]
		if f.str("type") != rules.CommandType || f.str("agent") != "rule:"+c.rule || f.str("subject") != ask.ID || f.str("session") != "s-rules" {
			t.Fatalf("%q: the claimant got %s, want a respond from rule:%s", c.command, f.raw, c.rule)
		}
		answer := f.m["data"].(map[string]any)["answer"].(map[string]any)
		if answer["option"] != c.option {
			t.Fatalf("%q: option %v, want %s", c.command, answer["option"], c.option)
		}
		if c.option == "deny" && !strings.Contains(answer["text"].(string), "rule rmrf: never force-remove") {
			t.Fatalf("the deny does not tell the agent which rule refused and why: %v", answer["text"])
		}
		got := watcher.events(t, 2)
		if got[0].ID != ask.ID || got[1].Type != rules.CommandType || got[1].Subject != ask.ID {
			t.Fatalf("%q: watcher saw %s %s, want the request then its answer", c.command, got[0].Type, got[1].Type)
		}
	}
	// No rule: nothing is sent, the request waits for a person.
	tgt.send(t, askEvent("s-rules", 4, "git push", "redacted"))
	if got := watcher.events(t, 1); got[0].Type != "attention.requested" {
		t.Fatal(got[0].Type)
	}
	tgt.quiet(t, 150*time.Millisecond)
	watcher.quiet(t, 50*time.Millisecond)

	hist := sessionReplay(t, srv, "s-rules")
	var types []string
	for _, it := range hist {
		types = append(types, it.Event)
	}
	want := "progress.status,attention.requested,control.attention.respond,attention.requested,control.attention.respond,attention.requested,control.attention.respond,attention.requested"
	if strings.Join(types, ",") != want {
		t.Fatalf("history:\n got %s\nwant %s", strings.Join(types, ","), want)
	}
	for _, l := range book.List() {
		if l.Uses != 1 || l.LastUse.IsZero() {
			t.Fatalf("rule %s used %d times, want 1", l.ID, l.Uses)
		}
	}
	metrics := string(do(t, srv, "GET", "/metrics", nil, nil).body)
	for _, m := range []string{
		`aepkimi_rules_uses_total{effect="deny",rule="rmrf"} 1`,
		`aepkimi_rules_uses_total{effect="allow",rule="echo"} 1`,
		`aepkimi_rules_requests_total{outcome="answered"} 3`,
		`aepkimi_rules_requests_total{outcome="none"} 1`,
		`aepkimi_rules_loaded 3`,
	} {
		if !strings.Contains(metrics, m) {
			t.Errorf("/metrics lacks %s", m)
		}
	}
}

// What a rule cannot see it does not answer: a request captured at
// metadata carries no argument text, so neither the allow nor the deny
// rule on it applies, and an unknowable deny keeps a broad allow from
// answering.
func TestRulesNeedArgumentText(t *testing.T) {
	t.Parallel()
	book := rulesBook(t, append([]rules.Rule{{ID: "any-bash", Effect: rules.Allow, Tool: "Bash"}}, issueRules...)...)
	srv := relaytest.RunServer(t, relay.Config{Token: testToken, Rules: book})
	tgt := gateTarget(t, srv, "s-meta")
	tgt.send(t, askEvent("s-meta", 1, "rm -rf /", "metadata"))
	tgt.quiet(t, 200*time.Millisecond)
	metrics := string(do(t, srv, "GET", "/metrics", nil, nil).body)
	if !strings.Contains(metrics, `aepkimi_rules_requests_total{outcome="held"} 1`) {
		t.Fatalf("/metrics does not count the held request:\n%s", grep(metrics, "aepkimi_rules"))
	}
	for _, l := range book.List() {
		if l.ID == "rmrf" && l.Unknowable != 1 {
			t.Fatalf("rmrf's unknowable count %d, want 1", l.Unknowable)
		}
	}
}

// A watch-only relay carries no commands, so no rule answers there.
func TestRulesWatchOnlyAnswerNothing(t *testing.T) {
	t.Parallel()
	srv := relaytest.RunServer(t, relay.Config{Rules: rulesBook(t, issueRules...)})
	tgt := gateTarget(t, srv, "s-w")
	tgt.send(t, askEvent("s-w", 1, "echo ok", "redacted"))
	tgt.quiet(t, 200*time.Millisecond)
	if hist := sessionReplay(t, srv, "s-w"); len(hist) != 2 {
		t.Fatalf("history has %d events, want the claim and the request only", len(hist))
	}
}

// A request delivered twice gets the same answer twice: the emitter
// dedupes it and acks as before, and the rule counts one use.
func TestRulesRedeliveredRequest(t *testing.T) {
	t.Parallel()
	book := rulesBook(t, issueRules...)
	srv := relaytest.RunServer(t, relay.Config{Token: testToken, Rules: book})
	tgt := gateTarget(t, srv, "s-dup")
	ask := askEvent("s-dup", 1, "echo ok", "redacted")
	tgt.send(t, ask)
	first := tgt.eventFrames(t, 1)[0]
	tgt.send(t, ask)
	second := tgt.eventFrames(t, 1)[0]
	if string(first.raw) != string(second.raw) {
		t.Fatalf("a redelivered request got a different answer:\n%s\n%s", first.raw, second.raw)
	}
	if l := book.List(); l[0].Uses != 1 {
		t.Fatalf("uses %d, want 1", l[0].Uses)
	}
}

// A rule whose answer cannot be delivered (no socket claims the session:
// the request came over HTTP) answers nothing; a person does.
func TestRulesUndeliverable(t *testing.T) {
	t.Parallel()
	book := rulesBook(t, issueRules...)
	srv := relaytest.RunServer(t, relay.Config{Token: testToken, Rules: book})
	mustPost(t, srv, askEvent("s-http", 0, "echo ok", "redacted"))
	if hist := sessionReplay(t, srv, "s-http"); len(hist) != 1 {
		t.Fatalf("history has %d events; an undelivered answer must not be stored", len(hist))
	}
	if l := book.List(); l[0].Uses != 0 {
		t.Fatal("an undelivered answer counted as a use")
	}
}

// The project rules read the session's working directory from its
// session.started: learned at admission, or from history.
func TestRulesProject(t *testing.T) {
	t.Parallel()
	book := rulesBook(t, rules.Rule{ID: "here", Effect: rules.Allow, Tool: "Bash", Project: "/home/ann/src/aep-kimi"})
	srv := relaytest.RunServer(t, relay.Config{Token: testToken, Rules: book})
	tgt := gateTarget(t, srv, "s-proj")
	start := mkEvent("s-proj", 1, withType("session.started"), withSeverity("notice"), withData(`{"cwd":"~/src/aep-kimi/cmd"}`))
	start.Agent, start.Source, start.Capture = "kimi-code", "aep://test/agent/kimi-code", "redacted"
	tgt.send(t, start)
	tgt.send(t, askEvent("s-proj", 2, "make", "redacted"))
	if f := tgt.eventFrames(t, 1)[0]; f.str("agent") != "rule:here" {
		t.Fatalf("got %s", f.raw)
	}
	other := gateTarget(t, srv, "s-elsewhere")
	other.send(t, askEvent("s-elsewhere", 1, "make", "redacted"))
	other.quiet(t, 150*time.Millisecond)
}

// A relay restarted on its durable store still knows a session's project:
// it reads the session.started from history when the request comes.
func TestRulesProjectAfterRestart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	book := rulesBook(t, rules.Rule{ID: "here", Effect: rules.Allow, Tool: "Bash", Project: "~/src/aep-kimi"})
	store := openJetStreamIn(t, dir, 100, 10, 1<<24)
	first := relaytest.RunServer(t, relay.Config{Token: testToken, Rules: book, Backend: store})
	tgt := gateTarget(t, first, "s-restart")
	start := mkEvent("s-restart", 1, withType("session.started"), withSeverity("notice"), withData(`{"cwd":"/home/ann/src/aep-kimi"}`))
	start.Agent, start.Source, start.Capture = "kimi-code", "aep://test/agent/kimi-code", "redacted"
	tgt.send(t, start)
	syncWS(t, tgt)
	if err := first.Shutdown(); err != nil {
		t.Fatal(err)
	}
	if err := store.Close(); err != nil {
		t.Fatal(err)
	}
	second := relaytest.RunServer(t, relay.Config{Token: testToken, Rules: book, Backend: openJetStreamIn(t, dir, 100, 10, 1<<24)})
	again := gateTarget(t, second, "s-restart")
	again.send(t, askEvent("s-restart", 3, "make", "redacted"))
	if f := again.eventFrames(t, 1)[0]; f.str("agent") != "rule:here" {
		t.Fatalf("after a restart the project rule did not answer: %s", f.raw)
	}
}

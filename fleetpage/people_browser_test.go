package fleetpage_test

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/aep-kimi/aep-kimi/access"
	"github.com/aep-kimi/aep-kimi/aep"
	"github.com/aep-kimi/aep-kimi/fleetpage"
	"github.com/aep-kimi/aep-kimi/internal/testkit/browsertest"
	"github.com/aep-kimi/aep-kimi/internal/testkit/relaytest"
	"github.com/aep-kimi/aep-kimi/mapping"
	"github.com/aep-kimi/aep-kimi/relay"
	"github.com/aep-kimi/aep-kimi/rules"
)

// consoleRespond is what a watcher could type into the console: its own
// socket, logged in with the tab's login, sending an answer to request in
// session s1; it resolves to the relay's reply to the command (an error
// frame's code and detail, or "sent" when the relay said nothing within a second).
func consoleRespond(request string) string {
	return `new Promise((resolve) => {
	  const ws = new WebSocket('ws://' + location.host + '/socket');
	  ws.onopen = () => ws.send(JSON.stringify({ type: 'hello', versions: ['0.1'], role: 'consumer',
	    identity: { agent: 'aep-kimi-page', instance: 'console' }, capabilities: {}, auth: { login: sessionStorage.getItem('aep-fleet-login') } }));
	  ws.onmessage = (m) => {
	    const f = JSON.parse(m.data);
	    if (f.type === 'hello') {
	      ws.send(JSON.stringify({ aep: '0.1', id: 'CONSOLE' + Date.now(), type: 'control.attention.respond', time: new Date().toISOString(),
	        source: 'aep://console/agent/aep-kimi-page', agent: 'aep-kimi-page', session: 's1', subject: ` + browsertest.Quote(request) + `,
	        cause: ` + browsertest.Quote(request) + `, aepkimiby: 'owner', data: { answer: { option: 'allow' } } }));
	      setTimeout(() => resolve('sent'), 1000);
	    } else if (f.type === 'error') {
	      resolve((f.code || 'error') + ': ' + (f.detail || ''));
	    }
	  };
	  ws.onclose = (e) => resolve('closed ' + e.code);
	})`
}

// aliceAndBob are the people of a relay: alice watches, bob answers; it
// returns the roster and their tokens.
func aliceAndBob(t *testing.T) (people *access.Roster, alice, bob string) {
	t.Helper()
	home := t.TempDir()
	store := access.Store{Home: home}
	_, alice, err := store.Add("alice", access.RoleWatch, "")
	if err != nil {
		t.Fatal(err)
	}
	if _, bob, err = store.Add("bob", access.RoleAnswer, ""); err != nil {
		t.Fatal(err)
	}
	return access.OpenRoster(home, nil), alice, bob
}

// In Chromium, against a real relay with people: a watcher's page names
// them and their role, shows the waiting request with no way to answer it
// and no way to change the rules, and an answer typed into its console is
// refused by the relay (nothing reaches the emitter); an answerer's page
// names them, answers, and what it shows of the answer (the inbox's trace,
// the session's timeline) names them and the page as the stream does;
// neither may change the rules.
func TestBrowserPeopleRoles(t *testing.T) {
	people, alice, bob := aliceAndBob(t)
	ruleBook := rules.Open(rules.Config{Path: filepath.Join(t.TempDir(), rules.FileName)})
	if _, err := ruleBook.Add(rules.Rule{ID: "no-curl", Effect: rules.Deny, Tool: "Bash", Args: "curl *"}); err != nil {
		t.Fatal(err)
	}
	page, err := fleetpage.New(fleetpage.Config{Token: testToken, People: people, LoginsFile: filepath.Join(t.TempDir(), "page-login.key")})
	if err != nil {
		t.Fatal(err)
	}
	srv := relaytest.RunServer(t, relay.Config{Token: testToken, Page: page, People: people, Rules: ruleBook})
	em := dialEmitter(t, srv.URL)
	held := aep.NewID()
	item := sel("data-attention", held)
	em.send(
		em.event("s1", "session.started", 0, map[string]any{"capture": "redacted", "data": map[string]any{"label": "ship it", "cwd": "~/src/aep-kimi"}}),
		em.event("s1", "run.started", -1, map[string]any{"run": "r1", "data": map[string]any{"trigger": "user"}}),
		em.event("s1", "attention.requested", -1, merge(gateAsk(held, "go test ./..."), map[string]any{"run": "r1"})),
	)

	// The watcher.
	w := browsertest.New(t, 1200, 900)
	w.MustRun("alice logs in", chromedp.Navigate(fleetpage.LoginURL(srv.URL, alice)))
	w.WaitJS("alice's name and role", `(document.getElementById('whoami')||{}).textContent === 'alice · watch' && !document.getElementById('whoami').hidden`)
	w.WaitJS("the waiting request, read-only", `document.querySelector('`+item+` [data-watch-only]') !== null`)
	w.WaitJS("the rules, listed", `document.querySelector('[data-rule="no-curl"]') !== null`)
	var controls int
	w.Eval("answer and rule controls", `document.querySelectorAll('`+item+` [data-option], `+item+` [data-reply], `+item+` [data-cancel], `+item+` [data-always], [data-rule-remove], .send').length`, &controls)
	if controls != 0 {
		t.Errorf("the watcher's page offers %d answer or rule controls", controls)
	}
	var reply string
	w.EvalAwait("an answer from the console", consoleRespond(held), &reply)
	if !strings.HasPrefix(reply, "unauthorized: ") || !strings.Contains(reply, "answer") {
		t.Errorf("the relay answered the watcher's console command with %q, want unauthorized, naming the answer role", reply)
	}
	for quiet := time.After(300 * time.Millisecond); ; {
		var f map[string]any
		select {
		case f = <-em.frames:
		case <-quiet:
		}
		if f == nil {
			break
		}
		if typ, _ := f["type"].(string); typ == "control.attention.respond" {
			t.Fatalf("the watcher's answer reached the emitter: %v", f)
		}
	}

	// The answerer.
	a := browsertest.New(t, 1200, 900)
	a.MustRun("bob logs in", chromedp.Navigate(fleetpage.LoginURL(srv.URL, bob)))
	a.WaitJS("bob's name and role", `(document.getElementById('whoami')||{}).textContent === 'bob · answer'`)
	a.WaitJS("the answer buttons", `document.querySelectorAll('`+item+` [data-option]').length === 2`)
	a.WaitJS("the rules, listed", `document.querySelector('[data-rule="no-curl"]') !== null`)
	var ruleControls int
	a.Eval("rule controls", `document.querySelectorAll('`+item+` [data-always], [data-rule-remove]').length`, &ruleControls)
	if ruleControls != 0 {
		t.Errorf("the answerer's page offers %d rule controls", ruleControls)
	}
	a.Click("allow", item+" "+sel("data-option", "allow"))
	cmd := em.command()
	if cmd["type"] != "control.attention.respond" || cmd["subject"] != held || cmd["agent"] != "aep-kimi-page" || cmd[mapping.ExtBy] != "bob" {
		b, _ := json.Marshal(cmd)
		t.Fatalf("bob's answer as the emitter got it: %s", b)
	}
	cmdID, _ := cmd["id"].(string)
	// The emitter answers as the gate does: by names the command's agent.
	answered := em.event("s1", "attention.answered", -1, map[string]any{"subject": held, "cause": cmdID, "capture": "redacted", "run": "r1",
		"data": map[string]any{"answer": map[string]any{"option": "allow"}, "via": "control", "by": "aep-kimi-page"}})
	em.send(answered, em.event("s1", "attention.resolved", -1, map[string]any{"subject": held, "cause": answered["id"], "run": "r1",
		"data": map[string]any{"resolution": "answered", "latency_ms": 1200}}))
	for _, b := range []*browsertest.Browser{a, w} {
		b.WaitJS("the trace names bob and the page", `(document.querySelector('`+sel("data-answered", held)+`')||{}).textContent?.startsWith('Allowed by bob from the page, ')`)
		b.Click("open s1", `#fleet [data-session="s1"] button`)
		b.WaitJS("the timeline names bob and the page", `(document.querySelector('`+sel("data-settled", held)+`')||{}).textContent === ' · allowed by bob from the page'`)
	}
}

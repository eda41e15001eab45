package relay_test

import (
	"encoding/json"
	"github.com/aep-kimi/aep-kimi/access"
	"os"
	"strings"
	"testing"

	"github.com/aep-kimi/aep-kimi/internal/testkit/relaytest"
	"github.com/aep-kimi/aep-kimi/relay"
	"github.com/aep-kimi/aep-kimi/rules"
)

var jsonCT = map[string]string{"Content-Type": "application/json"}

func withHeaders(base map[string]string, kv ...string) map[string]string {
	out := map[string]string{}
	for k, v := range base {
		out[k] = v
	}
	for i := 0; i+1 < len(kv); i += 2 {
		out[kv[i]] = kv[i+1]
	}
	return out
}

func TestRulesAPI(t *testing.T) {
	t.Parallel()
	book := rulesBook(t)
	srv := relaytest.RunServer(t, relay.Config{Token: testToken, Rules: book})
	add := do(t, srv, "POST", "/rules", []byte(`{"effect":"deny","tool":"Bash","args":"rm -rf *","note":"never"}`), jsonCT)
	if add.status != 201 {
		t.Fatalf("add: %d %s", add.status, add.body)
	}
	var added struct{ Rule rules.Rule }
	if err := json.Unmarshal(add.body, &added); err != nil || added.Rule.ID == "" || added.Rule.Effect != rules.Deny {
		t.Fatalf("add answered %s", add.body)
	}
	list := do(t, srv, "GET", "/rules", nil, nil)
	var l rules.Listing
	if err := json.Unmarshal(list.body, &l); err != nil || list.status != 200 || len(l.Rules) != 1 || !l.Status.OK || l.Rules[0].ID != added.Rule.ID {
		t.Fatalf("list: %d %s", list.status, list.body)
	}
	test := do(t, srv, "POST", "/rules/test", []byte(`{"tool":"Bash","args":"rm -rf ./build"}`), jsonCT)
	if test.status != 200 || !strings.Contains(string(test.body), `"effect":"deny"`) || !strings.Contains(string(test.body), `"trace"`) {
		t.Fatalf("test: %d %s", test.status, test.body)
	}
	noArgs := do(t, srv, "POST", "/rules/test", []byte(`{"tool":"Bash"}`), jsonCT)
	if !strings.Contains(string(noArgs.body), "carries no argument text") {
		t.Fatalf("rules test does not say the rule needs argument text: %s", noArgs.body)
	}
	if rm := do(t, srv, "DELETE", "/rules/"+added.Rule.ID, nil, nil); rm.status != 200 {
		t.Fatalf("remove: %d %s", rm.status, rm.body)
	}
	if rm := do(t, srv, "DELETE", "/rules/"+added.Rule.ID, nil, nil); rm.status != 404 || rm.json(t)["error"] != rules.CodeNotFound {
		t.Fatalf("remove twice: %d %s", rm.status, rm.body)
	}
}

// Bad input gets a status and a JSON error body, never a change.
func TestRulesAPIBadInput(t *testing.T) {
	t.Parallel()
	book := rulesBook(t)
	srv := relaytest.RunServer(t, relay.Config{Token: testToken, Rules: book})
	cases := []struct {
		name, method, path, body string
		hdr                      map[string]string
		status                   int
		code                     string
	}{
		{"invalid rule", "POST", "/rules", `{"effect":"allwo","tool":"Bash"}`, jsonCT, 400, rules.CodeInvalidRule},
		{"no tool", "POST", "/rules", `{"effect":"allow"}`, jsonCT, 400, rules.CodeInvalidRule},
		{"bad glob", "POST", "/rules", `{"effect":"allow","tool":"Bash","args":"x\\"}`, jsonCT, 400, rules.CodeInvalidRule},
		{"unknown member", "POST", "/rules", `{"effect":"allow","tool":"Bash","arg":"x"}`, jsonCT, 400, rules.CodeInvalidJSON},
		{"not json", "POST", "/rules", `{effect`, jsonCT, 400, rules.CodeInvalidJSON},
		{"two objects", "POST", "/rules", `{"effect":"allow","tool":"Bash"}{}`, jsonCT, 400, rules.CodeInvalidJSON},
		{"media type", "POST", "/rules", `{"effect":"allow","tool":"Bash"}`, map[string]string{"Content-Type": "text/plain"}, 415, rules.CodeMedia},
		{"too large", "POST", "/rules", `{"note":"` + strings.Repeat("x", 70<<10) + `"}`, jsonCT, 413, rules.CodeTooLarge},
		{"method", "PUT", "/rules", ``, jsonCT, 405, "method-not-allowed"},
		{"no such path", "GET", "/rules/a/b", ``, nil, 404, rules.CodeNotFound},
		{"probe without tool", "POST", "/rules/test", `{"args":"x"}`, jsonCT, 400, rules.CodeInvalidJSON},
		{"probe bad capture", "POST", "/rules/test", `{"tool":"Bash","capture":"most"}`, jsonCT, 400, rules.CodeInvalidJSON},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := do(t, srv, c.method, c.path, []byte(c.body), c.hdr)
			if r.status != c.status || r.json(t)["error"] != c.code {
				t.Fatalf("%d %s, want %d %s", r.status, r.body, c.status, c.code)
			}
		})
	}
	if book.Set().Len() != 0 {
		t.Fatal("a refused request changed the rules")
	}
}

// Attacks: changing rules without the token, with a wrong one, from a
// foreign origin (a page in the operator's browser), or through a
// rebinding Host is refused, and nothing changes; a watch-only relay
// takes no changes at all.
func TestRulesAPIRefusesStrangers(t *testing.T) {
	t.Parallel()
	book := rulesBook(t)
	srv := relaytest.RunServer(t, relay.Config{Token: testToken, Rules: book})
	body := []byte(`{"effect":"allow","tool":"Read"}`)
	cases := []struct {
		name   string
		hdr    map[string]string
		status int
	}{
		{"no token", withHeaders(jsonCT, "Authorization", ""), 401},
		{"wrong token", withHeaders(jsonCT, "Authorization", "Bearer nope"), 403},
		{"foreign origin", withHeaders(jsonCT, "Origin", "https://evil.example"), 403},
		{"cross-site fetch", withHeaders(jsonCT, "Sec-Fetch-Site", "cross-site"), 403},
		{"rebinding host", withHeaders(jsonCT, "Host", "evil.example"), 421},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := do(t, srv, "POST", "/rules", body, c.hdr)
			if r.status != c.status {
				t.Fatalf("status %d %s, want %d", r.status, r.body, c.status)
			}
			if _, ok := r.json(t)["error"]; !ok {
				t.Fatalf("no JSON error: %s", r.body)
			}
		})
	}
	// The same origin, as the relay's own page would send it, is taken.
	same := do(t, srv, "POST", "/rules", body, withHeaders(jsonCT, "Origin", srv.URL, "Sec-Fetch-Site", "same-origin"))
	if same.status != 201 {
		t.Fatalf("same origin: %d %s", same.status, same.body)
	}
	if n := book.Set().Len(); n != 1 {
		t.Fatalf("%d rules: a refused request changed them", n)
	}
	if _, err := os.Stat(book.Path()); err != nil {
		t.Fatal(err)
	}

	watchOnly := relaytest.RunServer(t, relay.Config{Rules: rulesBook(t)})
	if r := do(t, watchOnly, "POST", "/rules", body, jsonCT); r.status != 403 {
		t.Fatalf("a watch-only relay took a change: %d %s", r.status, r.body)
	}
	if r := do(t, watchOnly, "GET", "/rules", nil, nil); r.status != 200 {
		t.Fatalf("a watch-only relay's rules cannot be read: %d", r.status)
	}
}

// A bad rules file keeps the last good rules and says why on /healthz,
// to an authorized reader only.
func TestRulesHealthz(t *testing.T) {
	t.Parallel()
	book := rulesBook(t, issueRules...)
	srv := relaytest.RunServer(t, relay.Config{Token: testToken, Rules: book})
	if err := os.WriteFile(book.Path(), []byte(`{"version":1,"rules":[{"id":"x"}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the bad file seen", func() bool { return !book.Status().OK })
	h := do(t, srv, "GET", "/healthz", nil, nil).json(t)
	r, _ := h["rules"].(map[string]any)
	if r == nil || r["ok"] != false || r["rules"] != float64(3) || !strings.Contains(r["error"].(string), "effect is missing") {
		t.Fatalf("healthz: %v", h)
	}
	anon := do(t, srv, "GET", "/healthz", nil, map[string]string{"Authorization": ""}).json(t)
	if _, leaked := anon["rules"]; leaked {
		t.Fatalf("an anonymous /healthz shows the rules: %v", anon)
	}
}

// An answer becomes a rule through the relay: propose reads the held
// request (its tool, argument text and project), always saves what an
// answer to it makes, refusing a pattern that does not match it.
func TestRulesAPIFromAnswer(t *testing.T) {
	t.Parallel()
	book := rulesBook(t)
	srv := relaytest.RunServer(t, relay.Config{Token: testToken, Rules: book})
	tgt := gateTarget(t, srv, "s-ans")
	start := mkEvent("s-ans", 1, withType("session.started"), withSeverity("notice"), withData(`{"cwd":"/home/ann/src/aep-kimi"}`))
	start.Agent, start.Source, start.Capture = "kimi-code", "aep://test/agent/kimi-code", "redacted"
	ask := askEvent("s-ans", 2, "go test ./...", "redacted")
	tgt.send(t, start)
	tgt.send(t, ask)
	syncWS(t, tgt)
	ref := `{"session":"s-ans","request":"` + ask.ID + `"}`
	p := do(t, srv, "POST", "/rules/propose", []byte(ref), jsonCT)
	var prop rules.Proposal
	if err := json.Unmarshal(p.body, &prop); err != nil || p.status != 200 || prop.Pattern != "go test *" || prop.Project != "/home/ann/src/aep-kimi" ||
		prop.Tool != "Bash" || prop.Allow != "allow" || prop.Args != "go test ./..." {
		t.Fatalf("propose: %d %s", p.status, p.body)
	}
	bad := do(t, srv, "POST", "/rules/always", []byte(`{"session":"s-ans","request":"`+ask.ID+`","option":"allow","pattern":"git *","scope":"project"}`), jsonCT)
	if bad.status != 400 || !strings.Contains(string(bad.body), "does not match") || book.Set().Len() != 0 {
		t.Fatalf("always with a pattern that misses: %d %s", bad.status, bad.body)
	}
	ok := do(t, srv, "POST", "/rules/always", []byte(`{"session":"s-ans","request":"`+ask.ID+`","option":"allow","pattern":"go test *","scope":"project"}`), jsonCT)
	var saved struct{ Rule rules.Rule }
	if err := json.Unmarshal(ok.body, &saved); err != nil || ok.status != 201 || saved.Rule.Project != "/home/ann/src/aep-kimi" || saved.Rule.Args != "go test *" {
		t.Fatalf("always: %d %s", ok.status, ok.body)
	}
	for _, body := range []string{`{"session":"s-ans","request":"nope"}`, `{"session":"nope","request":"` + ask.ID + `"}`, `{}`} {
		if r := do(t, srv, "POST", "/rules/propose", []byte(body), jsonCT); r.status != 404 || r.json(t)["error"] != rules.CodeNotFound {
			t.Fatalf("propose %s: %d %s", body, r.status, r.body)
		}
	}
	if r := do(t, srv, "POST", "/rules/always", []byte(ref), withHeaders(jsonCT, "Origin", "https://evil.example")); r.status != 403 {
		t.Fatalf("always from a foreign origin: %d", r.status)
	}
}

// What propose answers is read from a held request, so it is served like
// the stream: only to those who may save the rule (admin), and no more of
// the request's argument text or its session's directory than the
// caller's capture ceiling lets the stream carry. A watcher at metadata
// once read both here.
func TestRulesProposeWithinCeiling(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	store := access.Store{Home: home}
	add := func(name string, role access.Role, capture string) map[string]string {
		_, tok, err := store.Add(name, role, capture)
		if err != nil {
			t.Fatal(err)
		}
		return map[string]string{"Authorization": "Bearer " + tok, "Content-Type": "application/json"}
	}
	walt, ann := add("walt", access.RoleWatch, ""), add("ann", access.RoleAnswer, "")
	meta, red := add("meta", access.RoleAdmin, "metadata"), add("red", access.RoleAdmin, "redacted")
	srv := relaytest.RunServer(t, relay.Config{Token: testToken, Rules: rulesBook(t), People: access.OpenRoster(home, nil)})
	tgt := gateTarget(t, srv, "s-ceil")
	start := mkEvent("s-ceil", 1, withType("session.started"), withSeverity("notice"), withData(`{"cwd":"/home/ann/src/secret-project"}`))
	start.Agent, start.Source, start.Capture = "kimi-code", "aep://test/agent/kimi-code", "redacted"
	ask := askEvent("s-ceil", 2, "curl https://secret.example/x", "redacted")
	tgt.send(t, start)
	tgt.send(t, ask)
	syncWS(t, tgt)
	ref := []byte(`{"session":"s-ceil","request":"` + ask.ID + `"}`)
	for who, h := range map[string]map[string]string{"walt": walt, "ann": ann} {
		if r := do(t, srv, "POST", "/rules/propose", ref, h); r.status != 403 || strings.Contains(string(r.body), "secret") {
			t.Errorf("%s's propose: %d %s", who, r.status, r.body)
		}
	}
	r := do(t, srv, "POST", "/rules/propose", ref, meta)
	var p rules.Proposal
	if err := json.Unmarshal(r.body, &p); err != nil || r.status != 200 || strings.Contains(string(r.body), "secret") ||
		p.ArgsCarried || p.Project != "" || p.Tool != "Bash" || p.Pattern != "" || p.Allow != "allow" {
		// (No pattern: "*" on Bash, the only one there is at metadata,
		// would allow every destructive command.)
		t.Errorf("an admin at metadata's propose: %d %s", r.status, r.body)
	}
	// A project scope would put the directory into the rule it answers.
	if r := do(t, srv, "POST", "/rules/always", []byte(`{"session":"s-ceil","request":"`+ask.ID+`","option":"allow","pattern":"*","scope":"project"}`), meta); r.status == 201 || strings.Contains(string(r.body), "secret") {
		t.Errorf("an admin at metadata's always: %d %s", r.status, r.body)
	}
	r = do(t, srv, "POST", "/rules/propose", ref, red)
	if err := json.Unmarshal(r.body, &p); err != nil || r.status != 200 || p.Args != "curl https://secret.example/x" || p.Project != "/home/ann/src/secret-project" {
		t.Errorf("an admin at redacted's propose: %d %s", r.status, r.body)
	}
}

// A rule saved from an answer holds a command and a directory: a reader
// below the redacted capture ceiling, who is not served those on the
// stream, is not served them in the rules either: the listing and a
// test's verdict blank them, saying so, and the verdict leaves out its
// trace, whose steps quote them. At redacted and above they read as
// written.
func TestRulesListWithinCeiling(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	store := access.Store{Home: home}
	add := func(name string, role access.Role, capture string) map[string]string {
		_, tok, err := store.Add(name, role, capture)
		if err != nil {
			t.Fatal(err)
		}
		return map[string]string{"Authorization": "Bearer " + tok, "Content-Type": "application/json"}
	}
	walt, meta, red := add("walt", access.RoleWatch, ""), add("meta", access.RoleAdmin, "metadata"), add("red", access.RoleWatch, "redacted")
	owner := map[string]string{"Authorization": "Bearer " + testToken, "Content-Type": "application/json"}
	srv := relaytest.RunServer(t, relay.Config{Token: testToken, Rules: rulesBook(t), People: access.OpenRoster(home, nil)})
	for _, body := range []string{
		`{"effect":"allow","tool":"Bash","args":"curl https://secret.example/*","project":"/home/ann/src/secret-project"}`,
		`{"effect":"deny","tool":"Write"}`,
	} {
		if r := do(t, srv, "POST", "/rules", []byte(body), owner); r.status != 201 {
			t.Fatalf("adding %s: %d %s", body, r.status, r.body)
		}
	}
	probe := []byte(`{"tool":"Bash","args":"curl https://secret.example/x","project":"/home/ann/src/secret-project"}`)
	for who, h := range map[string]map[string]string{"walt": walt, "meta": meta} {
		r := do(t, srv, "GET", "/rules", nil, h)
		var l rules.Listing
		if err := json.Unmarshal(r.body, &l); err != nil || r.status != 200 || strings.Contains(string(r.body), "secret") ||
			len(l.Rules) != 2 || !l.Rules[0].Hidden || l.Rules[1].Hidden || l.Rules[1].Tool != "Write" {
			t.Errorf("%s's listing: %d %s", who, r.status, r.body)
		}
		r = do(t, srv, "POST", "/rules/test", probe, h)
		var v struct{ Verdict rules.Verdict }
		if err := json.Unmarshal(r.body, &v); err != nil || r.status != 200 || strings.Contains(string(r.body), "secret") ||
			!v.Verdict.Hidden || v.Verdict.Effect != rules.Allow || v.Verdict.Rule == nil || v.Verdict.Trace != nil {
			t.Errorf("%s's test: %d %s", who, r.status, r.body)
		}
	}
	for who, h := range map[string]map[string]string{"red": red, "owner": owner} {
		r := do(t, srv, "GET", "/rules", nil, h)
		var l rules.Listing
		if err := json.Unmarshal(r.body, &l); err != nil || r.status != 200 || len(l.Rules) != 2 || l.Rules[0].Hidden ||
			l.Rules[0].Args != "curl https://secret.example/*" || l.Rules[0].Project != "/home/ann/src/secret-project" {
			t.Errorf("%s's listing: %d %s", who, r.status, r.body)
		}
		r = do(t, srv, "POST", "/rules/test", probe, h)
		var v struct{ Verdict rules.Verdict }
		if err := json.Unmarshal(r.body, &v); err != nil || r.status != 200 || v.Verdict.Hidden || v.Verdict.Rule == nil ||
			v.Verdict.Rule.Args != "curl https://secret.example/*" || len(v.Verdict.Trace) == 0 {
			t.Errorf("%s's test: %d %s", who, r.status, r.body)
		}
	}
}

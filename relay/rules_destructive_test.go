package relay_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/aep-kimi/aep-kimi/internal/testkit/relaytest"
	"github.com/aep-kimi/aep-kimi/relay"
	"github.com/aep-kimi/aep-kimi/rules"
)

// "Always" has a floor: propose suggests a destructive command exactly,
// and the API saves a wildcard allow that would answer destructive
// commands only with the override, refusing it otherwise with a JSON
// error that names the override and the commands.
func TestRulesAPIDestructiveFloor(t *testing.T) {
	t.Parallel()
	book := rulesBook(t)
	srv := relaytest.RunServer(t, relay.Config{Token: testToken, Rules: book})
	tgt := gateTarget(t, srv, "s-rm")
	ask := askEvent("s-rm", 1, "rm -rf ./build", "redacted")
	tgt.send(t, ask)
	syncWS(t, tgt)
	ref := `{"session":"s-rm","request":"` + ask.ID + `"}`
	p := do(t, srv, "POST", "/rules/propose", []byte(ref), jsonCT)
	var prop rules.Proposal
	if err := json.Unmarshal(p.body, &prop); err != nil || p.status != 200 || prop.Pattern != "rm -rf ./build" {
		t.Fatalf("propose for rm -rf ./build: %d %s", p.status, p.body)
	}
	refused := func(r httpResult, what string) {
		t.Helper()
		j := r.json(t)
		detail, _ := j["detail"].(string)
		if r.status != 422 || j["error"] != rules.CodeDestructive || !strings.Contains(detail, rules.OverrideDestructive+"=1") ||
			!strings.Contains(detail, "rm (rm -rf /)") || book.Set().Len() != 0 {
			t.Fatalf("%s: %d %s", what, r.status, r.body)
		}
	}
	always := `{"session":"s-rm","request":"` + ask.ID + `","option":"allow","pattern":"rm *","scope":"all"}`
	refused(do(t, srv, "POST", "/rules/always", []byte(always), jsonCT), "always rm *")
	refused(do(t, srv, "POST", "/rules", []byte(`{"effect":"allow","tool":"Bash","args":"rm *"}`), jsonCT), "add rm *")
	refused(do(t, srv, "POST", "/rules", []byte(`{"effect":"allow","tool":"Bash"}`), jsonCT), "add Bash, any args")
	refused(do(t, srv, "POST", "/rules?"+rules.OverrideDestructive+"=0", []byte(`{"effect":"allow","tool":"*","args":"sudo *"}`), jsonCT), "add sudo * with the override off")

	// What stays open: the exact command, a deny, a narrow allow.
	for _, body := range []string{`{"effect":"allow","tool":"Bash","args":"rm -rf ./build"}`, `{"effect":"deny","tool":"Bash","args":"rm *"}`,
		`{"effect":"allow","tool":"Bash","args":"go test *"}`} {
		if r := do(t, srv, "POST", "/rules", []byte(body), jsonCT); r.status != 201 {
			t.Fatalf("%s: %d %s", body, r.status, r.body)
		}
	}
	if r := do(t, srv, "POST", "/rules/always?"+rules.OverrideDestructive+"=1", []byte(always), jsonCT); r.status != 201 {
		t.Fatalf("always rm * with the override: %d %s", r.status, r.body)
	}
	test := do(t, srv, "POST", "/rules/test", []byte(`{"tool":"Bash","args":"rm -rf /"}`), jsonCT)
	var v struct{ Verdict rules.Verdict }
	if err := json.Unmarshal(test.body, &v); err != nil {
		t.Fatalf("test: %s", test.body)
	}
	shown := false
	for _, s := range v.Verdict.Trace {
		shown = shown || s.Rule.Args == "rm *" && len(s.Destructive) > 0 && s.Destructive[0].Name == "rm"
	}
	if !shown {
		t.Fatalf("test does not list what rm * allows: %s", test.body)
	}
}

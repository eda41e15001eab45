package main

import (
	"encoding/json"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/aep-kimi/aep-kimi/internal/testkit/relaytest"
	"github.com/aep-kimi/aep-kimi/internal/testkit/stacktest"
	"github.com/aep-kimi/aep-kimi/relay"
	"github.com/aep-kimi/aep-kimi/rules"
)

// tokenFileWith is a fresh private token file holding token.
func tokenFileWith(t *testing.T, token string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "token")
	stacktest.WriteToken(t, path, token)
	return path
}

// The rules commands against a real relay: add prints the id, list and
// test say what is in force and why, rm removes; refusals are one line
// and an exit code.
func TestRulesCLI(t *testing.T) {
	book := rules.Open(rules.Config{Path: filepath.Join(t.TempDir(), rules.FileName)})
	srv := relaytest.RunServer(t, relay.Config{Token: "tok", Rules: book})
	conn := []string{"--relay", srv.URL, "--token-file", tokenFileWith(t, "tok")}
	cli := func(args ...string) (int, string, string) {
		t.Helper()
		return runIn(t, "rules", append(args, conn...)...)
	}
	code, out, errs := cli("add", "deny", "--tool", "Bash", "--args", "rm -rf *", "--note", "never force-remove")
	deny := strings.TrimSpace(out)
	if code != 0 || !strings.HasPrefix(deny, "r-") || strings.Contains(deny, "\n") || errs != "" {
		t.Fatalf("add: exit %d, out %q, err %q", code, out, errs)
	}
	// A wildcard allow over a destructive program is refused, saying
	// which commands it would allow and how to save it anyway.
	code, _, errs = cli("add", "allow", "--tool", "Bash", "--args", "rm *", "--id", "rm-any")
	if code != 1 || !strings.Contains(errs, "rm (rm -rf /)") || !strings.Contains(errs, "--allow-destructive") || strings.Count(strings.TrimSpace(errs), "\n") != 0 {
		t.Fatalf("add allow 'rm *' without the override: %d %q", code, errs)
	}
	if code, out, _ := cli("add", "allow", "--tool", "Bash", "--args", "rm *", "--id", "rm-any", "--allow-destructive"); code != 0 || strings.TrimSpace(out) != "rm-any" {
		t.Fatalf("add --id: %d %q", code, out)
	}
	code, out, _ = cli("list")
	for _, want := range []string{"ID", "USES", deny, "deny", "rm -rf *", "never force-remove", "rm-any", "never",
		"warning: rm-any's wildcard also allows destructive commands (rm)"} {
		if code != 0 || !strings.Contains(out, want) {
			t.Fatalf("list lacks %q (exit %d):\n%s", want, code, out)
		}
	}
	code, out, _ = cli("list", "--json")
	var l rules.Listing
	if err := json.Unmarshal([]byte(out), &l); err != nil || code != 0 || len(l.Rules) != 2 || !l.Status.OK {
		t.Fatalf("list --json: %v\n%s", err, out)
	}
	code, out, _ = cli("test", "--tool", "Bash", "--args", "rm -rf ./build")
	if code != 0 || !strings.Contains(out, "deny by rule "+deny) || !strings.Contains(out, "rm-any") {
		t.Fatalf("test:\n%s", out)
	}
	if !strings.Contains(out, "warning: rm-any (allow Bash `rm *`) would also allow these destructive commands") ||
		!regexp.MustCompile(`(?m)^  rm +e\.g\. rm -rf /$`).MatchString(out) || strings.Contains(out, "warning: "+deny) {
		t.Fatalf("test does not show what rm-any would allow:\n%s", out)
	}
	code, out, _ = cli("test", "--tool", "Bash")
	if code != 0 || !strings.Contains(out, "carries no argument text") || !strings.Contains(out, "unknowable") || !strings.Contains(out, "a person answers") {
		t.Fatalf("test without args does not say the rules cannot be checked:\n%s", out)
	}
	if code, out, _ := cli("rm", deny); code != 0 || !strings.Contains(out, "removed "+deny) {
		t.Fatalf("rm: %d %s", code, out)
	}
	if code, _, errs := cli("rm", deny); code != 1 || !strings.Contains(errs, "the relay refused: no rule with that id") {
		t.Fatalf("rm twice: %d %s", code, errs)
	}
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"add", "maybe", "--tool", "Bash"}, 2, `effect "maybe"`},
		{[]string{"add", "allow"}, 2, "--tool is required"},
		{[]string{"add", "allow", "--tool", "Bash", "--args", `x\`}, 1, "lone backslash"},
		{[]string{"test"}, 2, "--tool is required"},
	} {
		code, _, errs := cli(c.args...)
		if code != c.code || !strings.Contains(errs, c.want) || strings.Count(strings.TrimSpace(errs), "\n") != 0 {
			t.Errorf("%v: exit %d %q, want %d and one line with %q", c.args, code, errs, c.code, c.want)
		}
	}
	wrong := []string{"--relay", srv.URL, "--token-file", tokenFileWith(t, "not-the-token")}
	if code, _, errs := runIn(t, "rules", append([]string{"add", "allow", "--tool", "*"}, wrong...)...); code != 1 || !strings.Contains(errs, "invalid bearer token") {
		t.Fatalf("a wrong token: %d %s", code, errs)
	}
	if code, _, errs := runIn(t, "rules", "list", "--relay", "http://127.0.0.1:1", "--token-file", tokenFileWith(t, "tok")); code != 1 || !strings.Contains(errs, "relay http://127.0.0.1:1") {
		t.Fatalf("an unreachable relay: %d %s", code, errs)
	}
	if n := book.Set().Len(); n != 1 {
		t.Fatalf("%d rules in force, want 1", n)
	}
}

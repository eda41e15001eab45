// Rules answering for a person with the real Kimi, in print mode and in
// kimi web: the answer must reach the real hook or bridge.

package e2e

import (
	"encoding/json"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/aep-kimi/aep-kimi/access"
	"github.com/aep-kimi/aep-kimi/aep"
	"github.com/aep-kimi/aep-kimi/internal/testkit/kimiharness"
	"github.com/aep-kimi/aep-kimi/internal/testkit/stacktest"
	"github.com/aep-kimi/aep-kimi/rules"
)

// The session, with the real Kimi: `echo ok` is allowed by a rule,
// `rm -rf ./build` denied by the deny rule although an allow rule on `rm *`
// matches too, both with no person involved; only `git push` waits in
// pending, and a person denies it. The stream names both rules, and `rules
// list` counts one use each.
func TestE2ERulesAnswerForYou(t *testing.T) {
	t.Parallel()
	kimi := kimiharness.Require(t)
	// Sessions carry their directory at capture redacted: the echo rule is
	// held to the test's own temporary tree, where Kimi runs.
	st := stacktest.StartStack(t, "AEP_KIMI_CONTROL=1", "AEP_ATTENTION_TIMEOUT_MS=8000", "AEP_CAPTURE=redacted")
	here := filepath.Dir(t.TempDir())
	echo := st.AddRule(t, "allow", "--tool", "Bash", "--args", "echo *", "--project", here)
	rm := st.AddRule(t, "allow", "--tool", "Bash", "--args", "rm *", "--allow-destructive")
	rmrf := st.AddRule(t, "deny", "--tool", "Bash", "--args", "rm -rf *", "--note", "never force-remove")

	script := stacktest.BashSteps(t, "echo ok", "rm -rf ./build", "git push")
	done := stacktest.Async(t, func() kimiharness.PrintRun { return stacktest.Scenario(t, kimi, script, st.HookCmd(t)) })

	out := st.WaitCLI(t, func(s string) bool { return strings.Contains(s, "git push") }, "pending")
	if !strings.Contains(out, "1 request waits on you") || strings.Contains(out, "echo ok") || strings.Contains(out, "rm -rf") {
		t.Fatalf("pending shows more than git push:\n%s", out)
	}
	if !strings.Contains(out, "always: aep-kimi respond --option allow --always 'git push'") {
		t.Fatalf("pending proposes no rule for git push:\n%s", out)
	}
	m := regexp.MustCompile(`aep-kimi respond --option deny (\S+) (\S+)`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no answering command in pending:\n%s", out)
	}
	if code, msg := st.Cli(t, "respond", "--option", "deny", "--text", "not today", m[1], m[2]); code != 0 {
		t.Fatalf("respond: exit %d: %s", code, msg)
	}
	run := <-done
	st.WaitQuiet(t)

	_, _, evs := st.OneSession(t)
	byRequest := map[string]string{} // request id -> who answered it
	var requests []*aep.Event
	for _, e := range evs {
		switch e.Type {
		case "attention.requested":
			requests = append(requests, e)
		case "attention.answered":
			by, _ := stacktest.DataOf(e)["by"].(string)
			byRequest[e.Subject] = by
		}
	}
	if len(requests) != 3 {
		t.Fatalf("%d held calls, want 3", len(requests))
	}
	for i, want := range []string{"rule:" + echo, "rule:" + rmrf, access.OwnerName} {
		if got := byRequest[requests[i].ID]; got != want {
			t.Errorf("request %d (%v) answered by %q, want %q", i+1, stacktest.DataOf(requests[i])["prompt"], got, want)
		}
	}
	counts := stacktest.TypeCounts(evs)
	if counts["tool.completed"] != 1 || counts["tool.denied"] != 2 {
		t.Fatalf("echo ran and the other two were denied? %v", counts)
	}
	var deniedBy []string
	for _, e := range evs {
		if e.Type == "tool.denied" {
			rule, _ := stacktest.DataOf(e)["rule"].(string)
			deniedBy = append(deniedBy, rule)
		}
	}
	if strings.Join(deniedBy, ",") != rmrf+"," {
		t.Fatalf("tool.denied names rules %q, want %s for rm -rf and none for the person's deny", deniedBy, rmrf)
	}
	// The deny told the model which rule refused it and why.
	if reqs := strings.Join(run.Mock.Requests(t), "\n"); !strings.Contains(reqs, "rule "+rmrf+": never force-remove") {
		t.Fatal("the model never heard which rule denied rm -rf")
	}

	// On the relay's stream, the rules' commands, each right behind its
	// request, and no person's command before git push.
	stream := st.RelayEventsOf(t, requests[0].Session)
	for i, rule := range []string{echo, rmrf} {
		at := stacktest.IndexOf(stream, requests[i].ID)
		if at < 0 || at+1 >= len(stream) || stream[at+1].Type != rules.CommandType || stream[at+1].Agent != "rule:"+rule || stream[at+1].Subject != requests[i].ID {
			t.Fatalf("request %d is not followed on the stream by rule %s's answer", i+1, rule)
		}
	}
	for _, e := range stream {
		if e.Type == rules.CommandType && e.Agent == "aep-kimi-cli" && e.Subject != requests[2].ID {
			t.Fatalf("a person answered request %s", e.Subject)
		}
	}

	code, list := st.Cli(t, "rules", "list", "--json")
	var l rules.Listing
	if err := json.Unmarshal([]byte(list), &l); code != 0 || err != nil {
		t.Fatalf("rules list --json: exit %d %v: %s", code, err, list)
	}
	uses := map[string]uint64{}
	for _, r := range l.Rules {
		uses[r.ID] = r.Uses
	}
	if uses[echo] != 1 || uses[rmrf] != 1 || uses[rm] != 0 {
		t.Fatalf("uses %v: want one each for %s and %s, none for %s", uses, echo, rmrf, rm)
	}
	if code, text := st.Cli(t, "rules", "list"); code != 0 || !strings.Contains(text, rmrf) || !strings.Contains(text, "never force-remove") {
		t.Fatalf("rules list: %s", text)
	}
}

// kimi web approvals go through the same rules: the bridge answers each
// with the rule's command as it answers a person's, through the
// kap-server's REST API, and the stream names the rule.
func TestE2ERulesAnswerKimiWeb(t *testing.T) {
	t.Parallel()
	ws := stacktest.StartWebStack(t, "primary", "AEP_KIMI_WEB_CONTROL=1")
	allow := ws.AddRule(t, "allow", "--tool", "Bash", "--args", "echo probe-*")
	deny := ws.AddRule(t, "deny", "--tool", "Bash", "--args", "echo should-not-*", "--note", "not on this machine")
	sid := ws.Web.CreateSession(t)
	ws.Web.Prompt(t, sid, "run the probe")
	ws.WaitCount(t, sid, "run.finished", 1)
	ws.Web.Prompt(t, sid, "reject me")
	ws.WaitCount(t, sid, "run.finished", 2)

	_, evs := ws.Events(t, sid)
	var by []string
	for _, e := range evs {
		if e.Type == "attention.answered" {
			b, _ := stacktest.DataOf(e)["by"].(string)
			by = append(by, b)
		}
	}
	if strings.Join(by, ",") != "rule:"+allow+",rule:"+deny {
		t.Fatalf("approvals answered by %v, want rule:%s then rule:%s", by, allow, deny)
	}
	if c := stacktest.TypeCounts(evs); c["tool.completed"] != 1 || c["tool.failed"] != 1 || c["control.accepted"] != 2 {
		t.Fatalf("the allowed probe ran and the denied one did not? %v", c)
	}
	code, list := ws.Cli(t, "rules", "list", "--json")
	var l rules.Listing
	if err := json.Unmarshal([]byte(list), &l); code != 0 || err != nil || l.Rules[0].Uses != 1 || l.Rules[1].Uses != 1 {
		t.Fatalf("rules list: exit %d %v: %s", code, err, list)
	}
}

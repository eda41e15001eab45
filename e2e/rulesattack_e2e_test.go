// Attacks on the rules, against the built binaries: redaction and
// "always" must not widen what a rule allows.

package e2e

import (
	"regexp"
	"strings"
	"testing"

	"github.com/aep-kimi/aep-kimi/aep"
	"github.com/aep-kimi/aep-kimi/internal/testkit/stacktest"
)

// An allow rule is not talked around through redaction: with `allow Bash
// "echo *"` and the gate denying at its deadline, a command that hides a
// second one behind a credential (`echo password=x;rm -rf /tmp/victim`) is
// not allowed by the rule. The redactor once took the operator and what
// followed into the secret's marker, so the rule read `echo
// password=[REDACTED:secret] -rf /tmp/victim` and allowed it at once. Now
// the marker alone keeps the allow rule off (a person, here the deadline,
// answers), and a deny rule still sees the `rm -rf` behind the operator.
func TestE2ERulesAllowNotTalkedAroundByRedaction(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("end to end: builds and runs the binaries")
	}
	st := stacktest.StartStack(t, "AEP_KIMI_CONTROL=1", "AEP_KIMI_ON_TIMEOUT=deny", "AEP_ATTENTION_TIMEOUT_MS=3000")
	echo := st.AddRule(t, "allow", "--tool", "Bash", "--args", "echo *")
	session := "rules-" + strings.ToLower(aep.NewID())

	if out := stacktest.Reply(t, st.HeldGate(t, session, "call_ok", "echo ok")); out != "" {
		t.Fatalf("echo ok was not allowed by rule %s: %q", echo, out)
	}
	attacks := []string{
		"echo password=x;rm -rf /tmp/victim",
		"echo token=abc&&rm -rf ~",
		"echo --api-key=k;rm -rf /tmp/victim",
		"echo TOKEN=$(rm -rf ~)",
		"echo authorization=Bearer x;rm -rf /tmp/victim",
		"echo DB_PASSWORD=x|sh",
		"echo password=x",
		"echo ok;rm -rf /tmp/victim",
	}
	held := make([]<-chan string, len(attacks))
	for i, c := range attacks {
		held[i] = st.HeldGate(t, session, "call_"+string(rune('a'+i)), c)
	}
	for i, c := range attacks {
		if out := stacktest.Reply(t, held[i]); !stacktest.Denies(out) || !strings.Contains(out, "AEP_KIMI_ON_TIMEOUT=deny") {
			t.Errorf("%q was not left to the deadline (which denies): reply %q", c, out)
		}
	}
	evs := st.RelayEventsOf(t, session)
	for _, e := range evs {
		if e.Type == "attention.answered" {
			if by, _ := stacktest.DataOf(e)["by"].(string); by != "rule:"+echo {
				continue
			}
			for _, r := range evs {
				if r.ID == e.Subject && !strings.HasSuffix(stacktest.AsString(stacktest.DataOf(r)["prompt"]), ": echo ok") {
					t.Errorf("rule %s answered %q", echo, stacktest.DataOf(r)["prompt"])
				}
			}
		}
	}

	// A deny rule reads what follows the operator: it answers at once.
	deny := st.AddRule(t, "deny", "--tool", "Bash", "--args", "*rm -rf*")
	for i, c := range attacks[:4] {
		out := stacktest.Reply(t, st.HeldGate(t, session, "call_deny_"+string(rune('a'+i)), c))
		if !stacktest.Denies(out) || !strings.Contains(out, "Denied by aep-kimi rule "+deny) {
			t.Errorf("deny rule %s did not answer %q: reply %q", deny, c, out)
		}
	}
}

// "Always" has a floor, against the built binaries: for `rm -rf ./build`
// pending once suggested `--always 'rm *' --scope all`, which allows `rm
// -rf ~ /` (rules test said so). Now it suggests the command exactly;
// saving `rm *` from respond or rules add is refused, naming the override,
// before anything is sent; the exact rule does not allow `rm -rf ~ /`; and
// rules test shows what a wildcard allow saved with the override allows.
func TestE2ERulesAlwaysHasAFloor(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("end to end: builds and runs the binaries")
	}
	st := stacktest.StartStack(t, "AEP_KIMI_CONTROL=1", "AEP_KIMI_ON_TIMEOUT=deny", "AEP_ATTENTION_TIMEOUT_MS=20000")
	session := "floor-" + strings.ToLower(aep.NewID())
	held := st.HeldGate(t, session, "call_1", "rm -rf ./build")
	out := st.WaitCLI(t, func(s string) bool { return strings.Contains(s, "rm -rf ./build") }, "pending")
	if strings.Contains(out, "'rm *'") || !strings.Contains(out, "--always 'rm -rf ./build'") {
		t.Fatalf("pending does not suggest the command exactly:\n%s", out)
	}
	m := regexp.MustCompile(`aep-kimi respond --option allow --always '[^']*'(?: --scope all)? (\S+) (\S+)`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no always command in pending:\n%s", out)
	}
	code, msg := st.Cli(t, "respond", "--option", "allow", "--always", "rm *", "--scope", "all", m[1], m[2])
	if code != 2 || !strings.Contains(msg, "--allow-destructive") || !strings.Contains(msg, "rm (rm -rf /)") {
		t.Fatalf("respond --always 'rm *': exit %d: %s", code, msg)
	}
	code, msg = st.Cli(t, "rules", "add", "allow", "--tool", "Bash", "--args", "rm *")
	if code != 1 || !strings.Contains(msg, "--allow-destructive") {
		t.Fatalf("rules add allow 'rm *': exit %d: %s", code, msg)
	}
	if code, list := st.Cli(t, "rules", "list"); code != 0 || !strings.Contains(list, "no rules") {
		t.Fatalf("a refused rule was saved:\n%s", list)
	}
	// Nothing was sent: the call still waits, and the exact rule answers it.
	if code, msg := st.Cli(t, "respond", "--option", "allow", "--always", "rm -rf ./build", "--scope", "all", m[1], m[2]); code != 0 || !strings.Contains(msg, "saved rule") {
		t.Fatalf("respond --always 'rm -rf ./build': exit %d: %s", code, msg)
	}
	if r := stacktest.Reply(t, held); r != "" {
		t.Fatalf("the allowed call's reply: %q", r)
	}
	code, msg = st.Cli(t, "rules", "test", "--tool", "Bash", "--args", "rm -rf ~ /")
	if code != 0 || !strings.Contains(msg, "no rule decides") || strings.Contains(msg, "warning:") {
		t.Fatalf("rules test on rm -rf ~ / with the exact rule:\n%s", msg)
	}
	wide := st.AddRule(t, "allow", "--tool", "Bash", "--args", "rm *", "--allow-destructive")
	code, msg = st.Cli(t, "rules", "test", "--tool", "Bash", "--args", "rm -rf ~ /")
	if code != 0 || !strings.Contains(msg, "allow by rule "+wide) || !strings.Contains(msg, "warning: "+wide) || !strings.Contains(msg, "e.g. rm -rf /") {
		t.Fatalf("rules test does not show what %s allows:\n%s", wide, msg)
	}
}

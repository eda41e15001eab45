// The terminal path for answering: `pending` finds a held gate and
// `respond` answers it; end to end because the hold is the real kimi-hook's.

package e2e

import (
	"regexp"
	"strings"
	"testing"

	"github.com/aep-kimi/aep-kimi/aep"
	"github.com/aep-kimi/aep-kimi/internal/testkit/stacktest"
)

// The terminal path end to end: a held gate is found with `pending`, answered
// with `respond --option deny SESSION` (no request id), and the hook's reply
// denies; afterwards nothing waits and a second answer finds nothing.
func TestE2EPendingThenRespondSession(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("end to end: builds and runs the binaries")
	}
	st := stacktest.StartStack(t, "AEP_KIMI_CONTROL=1", "AEP_ATTENTION_TIMEOUT_MS=45000", "AEP_CAPTURE=redacted")
	session := "term-" + strings.ToLower(aep.NewID())
	if out := stacktest.Reply(t, st.Hook(t, map[string]any{"hook_event_name": "SessionStart", "session_id": session,
		"source": "startup", "session_title": "Clean up the cluster"})); out != "" {
		t.Fatalf("SessionStart reply %q", out)
	}
	held := st.HeldGate(t, session, "call_1", "kubectl delete pod x")
	out := st.WaitCLI(t, func(s string) bool { return strings.Contains(s, "kubectl delete pod x") }, "pending")
	m := regexp.MustCompile(`(?m)^Clean up the cluster · (\S+)  request (\S+)$`).FindStringSubmatch(out)
	if m != nil && !strings.HasPrefix(session, m[1]) {
		m = nil
	}
	if m == nil {
		t.Fatalf("pending does not name the session, its title and the request:\n%s", out)
	}
	for _, want := range []string{"1 request waits on you", "options allow, allow_session, deny, cancel", "· runs anyway in ",
		"aep-kimi respond --option deny " + m[1] + " " + m[2]} {
		if !strings.Contains(out, want) {
			t.Fatalf("pending lacks %q:\n%s", want, out)
		}
	}
	code, msg := st.Cli(t, "respond", "--option", "deny", session)
	if code != 0 || !strings.Contains(msg, "accepted control.attention.respond") {
		t.Fatalf("respond SESSION: exit %d: %s", code, msg)
	}
	if r := stacktest.Reply(t, held); !stacktest.Denies(r) {
		t.Fatalf("the hook's reply does not deny: %q", r)
	}
	st.WaitCLI(t, func(s string) bool { return strings.TrimSpace(s) == "nothing waits on you" }, "pending")
	if code, msg := st.Cli(t, "respond", "--option", "deny", session); code != stacktest.ExitNotPending || !strings.Contains(msg, "no pending request") {
		t.Fatalf("respond with nothing pending: exit %d: %s", code, msg)
	}
	if code, msg := st.Cli(t, "respond", "--option", "deny", session, m[2]); code != stacktest.ExitNotPending || !strings.Contains(msg, "no longer waits (answered)") {
		t.Fatalf("respond to the answered request: exit %d: %s", code, msg)
	}
	if code, msg := st.Cli(t, "respond", "--option", "deny", "no-such-session"); code != stacktest.ExitUnknownSession {
		t.Fatalf("respond to an unknown session: exit %d: %s", code, msg)
	}
}

// From tail alone: with two holds in one session, respond SESSION refuses and
// lists both; each request's pasted command from tail answers it.
func TestE2ETailPastedCommandAnswers(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("end to end: builds and runs the binaries")
	}
	st := stacktest.StartStack(t, "AEP_KIMI_CONTROL=1", "AEP_ATTENTION_TIMEOUT_MS=45000")
	session := "term-" + strings.ToLower(aep.NewID())
	first := st.HeldGate(t, session, "call_1", "rm -rf /tmp/a")
	second := st.HeldGate(t, session, "call_2", "rm -rf /tmp/b")
	out := st.WaitCLI(t, func(s string) bool { return strings.Count(s, "aep-kimi respond") == 2 },
		"tail", "--from", "all", "--once", "--state", "none")
	if strings.Contains(out, "\x1b[") {
		t.Fatalf("tail coloured a pipe:\n%s", out)
	}
	var pasted [][]string
	for _, l := range strings.Split(out, "\n") {
		if _, cmd, ok := strings.Cut(l, "↳ aep-kimi respond "); ok {
			pasted = append(pasted, append([]string{"respond"}, strings.Fields(cmd)...))
		}
	}
	if len(pasted) != 2 || !strings.Contains(out, "options allow, allow_session, deny, cancel · runs anyway in") {
		t.Fatalf("tail shows %d answer commands:\n%s", len(pasted), out)
	}
	code, msg := st.Cli(t, "respond", "--option", "deny", session)
	if code != stacktest.ExitSeveralPending || !strings.Contains(msg, pasted[0][len(pasted[0])-1]) || !strings.Contains(msg, pasted[1][len(pasted[1])-1]) {
		t.Fatalf("respond SESSION with two pending: exit %d, want %d and both listed:\n%s", code, stacktest.ExitSeveralPending, msg)
	}
	for _, args := range pasted {
		if code, msg := st.Cli(t, args...); code != 0 {
			t.Fatalf("pasted %q: exit %d: %s", args, code, msg)
		}
	}
	for i, held := range []<-chan string{first, second} {
		if r := stacktest.Reply(t, held); !stacktest.Denies(r) {
			t.Fatalf("hold %d: the reply does not deny: %q", i+1, r)
		}
	}
}

// Sessions named by their project at the default capture, from a real
// Kimi run through adapter and relay.

package e2e

import (
	"regexp"
	"strings"
	"testing"

	"github.com/aep-kimi/aep-kimi/aep"
	"github.com/aep-kimi/aep-kimi/internal/testkit/stacktest"
)

// At the default capture a session is named by its project: the last
// element of its working directory rides at metadata, so `pending` and
// `tail` say "acme-shop · <short id>", never the working directory itself;
// the respond command they print names it by the short id, which answers.
func TestE2EProjectNameAtDefaultCapture(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("end to end: builds and runs the binaries")
	}
	st := stacktest.StartStack(t, "AEP_KIMI_CONTROL=1", "AEP_ATTENTION_TIMEOUT_MS=45000")
	session := "session_" + strings.ToLower(aep.NewID())
	if out := stacktest.Reply(t, st.Hook(t, map[string]any{"hook_event_name": "SessionStart", "session_id": session,
		"cwd": "/home/ann/work/acme-shop", "source": "startup"})); out != "" {
		t.Fatalf("SessionStart reply %q", out)
	}
	held := st.HeldGate(t, session, "call_1", "make deploy")
	short := regexp.QuoteMeta(strings.TrimPrefix(session, "session_")[:6])
	label := regexp.MustCompile(`acme-shop · ` + short + `\b`)
	timeRow := regexp.MustCompile(`^\d\d:\d\d:\d\d`)

	out := st.WaitCLI(t, func(s string) bool { return strings.Contains(s, "request waits on you") }, "pending")
	if !regexp.MustCompile(`(?m)^acme-shop · ` + short + `  request `).MatchString(out) {
		t.Errorf("pending does not name the session by its project:\n%s", out)
	}
	tail := st.WaitCLI(t, func(s string) bool { return strings.Contains(s, "calls Bash") || strings.Contains(s, "Bash") },
		"tail", "--from", "all", "--once", "--state", "none")
	rows := 0
	for _, l := range strings.Split(tail, "\n") {
		if timeRow.MatchString(l) && strings.Contains(l, short) {
			rows++
			if !label.MatchString(l) {
				t.Errorf("a tail row of the session lacks its project: %q", l)
			}
		}
	}
	if rows < 2 {
		t.Errorf("tail printed %d rows of the session:\n%s", rows, tail)
	}
	for _, leak := range []string{"/home/ann", "~/work"} {
		if strings.Contains(out+tail, leak) {
			t.Errorf("the working directory (%s) left the adapter at the default capture:\n%s\n%s", leak, out, tail)
		}
	}
	// The command pending prints names the session by its short id, and
	// answers it.
	m := regexp.MustCompile(`aep-kimi respond --option deny (\S+) (\S+)`).FindStringSubmatch(out)
	if m == nil || m[1] != strings.TrimPrefix(session, "session_")[:6] {
		t.Fatalf("pending's command does not name the session by its short id:\n%s", out)
	}
	if code, msg := st.Cli(t, "respond", "--option", "deny", m[1], m[2]); code != 0 {
		t.Fatalf("respond: exit %d: %s", code, msg)
	}
	stacktest.Reply(t, held)
}

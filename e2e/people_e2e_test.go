// A team on one relay: roles added, used and revoked with the real CLI,
// relay, adapter and Kimi, since roles are checked on every binding.

package e2e

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/aep-kimi/aep-kimi/access"
	"github.com/aep-kimi/aep-kimi/internal/testkit/kimiharness"
	"github.com/aep-kimi/aep-kimi/internal/testkit/poll"
	"github.com/aep-kimi/aep-kimi/internal/testkit/stacktest"
	"github.com/aep-kimi/aep-kimi/relay/consumer"
)

// A team on a real relay, adapter and Kimi session: the owner adds a
// watcher and an answerer with `aep-kimi token add`. The watcher's stream
// and socket carry the session's shape but no text above metadata, and its
// respond is refused; the answerer's deny reaches the hook (Kimi is told
// who denied it) and the stream names her; a command she makes herself
// naming the owner (aepkimiby, and by in its data) is recorded as hers;
// `token rm` ends the watcher's stream and socket within 2 s.
func TestE2ETeamRoles(t *testing.T) {
	// Serial: it holds a revocation to closing connections within 2 s, which tests running beside it would stretch.
	kimi := kimiharness.Require(t)
	st := stacktest.StartStack(t, "AEP_KIMI_CONTROL=1", "AEP_CAPTURE=redacted")
	add := func(name, role string) string {
		code, out := st.CliAs(t, st.Token, "token", "add", name, "--role", role, "--json")
		var got struct{ Token string }
		if code != 0 || json.Unmarshal([]byte(out), &got) != nil || got.Token == "" {
			t.Fatalf("token add %s: exit %d: %s", name, code, out)
		}
		return got.Token
	}
	walt, ann := add("walt", "watch"), add("ann", "answer")
	b, err := os.ReadFile(filepath.Join(st.Home, access.FileName))
	if st2, _ := os.Stat(filepath.Join(st.Home, access.FileName)); err != nil || st2.Mode().Perm() != 0o600 ||
		strings.Contains(string(b), walt) || strings.Contains(string(b), ann) {
		t.Fatalf("tokens file (%v): %s", err, b)
	}
	// The relay re-reads the file every 0.5 s.
	poll.Must(t, 10*time.Second, "the relay to admit the watcher", func() bool {
		return stacktest.StatusOf(t, st.RelayURL+"/.well-known/aep", stacktest.Bearer(walt)) == http.StatusOK
	})
	watcher := stacktest.OpenAs(t, st.RelayURL, walt)

	const secret = "echo team-secret-7f3a"
	done := make(chan kimiharness.PrintRun, 1)
	go func() {
		done <- stacktest.Scenario(t, kimi, stacktest.BashSteps(t, secret, "echo forged"), st.HookCmd(t))
	}()
	out := st.WaitCLI(t, func(s string) bool { return strings.Contains(s, "team-secret-7f3a") }, "pending")
	m := regexp.MustCompile(`aep-kimi respond --option deny (\S+) (\S+)`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no answering command in pending:\n%s", out)
	}
	if code, msg := st.CliAs(t, walt, "respond", "--option", "allow", m[1], m[2]); code != stacktest.ExitRejected || !strings.Contains(msg, "needs the answer role") {
		t.Fatalf("the watcher's respond: exit %d: %s", code, msg)
	}
	if code, msg := st.CliAs(t, ann, "respond", "--option", "deny", m[1], m[2]); code != 0 {
		t.Fatalf("the answerer's respond: exit %d: %s", code, msg)
	}

	// The second call: ann answers with a command of her own making that
	// names someone else (aepkimiby, and a by in its data): the relay
	// writes her name over it.
	out = st.WaitCLI(t, func(s string) bool { return strings.Contains(s, "echo forged") }, "pending")
	m2 := regexp.MustCompile(`aep-kimi respond --option deny (\S+) (\S+)`).FindStringSubmatch(out)
	if m2 == nil {
		t.Fatalf("no answering command in pending:\n%s", out)
	}
	// pending names the session by its short id; a command goes to the whole.
	_, _, held := st.OneSession(t)
	if len(held) == 0 || !strings.HasPrefix(consumer.BareID(held[0].Session), m2[1]) {
		t.Fatalf("the session log does not hold session %s", m2[1])
	}
	stacktest.SendForged(t, st.RelayURL, ann, held[0].Session, m2[2])
	run := <-done
	st.WaitQuiet(t)

	// The hook got the deny, with who gave it, and Kimi told its model.
	if reqs := strings.Join(run.Mock.Requests(t), "\n"); !strings.Contains(reqs, "Denied by ann (cli) through aep-kimi") {
		t.Errorf("Kimi's model was not told ann denied the call:\n%s", reqs)
	}
	_, _, evs := st.OneSession(t)
	answers := map[string]map[string]any{} // request -> the answer's data
	for _, e := range evs {
		if e.Type == "attention.answered" {
			answers[e.Subject] = stacktest.DataOf(e)
		}
	}
	if a := answers[m[2]]; a["by"] != "ann" || a["x-kimi-code-surface"] != "cli" {
		t.Fatalf("the answer on the record: %v", a)
	}
	if a := answers[m2[2]]; a["by"] != "ann" || a["x-kimi-code-surface"] != "page" {
		t.Fatalf("the forged answer on the record: %v", a)
	}
	if code, tail := st.Cli(t, "tail", "--from", "all", "--no-color", "--once"); code != 0 || !strings.Contains(tail, "denied by ann (cli)") {
		t.Errorf("tail (exit %d) does not name ann:\n%s", code, tail)
	}

	// The watcher saw the session's shape, and no text above metadata.
	wanted := []string{"session.started", "tool.requested", "attention.requested", "control.attention.respond", "attention.answered", "tool.denied"}
	types := map[string]bool{}
	sawAll := func() bool {
		for _, want := range wanted {
			if !types[want] {
				return false
			}
		}
		return true
	}
	poll.Until(10*time.Second, func() bool {
		for _, raw := range append(stacktest.Drain(watcher.Sse), stacktest.Drain(watcher.Sock)...) {
			var e struct {
				Type, Capture string
				Data          map[string]any
			}
			if err := json.Unmarshal([]byte(raw), &e); err != nil {
				t.Fatalf("%v: %s", err, raw)
			}
			types[e.Type] = true
			if strings.Contains(raw, "team-secret") || (e.Capture != "" && e.Capture != "metadata" && e.Capture != "none") {
				t.Fatalf("the watcher was served %s", raw)
			}
		}
		return sawAll()
	})
	for _, want := range wanted {
		if !types[want] {
			t.Errorf("the watcher never saw a %s (saw %v)", want, types)
		}
	}

	// Revoking the watcher ends its stream and its socket within 2 s.
	start := time.Now()
	if code, out := st.CliAs(t, st.Token, "token", "rm", "walt"); code != 0 {
		t.Fatalf("token rm: exit %d: %s", code, out)
	}
	for name, ch := range map[string]chan string{"stream": watcher.SseEnd, "socket": watcher.SockEnd} {
		select {
		case reason := <-ch:
			if reason != "token-revoked" || time.Since(start) > 2*time.Second {
				t.Errorf("the watcher's %s ended after %v with %q", name, time.Since(start), reason)
			}
		case <-time.After(2*time.Second - time.Since(start)):
			t.Errorf("the watcher's %s is open 2 s after token rm", name)
		}
	}
	if code, _ := st.CliAs(t, walt, "pending"); code == 0 {
		t.Error("a revoked token still reads pending")
	}
}

// Hints that fit the reader: what a live tail, pending and tail offer
// an owner and a watcher, from the built binaries' real output.

package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aep-kimi/aep-kimi/aep"
	"github.com/aep-kimi/aep-kimi/internal/testkit/poll"
	"github.com/aep-kimi/aep-kimi/internal/testkit/stacktest"
	"github.com/aep-kimi/aep-kimi/internal/testkit/syncbuf"
)

// Hints fit the reader (issue 36): a live tail says a rule answers a
// request the relay's rules answered, with no countdown and no respond
// command; a watcher's pending and tail offer no respond command she
// cannot run, while the owner's do.
func TestE2EHintsFitTheReader(t *testing.T) {
	t.Parallel()
	st := stacktest.StartStack(t, "AEP_KIMI_CONTROL=1", "AEP_ATTENTION_TIMEOUT_MS=45000")
	rule := st.AddRule(t, "deny", "--tool", "Bash", "--args", "make *")
	watcher := st.AddPerson(t, "walt", "watch", "--capture", "redacted")

	subs := st.Subscriptions(t)
	live := &syncbuf.Buffer{}
	tail := exec.Command(filepath.Join(stacktest.Binaries(t), "aep-kimi"), "tail", "--state", "none", "--no-color")
	tail.Env = append(os.Environ(), "AEP_TOKEN="+st.Token, "AEP_RELAY="+st.RelayURL, "COLUMNS=400")
	tail.Stdout, tail.Stderr = live, live
	if err := tail.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tail.Process.Kill(); tail.Wait() })
	st.AwaitSubscriber(t, subs) // the tail connects

	ruled := "ruled-" + strings.ToLower(aep.NewID())
	<-st.HeldGate(t, ruled, "call_1", "make release")
	if !poll.Until(10*time.Second, func() bool { return strings.Contains(live.String(), "denied by rule") }) {
		t.Fatalf("the live tail never showed the rule's answer:\n%s", live.String())
	}
	out := live.String()
	if !strings.Contains(out, "rule "+rule+" answers it: deny") || strings.Contains(out, "aep-kimi respond") || strings.Contains(out, "runs anyway") {
		t.Fatalf("the live tail offers a person an answer the rule gives:\n%s", out)
	}

	asked := "asked-" + strings.ToLower(aep.NewID())
	st.HeldGate(t, asked, "call_1", "ls -la")
	owner := st.WaitCLI(t, func(s string) bool { return strings.Contains(s, "ls -la") }, "pending")
	if !strings.Contains(owner, "aep-kimi respond --option deny ") {
		t.Fatalf("the owner's pending has no respond command:\n%s", owner)
	}
	for _, args := range [][]string{{"pending"}, {"tail", "--from", "all", "--once", "--state", "none"}} {
		code, out := st.CliAs(t, watcher, args...)
		if code != 0 || !strings.Contains(out, "ls -la") || strings.Contains(out, "aep-kimi respond") {
			t.Fatalf("a watcher's %s (exit %d) offers a respond command she cannot run:\n%s", args[0], code, out)
		}
	}
}

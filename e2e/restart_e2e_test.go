// Restarts of the adapter and of `up`: open requests, history and a
// live tail survive, with real processes killed and started again.

package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aep-kimi/aep-kimi/adapter"
	"github.com/aep-kimi/aep-kimi/aep"
	"github.com/aep-kimi/aep-kimi/internal/testkit/netaddr"
	"github.com/aep-kimi/aep-kimi/internal/testkit/poll"
	"github.com/aep-kimi/aep-kimi/internal/testkit/proctest"
	"github.com/aep-kimi/aep-kimi/internal/testkit/stacktest"
	"github.com/aep-kimi/aep-kimi/internal/testkit/syncbuf"
)

// The adapter killed (-9) while a permission request is open in Kimi, then
// started again on the same home: the request comes back from the log, so
// the session's end dismisses it (or its result answers it) and the log is
// valid by `aep-kimi validate` (AEP-0002 §7.2: no session ends with a
// request pending).
func TestE2EAdapterRestartKeepsOpenRequest(t *testing.T) {
	t.Parallel()
	stacktest.Binaries(t)
	events, payloads := stacktest.RecordedHooks(t, "tui")
	req := -1
	for i, e := range events {
		if e == "PermissionRequest" {
			req = i
		}
	}
	if req < 0 || events[len(events)-1] != "SessionEnd" {
		t.Fatalf("the capture has no PermissionRequest or does not end: %v", events)
	}
	var session struct {
		ID string `json:"session_id"`
	}
	json.Unmarshal([]byte(payloads[0]), &session) //nolint:errcheck // checked below
	for _, c := range []struct {
		name  string
		after []string
	}{
		{"ended", payloads[len(payloads)-1:]},
		{"answered-then-ended", payloads[req+1:]},
	} {
		t.Run(c.name, func(t *testing.T) {
			home := t.TempDir()
			addr := fmt.Sprintf("127.0.0.1:%d", netaddr.FreePort(t))
			base := "http://" + addr
			start := func() func() {
				p := stacktest.StartDaemon(t, base, stacktest.CleanEnv(home), "adapter", "--listen", addr, "--relay", "none", "--home", home)
				return p.Kill
			}
			post := func(payload string) {
				tok, err := os.ReadFile(adapter.TokenPath(home))
				if err != nil {
					t.Fatal(err)
				}
				r, _ := http.NewRequest(http.MethodPost, base+"/hook", strings.NewReader(payload))
				r.Header.Set("Content-Type", "application/json")
				r.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(tok)))
				resp, err := http.DefaultClient.Do(r)
				if err != nil {
					t.Fatal(err)
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 {
					t.Fatalf("hook answered %d %s", resp.StatusCode, body)
				}
			}
			kill := start()
			for _, p := range payloads[:req+1] {
				post(p)
			}
			kill()
			kill = start()
			for _, p := range c.after {
				post(p)
			}
			kill()
			path := filepath.Join(home, "logs", "kimi-code", adapter.LogFileName(session.ID))
			stacktest.ValidateWithCLI(t, path)
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if n := strings.Count(string(b), `"type":"attention.requested"`); n != 1 {
				t.Fatalf("%d attention requests for one permission prompt:\n%s", n, b)
			}
		})
	}
}

// History survives a restart of `up` with the defaults (issue 36): a
// session with an answered request, then `up` stopped and started again on
// the same home. `tail --from all` (with a state file that has seen it all)
// still prints the session and `audit` still says who answered, from the
// relay alone.
func TestE2EUpRestartKeepsHistory(t *testing.T) {
	t.Parallel()
	st := stacktest.NewUpStack(t)
	start := func() *proctest.Proc {
		return st.Up(t, []string{"AEP_STORE="}, "--control", "--web=false", "--kimi-home", t.TempDir())
	}
	st.Relay = start()
	session := "hist-" + strings.ToLower(aep.NewID())
	reply := st.HeldGate(t, session, "call_1", "make release")
	st.WaitCLI(t, func(s string) bool { return strings.Contains(s, "make release") }, "pending")
	if code, out := st.Cli(t, "respond", "--option", "deny", "--text", "not today", session); code != 0 {
		t.Fatalf("respond: exit %d\n%s", code, out)
	}
	<-reply
	state := filepath.Join(t.TempDir(), "tail-state.json")
	before := st.WaitCLI(t, func(s string) bool { return strings.Contains(s, "make release") && strings.Contains(s, "denied") },
		"tail", "--from", "all", "--once", "--state", state)
	st.Relay.Stop(t)

	st.Relay = start()
	out := st.WaitCLI(t, func(string) bool { return true }, "tail", "--from", "all", "--once", "--state", state)
	if !strings.Contains(out, "make release") || !strings.Contains(out, "denied") {
		t.Fatalf("tail --from all after up restarted:\n%s\nbefore it:\n%s", out, before)
	}
	out = st.WaitCLI(t, func(string) bool { return true }, "audit")
	if !strings.Contains(out, "make release") || !strings.Contains(out, "denied") || !strings.Contains(out, "owner") {
		t.Fatalf("audit after up restarted:\n%s", out)
	}
}

// A tail left open across a restart of up prints the session begun while
// up was down: kimi-hook spooled it, the adapter ingested the spool when up
// came back, and the tail's reconnection asked for every session the relay
// holds (issue 36).
func TestE2ETailCatchesSessionSpooledWhileDown(t *testing.T) {
	t.Parallel()
	st := stacktest.NewUpStack(t)
	start := func() *proctest.Proc {
		return st.Up(t, []string{"AEP_STORE="}, "--web=false", "--kimi-home", t.TempDir())
	}
	st.Relay = start()
	subs := st.Subscriptions(t)
	live := &syncbuf.Buffer{}
	tail := exec.Command(filepath.Join(stacktest.Binaries(t), "aep-kimi"), "tail", "--state", "none", "--no-color", "--details")
	tail.Env = append(os.Environ(), "AEP_TOKEN="+st.Token, "AEP_RELAY="+st.RelayURL, "COLUMNS=400")
	tail.Stdout, tail.Stderr = live, live
	if err := tail.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tail.Process.Kill(); tail.Wait() })
	st.AwaitSubscriber(t, subs) // the tail connects, live
	started := func() int { return strings.Count(live.String(), "session started") }
	st.RunHook(t, fmt.Sprintf(`{"hook_event_name":"SessionStart","session_id":%q,"source":"startup"}`, "before-"+strings.ToLower(aep.NewID())))
	if !poll.Until(10*time.Second, func() bool { return started() == 1 }) {
		t.Fatalf("the live tail never showed the first session:\n%s", live.String())
	}
	st.Relay.Stop(t)

	st.RunHook(t, fmt.Sprintf(`{"hook_event_name":"SessionStart","session_id":%q,"source":"startup"}`, "gap-"+strings.ToLower(aep.NewID())))
	st.Relay = start()
	if !poll.Until(20*time.Second, func() bool { return started() >= 2 }) {
		t.Fatalf("the tail left open never printed the session spooled while up was down:\n%s", live.String())
	}
	// A session begun now prints after any second copy the reconnection
	// brought: once it shows, each session must have shown once.
	// (The tail shows a session's first six characters.)
	st.RunHook(t, fmt.Sprintf(`{"hook_event_name":"SessionStart","session_id":%q,"source":"startup"}`, "after-"+strings.ToLower(aep.NewID())))
	if !poll.Until(20*time.Second, func() bool { return strings.Contains(live.String(), " after- ") }) {
		t.Fatalf("the tail never printed the session begun after the restart:\n%s", live.String())
	}
	if started() != 3 {
		t.Fatalf("%d sessions started, want the first, the spooled one and the last once each:\n%s", started(), live.String())
	}
}

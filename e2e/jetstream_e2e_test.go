// The JetStream store through kill -9 and across two relays on one
// NATS: real processes, since the fault is a process's death.

package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aep-kimi/aep-kimi/aep"
	"github.com/aep-kimi/aep-kimi/internal/testkit/netaddr"
	"github.com/aep-kimi/aep-kimi/internal/testkit/poll"
	"github.com/aep-kimi/aep-kimi/internal/testkit/relaycall"
	"github.com/aep-kimi/aep-kimi/internal/testkit/stacktest"
	"github.com/aep-kimi/aep-kimi/relay/client"
	"github.com/aep-kimi/aep-kimi/relay/wire"
)

// A relay on the JetStream store killed -9 and restarted serves every event
// it admitted, in (epoch, seq) order, once; a consumer following it across
// the crash resumes with no gap.
func TestE2EJetStreamSurvivesKill(t *testing.T) {
	t.Parallel()
	stacktest.Binaries(t)
	home := t.TempDir()
	token := "e2e-" + aep.NewID()
	port := netaddr.FreePort(t)
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	env := []string{"AEP_TOKEN=" + token, "AEP_HOME=" + home}
	args := []string{"relay", "--listen", fmt.Sprintf("127.0.0.1:%d", port), "--store", "jetstream"}
	rel := stacktest.StartDaemon(t, base, env, args...)

	var mu sync.Mutex
	seen := map[string][]int64{}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	tail, err := client.NewTailer(client.TailConfig{URL: base, Token: token, Live: true,
		BackoffMin: 20 * time.Millisecond, BackoffMax: 200 * time.Millisecond,
		OnEvent: func(ev *aep.Event) {
			mu.Lock()
			seen[ev.Session] = append(seen[ev.Session], *ev.Seq)
			mu.Unlock()
		}})
	if err != nil {
		t.Fatal(err)
	}
	tailDone := make(chan error, 1)
	go func() { tailDone <- tail.Run(ctx) }()

	// Three sessions, 400 events each, posted in batches with redeliveries
	// of earlier events. (Late arrivals are the store tests' business: the
	// Tailer skips anything at or before a position it has seen.)
	sessions := []string{"s-a", "s.b", "s c"}
	const perSession = 400
	post := func(from, to int) {
		for i := from; i < to; i += 50 {
			var lines [][]byte
			for _, s := range sessions {
				for k := range 50 {
					lines = append(lines, stacktest.JsEvent(t, s, int64(i+k)))
				}
				if i > 0 {
					lines = append(lines, stacktest.JsEvent(t, s, int64(i-1))) // a redelivery
				}
			}
			relaycall.PostLines(t, base, token, lines...)
		}
	}
	post(0, perSession/2)
	rel.Kill()
	start := time.Now()
	rel = stacktest.StartDaemon(t, base, env, args...)
	restart := time.Since(start)
	post(perSession/2, perSession)

	want := make([]string, perSession)
	for _, s := range sessions {
		for i := range want {
			want[i] = fmt.Sprintf("%s-%d", s, i)
		}
		if got := stacktest.ReplayIDs(t, base, token)[s]; !slices.Equal(got, want) {
			t.Fatalf("session %q after kill -9: served %d events %v..., want %d in order once", s, len(got), got[:min(len(got), 10)], len(want))
		}
	}
	// The follower saw every seq of every session, in order, no gap.
	poll.Until(10*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		done := true
		for _, s := range sessions {
			done = done && len(seen[s]) >= perSession
		}
		return done
	})
	mu.Lock()
	defer mu.Unlock()
	for _, s := range sessions {
		got := seen[s]
		if len(got) != perSession {
			t.Fatalf("consumer of %q saw %d events, want %d", s, len(got), perSession)
		}
		for i, q := range got {
			if q != int64(i) {
				t.Fatalf("consumer of %q: gap or repeat at %d (got seq %d)", s, i, q)
			}
		}
	}
	t.Logf("restart to serving after kill -9 (%d events stored): %v", len(sessions)*perSession/2, restart)
	if !strings.Contains(rel.Logs.String(), "jetstream store ready") {
		t.Errorf("the restarted relay did not log its store: %s", rel.Logs.String())
	}
	cancel()
	<-tailDone
}

// Two relays on one NATS behind one name: the adapter publishes to relay A
// (whose embedded NATS listens on loopback; B connects with the credentials
// A generated), a person asks relay B what
// waits and answers there; B routes the answer to the adapter through A, and
// the held hook's reply denies.
func TestE2ETwoRelaysAnswerThroughEither(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("end to end: builds and runs the binaries")
	}
	natsAddr := fmt.Sprintf("127.0.0.1:%d", netaddr.FreePort(t))
	st := &stacktest.Stack{Home: t.TempDir(), Token: "e2e-" + aep.NewID()}
	aAddr, bAddr := fmt.Sprintf("127.0.0.1:%d", netaddr.FreePort(t)), fmt.Sprintf("127.0.0.1:%d", netaddr.FreePort(t))
	st.RelayURL = "http://" + aAddr
	aHome := t.TempDir()
	st.Relay = stacktest.StartDaemon(t, st.RelayURL, []string{"AEP_TOKEN=" + st.Token, "AEP_STORE=jetstream", "AEP_HOME=" + aHome},
		"relay", "--listen", aAddr, "--nats-listen", natsAddr)
	// B joins A's NATS as the user A generated.
	stacktest.StartDaemon(t, "http://"+bAddr, []string{"AEP_TOKEN=" + st.Token, "AEP_STORE=jetstream", "AEP_NATS_URL=nats://" + natsAddr,
		"AEP_NATS_CREDS=" + filepath.Join(aHome, wire.StoreDirName, wire.NATSCredsName)},
		"relay", "--listen", bAddr)
	st.WithAdapter(t, "AEP_KIMI_CONTROL=1", "AEP_ATTENTION_TIMEOUT_MS=45000")

	session := "two-" + strings.ToLower(aep.NewID())
	if out := stacktest.Reply(t, st.Hook(t, map[string]any{"hook_event_name": "SessionStart", "session_id": session, "source": "startup"})); out != "" {
		t.Fatalf("SessionStart reply %q", out)
	}
	held := st.HeldGate(t, session, "call_1", "rm -rf build")
	onB := *st
	onB.RelayURL = "http://" + bAddr
	onB.WaitCLI(t, func(s string) bool { return strings.Contains(s, "rm -rf build") }, "pending")
	code, msg := onB.Cli(t, "respond", "--option", "deny", session)
	if code != 0 || !strings.Contains(msg, "accepted control.attention.respond") {
		t.Fatalf("respond through relay B: exit %d: %s", code, msg)
	}
	if r := stacktest.Reply(t, held); !stacktest.Denies(r) {
		t.Fatalf("the hook's reply does not deny: %q", r)
	}
	st.WaitCLI(t, func(s string) bool { return strings.TrimSpace(s) == "nothing waits on you" }, "pending")
}

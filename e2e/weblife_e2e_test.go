// `up` following the real `kimi web` as it starts after up, stops mid-run
// and comes back: attached each time without a restart of up.

package e2e

import (
	"fmt"
	"testing"
	"time"

	"github.com/aep-kimi/aep-kimi/aep"
	"github.com/aep-kimi/aep-kimi/bridgeweb"
	"github.com/aep-kimi/aep-kimi/internal/testkit/kimiharness"
	"github.com/aep-kimi/aep-kimi/internal/testkit/netaddr"
	"github.com/aep-kimi/aep-kimi/internal/testkit/stacktest"
	"github.com/aep-kimi/aep-kimi/mapping"
)

func TestE2EUpFollowsKimiWebAsItComesAndGoes(t *testing.T) {
	t.Parallel()
	kimi := kimiharness.Require(t)
	mock := kimiharness.StartMock(t, kimiharness.WriteScript(t, stacktest.WebScript))
	ws := &stacktest.WebStack{Stack: &stacktest.Stack{Token: "e2e-" + aep.NewID()}, Kimi: kimi, Mode: "primary",
		Home: t.TempDir(), Khome: t.TempDir(), Work: t.TempDir()}
	kimiharness.WriteWebConfig(t, ws.Khome, mock.Port)
	rport := netaddr.FreePort(t)
	ws.RelayURL = fmt.Sprintf("http://127.0.0.1:%d", rport)
	ws.Addr = fmt.Sprintf("127.0.0.1:%d", netaddr.FreePort(t))
	env := []string{"AEP_TOKEN=" + ws.Token, "AEP_HOME=" + ws.Home, "KIMI_CODE_HOME=" + ws.Khome}
	ws.Bridge = stacktest.StartDaemon(t, "http://"+ws.Addr, env, "up", "--relay-listen", fmt.Sprintf("127.0.0.1:%d", rport),
		"--adapter-listen", fmt.Sprintf("127.0.0.1:%d", netaddr.FreePort(t)), "--bridge-listen", ws.Addr, "--mode", "primary")
	if h := ws.Health(t); h.Kap.State != bridgeweb.KapDiscovering {
		t.Fatalf("up with no kimi web: %+v", h)
	}

	// kimi web starts after up: it is attached without a restart.
	started := time.Now()
	ws.Web = kimiharness.StartWeb(t, kimi, ws.Khome, ws.Work)
	registered := time.Now()
	attached := ws.WaitAttached(t, ws.Web)
	t.Logf("kimi web attached %s after it was started, %s after it answered and registered",
		attached.Sub(started).Round(10*time.Millisecond), attached.Sub(registered).Round(10*time.Millisecond))

	// A session runs through it; a second prompt is still running when the
	// server stops.
	sid := ws.Web.CreateSession(t)
	ws.Web.Prompt(t, sid, "run the probe")
	ws.ApproveViaUI(t, sid)
	ws.WaitIdle(t, sid)
	ws.WaitCount(t, sid, "run.finished", 1)
	ws.Web.Prompt(t, sid, "slow prompt")
	ws.WaitCount(t, sid, "run.started", 2)

	stopped := time.Now()
	ws.Web.Shutdown(t)
	end := ws.WaitFor(t, sid, "session.ended", func(e *aep.Event) bool { return e.Type == "session.ended" })
	ended := time.Now()
	t.Logf("session.ended %s after kimi web was told to stop", ended.Sub(stopped).Round(10*time.Millisecond))
	if lag := ended.Sub(stopped); lag > stacktest.MaxEndLag {
		t.Errorf("the session outlived its kimi web by %s (bound %s)", lag, stacktest.MaxEndLag)
	}
	if d := stacktest.DataOf(end); d["reason"] != mapping.EndKilled {
		t.Errorf("session.ended %v, want reason killed (a run was open)", d)
	}
	if v, _ := end.ExtString(mapping.ExtObserved); v != mapping.ObservedProcess {
		t.Errorf("session.ended %s = %q", mapping.ExtObserved, v)
	}
	select {
	case <-ws.Web.Exited():
	case <-time.After(15 * time.Second):
		t.Fatal("kimi web still runs 15 s after shutdown: the bridge kept it alive")
	}

	// The bridge waits for the next server, and a session it loads again
	// is a new chapter.
	ws.WaitHealth(t, "back to waiting", func(h bridgeweb.Health) bool {
		return h.Kap.State == bridgeweb.KapDiscovering && len(h.Instances) == 0
	})
	ws.Web = kimiharness.StartWeb(t, kimi, ws.Khome, ws.Work)
	ws.WaitAttached(t, ws.Web)
	// Opening the session loads it, as the web UI does; the server journals
	// its events only once someone subscribes, so the prompt waits for the
	// bridge.
	ws.Web.PendingApprovals(t, sid)
	ws.WaitHealth(t, "re-subscribed the session", func(h bridgeweb.Health) bool { return h.SessionsFollowed >= 1 })
	ws.Web.Prompt(t, sid, "hello again")
	ws.WaitIdle(t, sid)
	ws.WaitCount(t, sid, "run.finished", 2)
	ws.WaitFor(t, sid, "the journal's last frame", func(e *aep.Event) bool {
		n, _ := stacktest.KimiSeq(e)
		j := kimiharness.Journal(t, ws.Khome, sid)
		return n == j[len(j)-1].Seq
	})

	raw, evs := ws.Events(t, sid)
	stacktest.ValidateWithCLI(t, ws.LogPath(sid)) // every event and the stream rules
	stacktest.Want(t, evs, map[string]int{"run.started": 3, "run.finished": 2, "run.cancelled": 1, "session.ended": 1, "session.started": 1})
	var order []string
	for _, e := range evs {
		switch e.Type {
		case "run.cancelled", "session.ended", "session.started":
			order = append(order, e.Type)
		}
	}
	if fmt.Sprint(order) != "[run.cancelled session.ended session.started]" {
		t.Errorf("lifecycle order %v", order)
	}
	ws.SameOnRelay(t, raw, sid)
}

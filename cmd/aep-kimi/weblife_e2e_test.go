package main

// End-to-end: `aep-kimi up` started before any `kimi web` attaches each
// server as it starts and ends its sessions when it stops, with the real
// Kimi CLI, the real relay and the bridge up runs.

import (
	"fmt"
	"testing"
	"time"

	"github.com/aep-kimi/aep-kimi/aep"
	"github.com/aep-kimi/aep-kimi/bridgeweb"
	"github.com/aep-kimi/aep-kimi/internal/testkit/kimiharness"
	"github.com/aep-kimi/aep-kimi/internal/testkit/netaddr"
	"github.com/aep-kimi/aep-kimi/mapping"
)

// maxEndLag is the bound: no session outlives its server by more.
const maxEndLag = 5 * time.Second

// waitAttached waits until the bridge follows a server and returns when.
func (ws *webStack) waitAttached(t *testing.T, web *kimiharness.Web) time.Time {
	t.Helper()
	ws.waitHealth(t, "attached "+web.Base, func(h bridgeweb.Health) bool {
		for _, in := range h.Instances {
			if in.URL == web.Base && in.State == bridgeweb.KapConnected && in.PID == web.PID {
				return true
			}
		}
		return false
	})
	return time.Now()
}

func TestE2EUpFollowsKimiWebAsItComesAndGoes(t *testing.T) {
	kimi := kimiharness.Require(t)
	mock := kimiharness.StartMock(t, kimiharness.WriteScript(t, webScript))
	ws := &webStack{stack: &stack{token: "e2e-" + aep.NewID()}, kimi: kimi, mode: "primary",
		home: t.TempDir(), khome: t.TempDir(), work: t.TempDir()}
	kimiharness.WriteWebConfig(t, ws.khome, mock.Port)
	rport := netaddr.FreePort(t)
	ws.relayURL = fmt.Sprintf("http://127.0.0.1:%d", rport)
	ws.addr = fmt.Sprintf("127.0.0.1:%d", netaddr.FreePort(t))
	env := []string{"AEP_TOKEN=" + ws.token, "AEP_HOME=" + ws.home, "KIMI_CODE_HOME=" + ws.khome}
	ws.bridge = startDaemon(t, "http://"+ws.addr, env, "up", "--relay-listen", fmt.Sprintf("127.0.0.1:%d", rport),
		"--adapter-listen", fmt.Sprintf("127.0.0.1:%d", netaddr.FreePort(t)), "--bridge-listen", ws.addr, "--mode", "primary")
	if h := ws.health(t); h.Kap.State != bridgeweb.KapDiscovering {
		t.Fatalf("up with no kimi web: %+v", h)
	}

	// kimi web starts after up: it is attached without a restart.
	started := time.Now()
	ws.web = kimiharness.StartWeb(t, kimi, ws.khome, ws.work)
	registered := time.Now()
	attached := ws.waitAttached(t, ws.web)
	t.Logf("kimi web attached %s after it was started, %s after it answered and registered",
		attached.Sub(started).Round(10*time.Millisecond), attached.Sub(registered).Round(10*time.Millisecond))

	// A session runs through it; a second prompt is still running when the
	// server stops.
	sid := ws.web.CreateSession(t)
	ws.web.Prompt(t, sid, "run the probe")
	ws.approveViaUI(t, sid)
	ws.waitIdle(t, sid)
	ws.waitCount(t, sid, "run.finished", 1)
	ws.web.Prompt(t, sid, "slow prompt")
	ws.waitCount(t, sid, "run.started", 2)

	stopped := time.Now()
	ws.web.Shutdown(t)
	end := ws.waitFor(t, sid, "session.ended", func(e *aep.Event) bool { return e.Type == "session.ended" })
	ended := time.Now()
	t.Logf("session.ended %s after kimi web was told to stop", ended.Sub(stopped).Round(10*time.Millisecond))
	if lag := ended.Sub(stopped); lag > maxEndLag {
		t.Errorf("the session outlived its kimi web by %s (bound %s)", lag, maxEndLag)
	}
	if d := dataOf(end); d["reason"] != mapping.EndKilled {
		t.Errorf("session.ended %v, want reason killed (a run was open)", d)
	}
	if v, _ := end.ExtString(mapping.ExtObserved); v != mapping.ObservedProcess {
		t.Errorf("session.ended %s = %q", mapping.ExtObserved, v)
	}
	select {
	case <-ws.web.Exited():
	case <-time.After(15 * time.Second):
		t.Fatal("kimi web still runs 15 s after shutdown: the bridge kept it alive")
	}

	// The bridge waits for the next server, and a session it loads again
	// is a new chapter.
	ws.waitHealth(t, "back to waiting", func(h bridgeweb.Health) bool {
		return h.Kap.State == bridgeweb.KapDiscovering && len(h.Instances) == 0
	})
	ws.web = kimiharness.StartWeb(t, kimi, ws.khome, ws.work)
	ws.waitAttached(t, ws.web)
	// Opening the session loads it, as the web UI does; the server journals
	// its events only once someone subscribes, so the prompt waits for the
	// bridge.
	ws.web.PendingApprovals(t, sid)
	ws.waitHealth(t, "re-subscribed the session", func(h bridgeweb.Health) bool { return h.SessionsFollowed >= 1 })
	ws.web.Prompt(t, sid, "hello again")
	ws.waitIdle(t, sid)
	ws.waitCount(t, sid, "run.finished", 2)
	ws.waitFor(t, sid, "the journal's last frame", func(e *aep.Event) bool {
		n, _ := kimiSeq(e)
		j := kimiharness.Journal(t, ws.khome, sid)
		return n == j[len(j)-1].Seq
	})

	raw, evs := ws.events(t, sid)
	validateWithCLI(t, ws.logPath(sid)) // every event and the stream rules
	want(t, evs, map[string]int{"run.started": 3, "run.finished": 2, "run.cancelled": 1, "session.ended": 1, "session.started": 1})
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
	ws.sameOnRelay(t, raw, sid)
}

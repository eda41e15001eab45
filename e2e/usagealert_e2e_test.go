// A session crossing the context threshold sends one usage alert to a
// real receiver, and a restart of up does not send it again.

package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aep-kimi/aep-kimi/aep"
	"github.com/aep-kimi/aep-kimi/bridgeweb"
	"github.com/aep-kimi/aep-kimi/internal/testkit/kimiharness"
	"github.com/aep-kimi/aep-kimi/internal/testkit/netaddr"
	"github.com/aep-kimi/aep-kimi/internal/testkit/poll"
	"github.com/aep-kimi/aep-kimi/internal/testkit/proctest"
	"github.com/aep-kimi/aep-kimi/internal/testkit/stacktest"
	"github.com/aep-kimi/aep-kimi/internal/testkit/stacktest/notifytest"
	"github.com/aep-kimi/aep-kimi/notify/webhook"
)

// The Done-when: a session crossing the context threshold sends
// exactly one notification to a real receiver, and a restart of up does
// not send it again. The session's tokens go past two token thresholds
// after the restart: the first alert shows the restarted notifier took the
// history in (the tokens before the restart count), the second that it
// went past every event of the turn before it, the context figures that
// stay past 50% included, without a second context alert.
func TestE2EUsageAlertOnce(t *testing.T) {
	t.Parallel()
	kimi := kimiharness.Require(t)
	mock := kimiharness.StartMock(t, kimiharness.WriteScript(t, stacktest.UsageScript))
	ws := &stacktest.WebStack{Stack: &stacktest.Stack{Token: "e2e-" + aep.NewID()}, Kimi: kimi, Mode: "primary",
		Home: t.TempDir(), Khome: t.TempDir(), Work: t.TempDir()}
	kimiharness.WriteWebConfig(t, ws.Khome, mock.Port)
	recv := notifytest.NewWebhookReceiver(t)
	rport, aport := netaddr.FreePort(t), netaddr.FreePort(t)
	ws.RelayURL = fmt.Sprintf("http://127.0.0.1:%d", rport)
	ws.Addr = fmt.Sprintf("127.0.0.1:%d", netaddr.FreePort(t))
	env := []string{"AEP_TOKEN=" + ws.Token, "AEP_HOME=" + ws.Home, "KIMI_CODE_HOME=" + ws.Khome, "AEP_STORE="}
	up := func() *proctest.Proc {
		return stacktest.StartDaemon(t, "http://"+ws.Addr, env, "up", "--relay-listen", fmt.Sprintf("127.0.0.1:%d", rport),
			"--adapter-listen", fmt.Sprintf("127.0.0.1:%d", aport), "--bridge-listen", ws.Addr, "--mode", "primary",
			"--notify", "webhook:"+recv.URL+"/hook", "--notify-usage", "context=50%,tokens=120k,tokens=200k")
	}
	ws.Bridge = up()
	ws.Web = kimiharness.StartWeb(t, kimi, ws.Khome, ws.Work)
	ws.WaitAttached(t, ws.Web)
	sid := ws.Web.CreateSession(t)

	// One step at 70k of 131k: 53%, past context=50%.
	ws.Web.Prompt(t, sid, "fill one")
	ws.WaitIdle(t, sid)
	ws.WaitCount(t, sid, "run.finished", 1)
	var alert webhook.Body
	poll.Must(t, 10*time.Second, "the context alert at the receiver", func() bool {
		got := recv.UsageBodies()["context=50%"]
		if len(got) > 0 {
			alert = got[0]
		}
		return len(got) > 0
	})
	u := alert.Usage
	if alert.Session != sid || alert.Title != "Context 53% full (alert at 50%)" || u.ContextTokens == nil || u.ContextLimit == nil ||
		*u.ContextLimit != 131072 || *u.ContextTokens != 70_010 || u.Tokens < 70_010 || len(alert.Answers) != 0 ||
		!strings.Contains(alert.Open, "?session="+sid) {
		t.Fatalf("the context alert: %+v %+v", alert, u)
	}

	// up restarts on the same home: its store keeps the history.
	ws.Bridge.Stop(t)
	ws.Bridge = up()
	ws.WaitAttached(t, ws.Web)
	ws.WaitHealth(t, "following the session again", func(h bridgeweb.Health) bool { return h.SessionsFollowed >= 1 })

	// 70k more: past tokens=120k only with the 70k from before the restart.
	ws.Web.Prompt(t, sid, "fill two")
	ws.WaitIdle(t, sid)
	poll.Must(t, 10*time.Second, "the tokens=120k alert", func() bool { return len(recv.UsageBodies()["tokens=120k"]) > 0 })
	ws.Web.Prompt(t, sid, "fill three")
	ws.WaitIdle(t, sid)
	poll.Must(t, 10*time.Second, "the tokens=200k alert", func() bool { return len(recv.UsageBodies()["tokens=200k"]) > 0 })

	got := recv.UsageBodies()
	for th, bodies := range got {
		if len(bodies) != 1 || bodies[0].Session != sid {
			t.Errorf("%s: %d alerts, want exactly one for %s: %+v", th, len(bodies), sid, bodies)
		}
	}
	if len(got) != 3 {
		t.Errorf("alerts for %d thresholds, want 3: %v", len(got), got)
	}
	if fill := got["context=50%"]; len(fill) == 1 && fill[0].ID != alert.ID {
		t.Errorf("the context alert changed: %+v", fill)
	}
}

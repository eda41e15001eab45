package main

// End-to-end: usage alerts from a real `kimi web` session through `aep-kimi
// up`, its bridge and its notifier, to a real webhook receiver, across a
// restart of up.

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
	"github.com/aep-kimi/aep-kimi/notify"
)

// usageScript reports a context past half of Kimi's 131072-token window
// (Kimi compacts before a prompt once the context and its 50000 reserved
// tokens would not fit: not at 70010), and tokens that add up.
var usageScript = map[string]any{
	"responses": []map[string]any{
		{"match": "fill (one|two|three)", "text": "filled", "usage": map[string]int{"prompt_tokens": 70_000, "completion_tokens": 10}, "repeat": true},
	},
	"default": map[string]any{"text": "(mock default)", "usage": map[string]int{"prompt_tokens": 100, "completion_tokens": 1}},
}

// usageBodies are the usage alerts the receiver got, by threshold.
func (r *webhookReceiver) usageBodies() map[string][]notify.WebhookBody {
	out := map[string][]notify.WebhookBody{}
	for _, b := range r.all() {
		if b.Kind == notify.KindUsage && b.Usage != nil {
			out[b.Usage.Threshold] = append(out[b.Usage.Threshold], b)
		}
	}
	return out
}

// The Done-when: a session crossing the context threshold sends
// exactly one notification to a real receiver, and a restart of up does
// not send it again. The session's tokens go past two token thresholds
// after the restart: the first alert shows the restarted notifier took the
// history in (the tokens before the restart count), the second that it
// went past every event of the turn before it, the context figures that
// stay past 50% included, without a second context alert.
func TestE2EUsageAlertOnce(t *testing.T) {
	kimi := kimiharness.Require(t)
	mock := kimiharness.StartMock(t, kimiharness.WriteScript(t, usageScript))
	ws := &webStack{stack: &stack{token: "e2e-" + aep.NewID()}, kimi: kimi, mode: "primary",
		home: t.TempDir(), khome: t.TempDir(), work: t.TempDir()}
	kimiharness.WriteWebConfig(t, ws.khome, mock.Port)
	recv := newWebhookReceiver(t)
	rport, aport := netaddr.FreePort(t), netaddr.FreePort(t)
	ws.relayURL = fmt.Sprintf("http://127.0.0.1:%d", rport)
	ws.addr = fmt.Sprintf("127.0.0.1:%d", netaddr.FreePort(t))
	env := []string{"AEP_TOKEN=" + ws.token, "AEP_HOME=" + ws.home, "KIMI_CODE_HOME=" + ws.khome, "AEP_STORE="}
	up := func() *proctest.Proc {
		return startDaemon(t, "http://"+ws.addr, env, "up", "--relay-listen", fmt.Sprintf("127.0.0.1:%d", rport),
			"--adapter-listen", fmt.Sprintf("127.0.0.1:%d", aport), "--bridge-listen", ws.addr, "--mode", "primary",
			"--notify", "webhook:"+recv.URL+"/hook", "--notify-usage", "context=50%,tokens=120k,tokens=200k")
	}
	ws.bridge = up()
	ws.web = kimiharness.StartWeb(t, kimi, ws.khome, ws.work)
	ws.waitAttached(t, ws.web)
	sid := ws.web.CreateSession(t)

	// One step at 70k of 131k: 53%, past context=50%.
	ws.web.Prompt(t, sid, "fill one")
	ws.waitIdle(t, sid)
	ws.waitCount(t, sid, "run.finished", 1)
	var alert notify.WebhookBody
	poll.Must(t, 10*time.Second, "the context alert at the receiver", func() bool {
		got := recv.usageBodies()["context=50%"]
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
	ws.bridge.Stop(t)
	ws.bridge = up()
	ws.waitAttached(t, ws.web)
	ws.waitHealth(t, "following the session again", func(h bridgeweb.Health) bool { return h.SessionsFollowed >= 1 })

	// 70k more: past tokens=120k only with the 70k from before the restart.
	ws.web.Prompt(t, sid, "fill two")
	ws.waitIdle(t, sid)
	poll.Must(t, 10*time.Second, "the tokens=120k alert", func() bool { return len(recv.usageBodies()["tokens=120k"]) > 0 })
	ws.web.Prompt(t, sid, "fill three")
	ws.waitIdle(t, sid)
	poll.Must(t, 10*time.Second, "the tokens=200k alert", func() bool { return len(recv.usageBodies()["tokens=200k"]) > 0 })

	got := recv.usageBodies()
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

// AskUserQuestion from the real `kimi web` answered from elsewhere: the
// page and an answer link.

package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aep-kimi/aep-kimi/access"
	"github.com/aep-kimi/aep-kimi/aep"
	"github.com/aep-kimi/aep-kimi/internal/testkit/browsertest"
	"github.com/aep-kimi/aep-kimi/internal/testkit/kimiharness"
	"github.com/aep-kimi/aep-kimi/internal/testkit/netaddr"
	"github.com/aep-kimi/aep-kimi/internal/testkit/poll"
	"github.com/aep-kimi/aep-kimi/internal/testkit/relaycall"
	"github.com/aep-kimi/aep-kimi/internal/testkit/stacktest"
	"github.com/aep-kimi/aep-kimi/internal/testkit/stacktest/notifytest"
	"github.com/aep-kimi/aep-kimi/internal/testkit/stacktest/pagetest"
	"github.com/aep-kimi/aep-kimi/mapping"
	"github.com/aep-kimi/aep-kimi/notify/webhook"
)

// Kimi's AskUserQuestion from the real `kimi web`, answered from elsewhere:
// the model asks twice in one session; the first form is answered on the
// fleet page in Chromium, the second through the answer link of a webhook
// notification. Each time Kimi continues with that choice (the
// model's next request carries it in the tool's result), and the record
// says who answered and through what.
func TestE2EBridgeWebQuestionPageAndLink(t *testing.T) {
	t.Parallel()
	kimi := kimiharness.Require(t)
	mock := kimiharness.StartMock(t, kimiharness.ScenarioFile(t, "question"))
	recv := notifytest.NewWebhookReceiver(t)
	ws := &stacktest.WebStack{Kimi: kimi, Mode: "primary", Home: t.TempDir(), Khome: t.TempDir(), Work: t.TempDir()}
	kimiharness.WriteWebConfig(t, ws.Khome, mock.Port)
	ws.Web = kimiharness.StartWeb(t, kimi, ws.Khome, ws.Work)
	st := &stacktest.Stack{Home: t.TempDir(), Token: "e2e-" + aep.NewID()}
	rport := netaddr.FreePort(t)
	st.RelayURL = fmt.Sprintf("http://127.0.0.1:%d", rport)
	st.Relay = stacktest.StartDaemon(t, st.RelayURL, []string{"AEP_TOKEN=" + st.Token, "AEP_HOME=" + st.Home},
		"relay", "--listen", fmt.Sprintf("127.0.0.1:%d", rport), "--notify", "webhook:"+recv.URL+"/hook")
	ws.Stack = st
	ws.Addr = fmt.Sprintf("127.0.0.1:%d", netaddr.FreePort(t))
	ws.Env = []string{"AEP_TOKEN=" + st.Token, "AEP_HOME=" + ws.Home, "KIMI_CODE_HOME=" + ws.Khome, "AEP_KIMI_WEB_CONTROL=1"}
	ws.StartBridge(t)
	b := pagetest.OpenPage(t, st)
	sid := ws.Web.CreateSession(t)

	// (a) The page: pick "prod" (Kimi's second choice) and send.
	ws.Web.Prompt(t, sid, "ask me where to deploy")
	req, asked := ws.WaitQuestion(t, sid, mock, 1)
	field, prod := stacktest.FormChoice(t, req, 1)
	item := fmt.Sprintf(`[data-attention=%s]`, browsertest.Quote(req.ID))
	choice := fmt.Sprintf(`%s [data-field=%s] [data-choice=%s]`, item, browsertest.Quote(field), browsertest.Quote(prod))
	// The card is drawn again, a line taller, once the relay says where it
	// notified (the webhook): picked before that, the click could land on
	// whatever moved into the choice's place.
	b.WaitJS("the question as a form to answer, its notification sent", `document.querySelector('`+item+`[data-reach="ok"]') !== null && document.querySelector('`+choice+`') !== null && document.querySelector('`+item+` [data-sent]') !== null`)
	b.ClickUntil("pick prod", choice, `document.querySelector('`+choice+`').checked`)
	var sent bool
	b.Eval("a send button", `document.querySelector('`+item+` [data-form-send]') !== null`, &sent)
	if sent {
		b.Click("send the answer", item+" [data-form-send]")
	}
	stacktest.ToolResult(t, mock, asked, "Deploy where?", "prod")
	b.WaitJS("the form goes and says who answered", `document.querySelector('`+item+`') === null && (document.querySelector('[data-answered=`+browsertest.Quote(req.ID)+`]')||{}).textContent?.startsWith('Answered by `+access.OwnerName+` from the page')`)
	ws.WaitCount(t, sid, "attention.resolved", 1)
	ws.WaitIdle(t, sid)

	// (b) The webhook's answer link: "staging" (Kimi's first choice).
	ws.Web.Prompt(t, sid, "ask me where to deploy")
	req2, asked2 := ws.WaitQuestion(t, sid, mock, 2)
	_, staging := stacktest.FormChoice(t, req2, 0)
	var body webhook.Body
	if !poll.Until(30*time.Second, func() bool { var ok bool; body, _, ok = recv.Request(req2.ID); return ok }) {
		t.Fatalf("no webhook notification of the question; got %+v", recv.All())
	}
	if status, js := stacktest.PostLink(t, notifytest.LinkFor(t, body, staging)); status != http.StatusOK || js["answered"] != true {
		t.Fatalf("POST the answer link: %d %v", status, js)
	}
	stacktest.ToolResult(t, mock, asked2, "Deploy where?", "staging")
	ws.WaitCount(t, sid, "attention.resolved", 2)

	// The record on the relay: each answer by the owner, through the page
	// and through a link, then resolved as answered.
	var answered []*aep.Event
	if !poll.Until(30*time.Second, func() bool {
		answered = relaycall.History(t, st.RelayURL, st.Token, sid, "attention.answered", 5*time.Second)
		return len(answered) >= 2
	}) {
		t.Fatalf("the relay recorded %d answers, want 2", len(answered))
	}
	for i, w := range []struct{ req, choice, surface string }{{req.ID, prod, "page"}, {req2.ID, staging, "link"}} {
		d, _ := answered[i].DataMap()
		got, _ := json.Marshal(d["answer"])
		if answered[i].Subject != w.req || d["via"] != "control" || d["by"] != access.OwnerName || d[mapping.DataSurface] != w.surface || !strings.Contains(string(got), `"`+w.choice+`"`) {
			t.Errorf("answer %d recorded as %s, want %s by %s through the %s", i+1, answered[i].Data, w.choice, access.OwnerName, w.surface)
		}
	}
	resolved := relaycall.History(t, st.RelayURL, st.Token, sid, "attention.resolved", 5*time.Second)
	if len(resolved) != 2 {
		t.Fatalf("the relay recorded %d resolutions, want 2", len(resolved))
	}
	for _, r := range resolved {
		if d, _ := r.DataMap(); d["resolution"] != "answered" {
			t.Errorf("resolved %s, want answered", r.Data)
		}
	}
}

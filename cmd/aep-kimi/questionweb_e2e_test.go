package main

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
	"github.com/aep-kimi/aep-kimi/internal/testkit/relaytest"
	"github.com/aep-kimi/aep-kimi/mapping"
	"github.com/aep-kimi/aep-kimi/notify"
)

// Kimi's AskUserQuestion from the real `kimi web`, answered from elsewhere:
// the model asks twice in one session; the first form is answered on the
// fleet page in Chromium, the second through the answer link of a webhook
// notification. Each time Kimi continues with that choice (the
// model's next request carries it in the tool's result), and the record
// says who answered and through what.
func TestE2EBridgeWebQuestionPageAndLink(t *testing.T) {
	kimi := kimiharness.Require(t)
	mock := kimiharness.StartMock(t, kimiharness.ScenarioFile(t, "question"))
	recv := newWebhookReceiver(t)
	ws := &webStack{kimi: kimi, mode: "primary", home: t.TempDir(), khome: t.TempDir(), work: t.TempDir()}
	kimiharness.WriteWebConfig(t, ws.khome, mock.Port)
	ws.web = kimiharness.StartWeb(t, kimi, ws.khome, ws.work)
	st := &stack{home: t.TempDir(), token: "e2e-" + aep.NewID()}
	rport := netaddr.FreePort(t)
	st.relayURL = fmt.Sprintf("http://127.0.0.1:%d", rport)
	st.relay = startDaemon(t, st.relayURL, []string{"AEP_TOKEN=" + st.token, "AEP_HOME=" + st.home},
		"relay", "--listen", fmt.Sprintf("127.0.0.1:%d", rport), "--notify", "webhook:"+recv.URL+"/hook")
	ws.stack = st
	ws.addr = fmt.Sprintf("127.0.0.1:%d", netaddr.FreePort(t))
	ws.env = []string{"AEP_TOKEN=" + st.token, "AEP_HOME=" + ws.home, "KIMI_CODE_HOME=" + ws.khome, "AEP_KIMI_WEB_CONTROL=1"}
	ws.startBridge(t)
	b := st.openPage(t)
	sid := ws.web.CreateSession(t)

	// (a) The page: pick "prod" (Kimi's second choice) and send.
	ws.web.Prompt(t, sid, "ask me where to deploy")
	req, asked := ws.waitQuestion(t, sid, mock, 1)
	field, prod := formChoice(t, req, 1)
	item := fmt.Sprintf(`[data-attention=%s]`, browsertest.Quote(req.ID))
	choice := fmt.Sprintf(`%s [data-field=%s] [data-choice=%s]`, item, browsertest.Quote(field), browsertest.Quote(prod))
	b.WaitJS("the question as a form to answer", `document.querySelector('`+item+`[data-reach="ok"]') !== null && document.querySelector('`+choice+`') !== null`)
	b.Click("pick prod", choice)
	var sent bool
	b.Eval("a send button", `document.querySelector('`+item+` [data-form-send]') !== null`, &sent)
	if sent {
		b.Click("send the answer", item+" [data-form-send]")
	}
	toolResult(t, mock, asked, "Deploy where?", "prod")
	b.WaitJS("the form goes and says who answered", `document.querySelector('`+item+`') === null && (document.querySelector('[data-answered=`+browsertest.Quote(req.ID)+`]')||{}).textContent?.startsWith('Answered by `+access.OwnerName+` from the page')`)
	ws.waitCount(t, sid, "attention.resolved", 1)
	ws.waitIdle(t, sid)

	// (b) The webhook's answer link: "staging" (Kimi's first choice).
	ws.web.Prompt(t, sid, "ask me where to deploy")
	req2, asked2 := ws.waitQuestion(t, sid, mock, 2)
	_, staging := formChoice(t, req2, 0)
	var body notify.WebhookBody
	if !poll.Until(30*time.Second, func() bool { var ok bool; body, _, ok = recv.request(req2.ID); return ok }) {
		t.Fatalf("no webhook notification of the question; got %+v", recv.all())
	}
	if status, js := postLink(t, linkFor(t, body, staging)); status != http.StatusOK || js["answered"] != true {
		t.Fatalf("POST the answer link: %d %v", status, js)
	}
	toolResult(t, mock, asked2, "Deploy where?", "staging")
	ws.waitCount(t, sid, "attention.resolved", 2)

	// The record on the relay: each answer by the owner, through the page
	// and through a link, then resolved as answered.
	var answered []*aep.Event
	if !poll.Until(30*time.Second, func() bool {
		answered = relaytest.History(t, st.relayURL, st.token, sid, "attention.answered", 5*time.Second)
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
	resolved := relaytest.History(t, st.relayURL, st.token, sid, "attention.resolved", 5*time.Second)
	if len(resolved) != 2 {
		t.Fatalf("the relay recorded %d resolutions, want 2", len(resolved))
	}
	for _, r := range resolved {
		if d, _ := r.DataMap(); d["resolution"] != "answered" {
			t.Errorf("resolved %s, want answered", r.Data)
		}
	}
}

// waitQuestion waits for the n-th question's request in the bridge's log,
// as a form answerable through control, and returns it with the number of
// model requests made by then (the one after them carries the answer).
func (ws *webStack) waitQuestion(t *testing.T, sid string, mock *kimiharness.Mock, n int) (*aep.Event, int) {
	t.Helper()
	evs := ws.waitCount(t, sid, "attention.requested", n)
	var reqs []*aep.Event
	for _, e := range evs {
		if e.Type == "attention.requested" {
			reqs = append(reqs, e)
		}
	}
	req := reqs[n-1]
	d := dataOf(req)
	if d["kind"] != "form" || !strings.Contains(fmt.Sprint(d["respond_via"]), "control") {
		t.Fatalf("the question's request is not a form answered through control: %s", req.Data)
	}
	return req, len(mock.Requests(t))
}

// formChoice is the first field of a form request and the id of its i-th
// choice, in Kimi's order.
func formChoice(t *testing.T, req *aep.Event, i int) (field, choice string) {
	t.Helper()
	var d struct {
		Fields []struct {
			ID      string `json:"id"`
			Choices []struct {
				ID string `json:"id"`
			} `json:"choices"`
		} `json:"fields"`
	}
	if err := json.Unmarshal(req.Data, &d); err != nil || len(d.Fields) == 0 || len(d.Fields[0].Choices) <= i {
		t.Fatalf("form request %s: %v", req.Data, err)
	}
	return d.Fields[0].ID, d.Fields[0].Choices[i].ID
}

// toolResult waits for the model request after the first `after` and checks
// it carries AskUserQuestion's result, its last tool message: question
// answered with label.
func toolResult(t *testing.T, mock *kimiharness.Mock, after int, question, label string) {
	t.Helper()
	var reqs []string
	if !poll.Until(60*time.Second, func() bool { reqs = mock.Requests(t); return len(reqs) > after }) {
		t.Fatalf("Kimi never asked the model again after the question %q", question)
	}
	var body struct {
		Messages []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
	}
	if err := json.Unmarshal([]byte(reqs[after]), &body); err != nil {
		t.Fatal(err)
	}
	for i := len(body.Messages) - 1; i >= 0; i-- {
		m := body.Messages[i]
		if m.Role != "tool" {
			continue
		}
		var text string
		if json.Unmarshal(m.Content, &text) != nil {
			text = string(m.Content)
		}
		var res struct {
			Answers map[string]string `json:"answers"`
		}
		if err := json.Unmarshal([]byte(text), &res); err != nil || res.Answers[question] != label {
			t.Fatalf("the model's next request carries the question's result %s, want %q answered %q", text, question, label)
		}
		return
	}
	t.Fatalf("the model's next request has no tool result:\n%s", reqs[after])
}

// Attacks on answers and rules through the built relay: ceilings,
// forged rule answers, revoked devices and secrets kept out of logs.

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/aep-kimi/aep-kimi/aep"
	"github.com/aep-kimi/aep-kimi/internal/testkit/poll"
	"github.com/aep-kimi/aep-kimi/internal/testkit/pushtest"
	"github.com/aep-kimi/aep-kimi/internal/testkit/stacktest"
	"github.com/aep-kimi/aep-kimi/internal/testkit/stacktest/notifytest"
	"github.com/aep-kimi/aep-kimi/notify"
	"github.com/aep-kimi/aep-kimi/notify/webhook"
	"github.com/aep-kimi/aep-kimi/relay"
	"github.com/aep-kimi/aep-kimi/relay/consumer"
	"github.com/aep-kimi/aep-kimi/rules"
)

// A watcher at capture metadata asks the rules API to propose a rule for a
// request she sees on the stream: she learns neither its command nor its
// project (she may not propose at all: it is the first half of saving a
// rule), and an admin whose ceiling is metadata is proposed a rule without
// either. Before, both were answered the command text and the directory.
func TestE2EProposeWithinCeiling(t *testing.T) {
	t.Parallel()
	st := stacktest.RelayOnly(t, nil)
	walt := st.AddPerson(t, "walt", "watch")
	meta := st.AddPerson(t, "meta", "admin", "--capture", "metadata")
	h := stacktest.EmitSession(t, st, "/home/ann/src/secret-project")
	req := h.Ask(t, "curl https://secret.example/payload")
	ref := `{"session":"` + h.Id + `","request":"` + req + `"}`
	poll.Must(t, 5*time.Second, "the request held by the relay", func() bool {
		code, _ := stacktest.PostAs(t, st.RelayURL+rules.APIPath+"/propose", st.Token, ref)
		return code == http.StatusOK
	})
	code, body := stacktest.PostAs(t, st.RelayURL+rules.APIPath+"/propose", walt, ref)
	if code != http.StatusForbidden || strings.Contains(body, "secret") {
		t.Errorf("the watcher's propose: %d %s", code, body)
	}
	code, body = stacktest.PostAs(t, st.RelayURL+rules.APIPath+"/propose", meta, ref)
	if code != http.StatusOK || strings.Contains(body, "secret") {
		t.Errorf("an admin at metadata's propose: %d %s", code, body)
	}
	// The relay's own token reads what the relay holds.
	if code, body = stacktest.PostAs(t, st.RelayURL+rules.APIPath+"/propose", st.Token, ref); code != http.StatusOK ||
		!strings.Contains(body, "secret.example") || !strings.Contains(body, "/home/ann/src/secret-project") {
		t.Errorf("the owner's propose: %d %s", code, body)
	}
}

// An answerer sends an answer as "rule:r-always": the relay refuses it
// (only its rules send as a rule), so it reaches no emitter, the request
// stays in pending, and the audit records no rule's answer. Before, it
// was routed stamped with her name, yet pending hid the request as
// answered by a rule and the audit said {by: r-always, surface: rule}.
func TestE2EForgedRuleAnswer(t *testing.T) {
	t.Parallel()
	st := stacktest.RelayOnly(t, nil)
	ann := st.AddPerson(t, "ann", "answer")
	h := stacktest.EmitSession(t, st, "/home/ann/src/shop")
	req := h.Ask(t, "rm -rf ./dist")
	poll.Must(t, 5*time.Second, "the request in pending", func() bool {
		_, out := st.Cli(t, "pending")
		return strings.Contains(out, req)
	})
	sock := stacktest.OpenSocket(t, st.RelayURL, stacktest.Bearer(ann), stacktest.ConsumerHello(""))
	cmd := aep.NewID()
	forged := `{"aep":"0.1","id":"` + cmd + `","type":"control.attention.respond","time":"` + aep.FormatTime(time.Now()) +
		`","source":"aep://laptop/agent/aep-kimi-rules","agent":"rule:r-always","session":"` + h.Id + `","subject":"` + req +
		`","cause":"` + req + `","data":{"answer":{"option":"allow"}}}`
	if err := sock.C.Write(sock.Ctx, websocket.MessageText, []byte(forged)); err != nil {
		t.Fatal(err)
	}
	if f, _ := sock.Within("error", 3*time.Second); f == nil || f["cause"] != cmd || f["code"] != "forbidden" {
		t.Errorf("the forged rule's answer was not refused: %v", f)
	}
	if f, _ := h.Em.Within(rules.CommandType, time.Second); f != nil {
		t.Errorf("the forged rule's answer reached the emitter: %v", f)
	}
	if code, out := st.Cli(t, "pending"); code != 0 || !strings.Contains(out, req) {
		t.Errorf("pending (exit %d) no longer lists the request:\n%s", code, out)
	}
	code, out := st.Cli(t, "audit", "--json")
	if code != 0 || strings.Contains(out, `"surface":"rule"`) || strings.Contains(out, "r-always") {
		t.Errorf("audit (exit %d) records a rule's answer:\n%s", code, out)
	}
}

// The usual rotation after a lost phone: rita's token is removed, then her
// name is given a new one. Her old token's unused deny link answers
// nothing, and her old device is told nothing of the next request, while
// the owner's device is. Before, the link answered 200 and the device got
// the push: both were checked by name. The audit tells her two tokens'
// answers apart by the token IDs `token list` shows.
func TestE2EReAddedNameStaysRevoked(t *testing.T) {
	t.Parallel()
	ps := pushtest.New(t)
	st := stacktest.RelayOnly(t, []string{ps.Env()})
	rita := st.AddPerson(t, "rita", "answer")
	key := notifytest.VapidKey(t, st)
	device := func(token, name string) *pushtest.Subscription {
		t.Helper()
		sub, err := ps.Subscribe(key)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := json.Marshal(map[string]any{"subscription": json.RawMessage(sub.JSON()), "device": name})
		if code, out := stacktest.PostAs(t, st.RelayURL+notify.PathSubscriptions, token, string(body)); code != http.StatusCreated {
			t.Fatalf("subscribe %s: %d %s", name, code, out)
		}
		return sub
	}
	phone, desk := device(rita, "rita's phone"), device(st.Token, "desk")
	h := stacktest.EmitSession(t, st, "/home/rita/src/shop")
	first := h.Ask(t, "make deploy")
	ctx, cancel := context.WithTimeout(t.Context(), 15*time.Second)
	defer cancel()
	m, err := ps.Next(ctx, phone, 0)
	if err != nil {
		t.Fatal(err)
	}
	var p notify.PushPayload
	if err := json.Unmarshal(m.Plaintext, &p); err != nil || !strings.Contains(p.Open, first) {
		t.Fatalf("rita's push: %v %s", err, m.Plaintext)
	}
	deny := ""
	for _, a := range p.Answers {
		if a.Option == "deny" {
			deny = a.URL
		}
	}
	if deny == "" {
		t.Fatalf("rita's push offers no deny: %s", m.Plaintext)
	}
	before := h.Ask(t, "make test")
	h.RespondAs(t, st, rita, before, "allow")
	oldID := st.TokenID(t, "rita")

	if code, out := st.CliAs(t, st.Token, "token", "rm", "rita"); code != 0 {
		t.Fatalf("token rm: exit %d: %s", code, out)
	}
	poll.Must(t, 5*time.Second, "rita's token refused", func() bool {
		return stacktest.StatusOf(t, st.RelayURL+"/events", stacktest.Bearer(rita)) == http.StatusForbidden
	})
	rita2 := st.AddPerson(t, "rita", "answer")

	code, js := stacktest.PostLink(t, deny)
	if code != http.StatusForbidden || js["code"] != notify.CodeAnswerForbidden {
		t.Errorf("rita's old unused deny link: %d %v", code, js)
	}
	if f, _ := h.Em.Within(rules.CommandType, time.Second); f != nil {
		t.Errorf("the old link's answer reached the emitter: %v", f)
	}

	second := h.Ask(t, "make release")
	told := -1
	poll.Must(t, 15*time.Second, "the owner's device told of the second request", func() bool {
		told = slices.IndexFunc(ps.Messages(desk), func(m pushtest.Message) bool { return bytes.Contains(m.Plaintext, []byte(second)) })
		return told >= 0
	})

	h.RespondAs(t, st, rita2, second, "deny")
	// The desk is told of the answer too: a push to the old device, queued
	// with the desk's first, has had a round trip more to arrive.
	poll.Must(t, 15*time.Second, "the owner's device told of the answer", func() bool {
		return len(ps.Messages(desk)) > told+1
	})
	for _, m := range ps.Messages(phone) {
		if bytes.Contains(m.Plaintext, []byte(second)) {
			t.Fatalf("rita's old device was told of the second request: %s", m.Plaintext)
		}
	}
	newID := st.TokenID(t, "rita")
	if oldID == "" || newID == "" || oldID == newID {
		t.Fatalf("token IDs %q then %q", oldID, newID)
	}
	code, out := st.Cli(t, "audit", "--json")
	want := map[string]string{before: oldID, second: newID}
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		var row consumer.AuditRow
		if json.Unmarshal([]byte(l), &row) != nil {
			t.Fatalf("audit --json (exit %d): %s", code, out)
		}
		if id, ok := want[row.Request]; ok {
			if row.By != "rita" || row.Token != id {
				t.Errorf("audit of %s: by %q token %q, want rita %q", row.Request, row.By, row.Token, id)
			}
			delete(want, row.Request)
		}
	}
	if len(want) != 0 {
		t.Errorf("audit (exit %d) has no row for %v:\n%s", code, want, out)
	}
}

// With -v a relay logs every request, yet no secret: not an answer link's
// token (a GET to preview it, a POST to answer), not the relay's token or a
// person's (header or query), not a push endpoint whose service is down.
// Before, the access log wrote path=/answer/<whole token> and a failed
// push quoted its endpoint.
func TestE2ENoSecretInLogs(t *testing.T) {
	t.Parallel()
	recv := notifytest.NewWebhookReceiver(t)
	ps := pushtest.New(t)
	st := stacktest.RelayOnly(t, []string{ps.Env()}, "-v", "--notify", "webhook:"+recv.URL+"/hook")
	rita := st.AddPerson(t, "rita", "answer")
	sub, err := ps.Subscribe(notifytest.VapidKey(t, st))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := json.Marshal(map[string]any{"subscription": json.RawMessage(sub.JSON()), "device": "phone"})
	if code, out := stacktest.PostAs(t, st.RelayURL+notify.PathSubscriptions, rita, string(body)); code != http.StatusCreated {
		t.Fatalf("subscribe: %d %s", code, out)
	}
	ps.Close() // the phone's push service goes away: its pushes fail, and are logged

	h := stacktest.EmitSession(t, st, "/home/rita/src/shop")
	req := h.Ask(t, "make deploy")
	var hook webhook.Body
	poll.Must(t, 15*time.Second, "the request at the webhook", func() bool {
		var ok bool
		hook, _, ok = recv.Request(req)
		return ok
	})
	var secrets []string
	for _, a := range hook.Answers {
		secrets = append(secrets, strings.TrimPrefix(a.URL, st.RelayURL+relay.AnswerPath))
	}
	deny := notifytest.LinkFor(t, hook, "deny")
	if resp, err := http.Get(deny); err == nil { // a chat app's preview
		resp.Body.Close()
	}
	if code, js := h.AnswerLink(t, deny, req, "deny"); code != http.StatusOK {
		t.Fatalf("the deny link: %d %v", code, js)
	}
	stacktest.StatusOf(t, st.RelayURL+"/events?access_token="+rita, nil)
	poll.Must(t, 15*time.Second, "the failed push logged", func() bool {
		return strings.Contains(st.Relay.Logs.String(), "notification delivery failed")
	})
	logs := st.Relay.Logs.String()
	if !strings.Contains(logs, "path="+relay.AnswerPath) {
		t.Fatalf("no access log line for the link: the test sees nothing\n%s", logs)
	}
	secrets = append(secrets, st.Token, rita, sub.Endpoint, strings.TrimPrefix(sub.Endpoint, ps.URL), sub.Auth, sub.P256dh)
	for _, line := range strings.Split(logs, "\n") {
		for _, s := range secrets {
			if s != "" && strings.Contains(line, s) {
				t.Errorf("a log line holds a secret (%.12s…): %s", s, line)
				break
			}
		}
	}
}

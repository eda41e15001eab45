package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/aep-kimi/aep-kimi/access"
	"github.com/aep-kimi/aep-kimi/aep"
	"github.com/aep-kimi/aep-kimi/internal/testkit/netaddr"
	"github.com/aep-kimi/aep-kimi/internal/testkit/poll"
	"github.com/aep-kimi/aep-kimi/internal/testkit/pushtest"
	"github.com/aep-kimi/aep-kimi/notify"
	"github.com/aep-kimi/aep-kimi/relay"
	"github.com/aep-kimi/aep-kimi/relay/consumer"
	"github.com/aep-kimi/aep-kimi/rules"
)

// Attacks on the relay's people, replayed against the built relay and CLI:
// a watcher reading above her ceiling, an answerer passing for a rule, a
// revoked name given a new token, and a reader of the logs. The held
// requests come from a session the test itself emits on the relay's socket,
// as an adapter would: the relay is what is attacked.

// relayOnly runs the built relay alone on a fresh home and token, with env
// and args added (-v, --notify ...).
func relayOnly(t *testing.T, env []string, args ...string) *stack {
	t.Helper()
	st := &stack{home: t.TempDir(), token: "e2e-" + aep.NewID()}
	port := netaddr.FreePort(t)
	st.relayURL = fmt.Sprintf("http://127.0.0.1:%d", port)
	st.relay = startDaemon(t, st.relayURL, append([]string{"AEP_TOKEN=" + st.token, "AEP_HOME=" + st.home}, env...),
		append([]string{"relay", "--listen", fmt.Sprintf("127.0.0.1:%d", port)}, args...)...)
	return st
}

// addPerson is `aep-kimi token add NAME --role ROLE [ARGS] --json`'s token,
// once the relay admits it.
func (st *stack) addPerson(t *testing.T, name, role string, args ...string) string {
	t.Helper()
	code, out := st.cliAs(t, st.token, append([]string{"token", "add", name, "--role", role, "--json"}, args...)...)
	var got struct{ Token string }
	if code != 0 || json.Unmarshal([]byte(out), &got) != nil || got.Token == "" {
		t.Fatalf("token add %s: exit %d: %s", name, code, out)
	}
	poll.Must(t, 5*time.Second, name+"'s token admitted", func() bool {
		return statusOf(t, st.relayURL+"/events", bearer(got.Token)) == http.StatusOK
	})
	return got.Token
}

// heldSession is a session the test emits as an adapter would, claiming it
// on the relay's socket: its working directory and its requests carry
// text above metadata.
type heldSession struct {
	em      *liveSocket
	id, cwd string
	seq     int
}

func emitSession(t *testing.T, st *stack, cwd string) *heldSession {
	t.Helper()
	em := openSocket(t, st.relayURL, bearer(st.token), `{"type":"hello","versions":["0.1"],"role":"emitter","identity":{"agent":"kimi-code","instance":"e2e"},`+
		`"capabilities":{"control":{"accepts":["control.attention.respond"]}}}`)
	h := &heldSession{em: em, id: "attack-" + aep.NewID(), cwd: cwd}
	h.send(t, aep.NewID(), "session.started", "", "", `{"trigger":"startup","cwd":`+quote(cwd)+`}`)
	return h
}

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// send emits one event of the session; subject and cause when not "".
func (h *heldSession) send(t *testing.T, id, typ, subject, cause, data string) {
	t.Helper()
	sub := ""
	if subject != "" {
		sub = `,"subject":` + quote(subject)
	}
	if cause != "" {
		sub += `,"cause":` + quote(cause)
	}
	ev := `{"aep":"0.1","id":"` + id + `","type":"` + typ + `","time":"` + aep.FormatTime(time.Now()) + `","source":"aep://e2e/agent/kimi-code/session/` + h.id +
		`","agent":"kimi-code","session":"` + h.id + `","seq":` + fmt.Sprint(h.seq) + `,"epoch":0,"severity":"notice","capture":"redacted"` + sub + `,"data":` + data + `}`
	h.seq++
	if err := h.em.c.Write(h.em.ctx, websocket.MessageText, []byte(ev)); err != nil {
		t.Fatal(err)
	}
}

// ask raises the gate's request to run command in Bash and returns its id.
func (h *heldSession) ask(t *testing.T, command string) string {
	t.Helper()
	id := aep.NewID()
	h.send(t, id, "attention.requested", "Bash", "", `{"kind":"permission","prompt":`+quote("Kimi wants to use Bash: "+command)+
		`,"tool":{"name":"Bash","call_id":"c`+fmt.Sprint(h.seq)+`"},"respond_via":["control"],"expires_at":"`+aep.FormatTime(time.Now().Add(5*time.Minute))+
		`","options":[{"id":"allow","label":"Allow"},{"id":"deny","label":"Deny"}]}`)
	return id
}

// respondAs answers request with `aep-kimi respond` and token, the
// session's emitter accepting the command and answering as the gate does
// (by the sender the relay stamped).
func (h *heldSession) respondAs(t *testing.T, st *stack, token, request, option string) {
	t.Helper()
	done := make(chan string, 1)
	go func() {
		code, out := st.cliAs(t, token, "respond", "--option", option, h.id, request)
		done <- fmt.Sprintf("exit %d: %s", code, out)
	}()
	f, _ := h.em.within(rules.CommandType, 10*time.Second)
	if f == nil || f["subject"] != request {
		t.Fatalf("the answer to %s did not reach the emitter: %v (respond: %s)", request, f, <-done)
	}
	cmd, by := f["id"].(string), f["aepkimiby"].(string)
	h.send(t, aep.NewID(), "control.accepted", "", cmd, `{}`)
	h.send(t, aep.NewID(), "attention.answered", request, cmd, `{"answer":{"option":`+quote(option)+`},"via":"control","by":`+quote(by)+`}`)
	if res := <-done; !strings.HasPrefix(res, "exit 0") {
		t.Fatalf("respond: %s", res)
	}
}

// postAs POSTs body as JSON with token.
func postAs(t *testing.T, url, token, body string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// A watcher at capture metadata asks the rules API to propose a rule for a
// request she sees on the stream: she learns neither its command nor its
// project (she may not propose at all: it is the first half of saving a
// rule), and an admin whose ceiling is metadata is proposed a rule without
// either. Before, both were answered the command text and the directory.
func TestE2EProposeWithinCeiling(t *testing.T) {
	st := relayOnly(t, nil)
	walt := st.addPerson(t, "walt", "watch")
	meta := st.addPerson(t, "meta", "admin", "--capture", "metadata")
	h := emitSession(t, st, "/home/ann/src/secret-project")
	req := h.ask(t, "curl https://secret.example/payload")
	ref := `{"session":"` + h.id + `","request":"` + req + `"}`
	poll.Must(t, 5*time.Second, "the request held by the relay", func() bool {
		code, _ := postAs(t, st.relayURL+rules.APIPath+"/propose", st.token, ref)
		return code == http.StatusOK
	})
	code, body := postAs(t, st.relayURL+rules.APIPath+"/propose", walt, ref)
	if code != http.StatusForbidden || strings.Contains(body, "secret") {
		t.Errorf("the watcher's propose: %d %s", code, body)
	}
	code, body = postAs(t, st.relayURL+rules.APIPath+"/propose", meta, ref)
	if code != http.StatusOK || strings.Contains(body, "secret") {
		t.Errorf("an admin at metadata's propose: %d %s", code, body)
	}
	// The relay's own token reads what the relay holds.
	if code, body = postAs(t, st.relayURL+rules.APIPath+"/propose", st.token, ref); code != http.StatusOK ||
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
	st := relayOnly(t, nil)
	ann := st.addPerson(t, "ann", "answer")
	h := emitSession(t, st, "/home/ann/src/shop")
	req := h.ask(t, "rm -rf ./dist")
	poll.Must(t, 5*time.Second, "the request in pending", func() bool {
		_, out := st.cli(t, "pending")
		return strings.Contains(out, req)
	})
	sock := openSocket(t, st.relayURL, bearer(ann), consumerHello(""))
	cmd := aep.NewID()
	forged := `{"aep":"0.1","id":"` + cmd + `","type":"control.attention.respond","time":"` + aep.FormatTime(time.Now()) +
		`","source":"aep://laptop/agent/aep-kimi-rules","agent":"rule:r-always","session":"` + h.id + `","subject":"` + req +
		`","cause":"` + req + `","data":{"answer":{"option":"allow"}}}`
	if err := sock.c.Write(sock.ctx, websocket.MessageText, []byte(forged)); err != nil {
		t.Fatal(err)
	}
	if f, _ := sock.within("error", 3*time.Second); f == nil || f["cause"] != cmd || f["code"] != "forbidden" {
		t.Errorf("the forged rule's answer was not refused: %v", f)
	}
	if f, _ := h.em.within(rules.CommandType, time.Second); f != nil {
		t.Errorf("the forged rule's answer reached the emitter: %v", f)
	}
	if code, out := st.cli(t, "pending"); code != 0 || !strings.Contains(out, req) {
		t.Errorf("pending (exit %d) no longer lists the request:\n%s", code, out)
	}
	code, out := st.cli(t, "audit", "--json")
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
	ps := pushtest.New(t)
	st := relayOnly(t, []string{ps.Env()})
	rita := st.addPerson(t, "rita", "answer")
	key := st.vapidKey(t)
	device := func(token, name string) *pushtest.Subscription {
		t.Helper()
		sub, err := ps.Subscribe(key)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := json.Marshal(map[string]any{"subscription": json.RawMessage(sub.JSON()), "device": name})
		if code, out := postAs(t, st.relayURL+notify.PathSubscriptions, token, string(body)); code != http.StatusCreated {
			t.Fatalf("subscribe %s: %d %s", name, code, out)
		}
		return sub
	}
	phone, desk := device(rita, "rita's phone"), device(st.token, "desk")
	h := emitSession(t, st, "/home/rita/src/shop")
	first := h.ask(t, "make deploy")
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
	before := h.ask(t, "make test")
	h.respondAs(t, st, rita, before, "allow")
	oldID := st.tokenID(t, "rita")

	if code, out := st.cliAs(t, st.token, "token", "rm", "rita"); code != 0 {
		t.Fatalf("token rm: exit %d: %s", code, out)
	}
	poll.Must(t, 5*time.Second, "rita's token refused", func() bool {
		return statusOf(t, st.relayURL+"/events", bearer(rita)) == http.StatusForbidden
	})
	rita2 := st.addPerson(t, "rita", "answer")

	code, js := postLink(t, deny)
	if code != http.StatusForbidden || js["code"] != notify.CodeAnswerForbidden {
		t.Errorf("rita's old unused deny link: %d %v", code, js)
	}
	if f, _ := h.em.within(rules.CommandType, time.Second); f != nil {
		t.Errorf("the old link's answer reached the emitter: %v", f)
	}

	second := h.ask(t, "make release")
	poll.Must(t, 15*time.Second, "the owner's device told of the second request", func() bool {
		for _, m := range ps.Messages(desk) {
			if bytes.Contains(m.Plaintext, []byte(second)) {
				return true
			}
		}
		return false
	})
	time.Sleep(500 * time.Millisecond) // one pass of the queues, for a push that should not come
	for _, m := range ps.Messages(phone) {
		if bytes.Contains(m.Plaintext, []byte(second)) {
			t.Fatalf("rita's old device was told of the second request: %s", m.Plaintext)
		}
	}

	h.respondAs(t, st, rita2, second, "deny")
	newID := st.tokenID(t, "rita")
	if oldID == "" || newID == "" || oldID == newID {
		t.Fatalf("token IDs %q then %q", oldID, newID)
	}
	code, out := st.cli(t, "audit", "--json")
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

// tokenID is NAME's token ID as `aep-kimi token list --json` shows it.
func (st *stack) tokenID(t *testing.T, name string) string {
	t.Helper()
	code, out := st.cliAs(t, st.token, "token", "list", "--json")
	var l struct{ People []access.Listed }
	if code != 0 || json.Unmarshal([]byte(out), &l) != nil {
		t.Fatalf("token list: exit %d: %s", code, out)
	}
	for _, p := range l.People {
		if p.Name == name {
			return p.Token
		}
	}
	t.Fatalf("token list has no %s: %s", name, out)
	return ""
}

// With -v a relay logs every request, yet no secret: not an answer link's
// token (a GET to preview it, a POST to answer), not the relay's token or a
// person's (header or query), not a push endpoint whose service is down.
// Before, the access log wrote path=/answer/<whole token> and a failed
// push quoted its endpoint.
func TestE2ENoSecretInLogs(t *testing.T) {
	recv := newWebhookReceiver(t)
	ps := pushtest.New(t)
	st := relayOnly(t, []string{ps.Env()}, "-v", "--notify", "webhook:"+recv.URL+"/hook")
	rita := st.addPerson(t, "rita", "answer")
	sub, err := ps.Subscribe(st.vapidKey(t))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := json.Marshal(map[string]any{"subscription": json.RawMessage(sub.JSON()), "device": "phone"})
	if code, out := postAs(t, st.relayURL+notify.PathSubscriptions, rita, string(body)); code != http.StatusCreated {
		t.Fatalf("subscribe: %d %s", code, out)
	}
	ps.Close() // the phone's push service goes away: its pushes fail, and are logged

	h := emitSession(t, st, "/home/rita/src/shop")
	req := h.ask(t, "make deploy")
	var hook notify.WebhookBody
	poll.Must(t, 15*time.Second, "the request at the webhook", func() bool {
		var ok bool
		hook, _, ok = recv.request(req)
		return ok
	})
	var secrets []string
	for _, a := range hook.Answers {
		secrets = append(secrets, strings.TrimPrefix(a.URL, st.relayURL+relay.AnswerPath))
	}
	deny := linkFor(t, hook, "deny")
	if resp, err := http.Get(deny); err == nil { // a chat app's preview
		resp.Body.Close()
	}
	if code, js := postLink(t, deny); code != http.StatusOK {
		t.Fatalf("the deny link: %d %v", code, js)
	}
	statusOf(t, st.relayURL+"/events?access_token="+rita, nil)
	poll.Must(t, 15*time.Second, "the failed push logged", func() bool {
		return strings.Contains(st.relay.Logs.String(), "notification delivery failed")
	})
	logs := st.relay.Logs.String()
	if !strings.Contains(logs, "path="+relay.AnswerPath) {
		t.Fatalf("no access log line for the link: the test sees nothing\n%s", logs)
	}
	secrets = append(secrets, st.token, rita, sub.Endpoint, strings.TrimPrefix(sub.Endpoint, ps.URL), sub.Auth, sub.P256dh)
	for _, line := range strings.Split(logs, "\n") {
		for _, s := range secrets {
			if s != "" && strings.Contains(line, s) {
				t.Errorf("a log line holds a secret (%.12s…): %s", s, line)
				break
			}
		}
	}
}

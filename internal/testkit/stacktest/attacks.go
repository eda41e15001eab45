package stacktest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/aep-kimi/aep-kimi/access"
	"github.com/aep-kimi/aep-kimi/aep"
	"github.com/aep-kimi/aep-kimi/internal/testkit/httpcall"
	"github.com/aep-kimi/aep-kimi/internal/testkit/netaddr"
	"github.com/aep-kimi/aep-kimi/internal/testkit/poll"
	"github.com/aep-kimi/aep-kimi/rules"
)

// RelayOnly runs the built relay alone on a fresh home and token, with env
// and args added (-v, --notify ...).
func RelayOnly(t *testing.T, env []string, args ...string) *Stack {
	t.Helper()
	st := &Stack{Home: t.TempDir(), Token: "e2e-" + aep.NewID()}
	port := netaddr.FreePort(t)
	st.RelayURL = fmt.Sprintf("http://127.0.0.1:%d", port)
	st.Relay = StartDaemon(t, st.RelayURL, append([]string{"AEP_TOKEN=" + st.Token, "AEP_HOME=" + st.Home}, env...),
		append([]string{"relay", "--listen", fmt.Sprintf("127.0.0.1:%d", port)}, args...)...)
	return st
}

// AddPerson is `aep-kimi token add NAME --role ROLE [ARGS] --json`'s token,
// once the relay admits it.
func (st *Stack) AddPerson(t *testing.T, name, role string, args ...string) string {
	t.Helper()
	code, out := st.CliAs(t, st.Token, append([]string{"token", "add", name, "--role", role, "--json"}, args...)...)
	var got struct{ Token string }
	if code != 0 || json.Unmarshal([]byte(out), &got) != nil || got.Token == "" {
		t.Fatalf("token add %s: exit %d: %s", name, code, out)
	}
	poll.Must(t, 5*time.Second, name+"'s token admitted", func() bool {
		return StatusOf(t, st.RelayURL+"/events", Bearer(got.Token)) == http.StatusOK
	})
	return got.Token
}

// HeldSession is a session the test emits as an adapter would, claiming it
// on the relay's socket: its working directory and its requests carry
// text above metadata.
type HeldSession struct {
	Em      *LiveSocket
	Id, Cwd string
	Seq     int
}

func EmitSession(t *testing.T, st *Stack, cwd string) *HeldSession {
	t.Helper()
	em := OpenSocket(t, st.RelayURL, Bearer(st.Token), `{"type":"hello","versions":["0.1"],"role":"emitter","identity":{"agent":"kimi-code","instance":"e2e"},`+
		`"capabilities":{"control":{"accepts":["control.attention.respond"]}}}`)
	h := &HeldSession{Em: em, Id: "attack-" + aep.NewID(), Cwd: cwd}
	h.Send(t, aep.NewID(), "session.started", "", "", `{"trigger":"startup","cwd":`+Quote(cwd)+`}`)
	return h
}

func Quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// Send emits one event of the session; subject and cause when not "".
func (h *HeldSession) Send(t *testing.T, id, typ, subject, cause, data string) {
	t.Helper()
	sub := ""
	if subject != "" {
		sub = `,"subject":` + Quote(subject)
	}
	if cause != "" {
		sub += `,"cause":` + Quote(cause)
	}
	ev := `{"aep":"0.1","id":"` + id + `","type":"` + typ + `","time":"` + aep.FormatTime(time.Now()) + `","source":"aep://e2e/agent/kimi-code/session/` + h.Id +
		`","agent":"kimi-code","session":"` + h.Id + `","seq":` + fmt.Sprint(h.Seq) + `,"epoch":0,"severity":"notice","capture":"redacted"` + sub + `,"data":` + data + `}`
	h.Seq++
	if err := h.Em.C.Write(h.Em.Ctx, websocket.MessageText, []byte(ev)); err != nil {
		t.Fatal(err)
	}
}

// Ask raises the gate's request to run command in Bash and returns its id.
func (h *HeldSession) Ask(t *testing.T, command string) string {
	t.Helper()
	id := aep.NewID()
	h.Send(t, id, "attention.requested", "Bash", "", `{"kind":"permission","prompt":`+Quote("Kimi wants to use Bash: "+command)+
		`,"tool":{"name":"Bash","call_id":"c`+fmt.Sprint(h.Seq)+`"},"respond_via":["control"],"expires_at":"`+aep.FormatTime(time.Now().Add(5*time.Minute))+
		`","options":[{"id":"allow","label":"Allow"},{"id":"deny","label":"Deny"}]}`)
	return id
}

// RespondAs answers request with `aep-kimi respond` and token, the
// Session's emitter accepting the command and answering as the gate does
// (by the sender the relay stamped).
func (h *HeldSession) RespondAs(t *testing.T, st *Stack, token, request, option string) {
	t.Helper()
	done := make(chan string, 1)
	go func() {
		code, out := st.CliAs(t, token, "respond", "--option", option, h.Id, request)
		done <- fmt.Sprintf("exit %d: %s", code, out)
	}()
	if !h.accept(t, request, option) {
		t.Fatalf("the answer to %s did not reach the emitter (respond: %s)", request, <-done)
	}
	if res := <-done; !strings.HasPrefix(res, "exit 0") {
		t.Fatalf("respond: %s", res)
	}
}

// AnswerLink POSTs an answer link of the session's request, its emitter
// accepting the command and answering as the gate does: a link says
// "answered" only once the emitter took the answer. It returns the link's
// status and JSON body.
func (h *HeldSession) AnswerLink(t *testing.T, link, request, option string) (int, map[string]any) {
	t.Helper()
	type result struct {
		code int
		js   map[string]any
	}
	done := make(chan result, 1)
	go func() {
		code, js := PostLink(t, link)
		done <- result{code, js}
	}()
	if !h.accept(t, request, option) {
		t.Fatalf("the link's answer to %s did not reach the emitter", request)
	}
	r := <-done
	return r.code, r.js
}

// accept takes the next command the session's emitter is sent, which must
// answer request, and answers as the gate does: control.accepted, then
// attention.answered by the sender the relay stamped. False when no such
// command came within 10 s.
func (h *HeldSession) accept(t *testing.T, request, option string) bool {
	t.Helper()
	f, _ := h.Em.Within(rules.CommandType, 10*time.Second)
	if f == nil || f["subject"] != request {
		return false
	}
	cmd, by := f["id"].(string), f["aepkimiby"].(string)
	h.Send(t, aep.NewID(), "control.accepted", "", cmd, `{}`)
	h.Send(t, aep.NewID(), "attention.answered", request, cmd, `{"answer":{"option":`+Quote(option)+`},"via":"control","by":`+Quote(by)+`}`)
	return true
}

// PostLink POSTs an answer link, as a notification's button does, and
// returns the status and the JSON answer.
func PostLink(t *testing.T, link string) (int, map[string]any) {
	t.Helper()
	r := httpcall.Do(t, httpcall.Request{Method: http.MethodPost, URL: link})
	return r.Status, r.Map(t)
}

// PostAs POSTs body as JSON with token.
func PostAs(t *testing.T, url, token, body string) (int, string) {
	t.Helper()
	r := httpcall.Do(t, httpcall.Request{Method: http.MethodPost, URL: url, Token: token, Body: body,
		Header: map[string]string{"Content-Type": "application/json"}})
	return r.Status, string(r.Body)
}

// TokenID is NAME's token ID as `aep-kimi token list --json` shows it.
func (st *Stack) TokenID(t *testing.T, name string) string {
	t.Helper()
	code, out := st.CliAs(t, st.Token, "token", "list", "--json")
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

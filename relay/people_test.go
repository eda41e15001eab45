package relay_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/aep-kimi/aep-kimi/access"
	"github.com/aep-kimi/aep-kimi/aep"
	"github.com/aep-kimi/aep-kimi/internal/testkit/relaytest"
	"github.com/aep-kimi/aep-kimi/mapping"
	"github.com/aep-kimi/aep-kimi/relay"
)

// team is a relay with three people besides its owner: walt watches, ann
// answers, ada administers.
type team struct {
	srv             *relaytest.Server
	store           access.Store
	walt, ann, ada  string
	waltH, annH, aH map[string]string
}

func newTeam(t *testing.T) *team {
	t.Helper()
	home := t.TempDir()
	tm := &team{store: access.Store{Home: home}}
	var err error
	add := func(name string, role access.Role) string {
		if _, tok, e := tm.store.Add(name, role, ""); e != nil {
			err = e
		} else {
			return tok
		}
		return ""
	}
	tm.walt, tm.ann, tm.ada = add("walt", access.RoleWatch), add("ann", access.RoleAnswer), add("ada", access.RoleAdmin)
	if err != nil {
		t.Fatal(err)
	}
	bearer := func(tok string) map[string]string { return map[string]string{"Authorization": "Bearer " + tok} }
	tm.waltH, tm.annH, tm.aH = bearer(tm.walt), bearer(tm.ann), bearer(tm.ada)
	tm.srv = relaytest.RunServer(t, relay.Config{Token: testToken, People: access.OpenRoster(home, nil), TokenPoll: 20 * time.Millisecond})
	return tm
}

// withIngest adds a POST /events request's headers to h.
func withIngest(h map[string]string) map[string]string {
	return map[string]string{"Authorization": h["Authorization"], "Content-Type": "application/json", "AEP-Version": aep.Version}
}

// helloAs opens a socket with token and completes the hello.
func helloAs(t *testing.T, srv *relaytest.Server, token, role, agent string) *wsClient {
	t.Helper()
	w := dialWS(t, srv, token)
	w.send(t, map[string]any{"type": "hello", "versions": []string{"0.1"}, "role": role,
		"identity": map[string]any{"agent": agent, "instance": agent + "/1"}, "capabilities": map[string]any{}})
	if f := w.next(t); f.str("type") != "hello" {
		t.Fatalf("hello: %s", f.raw)
	}
	return w
}

// A watcher is served every event at metadata at most, on every binding
// (SSE, a socket's subscription, a replay), whatever capture it asks for:
// the prompt and the tool's arguments never reach it, their shapes and
// timings do. The owner and the others read the relay's bytes unchanged.
func TestWatcherSeesMetadataOnly(t *testing.T) {
	t.Parallel()
	tm := newTeam(t)
	secret := "rm -rf /home/alice/secret-project"
	full := func(e *aep.Event) { e.Capture = "full" }
	run := mkEvent("s1", 0, withType("run.started"), full, withData(`{"prompt":"`+secret+`"}`))
	tool := mkEvent("s1", 1, withType("tool.requested"), full,
		withData(`{"tool":{"name":"Bash","call_id":"c1"},"args":{"command":"`+secret+`"},"args_digest":"abc"}`))
	mustPost(t, tm.srv, run, tool)

	for _, q := range []url.Values{{"from": {"all"}, "live": {"0"}}, {"from": {"all"}, "live": {"0"}, "capture": {"full"}}} {
		s := openSSE(t, tm.srv, q, tm.waltH)
		for _, it := range []string{s.next(t, false).Data, s.next(t, false).Data} {
			if strings.Contains(it, secret) || !strings.Contains(it, `"capture":"metadata"`) {
				t.Fatalf("the watcher's stream (%v) carries %s", q, it)
			}
		}
	}
	if it := openSSE(t, tm.srv, url.Values{"from": {"all"}, "live": {"0"}}, tm.annH).next(t, false); it.Data != string(line(t, run)) {
		t.Fatalf("the answerer's stream changed the event: %s", it.Data)
	}
	if it := openSSE(t, tm.srv, url.Values{"from": {"all"}, "live": {"0"}}, nil).next(t, false); it.Data != string(line(t, run)) {
		t.Fatalf("the owner's stream changed the event: %s", it.Data)
	}

	// A socket: replay and live, the same ceiling.
	w := helloAs(t, tm.srv, tm.walt, "consumer", "walt")
	w.send(t, subscribeFrame("all", map[string]any{"session": "s1"}, map[string]any{"from": "all", "capture": "full"}))
	live := mkEvent("s1", 2, withType("run.finished"), full, withData(`{"duration_ms":5,"summary":"`+secret+`"}`))
	got := w.eventFrames(t, 2)
	mustPost(t, tm.srv, live)
	got = append(got, w.eventFrames(t, 1)...)
	for _, f := range got {
		if strings.Contains(string(f.raw), secret) || f.str("capture") != "metadata" {
			t.Fatalf("the watcher's socket got %s", f.raw)
		}
	}
}

// Each role may send what it may and is refused the rest, on every
// binding: a refused command is an unauthorized error frame naming it,
// and nothing reaches the target or the history.
func TestRolesOnEveryBinding(t *testing.T) {
	t.Parallel()
	tm := newTeam(t)
	tgt := target(t, tm.srv, "both", "kimi", "s-r", `{"accepts":["control.attention.respond","control.cancel","x.kimi-code.control.instruct"]}`)

	respond := func() *aep.Event {
		return command("control.attention.respond", "s-r", `{"answer":{"option":"deny"}}`)
	}
	instruct := func() *aep.Event { return command("x.kimi-code.control.instruct", "s-r", `{"text":"hi"}`) }
	for _, c := range []struct {
		who, token string
		cmd        *aep.Event
		ok         bool
	}{
		{"walt", tm.walt, respond(), false},
		{"walt", tm.walt, command("control.cancel", "s-r", `{"scope":"session"}`), false},
		{"ann", tm.ann, respond(), true},
		{"ann", tm.ann, command("control.cancel", "s-r", `{"scope":"session"}`), true},
		{"ann", tm.ann, instruct(), false},
		{"ada", tm.ada, instruct(), true},
	} {
		w := helloAs(t, tm.srv, c.token, "consumer", c.who)
		w.send(t, c.cmd)
		if c.ok {
			got := tgt.expect(t, func(f wsFrame) bool { return f.str("id") == c.cmd.ID })
			if got.str(mapping.ExtBy) != c.who {
				t.Errorf("%s's %s reached the target as %s", c.who, c.cmd.Type, got.raw)
			}
			continue
		}
		f := w.expect(t, func(f wsFrame) bool { return f.str("type") == "error" })
		if f.str("code") != "unauthorized" || f.str("cause") != c.cmd.ID || !strings.Contains(f.str("detail"), c.who) {
			t.Errorf("%s's %s: %s", c.who, c.cmd.Type, f.raw)
		}
	}
	tgt.quiet(t, 100*time.Millisecond)

	// Emitting: POST and an emitter's socket are the admin's (and the owner's).
	ev := mkEvent("s-e", 0)
	for who, h := range map[string]map[string]string{"walt": tm.waltH, "ann": tm.annH} {
		if res := do(t, tm.srv, http.MethodPost, "/events", line(t, ev), withIngest(h)); res.status != http.StatusForbidden || !strings.Contains(string(res.body), who) {
			t.Errorf("%s POST /events: %d %s", who, res.status, res.body)
		}
		w := helloAs(t, tm.srv, h["Authorization"][len("Bearer "):], "emitter", who)
		w.send(t, mkEvent("s-e-"+who, 0))
		if f := w.expect(t, func(f wsFrame) bool { return f.str("type") == "error" }); f.str("code") != "unauthorized" {
			t.Errorf("%s emitting on a socket: %s", who, f.raw)
		}
	}
	if res := do(t, tm.srv, http.MethodPost, "/events", line(t, ev), withIngest(tm.aH)); res.status != http.StatusAccepted {
		t.Errorf("ada POST /events: %d %s", res.status, res.body)
	}
	if n := len(sessionReplay(t, tm.srv, "s-e-walt")) + len(sessionReplay(t, tm.srv, "s-e-ann")); n != 0 {
		t.Errorf("refused events were stored: %d", n)
	}
}

// A command's sender cannot name who sent it: the relay writes the
// authenticated person in aepkimiby, and the ID of the token they sent it
// with in aepkimibytoken, over any the command carries (the owner's
// carries none); a by in its data is the command's own business, not who
// answered.
func TestForgedByIsReplaced(t *testing.T) {
	t.Parallel()
	tm := newTeam(t)
	annRef := func() string {
		_, ref, _ := access.OpenRoster(tm.store.Home, nil).Lookup(tm.ann)
		return ref.ID()
	}()
	tgt := target(t, tm.srv, "both", "kimi", "s-f", `{"accepts":["control.attention.respond"]}`)
	watch := openSSE(t, tm.srv, url.Values{"filter": {`{"session":"s-f","type":"control.*"}`}}, nil)
	for _, c := range []struct{ who, token, name, ref string }{{"ann", tm.ann, "ann", annRef}, {"the owner", testToken, access.OwnerName, ""}} {
		cmd := command("control.attention.respond", "s-f", `{"answer":{"option":"allow"},"by":"ada"}`)
		if cmd.SetExt(mapping.ExtBy, "ada") != nil || cmd.SetExt(mapping.ExtByToken, "0123456789ab") != nil {
			t.Fatal("cannot forge")
		}
		w := helloAs(t, tm.srv, c.token, "both", "aep-kimi-page")
		w.send(t, cmd)
		got := tgt.expect(t, func(f wsFrame) bool { return f.str("id") == cmd.ID })
		if got.str(mapping.ExtBy) != c.name || got.str(mapping.ExtByToken) != c.ref ||
			strings.Count(string(got.raw), `"`+mapping.ExtBy+`"`) != 1 || strings.Contains(string(got.raw), "0123456789ab") {
			t.Fatalf("%s's command reached the target as %s: want aepkimiby %s, once, token %q", c.who, got.raw, c.name, c.ref)
		}
		held, err := aep.ParseEvent([]byte(watch.next(t, false).Data))
		if err != nil {
			t.Fatal(err)
		}
		if by, _ := held.ExtString(mapping.ExtBy); by != c.name {
			t.Fatalf("the history holds %s", held.Raw())
		}
	}
	if annRef == "" {
		t.Fatal("ann's token has no ID")
	}
}

// Only the relay's rules send as "rule:<id>": a command whose sender
// names a rule as its agent is refused on the socket (it would otherwise
// reach the emitter stamped with the person, yet read as a rule's answer
// to whatever believes the agent), and so is any event naming one, on the
// socket and on POST /events, whoever sends it.
func TestForgedRuleAgentRefused(t *testing.T) {
	t.Parallel()
	tm := newTeam(t)
	tgt := target(t, tm.srv, "both", "kimi", "s-fr", `{"accepts":["control.attention.respond"]}`)
	for who, tok := range map[string]string{"ann": tm.ann, "ada": tm.ada, "owner": testToken} {
		cmd := command("control.attention.respond", "s-fr", `{"answer":{"option":"allow"}}`)
		cmd.Agent = "rule:r-always"
		w := helloAs(t, tm.srv, tok, "both", "aep-kimi-page")
		w.send(t, cmd)
		f := w.expect(t, func(f wsFrame) bool { return f.str("type") == "error" })
		if f.str("code") != "forbidden" || f.str("cause") != cmd.ID || !strings.Contains(f.str("detail"), "reserved") {
			t.Errorf("%s's command as rule:r-always: %s", who, f.raw)
		}
		ev := mkEvent("s-fr-"+who, 0)
		ev.Agent = "rule:r-always"
		w.send(t, ev)
		if f := w.expect(t, func(f wsFrame) bool { return f.str("type") == "error" }); f.str("code") != "forbidden" {
			t.Errorf("%s's event as rule:r-always on the socket: %s", who, f.raw)
		}
	}
	tgt.quiet(t, 100*time.Millisecond)
	ev := mkEvent("s-fr-post", 0)
	ev.Agent = "rule:r-always"
	if res := do(t, tm.srv, http.MethodPost, "/events", line(t, ev), withIngest(tm.aH)); res.status != http.StatusForbidden || !strings.Contains(string(res.body), "reserved") {
		t.Errorf("POST /events as rule:r-always: %d %s", res.status, res.body)
	}
	if n := len(sessionReplay(t, tm.srv, "s-fr")) + len(sessionReplay(t, tm.srv, "s-fr-post")) + len(sessionReplay(t, tm.srv, "s-fr-ada")); n != 1 {
		t.Errorf("refused events were stored: %d besides the claim", n-1)
	}
}

// Removing a person's token closes what it opened, an SSE stream and a
// socket, within 2 s; the token is refused from then on, as are blank and
// unknown tokens. The others' connections stay.
func TestRevokeEndsConnections(t *testing.T) {
	t.Parallel()
	tm := newTeam(t)
	for name, tok := range map[string]string{"blank": "  ", "unknown": "nobody's-token", "a hash": access.Hash(tm.walt)} {
		if _, code, _ := tryOpenSSE(t, tm.srv, url.Values{}, map[string]string{"Authorization": "Bearer " + tok}); code == http.StatusOK {
			t.Errorf("%s token opened a stream", name)
		}
	}
	stream := openSSE(t, tm.srv, url.Values{}, tm.waltH)
	sock := helloAs(t, tm.srv, tm.walt, "consumer", "walt")
	other := openSSE(t, tm.srv, url.Values{}, tm.annH)
	start := time.Now()
	if _, err := tm.store.Remove("walt"); err != nil {
		t.Fatal(err)
	}
	reason, deadline := "", time.After(2*time.Second)
read:
	for {
		select {
		case it, open := <-stream.items:
			if !open {
				break read
			}
			if it.IsComment && it.Comment != "ping" {
				reason = it.Comment
			}
		case <-deadline:
			t.Fatal("the stream is open 2 s after the token was removed")
		}
	}
	if took := time.Since(start); took > 2*time.Second || reason != "token-revoked" {
		t.Fatalf("the stream ended after %v with %q", took, reason)
	}
	closing := sock.expect(t, func(f wsFrame) bool { return f.str("type") == "closing" })
	if took := time.Since(start); took > 2*time.Second || closing.str("reason") != "token-revoked" {
		t.Fatalf("the socket closed after %v: %s", took, closing.raw)
	}
	if _, code, _ := tryOpenSSE(t, tm.srv, url.Values{}, tm.waltH); code != http.StatusForbidden {
		t.Fatalf("a revoked token: %d", code)
	}
	other.quiet(t, 100*time.Millisecond)
	select {
	case err := <-other.done:
		t.Fatalf("ann's stream ended with walt's token: %v", err)
	default:
	}
}

// The rules: every role reads them and asks what they would decide; only
// an admin changes them.
func TestRulesNeedAdminToChange(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	store := access.Store{Home: home}
	_, walt, _ := store.Add("walt", access.RoleWatch, "")
	_, ada, _ := store.Add("ada", access.RoleAdmin, "")
	tm := relaytest.RunServer(t, relay.Config{Token: testToken, People: access.OpenRoster(home, nil), Rules: rulesBook(t)})
	add, _ := json.Marshal(map[string]any{"effect": "allow", "tool": "Bash", "args": "echo *"})
	for _, c := range []struct {
		token, method, path string
		body                []byte
		want                int
	}{
		{walt, http.MethodGet, "/rules", nil, http.StatusOK},
		{walt, http.MethodPost, "/rules/test", []byte(`{"tool":"Bash","args":"echo hi"}`), http.StatusOK},
		{walt, http.MethodPost, "/rules", add, http.StatusForbidden},
		{ada, http.MethodPost, "/rules", add, http.StatusCreated},
	} {
		res := do(t, tm, c.method, c.path, c.body, map[string]string{"Authorization": "Bearer " + c.token, "Content-Type": "application/json"})
		if res.status != c.want {
			t.Errorf("%s %s as %.4s…: %d %s, want %d", c.method, c.path, c.token, res.status, res.body, c.want)
		}
	}
}

// Respond answers for a person as they stand now, by the token they were
// admitted with: a token revoked since a link was made for it answers
// nothing, and giving the name a new token (the rotation after a lost
// phone) does not revive it; the new token's own principal answers.
func TestRespondAsRevokedPerson(t *testing.T) {
	t.Parallel()
	tm := newTeam(t)
	target(t, tm.srv, "both", "kimi", "s-l", `{"accepts":["control.attention.respond"]}`)
	admitted := func(tok string) access.Principal {
		t.Helper()
		p, _, ok := access.OpenRoster(tm.store.Home, nil).Lookup(tok)
		if !ok {
			t.Fatal("the token is not in the file")
		}
		return p
	}
	ann := admitted(tm.ann)
	if err := tm.srv.Respond(context.Background(), ann, "aep-kimi-link", "s-l", "req-1", "deny"); err != nil {
		t.Fatalf("ann's answer: %v", err)
	}
	if _, err := tm.store.Remove("ann"); err != nil {
		t.Fatal(err)
	}
	var re *relay.RespondError
	eventually(t, "ann's link refused", func() bool {
		err := tm.srv.Respond(context.Background(), ann, "aep-kimi-link", "s-l", "req-1", "deny")
		return errors.As(err, &re) && re.Code == "forbidden"
	})
	_, again, err := tm.store.Add("ann", access.RoleAnswer, "")
	if err != nil {
		t.Fatal(err)
	}
	ann2 := admitted(again)
	eventually(t, "ann's new token answers", func() bool {
		return tm.srv.Respond(context.Background(), ann2, "aep-kimi-link", "s-l", "req-1", "deny") == nil
	})
	if err := tm.srv.Respond(context.Background(), ann, "aep-kimi-link", "s-l", "req-1", "deny"); !errors.As(err, &re) || re.Code != "forbidden" {
		t.Fatalf("ann's old token answered once her name had a new one: %v", err)
	}
	nameOnly := access.Principal{Name: "ann", Role: access.RoleAnswer}
	if err := tm.srv.Respond(context.Background(), nameOnly, "aep-kimi-link", "s-l", "req-1", "deny"); !errors.As(err, &re) || re.Code != "forbidden" {
		t.Fatalf("a name without its token answered: %v", err)
	}
	walt := admitted(tm.walt)
	walt.Role = access.RoleAnswer // the link says answer; the file says watch
	if err := tm.srv.Respond(context.Background(), walt, "aep-kimi-link", "s-l", "req-1", "deny"); !errors.As(err, &re) || re.Code != "forbidden" {
		t.Fatalf("walt's answer: %v", err)
	}
}

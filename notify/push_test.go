package notify_test

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aep-kimi/aep-kimi/access"
	"github.com/aep-kimi/aep-kimi/internal/testkit/httpcall"
	"github.com/aep-kimi/aep-kimi/internal/testkit/poll"
	"github.com/aep-kimi/aep-kimi/internal/testkit/pushtest"
	"github.com/aep-kimi/aep-kimi/mapping"
	"github.com/aep-kimi/aep-kimi/notify"
	"github.com/aep-kimi/aep-kimi/relay"
)

// api calls the relay's notification API with the relay token.
func api(t *testing.T, st *stage, method, path string, body any) (int, []byte) {
	t.Helper()
	return apiAs(t, st, testToken, method, path, body)
}

// apiAs calls the notification API with token.
func apiAs(t *testing.T, st *stage, token, method, path string, body any) (int, []byte) {
	t.Helper()
	r := httpcall.Do(t, httpcall.Request{Method: method, URL: st.url + path, Token: token, Body: body})
	return r.Status, r.Body
}

// subscribe subscribes a fresh device of the push service, as the page does.
func subscribe(t *testing.T, st *stage, ps *pushtest.Server, device string) (*pushtest.Subscription, notify.Listed) {
	t.Helper()
	code, b := api(t, st, http.MethodGet, notify.PathVAPID, nil)
	var vapid map[string]string
	if code != 200 || json.Unmarshal(b, &vapid) != nil || vapid["public_key"] == "" {
		t.Fatalf("vapid: %d %s", code, b)
	}
	sub, err := ps.Subscribe(vapid["public_key"])
	if err != nil {
		t.Fatal(err)
	}
	code, b = api(t, st, http.MethodPost, notify.PathSubscriptions, map[string]any{"subscription": json.RawMessage(sub.JSON()), "device": device})
	var l notify.Listed
	if code != http.StatusCreated || json.Unmarshal(b, &l) != nil || l.ID == "" || l.Owner != "owner" || l.Device != device {
		t.Fatalf("subscribe: %d %s", code, b)
	}
	return sub, l
}

func nextPush(t *testing.T, ps *pushtest.Server, sub *pushtest.Subscription, n int) (pushtest.Message, notify.PushPayload) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	m, err := ps.Next(ctx, sub, n)
	if err != nil {
		t.Fatalf("push %d: %v (refused: %+v)", n, err, ps.Refusals())
	}
	var p notify.PushPayload
	if err := json.Unmarshal(m.Plaintext, &p); err != nil {
		t.Fatalf("payload: %v: %s", err, m.Plaintext)
	}
	return m, p
}

// A waiting request reaches each subscribed device as an aes128gcm push
// that decrypts with the device's keys into the documented payload, its
// actions answering as the subscriber; the update that replaces it has the
// same tag and closes it. Keys and subscriptions are private files.
func TestWebPush(t *testing.T) {
	t.Parallel()
	ps := pushtest.New(t)
	home := t.TempDir()
	st := newStage(t, notify.Config{Home: home, Window: 50 * time.Millisecond, PushServiceAllow: ps.Allow()}, nil)
	sub, listed := subscribe(t, st, ps, "Pixel 8")
	for _, f := range []string{notify.VAPIDFileName, notify.SubscriptionsFileName} {
		if fi, err := os.Stat(filepath.Join(home, f)); err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: %v %v, want 0600", f, fi, err)
		}
	}
	st.start(t, "p1")
	req := st.ask(t, "p1", "rm -rf build", 45*time.Second)
	m, p := nextPush(t, ps, sub, 0)
	if p.V != 1 || p.Close || !strings.Contains(p.Title, "Bash") || !strings.Contains(p.Body, "runs anyway in") || len(p.Answers) != 2 {
		t.Fatalf("payload: %+v", p)
	}
	if strings.Contains(string(m.Plaintext), "rm -rf") {
		t.Errorf("the push says more than metadata: %s", m.Plaintext)
	}
	if m.Urgency != "high" || m.TTL < 40 || m.TTL > 45 || m.Topic == "" || len(m.Topic) > 32 {
		t.Errorf("push headers: urgency %q ttl %d topic %q", m.Urgency, m.TTL, m.Topic)
	}
	if !strings.HasPrefix(p.Open, st.url+"/?") {
		t.Errorf("open %q", p.Open)
	}
	// The action answers as the subscriber, from a phone.
	var deny string
	for _, a := range p.Answers {
		if a.Option == "deny" {
			deny = a.URL
		}
	}
	if code, js, raw := post(t, deny, nil); code != 200 || js["answered"] != true {
		t.Fatalf("the push's deny: %d %s", code, raw)
	}
	c := <-st.cmds
	if c.Agent != mapping.AgentPush || c.Subject != req.ID {
		t.Fatalf("command from %s for %s", c.Agent, c.Subject)
	}
	st.resolve(t, "p1", req, "answered")
	_, u := nextPush(t, ps, sub, 1)
	if !u.Close || u.Tag != p.Tag || len(u.Answers) != 0 {
		t.Fatalf("update: %+v", u)
	}
	routed := readSession(t, st, "p1", "attention.routed")
	if len(routed) != 1 {
		t.Fatalf("routed: %d", len(routed))
	}
	if d, _ := routed[0].DataMap(); d["to"] != "push:owner's Pixel 8" || d["via"] != "push" {
		t.Errorf("routed to %v", d)
	}

	// Listed, removable, and gone when removed.
	code, b := api(t, st, http.MethodGet, notify.PathSubscriptions, nil)
	var l notify.Listing
	if code != 200 || json.Unmarshal(b, &l) != nil || len(l.Subscriptions) != 1 || l.Subscriptions[0].ID != listed.ID || l.Subscriptions[0].LastOK.IsZero() {
		t.Fatalf("list: %d %s", code, b)
	}
	if code, b := api(t, st, http.MethodDelete, notify.PathSubscriptions+"/"+listed.ID, nil); code != http.StatusNoContent {
		t.Fatalf("delete: %d %s", code, b)
	}
	if code, _ := api(t, st, http.MethodDelete, notify.PathSubscriptions+"/"+listed.ID, nil); code != http.StatusNotFound {
		t.Errorf("delete again: %d", code)
	}
	// A witness device, subscribed now: a push for the next request and
	// then the one closing it reach it, so a push to the removed device,
	// queued with the first, has had a round trip more to arrive.
	witness, _ := subscribe(t, st, ps, "witness")
	next := st.ask(t, "p1", "ls", time.Minute)
	nextPush(t, ps, witness, 0)
	st.resolve(t, "p1", next, "answered")
	if _, u := nextPush(t, ps, witness, 1); !u.Close {
		t.Fatalf("the witness's second push does not close the first: %+v", u)
	}
	if n := ps.Requests(sub); n != 2 {
		t.Errorf("a removed device got pushes: %d requests", n)
	}
}

// A push service answering 404 or 410 drops the subscription; one that
// stalls holds up neither the relay nor other devices.
func TestWebPushGoneAndStalled(t *testing.T) {
	t.Parallel()
	ps := pushtest.New(t)
	st := newStage(t, notify.Config{PushServiceAllow: ps.Allow()}, nil)
	gone, _ := subscribe(t, st, ps, "old phone")
	stalled, _ := subscribe(t, st, ps, "slow phone")
	fine, _ := subscribe(t, st, ps, "laptop")
	ps.Answer(gone, http.StatusGone)
	ps.Stall(stalled, true)
	st.start(t, "g1")
	st.ask(t, "g1", "ls", time.Minute)
	nextPush(t, ps, fine, 0)
	poll.Must(t, 3*time.Second, "the gone subscription dropped", func() bool {
		_, b := api(t, st, http.MethodGet, notify.PathSubscriptions, nil)
		var l notify.Listing
		_ = json.Unmarshal(b, &l)
		for _, s := range l.Subscriptions {
			if s.Device == "old phone" {
				return false
			}
		}
		return len(l.Subscriptions) == 2
	})
	if n := ps.Requests(gone); n != 1 {
		t.Errorf("the gone subscription was tried %d times, want once", n)
	}
}

// Bad subscriptions are refused with a reason; another origin is refused.
func TestWebPushRefusals(t *testing.T) {
	t.Parallel()
	ps := pushtest.New(t)
	st := newStage(t, notify.Config{PushServiceAllow: ps.Allow()}, nil)
	good, _ := ps.Subscribe("")
	var ok map[string]any
	_ = json.Unmarshal(good.JSON(), &ok)
	for name, sub := range map[string]any{
		"plain http off loopback": map[string]any{"endpoint": "http://push.example.org/x", "keys": ok["keys"]},
		"no keys":                 map[string]any{"endpoint": good.Endpoint},
		"short auth":              map[string]any{"endpoint": good.Endpoint, "keys": map[string]any{"p256dh": good.P256dh, "auth": "AAAA"}},
		"bad point":               map[string]any{"endpoint": good.Endpoint, "keys": map[string]any{"p256dh": "BAAA", "auth": good.Auth}},
	} {
		code, b := api(t, st, http.MethodPost, notify.PathSubscriptions, map[string]any{"subscription": sub})
		if code != http.StatusBadRequest || !strings.Contains(string(b), notify.CodeBadSubscription) {
			t.Errorf("%s: %d %s", name, code, b)
		}
	}
	req, _ := http.NewRequest(http.MethodPost, st.url+notify.PathSubscriptions, strings.NewReader(`{}`))
	req.Header.Set("Authorization", "Bearer "+testToken)
	req.Header.Set("Origin", "https://evil.example")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("another origin: %d", resp.StatusCode)
	}
}

// The relay pushes only to public https push services: an endpoint
// naming a loopback, private, link-local, CGNAT or unspecified address, or
// plain http, is refused at registration.
func TestWebPushRefusesNonPublicEndpoints(t *testing.T) {
	t.Parallel()
	st := newStage(t, notify.Config{}, nil)
	ps := pushtest.New(t)
	good, _ := ps.Subscribe("")
	keys := map[string]any{"p256dh": good.P256dh, "auth": good.Auth}
	for _, endpoint := range []string{
		good.Endpoint, // the loopback push service, not allowed here
		"http://127.0.0.1:8398/hook/kimi",
		"https://127.0.0.1/x",
		"https://10.0.0.1/x",
		"https://172.16.5.4/x",
		"https://192.168.1.1/x",
		"https://169.254.169.254/latest/meta-data",
		"https://100.64.0.1/x",
		"https://0.0.0.0/x",
		"https://[::1]/x",
		"https://[fd00::1]/x",
		"https://[fe80::1%25eth0]/x",
		"https://[::ffff:10.0.0.1]/x",
	} {
		code, b := api(t, st, http.MethodPost, notify.PathSubscriptions, map[string]any{"subscription": map[string]any{"endpoint": endpoint, "keys": keys}})
		if code != http.StatusBadRequest || !strings.Contains(string(b), notify.CodeBadSubscription) || !strings.Contains(string(b), "endpoint") {
			t.Errorf("%s: %d %s", endpoint, code, b)
		}
	}
	if code, b := api(t, st, http.MethodGet, notify.PathSubscriptions, nil); code != http.StatusOK || strings.Contains(string(b), "endpoint") || strings.Contains(string(b), `"id"`) {
		t.Errorf("subscriptions after refusals: %d %s", code, b)
	}
}

// A name is checked where the push connects: one that resolves to
// loopback is refused by the dialer, nothing reaches the port, and the
// subscription is dropped.
func TestWebPushRefusesNonPublicAtConnect(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var conns atomic.Int32
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns.Add(1)
			c.Close()
		}
	}()
	t.Cleanup(func() { ln.Close() })
	st := newStage(t, notify.Config{}, nil)
	ps := pushtest.New(t)
	good, _ := ps.Subscribe("")
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	sub := map[string]any{"endpoint": "https://localhost:" + port + "/push/x", "keys": map[string]any{"p256dh": good.P256dh, "auth": good.Auth}}
	if code, b := api(t, st, http.MethodPost, notify.PathSubscriptions, map[string]any{"subscription": sub, "device": "probe"}); code != http.StatusCreated {
		t.Fatalf("a host name is checked when the push connects, not before: %d %s", code, b)
	}
	code, b := api(t, st, http.MethodPost, notify.PathTest, nil)
	var rep notify.TestReport
	if code != http.StatusOK || json.Unmarshal(b, &rep) != nil || len(rep.Results) != 1 {
		t.Fatalf("test: %d %s", code, b)
	}
	if r := rep.Results[0]; r.OK || !strings.Contains(r.Error, "not at a public address") {
		t.Errorf("the push to a name on loopback: %+v", r)
	}
	if n := conns.Load(); n != 0 {
		t.Errorf("the push reached the loopback port: %d connections", n)
	}
	if code, b := api(t, st, http.MethodGet, notify.PathSubscriptions, nil); code != http.StatusOK || strings.Contains(string(b), "probe") {
		t.Errorf("the subscription is kept after a refusal: %d %s", code, b)
	}
}

// notify test sends one message to each target and device and says what
// each answered.
func TestNotifyTestEndpoint(t *testing.T) {
	t.Parallel()
	ps := pushtest.New(t)
	rec := &recorder{name: "webhook:receiver.test"}
	st := newStage(t, notify.Config{Targets: []notify.Target{rec, downTarget("webhook:down.test")}, PushServiceAllow: ps.Allow()}, nil)
	sub, _ := subscribe(t, st, ps, "Pixel 8")
	gone, _ := subscribe(t, st, ps, "old phone")
	ps.Answer(gone, http.StatusGone)
	code, b := api(t, st, http.MethodPost, notify.PathTest, nil)
	var rep notify.TestReport
	if code != 200 || json.Unmarshal(b, &rep) != nil || len(rep.Results) != 4 {
		t.Fatalf("test: %d %s", code, b)
	}
	got := map[string]notify.TestResult{}
	for _, r := range rep.Results {
		got[r.Target] = r
	}
	if !got["webhook:receiver.test"].OK || !got["push:owner's Pixel 8"].OK || got["push:owner's old phone"].OK || !strings.Contains(got["push:owner's old phone"].Error, "410") {
		t.Fatalf("results: %+v", rep.Results)
	}
	// The report names each target once: a failure says why, not whose.
	if down := got["webhook:down.test"]; down.OK || down.Error != "post: connection refused" {
		t.Errorf("the target that is down: %+v", down)
	}
	if _, p := nextPush(t, ps, sub, 0); p.Title != "aep-kimi test notification" {
		t.Errorf("test push: %+v", p)
	}
	if len(rec.got()) != 1 || rec.got()[0].Kind != notify.KindTest {
		t.Errorf("webhook got %+v", rec.got())
	}
}

// A person's device is theirs: it answers as them, and once their token is
// revoked it is told nothing more and its links answer nothing.
func TestWebPushRevoked(t *testing.T) {
	t.Parallel()
	ps := pushtest.New(t)
	home := t.TempDir()
	_, alice, err := access.Store{Home: home}.Add("alice", access.RoleAnswer, "")
	if err != nil {
		t.Fatal(err)
	}
	// The roster is re-read at a test's pace: the revocation is awaited.
	st := newStageWith(t, notify.Config{Window: 50 * time.Millisecond, PushServiceAllow: ps.Allow()},
		relay.Config{People: access.OpenRoster(home, nil), TokenPoll: 20 * time.Millisecond})
	code, b := apiAs(t, st, alice, http.MethodGet, notify.PathVAPID, nil)
	var vapid map[string]string
	if code != 200 || json.Unmarshal(b, &vapid) != nil {
		t.Fatalf("vapid as alice: %d %s", code, b)
	}
	sub, _ := ps.Subscribe(vapid["public_key"])
	code, b = apiAs(t, st, alice, http.MethodPost, notify.PathSubscriptions, map[string]any{"subscription": json.RawMessage(sub.JSON()), "device": "Pixel 8"})
	if code != http.StatusCreated || !strings.Contains(string(b), `"owner":"alice"`) {
		t.Fatalf("subscribe as alice: %d %s", code, b)
	}
	// The owner's device, told of every request: the witness that the
	// notifier has routed one.
	witness, _ := subscribe(t, st, ps, "witness")
	st.start(t, "v1")
	st.ask(t, "v1", "ls", time.Minute)
	_, p := nextPush(t, ps, sub, 0)
	nextPush(t, ps, witness, 0)
	told := 1
	var allow, deny string
	for _, a := range p.Answers {
		switch a.Option {
		case "allow":
			allow = a.URL
		case "deny":
			deny = a.URL
		}
	}
	if _, err := (access.Store{Home: home}).Remove("alice"); err != nil {
		t.Fatal(err)
	}
	poll.Must(t, 3*time.Second, "alice's token refused", func() bool {
		c, _ := apiAs(t, st, alice, http.MethodGet, notify.PathVAPID, nil)
		return c == http.StatusForbidden || c == http.StatusUnauthorized
	})
	// dead checks the old token's link answers nothing and its device is
	// told nothing of the next request.
	dead := func(when, link, command string) {
		t.Helper()
		if code, js, raw := post(t, link, nil); code != http.StatusForbidden || js["code"] != notify.CodeAnswerForbidden {
			t.Fatalf("%s, the old token's link: %d %s", when, code, raw)
		}
		noCommand(t, st, 200*time.Millisecond)
		// As in TestWebPush: the witness is told of the request and then
		// of its close, so a push to the old device, queued with the
		// first, has had a round trip more to arrive.
		req := st.ask(t, "v1", command, time.Minute)
		nextPush(t, ps, witness, told)
		st.resolve(t, "v1", req, "answered")
		nextPush(t, ps, witness, told+1)
		told += 2
		if n := ps.Requests(sub); n != 1 {
			t.Fatalf("%s, the old token's device got %d pushes, want only the first", when, n)
		}
	}
	dead("revoked", allow, "make")

	// Her name given a new token (a lost phone's rotation) revives
	// neither: the old link and the old device were the old token's, and
	// the new token does not own the old device.
	_, again, err := access.Store{Home: home}.Add("alice", access.RoleAnswer, "")
	if err != nil {
		t.Fatal(err)
	}
	poll.Must(t, 3*time.Second, "alice's new token admitted", func() bool {
		c, _ := apiAs(t, st, again, http.MethodGet, notify.PathVAPID, nil)
		return c == http.StatusOK
	})
	dead("the name given a new token", deny, "make install") // deny: a link never used
	if code, b := apiAs(t, st, again, http.MethodGet, notify.PathSubscriptions, nil); code != http.StatusOK || strings.Contains(string(b), "Pixel 8") {
		t.Fatalf("the new token lists the old one's device: %d %s", code, b)
	}
}

// downTarget is a target whose receiver cannot be reached.
type downTarget string

func (d downTarget) Name() string { return string(d) }

func (d downTarget) Send(context.Context, notify.Message) error {
	return &notify.SendError{Target: string(d), Err: errors.New("post: connection refused")}
}

// An answer link's page says no more than its person may read: for someone
// whose ceiling is metadata it names the tool and the session, never the
// command.
func TestAnswerPageWithinCeiling(t *testing.T) {
	t.Parallel()
	ps := pushtest.New(t)
	home := t.TempDir()
	_, bob, err := access.Store{Home: home}.Add("bob", access.RoleAnswer, "metadata")
	if err != nil {
		t.Fatal(err)
	}
	st := newStageWith(t, notify.Config{Window: 50 * time.Millisecond, PushServiceAllow: ps.Allow()}, relay.Config{People: access.OpenRoster(home, nil)})
	code, b := apiAs(t, st, bob, http.MethodGet, notify.PathVAPID, nil)
	var vapid map[string]string
	if code != 200 || json.Unmarshal(b, &vapid) != nil {
		t.Fatalf("vapid as bob: %d %s", code, b)
	}
	sub, _ := ps.Subscribe(vapid["public_key"])
	if code, b := apiAs(t, st, bob, http.MethodPost, notify.PathSubscriptions, map[string]any{"subscription": json.RawMessage(sub.JSON()), "device": "Pixel 8"}); code != http.StatusCreated {
		t.Fatalf("subscribe as bob: %d %s", code, b)
	}
	st.start(t, "m1")
	st.ask(t, "m1", "rm -rf build", time.Minute)
	_, p := nextPush(t, ps, sub, 0)
	if len(p.Answers) == 0 {
		t.Fatalf("push without answer links: %+v", p)
	}
	resp, body := get(t, p.Answers[0].URL)
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, "This answers Bash in acme-shop · m1") {
		t.Fatalf("GET: %d %s", resp.StatusCode, body)
	}
	if strings.Contains(body, "rm -rf") {
		t.Errorf("the page of a metadata reader's link shows the command:\n%s", body)
	}
}

// Page login against the built relay: revocation and logout ending
// connections, stolen cookies, the connection cap and login limits.

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/aep-kimi/aep-kimi/aep"
	"github.com/aep-kimi/aep-kimi/fleetpage"
	"github.com/aep-kimi/aep-kimi/internal/testkit/netaddr"
	"github.com/aep-kimi/aep-kimi/internal/testkit/poll"
	"github.com/aep-kimi/aep-kimi/internal/testkit/stacktest"
)

// Every stream and socket a login or the token opened ends, within 2 s,
// when that credential does: a logout, a logout from another browser (the
// login key rotates), the key file replaced, the login's expiry, the
// token file replaced.
func TestE2ERevocationClosesConnections(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("e2e: builds and runs the binaries")
	}
	const stream = "/stream?from=all"
	for _, who := range []string{"this browser", "another browser"} {
		t.Run(who+" logs out", func(t *testing.T) {
			base, _, _, token := stacktest.TokenRelay(t)
			l, other := stacktest.LoginPage(t, base, token), stacktest.LoginPage(t, base, token)
			sock := stacktest.OpenSocket(t, base, l.SocketHeader(), stacktest.ConsumerHello(l.Secret))
			sse := stacktest.OpenStream(t, base+stream, l.Header())
			now := time.Now()
			if who == "this browser" {
				l.Logout(t)
			} else {
				other.Logout(t) // a logout ends every login: the key rotates
			}
			sock.ClosesWithin(t, "socket", "logged-out", now, stacktest.RevokeBound)
			sse.EndsWithin(t, "stream", now, stacktest.RevokeBound)
		})
	}
	t.Run("login key replaced", func(t *testing.T) {
		base, home, _, token := stacktest.TokenRelay(t)
		l := stacktest.LoginPage(t, base, token)
		sock := stacktest.OpenSocket(t, base, l.SocketHeader(), stacktest.ConsumerHello(l.Secret))
		sse := stacktest.OpenStream(t, base+stream, l.Header())
		key := filepath.Join(home, fleetpage.LoginsFileName)
		if err := os.WriteFile(key+".new", []byte(strings.Repeat("ab", 32)), 0o600); err != nil {
			t.Fatal(err)
		}
		now := time.Now()
		if err := os.Rename(key+".new", key); err != nil {
			t.Fatal(err)
		}
		sock.ClosesWithin(t, "socket", "login-key-rotated", now, stacktest.RevokeBound)
		sse.EndsWithin(t, "stream", now, stacktest.RevokeBound)
		if code := stacktest.StatusOf(t, base+stream+"&live=0", l.Header()); code != http.StatusUnauthorized {
			t.Errorf("the login after its key was replaced: %d, want 401", code)
		}
	})
	t.Run("login expires", func(t *testing.T) {
		base, _, _, token := stacktest.TokenRelay(t, "AEP_LOGIN_TTL=3s")
		l := stacktest.LoginPage(t, base, token)
		sock := stacktest.OpenSocket(t, base, l.SocketHeader(), stacktest.ConsumerHello(l.Secret))
		sse := stacktest.OpenStream(t, base+stream, l.Header())
		if l.Expires.IsZero() || time.Until(l.Expires) > 4*time.Second {
			t.Fatalf("AEP_LOGIN_TTL=3s: the cookie expires at %v", l.Expires)
		}
		sock.ClosesWithin(t, "socket", "login-expired", l.Expires, stacktest.RevokeBound)
		sse.EndsWithin(t, "stream", l.Expires, stacktest.RevokeBound)
	})
	t.Run("token file replaced", func(t *testing.T) {
		base, _, tokenFile, token := stacktest.TokenRelay(t)
		l := stacktest.LoginPage(t, base, token)
		pageSock := stacktest.OpenSocket(t, base, l.SocketHeader(), stacktest.ConsumerHello(l.Secret))
		tokSock := stacktest.OpenSocket(t, base, stacktest.Bearer(token), stacktest.ConsumerHello(""))
		tokSSE := stacktest.OpenStream(t, base+stream, stacktest.Bearer(token))
		pageSSE := stacktest.OpenStream(t, base+stream, l.Header())
		fresh := "e2e-" + aep.NewID()
		now := time.Now()
		stacktest.WriteToken(t, tokenFile, fresh)
		tokSock.ClosesWithin(t, "token socket", "token-changed", now, stacktest.RevokeBound)
		pageSock.ClosesWithin(t, "page socket", "token-changed", now, stacktest.RevokeBound)
		tokSSE.EndsWithin(t, "token stream", now, stacktest.RevokeBound)
		pageSSE.EndsWithin(t, "page stream", now, stacktest.RevokeBound)
		if code := stacktest.StatusOf(t, base+stream+"&live=0", stacktest.Bearer(token)); code != http.StatusForbidden {
			t.Errorf("the old token after the change: %d, want 403", code)
		}
		if code := stacktest.StatusOf(t, base+stream+"&live=0", stacktest.Bearer(fresh)); code != http.StatusOK {
			t.Errorf("the new token: %d, want 200", code)
		}
	})
	t.Run("dash logout", func(t *testing.T) {
		base, _, _, token := stacktest.TokenRelay(t)
		dash, dashToken := stacktest.StartDash(t, base, token)
		l := stacktest.LoginPage(t, dash, dashToken)
		sock := stacktest.OpenSocket(t, dash+"/r/0", l.SocketHeader(), stacktest.ConsumerHello(l.Secret))
		sse := stacktest.OpenStream(t, dash+"/r/0"+stream, l.Header())
		now := time.Now()
		l.Logout(t)
		sock.ClosesWithin(t, "dash socket", "logged-out", now, stacktest.RevokeBound)
		sse.EndsWithin(t, "dash stream", now, stacktest.RevokeBound)
	})
}

// A respond sent on a page's socket after the logout never reaches the
// session's emitter, though the same respond sent before it does.
func TestE2ERespondAfterLogoutNotDelivered(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("e2e: builds and runs the binaries")
	}
	base, _, _, token := stacktest.TokenRelay(t)
	em := stacktest.OpenSocket(t, base, stacktest.Bearer(token), `{"type":"hello","versions":["0.1"],"role":"emitter","identity":{"agent":"kimi-code","instance":"e2e"},`+
		`"capabilities":{"control":{"accepts":["control.attention.respond"]}}}`)
	session := "respond-" + aep.NewID()
	req := aep.NewID()
	for i, ev := range []string{
		`{"aep":"0.1","id":"` + aep.NewID() + `","type":"session.started","time":"2026-01-01T00:00:00Z","source":"aep://e2e/kimi-code/s","agent":"kimi-code","session":"` + session + `","seq":0,"epoch":1,"data":{}}`,
		`{"aep":"0.1","id":"` + req + `","type":"attention.requested","time":"2026-01-01T00:00:01Z","source":"aep://e2e/kimi-code/s","agent":"kimi-code","session":"` + session + `","seq":1,"epoch":1,"subject":"Shell","data":{"kind":"permission","prompt":"p","options":[{"id":"allow","label":"Allow"},{"id":"deny","label":"Deny"}],"respond_via":["control"]}}`,
	} {
		if err := em.C.Write(em.Ctx, websocket.MessageText, []byte(ev)); err != nil {
			t.Fatalf("event %d: %v", i, err)
		}
	}
	l := stacktest.LoginPage(t, base, token)
	page := stacktest.OpenSocket(t, base, l.SocketHeader(), stacktest.ConsumerHello(l.Secret))
	respond := func(option string) string {
		id := aep.NewID()
		cmd := fmt.Sprintf(`{"aep":"0.1","id":%q,"type":"control.attention.respond","time":%q,"source":"aep://e2e/aep-kimi-page/x","agent":"aep-kimi-page","session":%q,"subject":%q,"data":{"answer":{"option":%q}}}`,
			id, aep.FormatTime(time.Now()), session, req, option)
		_ = page.C.Write(page.Ctx, websocket.MessageText, []byte(cmd))
		return id
	}
	// Before the logout the page's answer reaches the emitter: the route
	// the attack needs is there.
	first := respond("allow")
	if f := em.Next(t, "control.attention.respond"); f == nil || f["id"] != first {
		t.Fatalf("the respond before logout did not reach the emitter: %v", f)
	}
	l.Logout(t)
	late := respond("deny")
	timeout := time.After(stacktest.RevokeBound + time.Second)
	for {
		select {
		case f := <-em.Frames:
			if f["type"] == "control.attention.respond" {
				t.Fatalf("a respond sent after the logout reached the emitter: %v (sent %s)", f["id"], late)
			}
		case <-timeout:
			return
		}
	}
}

// A cookie taken by another local listener (browsers send it to every port
// of the host) opens nothing on its own: not the stream without the
// browser's headers, not with forged ones, not the socket.
func TestE2EStolenCookieRefused(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("e2e: builds and runs the binaries")
	}
	base, _, _, token := stacktest.TokenRelay(t)
	l := stacktest.LoginPage(t, base, token)
	jar := func(extra map[string]string) http.Header {
		h := http.Header{}
		h.Set("Cookie", l.Cookie.Name+"="+l.Cookie.Value)
		for k, v := range extra {
			h.Set(k, v)
		}
		return h
	}
	for name, h := range map[string]http.Header{
		"the cookie alone":                           jar(nil),
		"the cookie with forged browser headers":     jar(map[string]string{"Origin": base, "Sec-Fetch-Site": "same-origin"}),
		"the cookie and secret, no browser header":   jar(map[string]string{"AEP-Login": l.Secret}),
		"the cookie with the cookie as the secret":   jar(map[string]string{"Sec-Fetch-Site": "same-origin", "AEP-Login": l.Cookie.Value}),
		"the cookie with a made-up secret":           jar(map[string]string{"Sec-Fetch-Site": "same-origin", "AEP-Login": strings.Repeat("A", 43)}),
		"the cookie on a page's GET without headers": jar(map[string]string{"Accept": "text/event-stream"}),
	} {
		if code := stacktest.StatusOf(t, base+"/stream?live=0&from=all", h); code != http.StatusUnauthorized {
			t.Errorf("%s: /stream answered %d, want 401", name, code)
		}
	}
	if code := stacktest.StatusOf(t, base+"/stream?live=0&from=all", l.Header()); code != http.StatusOK {
		t.Errorf("the page's own request: %d, want 200", code)
	}
	// The socket: the upgrade carries the cookie and a forged Origin; the
	// hello lacks the secret only the page's tab holds.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(base, "http")+"/socket", &websocket.DialOptions{HTTPHeader: l.SocketHeader()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseNow()
	if err := c.Write(ctx, websocket.MessageText, []byte(stacktest.ConsumerHello(""))); err != nil {
		t.Fatal(err)
	}
	_, b, err := c.Read(ctx)
	if err != nil || !strings.Contains(string(b), `"unauthorized"`) {
		t.Errorf("a socket with a stolen cookie and no secret got %s (%v), want an unauthorized error", b, err)
	}
	if _, b, err := c.Read(ctx); err == nil {
		t.Errorf("the socket stayed open: %s", b)
	}
}

// The relay serves at most --max-connections streams and sockets: one more
// is refused with 503, a JSON body and Retry-After, and counted; a closed
// one frees its slot.
func TestE2EConnectionCap(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("e2e: builds and runs the binaries")
	}
	home := t.TempDir()
	token := "e2e-" + aep.NewID()
	port := strconv.Itoa(netaddr.FreePort(t))
	base := "http://127.0.0.1:" + port
	stacktest.StartDaemon(t, base, stacktest.CleanEnv(home, "AEP_TOKEN="+token, "AEP_MAX_CONNECTIONS=99"), "relay", "--listen", "127.0.0.1:"+port, "--max-connections", "3")
	first := stacktest.OpenStream(t, base+"/stream", stacktest.Bearer(token))
	stacktest.OpenStream(t, base+"/stream", stacktest.Bearer(token))
	stacktest.OpenSocket(t, base, stacktest.Bearer(token), stacktest.ConsumerHello(""))
	refused := func(what string, res *http.Response) {
		t.Helper()
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		var body struct{ Error, Detail string }
		if res.StatusCode != http.StatusServiceUnavailable || json.Unmarshal(b, &body) != nil || body.Error != "limit-exceeded" || res.Header.Get("Retry-After") == "" {
			t.Errorf("%s past the cap: %d %s (Retry-After %q), want 503 limit-exceeded with Retry-After", what, res.StatusCode, b, res.Header.Get("Retry-After"))
		}
	}
	req, _ := http.NewRequest(http.MethodGet, base+"/stream", nil)
	req.Header = stacktest.Bearer(token)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	refused("a fourth stream", res)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if c, res, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(base, "http")+"/socket", &websocket.DialOptions{HTTPHeader: stacktest.Bearer(token)}); err == nil {
		c.CloseNow()
		t.Error("a fourth connection, a socket, was accepted")
	} else if res == nil {
		t.Fatal(err)
	} else {
		refused("a socket", res)
	}
	metrics := func() string {
		req, _ := http.NewRequest(http.MethodGet, base+"/metrics", nil)
		req.Header = stacktest.Bearer(token)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return string(b)
	}
	m := metrics()
	for _, want := range []string{`aepkimi_relay_connections_refused_total{binding="sse"} 1`, `aepkimi_relay_connections_refused_total{binding="ws"} 1`, `aepkimi_relay_connections_limit 3`} {
		if !strings.Contains(m, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	// Ending one frees its slot.
	first.Close()
	var code int
	if !poll.Until(10*time.Second, func() bool {
		code = stacktest.StatusOf(t, base+"/stream?live=0", stacktest.Bearer(token))
		return code == http.StatusOK
	}) {
		t.Fatalf("a stream after one ended: still %d", code)
	}
}

// Login attempts from one address are limited: after the burst, 429 with a
// JSON body and Retry-After, the right token included.
func TestE2ELoginRateLimited(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("e2e: builds and runs the binaries")
	}
	base, _, _, token := stacktest.TokenRelay(t)
	post := func(tok string) *http.Response {
		req, _ := http.NewRequest(http.MethodPost, base+"/app/login", strings.NewReader(`{"token":"`+tok+`"}`))
		req.Header.Set("Origin", base)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { res.Body.Close() })
		return res
	}
	tried := 0
	for ; tried < 50; tried++ {
		if res := post("guess-" + strconv.Itoa(tried)); res.StatusCode != http.StatusForbidden {
			break
		}
	}
	if tried != 10 {
		t.Errorf("%d wrong guesses were answered 403 before the limit, want 10", tried)
	}
	res := post(token)
	b, _ := io.ReadAll(res.Body)
	var body struct{ Error, Detail string }
	if res.StatusCode != http.StatusTooManyRequests || json.Unmarshal(b, &body) != nil || body.Error == "" || res.Header.Get("Retry-After") == "" {
		t.Errorf("the right token past the limit: %d %s (Retry-After %q), want 429 with a JSON body and Retry-After", res.StatusCode, b, res.Header.Get("Retry-After"))
	}
	if len(res.Cookies()) != 0 {
		t.Error("a limited login set a cookie")
	}
}

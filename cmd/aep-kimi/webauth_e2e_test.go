package main

// Attack tests on the fleet page's login and the relay's bounds, against
// the built binaries on real sockets: what a login or a token opened ends
// with it, a stolen cookie alone opens nothing, and the relay bounds its
// connections and its login attempts.

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/aep-kimi/aep-kimi/aep"
	"github.com/aep-kimi/aep-kimi/fleetpage"
	"github.com/aep-kimi/aep-kimi/internal/testkit/netaddr"
	"github.com/aep-kimi/aep-kimi/internal/testkit/poll"
	"github.com/aep-kimi/aep-kimi/internal/testkit/proctest"
)

// revokeBound is how soon a stream or socket must end once its credential
// does.
const revokeBound = 2 * time.Second

// pageLogin is a browser's login as the page's script holds it: the cookie
// the browser keeps and the secret the tab keeps.
type pageLogin struct {
	base    string
	cookie  *http.Cookie
	secret  string
	expires time.Time
}

// loginPage logs in to the page at base with token, as the page does.
func loginPage(t *testing.T, base, token string) *pageLogin {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, base+"/app/login", strings.NewReader(`{"token":"`+token+`"}`))
	req.Header.Set("Origin", base)
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	if res.StatusCode != http.StatusOK || len(res.Cookies()) != 1 {
		t.Fatalf("login at %s: %d %s (%d cookies)", base, res.StatusCode, b, len(res.Cookies()))
	}
	var body struct {
		Login string `json:"login"`
	}
	_ = json.Unmarshal(b, &body)
	c := res.Cookies()[0]
	if !strings.HasPrefix(c.Name, "aep_fleet") {
		t.Fatalf("login cookie %q", c.Name)
	}
	return &pageLogin{base: base, cookie: c, secret: body.Login, expires: c.Expires}
}

// header is what the page's own fetch carries: the cookie, the browser's
// same-origin marker and the tab's secret.
func (l *pageLogin) header() http.Header {
	h := http.Header{}
	h.Set("Cookie", l.cookie.Name+"="+l.cookie.Value)
	h.Set("Sec-Fetch-Site", "same-origin")
	h.Set("AEP-Login", l.secret)
	return h
}

// logout posts the page's logout.
func (l *pageLogin) logout(t *testing.T) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, l.base+"/app/logout", nil)
	req.Header = l.header()
	req.Header.Set("Origin", l.base)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("logout: %d", res.StatusCode)
	}
}

// liveStream is an open /stream, read until it ends.
type liveStream struct {
	ended chan time.Time
	tail  chan string // the last comment line before the end
	close context.CancelFunc
}

func openStream(t *testing.T, url string, h http.Header) *liveStream {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	req.Header = h
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if res.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		t.Fatalf("GET %s: %d %s", url, res.StatusCode, b)
	}
	s := &liveStream{ended: make(chan time.Time, 1), tail: make(chan string, 1), close: cancel}
	go func() {
		defer res.Body.Close()
		sc := bufio.NewScanner(res.Body)
		last := ""
		for sc.Scan() {
			if l := sc.Text(); strings.HasPrefix(l, ":") {
				last = l
			}
		}
		s.tail <- last
		s.ended <- time.Now()
	}()
	return s
}

// endsWithin waits for the stream to end no later than bound after since.
func (s *liveStream) endsWithin(t *testing.T, what string, since time.Time, bound time.Duration) {
	t.Helper()
	select {
	case at := <-s.ended:
		if d := at.Sub(since); d > bound {
			t.Errorf("%s: the stream ended %v after, want within %v", what, d.Round(time.Millisecond), bound)
		}
		t.Logf("%s: stream ended after %v (%s)", what, at.Sub(since).Round(time.Millisecond), <-s.tail)
	case <-time.After(time.Until(since.Add(bound + time.Second))):
		t.Errorf("%s: the stream is still open %v after", what, bound+time.Second)
	}
}

// liveSocket is an open /socket after its hello, read until it closes.
type liveSocket struct {
	c      *websocket.Conn
	ctx    context.Context
	frames chan map[string]any
	closed chan time.Time
}

func openSocket(t *testing.T, base string, h http.Header, hello string) *liveSocket {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	c, res, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(base, "http")+"/socket", &websocket.DialOptions{HTTPHeader: h})
	if err != nil {
		status := ""
		if res != nil {
			status = res.Status
		}
		t.Fatalf("socket at %s: %v %s", base, err, status)
	}
	t.Cleanup(func() { _ = c.CloseNow() })
	if err := c.Write(ctx, websocket.MessageText, []byte(hello)); err != nil {
		t.Fatal(err)
	}
	s := &liveSocket{c: c, ctx: ctx, frames: make(chan map[string]any, 256), closed: make(chan time.Time, 1)}
	go func() {
		for {
			_, b, err := c.Read(ctx)
			if err != nil {
				s.closed <- time.Now()
				close(s.frames)
				return
			}
			var f map[string]any
			if json.Unmarshal(b, &f) == nil {
				s.frames <- f
			}
		}
	}()
	if f := s.next(t, "hello"); f == nil {
		t.Fatal("the socket closed before its hello")
	}
	return s
}

// consumerHello is the page's hello, with its login when secret is set.
func consumerHello(secret string) string {
	auth := ""
	if secret != "" {
		auth = `,"auth":{"login":"` + secret + `"}`
	}
	return `{"type":"hello","versions":["0.1"],"role":"consumer","identity":{"agent":"aep-kimi-page","instance":"e2e"},"capabilities":{}` + auth + `}`
}

// next waits for the next frame of type typ, skipping others; nil when the
// socket closed first.
func (s *liveSocket) next(t *testing.T, typ string) map[string]any {
	t.Helper()
	f, closed := s.within(typ, 10*time.Second)
	if f == nil && !closed {
		t.Fatalf("no %s frame in 10 s", typ)
	}
	return f
}

// within is the next frame of type typ within d, skipping others; nil when
// none came, closed when the socket closed first.
func (s *liveSocket) within(typ string, d time.Duration) (f map[string]any, closed bool) {
	timeout := time.After(d)
	for {
		select {
		case f, ok := <-s.frames:
			if !ok {
				return nil, true
			}
			if f["type"] == typ {
				return f, false
			}
		case <-timeout:
			return nil, false
		}
	}
}

// closesWithin waits for a closing frame naming reason, then the close, no
// later than bound after since.
func (s *liveSocket) closesWithin(t *testing.T, what, reason string, since time.Time, bound time.Duration) {
	t.Helper()
	deadline := time.After(time.Until(since.Add(bound + time.Second)))
	var closing map[string]any
	for {
		select {
		case f, ok := <-s.frames:
			if ok && f["type"] == "closing" {
				closing = f
			}
			if ok {
				continue
			}
			at := <-s.closed
			if d := at.Sub(since); d > bound {
				t.Errorf("%s: the socket closed %v after, want within %v", what, d.Round(time.Millisecond), bound)
			}
			if closing == nil || closing["reason"] != reason {
				t.Errorf("%s: closing frame %v, want reason %q", what, closing, reason)
			}
			t.Logf("%s: socket closed after %v with %v", what, at.Sub(since).Round(time.Millisecond), closing)
			return
		case <-deadline:
			t.Errorf("%s: the socket is still open %v after", what, bound+time.Second)
			return
		}
	}
}

// writeToken replaces a token file the way an operator rotating it would:
// a new file renamed over the old.
func writeToken(t *testing.T, path, token string) {
	t.Helper()
	tmp := path + ".new"
	if err := os.WriteFile(tmp, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// tokenRelay runs the relay binary with its token in a file under a fresh
// home.
func tokenRelay(t *testing.T, env ...string) (base, home, tokenFile, token string) {
	t.Helper()
	home = t.TempDir()
	token = "e2e-" + aep.NewID()
	tokenFile = filepath.Join(home, "relay.token")
	writeToken(t, tokenFile, token)
	port := strconv.Itoa(netaddr.FreePort(t))
	base = "http://127.0.0.1:" + port
	startDaemon(t, base, cleanEnv(home, append([]string{"AEP_TOKEN_FILE=" + tokenFile}, env...)...), "relay", "--listen", "127.0.0.1:"+port)
	return base, home, tokenFile, token
}

// startDash runs `aep-kimi dash` reading the relay at relayURL and returns
// its base URL and its login token, read from what it prints.
func startDash(t *testing.T, relayURL, relayToken string) (base, token string) {
	t.Helper()
	home := t.TempDir()
	tokFile := filepath.Join(home, "relay.token")
	if err := os.WriteFile(tokFile, []byte(relayToken), 0o600); err != nil {
		t.Fatal(err)
	}
	port := strconv.Itoa(netaddr.FreePort(t))
	cmd := exec.Command(filepath.Join(binaries(t), "aep-kimi"), "dash", "--listen", "127.0.0.1:"+port, "--relay", relayURL+","+tokFile)
	cmd.Env = cleanEnv(home)
	d := proctest.Start(t, "aep-kimi dash", cmd)
	// Off a terminal the dash writes its login URL to a private file and
	// prints that file's path.
	page := regexp.MustCompile(`page\s+(http://127\.0\.0\.1:` + port + `)\s`)
	login := regexp.MustCompile(`#token=([A-Za-z0-9_%-]+)`)
	var m []string
	d.Await(t, 20*time.Second, "page URL printed", func() bool {
		m = page.FindStringSubmatch(d.Logs.String())
		return m != nil
	})
	b, err := os.ReadFile(filepath.Join(home, fleetpage.DashOpenFileName))
	if err != nil {
		t.Fatal(err)
	}
	tm := login.FindStringSubmatch(string(b))
	if tm == nil {
		t.Fatalf("%s holds no login URL: %s", fleetpage.DashOpenFileName, b)
	}
	tok, err := url.QueryUnescape(tm[1])
	if err != nil {
		t.Fatal(err)
	}
	return m[1], tok
}

func bearer(token string) http.Header {
	h := http.Header{}
	h.Set("Authorization", "Bearer "+token)
	return h
}

// Every stream and socket a login or the token opened ends, within 2 s,
// when that credential does: a logout, a logout from another browser (the
// login key rotates), the key file replaced, the login's expiry, the
// token file replaced.
func TestE2ERevocationClosesConnections(t *testing.T) {
	if testing.Short() {
		t.Skip("e2e: builds and runs the binaries")
	}
	const stream = "/stream?from=all"
	for _, who := range []string{"this browser", "another browser"} {
		t.Run(who+" logs out", func(t *testing.T) {
			base, _, _, token := tokenRelay(t)
			l, other := loginPage(t, base, token), loginPage(t, base, token)
			sock := openSocket(t, base, l.socketHeader(), consumerHello(l.secret))
			sse := openStream(t, base+stream, l.header())
			now := time.Now()
			if who == "this browser" {
				l.logout(t)
			} else {
				other.logout(t) // a logout ends every login: the key rotates
			}
			sock.closesWithin(t, "socket", "logged-out", now, revokeBound)
			sse.endsWithin(t, "stream", now, revokeBound)
		})
	}
	t.Run("login key replaced", func(t *testing.T) {
		base, home, _, token := tokenRelay(t)
		l := loginPage(t, base, token)
		sock := openSocket(t, base, l.socketHeader(), consumerHello(l.secret))
		sse := openStream(t, base+stream, l.header())
		key := filepath.Join(home, fleetpage.LoginsFileName)
		if err := os.WriteFile(key+".new", []byte(strings.Repeat("ab", 32)), 0o600); err != nil {
			t.Fatal(err)
		}
		now := time.Now()
		if err := os.Rename(key+".new", key); err != nil {
			t.Fatal(err)
		}
		sock.closesWithin(t, "socket", "login-key-rotated", now, revokeBound)
		sse.endsWithin(t, "stream", now, revokeBound)
		if code := statusOf(t, base+stream+"&live=0", l.header()); code != http.StatusUnauthorized {
			t.Errorf("the login after its key was replaced: %d, want 401", code)
		}
	})
	t.Run("login expires", func(t *testing.T) {
		base, _, _, token := tokenRelay(t, "AEP_LOGIN_TTL=3s")
		l := loginPage(t, base, token)
		sock := openSocket(t, base, l.socketHeader(), consumerHello(l.secret))
		sse := openStream(t, base+stream, l.header())
		if l.expires.IsZero() || time.Until(l.expires) > 4*time.Second {
			t.Fatalf("AEP_LOGIN_TTL=3s: the cookie expires at %v", l.expires)
		}
		sock.closesWithin(t, "socket", "login-expired", l.expires, revokeBound)
		sse.endsWithin(t, "stream", l.expires, revokeBound)
	})
	t.Run("token file replaced", func(t *testing.T) {
		base, _, tokenFile, token := tokenRelay(t)
		l := loginPage(t, base, token)
		pageSock := openSocket(t, base, l.socketHeader(), consumerHello(l.secret))
		tokSock := openSocket(t, base, bearer(token), consumerHello(""))
		tokSSE := openStream(t, base+stream, bearer(token))
		pageSSE := openStream(t, base+stream, l.header())
		fresh := "e2e-" + aep.NewID()
		now := time.Now()
		writeToken(t, tokenFile, fresh)
		tokSock.closesWithin(t, "token socket", "token-changed", now, revokeBound)
		pageSock.closesWithin(t, "page socket", "token-changed", now, revokeBound)
		tokSSE.endsWithin(t, "token stream", now, revokeBound)
		pageSSE.endsWithin(t, "page stream", now, revokeBound)
		if code := statusOf(t, base+stream+"&live=0", bearer(token)); code != http.StatusForbidden {
			t.Errorf("the old token after the change: %d, want 403", code)
		}
		if code := statusOf(t, base+stream+"&live=0", bearer(fresh)); code != http.StatusOK {
			t.Errorf("the new token: %d, want 200", code)
		}
	})
	t.Run("dash logout", func(t *testing.T) {
		base, _, _, token := tokenRelay(t)
		dash, dashToken := startDash(t, base, token)
		l := loginPage(t, dash, dashToken)
		sock := openSocket(t, dash+"/r/0", l.socketHeader(), consumerHello(l.secret))
		sse := openStream(t, dash+"/r/0"+stream, l.header())
		now := time.Now()
		l.logout(t)
		sock.closesWithin(t, "dash socket", "logged-out", now, revokeBound)
		sse.endsWithin(t, "dash stream", now, revokeBound)
	})
}

// socketHeader is what a browser's socket upgrade carries: the cookie and
// the page's Origin, no secret (the hello brings it).
func (l *pageLogin) socketHeader() http.Header {
	h := http.Header{}
	h.Set("Cookie", l.cookie.Name+"="+l.cookie.Value)
	h.Set("Origin", l.base)
	return h
}

func statusOf(t *testing.T, url string, h http.Header) int {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	req.Header = h
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	return res.StatusCode
}

// A respond sent on a page's socket after the logout never reaches the
// session's emitter, though the same respond sent before it does.
func TestE2ERespondAfterLogoutNotDelivered(t *testing.T) {
	if testing.Short() {
		t.Skip("e2e: builds and runs the binaries")
	}
	base, _, _, token := tokenRelay(t)
	em := openSocket(t, base, bearer(token), `{"type":"hello","versions":["0.1"],"role":"emitter","identity":{"agent":"kimi-code","instance":"e2e"},`+
		`"capabilities":{"control":{"accepts":["control.attention.respond"]}}}`)
	session := "respond-" + aep.NewID()
	req := aep.NewID()
	for i, ev := range []string{
		`{"aep":"0.1","id":"` + aep.NewID() + `","type":"session.started","time":"2026-01-01T00:00:00Z","source":"aep://e2e/kimi-code/s","agent":"kimi-code","session":"` + session + `","seq":0,"epoch":1,"data":{}}`,
		`{"aep":"0.1","id":"` + req + `","type":"attention.requested","time":"2026-01-01T00:00:01Z","source":"aep://e2e/kimi-code/s","agent":"kimi-code","session":"` + session + `","seq":1,"epoch":1,"subject":"Shell","data":{"kind":"permission","prompt":"p","options":[{"id":"allow","label":"Allow"},{"id":"deny","label":"Deny"}],"respond_via":["control"]}}`,
	} {
		if err := em.c.Write(em.ctx, websocket.MessageText, []byte(ev)); err != nil {
			t.Fatalf("event %d: %v", i, err)
		}
	}
	l := loginPage(t, base, token)
	page := openSocket(t, base, l.socketHeader(), consumerHello(l.secret))
	respond := func(option string) string {
		id := aep.NewID()
		cmd := fmt.Sprintf(`{"aep":"0.1","id":%q,"type":"control.attention.respond","time":%q,"source":"aep://e2e/aep-kimi-page/x","agent":"aep-kimi-page","session":%q,"subject":%q,"data":{"answer":{"option":%q}}}`,
			id, aep.FormatTime(time.Now()), session, req, option)
		_ = page.c.Write(page.ctx, websocket.MessageText, []byte(cmd))
		return id
	}
	// Before the logout the page's answer reaches the emitter: the route
	// the attack needs is there.
	first := respond("allow")
	if f := em.next(t, "control.attention.respond"); f == nil || f["id"] != first {
		t.Fatalf("the respond before logout did not reach the emitter: %v", f)
	}
	l.logout(t)
	late := respond("deny")
	timeout := time.After(revokeBound + time.Second)
	for {
		select {
		case f := <-em.frames:
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
	if testing.Short() {
		t.Skip("e2e: builds and runs the binaries")
	}
	base, _, _, token := tokenRelay(t)
	l := loginPage(t, base, token)
	jar := func(extra map[string]string) http.Header {
		h := http.Header{}
		h.Set("Cookie", l.cookie.Name+"="+l.cookie.Value)
		for k, v := range extra {
			h.Set(k, v)
		}
		return h
	}
	for name, h := range map[string]http.Header{
		"the cookie alone":                           jar(nil),
		"the cookie with forged browser headers":     jar(map[string]string{"Origin": base, "Sec-Fetch-Site": "same-origin"}),
		"the cookie and secret, no browser header":   jar(map[string]string{"AEP-Login": l.secret}),
		"the cookie with the cookie as the secret":   jar(map[string]string{"Sec-Fetch-Site": "same-origin", "AEP-Login": l.cookie.Value}),
		"the cookie with a made-up secret":           jar(map[string]string{"Sec-Fetch-Site": "same-origin", "AEP-Login": strings.Repeat("A", 43)}),
		"the cookie on a page's GET without headers": jar(map[string]string{"Accept": "text/event-stream"}),
	} {
		if code := statusOf(t, base+"/stream?live=0&from=all", h); code != http.StatusUnauthorized {
			t.Errorf("%s: /stream answered %d, want 401", name, code)
		}
	}
	if code := statusOf(t, base+"/stream?live=0&from=all", l.header()); code != http.StatusOK {
		t.Errorf("the page's own request: %d, want 200", code)
	}
	// The socket: the upgrade carries the cookie and a forged Origin; the
	// hello lacks the secret only the page's tab holds.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(base, "http")+"/socket", &websocket.DialOptions{HTTPHeader: l.socketHeader()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseNow()
	if err := c.Write(ctx, websocket.MessageText, []byte(consumerHello(""))); err != nil {
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
	if testing.Short() {
		t.Skip("e2e: builds and runs the binaries")
	}
	home := t.TempDir()
	token := "e2e-" + aep.NewID()
	port := strconv.Itoa(netaddr.FreePort(t))
	base := "http://127.0.0.1:" + port
	startDaemon(t, base, cleanEnv(home, "AEP_TOKEN="+token, "AEP_MAX_CONNECTIONS=99"), "relay", "--listen", "127.0.0.1:"+port, "--max-connections", "3")
	first := openStream(t, base+"/stream", bearer(token))
	openStream(t, base+"/stream", bearer(token))
	openSocket(t, base, bearer(token), consumerHello(""))
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
	req.Header = bearer(token)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	refused("a fourth stream", res)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if c, res, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(base, "http")+"/socket", &websocket.DialOptions{HTTPHeader: bearer(token)}); err == nil {
		c.CloseNow()
		t.Error("a fourth connection, a socket, was accepted")
	} else if res == nil {
		t.Fatal(err)
	} else {
		refused("a socket", res)
	}
	metrics := func() string {
		req, _ := http.NewRequest(http.MethodGet, base+"/metrics", nil)
		req.Header = bearer(token)
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
	first.close()
	var code int
	if !poll.Until(10*time.Second, func() bool { code = statusOf(t, base+"/stream?live=0", bearer(token)); return code == http.StatusOK }) {
		t.Fatalf("a stream after one ended: still %d", code)
	}
}

// Login attempts from one address are limited: after the burst, 429 with a
// JSON body and Retry-After, the right token included.
func TestE2ELoginRateLimited(t *testing.T) {
	if testing.Short() {
		t.Skip("e2e: builds and runs the binaries")
	}
	base, _, _, token := tokenRelay(t)
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

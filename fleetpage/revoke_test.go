package fleetpage_test

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/aep-kimi/aep-kimi/fleetpage"
	"github.com/aep-kimi/aep-kimi/internal/testkit/relaytest"
	"github.com/aep-kimi/aep-kimi/relay"
)

// openSocket opens the page's socket with l's cookie and hello, and
// returns a channel that yields the closing frame's reason ("" for none)
// once the socket closes.
func openSocket(t *testing.T, base string, l *login) <-chan string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	h := http.Header{}
	h.Set("Origin", base)
	h.Set("Cookie", l.cookie.Name+"="+l.cookie.Value)
	c, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(base, "http")+"/socket", &websocket.DialOptions{HTTPHeader: h})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.CloseNow() })
	hello := `{"type":"hello","versions":["0.1"],"role":"consumer","identity":{"agent":"t","instance":"t"},"capabilities":{},"auth":{"login":"` + l.secret + `"}}`
	if err := c.Write(ctx, websocket.MessageText, []byte(hello)); err != nil {
		t.Fatal(err)
	}
	if _, b, err := c.Read(ctx); err != nil || !strings.Contains(string(b), `"hello"`) {
		t.Fatalf("no hello: %s %v", b, err)
	}
	out := make(chan string, 1)
	go func() {
		reason := ""
		for {
			_, b, err := c.Read(ctx)
			if err != nil {
				out <- reason
				return
			}
			var f struct{ Type, Reason string }
			if json.Unmarshal(b, &f) == nil && f.Type == "closing" {
				reason = f.Reason
			}
		}
	}()
	return out
}

func closedWith(t *testing.T, what string, closed <-chan string, want string) {
	t.Helper()
	select {
	case got := <-closed:
		if got != want {
			t.Errorf("%s: closed with %q, want %q", what, got, want)
		}
	case <-time.After(2 * time.Second):
		t.Errorf("%s: the socket is still open 2 s later", what)
	}
}

// Each way a login ends closes the sockets it opened, with its reason: a
// logout, the key file replaced, the relay's token replaced, the login
// evicted by newer ones, its expiry.
func TestLoginEndClosesSockets(t *testing.T) {
	t.Parallel()
	key := filepath.Join(t.TempDir(), "page-login.key")
	var token atomic.Value
	token.Store(testToken)
	var ahead atomic.Int64 // how far the page's clock runs ahead of the real one
	now := func() time.Time { return time.Now().Add(time.Duration(ahead.Load())) }
	page, err := fleetpage.New(fleetpage.Config{Token: testToken, LoginsFile: key, MaxLogins: 2, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	base := relaytest.RunServer(t, relay.Config{Token: testToken, Page: page, TokenPoll: 20 * time.Millisecond,
		TokenSource: func() (string, error) { return token.Load().(string), nil }}).URL
	login := func(base, tok string) *login {
		res := do(t, base, req{method: http.MethodPost, path: "/app/login", body: `{"token":"` + tok + `"}`, origin: base})
		var body struct{ Login string }
		_ = json.NewDecoder(res.Body).Decode(&body)
		for _, c := range res.Cookies() {
			if c.Name == cookieName(base) {
				return &login{cookie: c, secret: body.Login}
			}
		}
		t.Fatalf("login: %d", res.StatusCode)
		return nil
	}

	a := login(base, testToken)
	closed := openSocket(t, base, a)
	do(t, base, req{method: http.MethodPost, path: "/app/logout", login: a, origin: base})
	closedWith(t, "logout", closed, "logged-out")

	a = login(base, testToken)
	closed = openSocket(t, base, a)
	if err := os.WriteFile(key+".new", []byte(strings.Repeat("cd", 32)), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(key+".new", key); err != nil {
		t.Fatal(err)
	}
	closedWith(t, "key file replaced", closed, "login-key-rotated")

	a = login(base, testToken)
	closed = openSocket(t, base, a)
	token.Store(testToken + "-new")
	closedWith(t, "token replaced", closed, "token-changed")
	if code := status(t, base, req{login: a, origin: base}); code != http.StatusUnauthorized {
		t.Errorf("a login of the old token: %d", code)
	}

	a = login(base, testToken+"-new")
	closed = openSocket(t, base, a)
	ahead.Add(int64(1100 * time.Millisecond)) // expiries are whole seconds: a's is the soonest
	login(base, testToken+"-new")
	login(base, testToken+"-new") // MaxLogins 2: the one closest to expiry is dropped
	closedWith(t, "evicted", closed, "login-evicted")

	var shortAhead atomic.Int64
	short, err := fleetpage.New(fleetpage.Config{Token: testToken, SessionTTL: 2 * time.Second,
		Now: func() time.Time { return time.Now().Add(time.Duration(shortAhead.Load())) }})
	if err != nil {
		t.Fatal(err)
	}
	base = relaytest.RunServer(t, relay.Config{Token: testToken, Page: short}).URL
	a = login(base, testToken)
	// The page's clock put forward to a second before the login's expiry
	// (whole seconds, as its cookie says): the socket's lease runs out a
	// second after it opens, not whatever the truncated TTL left.
	shortAhead.Store(int64(time.Until(a.cookie.Expires) - time.Second))
	closed = openSocket(t, base, a)
	select {
	case <-closed:
		t.Fatal("closed before the login expired")
	case <-time.After(500 * time.Millisecond):
	}
	closedWith(t, "expired", closed, "login-expired")
}

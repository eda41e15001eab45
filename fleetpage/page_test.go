package fleetpage_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/aep-kimi/aep-kimi/fleetpage"
	"github.com/aep-kimi/aep-kimi/internal/testkit/relaytest"
	"github.com/aep-kimi/aep-kimi/internal/testkit/syncbuf"
	"github.com/aep-kimi/aep-kimi/relay"
)

const testToken = "page-test-token-0123456789abcdef"

// startRelay runs a real relay with the page on a loopback port and returns
// its base URL and its log.
func startRelay(t *testing.T, token string, pcfg fleetpage.Config) (string, *syncbuf.Buffer) {
	t.Helper()
	return startRelayWith(t, token, pcfg, relay.Config{})
}

// startRelayWith is startRelay on a relay configured as rcfg besides its
// token, logger and page.
func startRelayWith(t *testing.T, token string, pcfg fleetpage.Config, rcfg relay.Config) (string, *syncbuf.Buffer) {
	t.Helper()
	logs := &syncbuf.Buffer{}
	log := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	pcfg.Token, pcfg.Logger = token, log
	page, err := fleetpage.New(pcfg)
	if err != nil {
		t.Fatal(err)
	}
	rcfg.Token, rcfg.Logger, rcfg.Page = token, log, page
	return relaytest.RunServer(t, rcfg).URL, logs
}

type req struct {
	method, path, body string
	origin, site       string
	cookie             *http.Cookie
	login              *login // its cookie and its bound secret
	header             map[string]string
}

// login is a browser's login: the cookie and the secret the page keeps in
// its tab.
type login struct {
	cookie *http.Cookie
	secret string
}

func do(t *testing.T, base string, r req) *http.Response {
	t.Helper()
	if r.method == "" {
		r.method = http.MethodGet
	}
	hr, err := http.NewRequest(r.method, base+r.path, strings.NewReader(r.body))
	if err != nil {
		t.Fatal(err)
	}
	if r.origin != "" {
		hr.Header.Set("Origin", r.origin)
	}
	if r.site != "" {
		hr.Header.Set("Sec-Fetch-Site", r.site)
	}
	if r.cookie != nil {
		hr.AddCookie(r.cookie)
	}
	if r.login != nil {
		hr.AddCookie(r.login.cookie)
		hr.Header.Set(fleetpage.BindHeader, r.login.secret)
	}
	for k, v := range r.header {
		hr.Header.Set(k, v)
	}
	res, err := http.DefaultClient.Do(hr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { res.Body.Close() })
	return res
}

// cookieName is the session cookie's name on the server at base.
func cookieName(base string) string { return fleetpage.CookieName(strings.TrimPrefix(base, "http://")) }

// tryLogin logs in at base with tok: the login, or nil when none was
// made, and the answer's body.
func tryLogin(t *testing.T, base, tok string) (*login, map[string]any) {
	t.Helper()
	res := do(t, base, req{method: http.MethodPost, path: "/app/login", body: `{"token":"` + tok + `"}`, origin: base, site: "same-origin"})
	var body map[string]any
	_ = json.NewDecoder(res.Body).Decode(&body)
	secret, _ := body["login"].(string)
	for _, c := range res.Cookies() {
		if c.Name == cookieName(base) {
			return &login{cookie: c, secret: secret}, body
		}
	}
	return nil, body
}

func loginCookie(t *testing.T, base string) *login {
	t.Helper()
	l, body := tryLogin(t, base, testToken)
	if l == nil {
		t.Fatalf("login set no session cookie named %s: %v", cookieName(base), body)
	}
	if len(l.secret) < 32 {
		t.Fatalf("login answered no bound secret: %v", body)
	}
	c := l.cookie
	if !c.HttpOnly || c.SameSite != http.SameSiteStrictMode || c.Value == "" || c.Path != "/" {
		t.Fatalf("cookie %+v: want HttpOnly, SameSite=Strict, Path=/", c)
	}
	if strings.Contains(c.Value, l.secret) {
		t.Fatal("the cookie carries the bound secret")
	}
	return l
}

func status(t *testing.T, base string, r req) int {
	t.Helper()
	if r.path == "" {
		r.path = "/stream?live=0&from=all"
	}
	return do(t, base, r).StatusCode
}

func TestPageServedWithoutToken(t *testing.T) {
	t.Parallel()
	base, _ := startRelay(t, testToken, fleetpage.Config{})
	for _, p := range []string{"/", "/app/app.js", "/app/state.js", "/app/style.css"} {
		res := do(t, base, req{path: p})
		b, _ := io.ReadAll(res.Body)
		if res.StatusCode != http.StatusOK || len(b) == 0 {
			t.Errorf("GET %s: %d (%d bytes)", p, res.StatusCode, len(b))
		}
		if csp := res.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'self'") {
			t.Errorf("GET %s: CSP %q", p, csp)
		}
		if strings.HasSuffix(p, ".js") && !strings.Contains(res.Header.Get("Content-Type"), "javascript") {
			t.Errorf("GET %s: Content-Type %q: browsers refuse modules without a JavaScript type", p, res.Header.Get("Content-Type"))
		}
	}
	if code := status(t, base, req{}); code != http.StatusUnauthorized {
		t.Errorf("stream without token or cookie: %d, want 401", code)
	}
	if code := status(t, base, req{path: "/app/nope.js"}); code != http.StatusNotFound {
		t.Errorf("missing asset: %d, want 404", code)
	}
}

func TestCookieOnlySameOrigin(t *testing.T) {
	t.Parallel()
	base, _ := startRelay(t, testToken, fleetpage.Config{})
	l := loginCookie(t, base)
	other := loginCookie(t, base)
	c := l.cookie
	cases := []struct {
		name string
		r    req
		want int
	}{
		{"same origin", req{login: l, origin: base, site: "same-origin"}, http.StatusOK},
		{"same-origin GET without Origin", req{login: l, site: "same-origin"}, http.StatusOK},
		{"cookie and secret, neither Origin nor Sec-Fetch-Site", req{login: l}, http.StatusUnauthorized},
		{"cookie without its secret", req{cookie: c, origin: base, site: "same-origin"}, http.StatusUnauthorized},
		{"cookie with another login's secret", req{cookie: c, origin: base, site: "same-origin", header: map[string]string{fleetpage.BindHeader: other.secret}}, http.StatusUnauthorized},
		{"secret without the cookie", req{origin: base, site: "same-origin", header: map[string]string{fleetpage.BindHeader: l.secret}}, http.StatusUnauthorized},
		{"foreign Origin", req{login: l, origin: "http://evil.example"}, http.StatusUnauthorized},
		{"foreign port", req{login: l, origin: "http://127.0.0.1:1"}, http.StatusUnauthorized},
		{"cross-site fetch", req{login: l, site: "cross-site"}, http.StatusUnauthorized},
		{"same-site other origin", req{login: l, site: "same-site"}, http.StatusUnauthorized},
		{"null Origin", req{login: l, origin: "null"}, http.StatusUnauthorized},
		{"cookie does not open discovery", req{login: l, path: "/events", origin: base}, http.StatusUnauthorized},
		{"cookie does not open ingest", req{login: l, method: http.MethodPost, path: "/events", body: "{}", origin: base}, http.StatusUnauthorized},
		{"forged cookie", req{cookie: &http.Cookie{Name: cookieName(base), Value: "forged"}, origin: base, header: map[string]string{fleetpage.BindHeader: l.secret}}, http.StatusUnauthorized},
		{"the cookie under another server's name", req{cookie: &http.Cookie{Name: cookieName("http://127.0.0.1:1"), Value: c.Value}, origin: base, header: map[string]string{fleetpage.BindHeader: l.secret}}, http.StatusUnauthorized},
	}
	for _, tc := range cases {
		if got := status(t, base, tc.r); got != tc.want {
			t.Errorf("%s: %d, want %d", tc.name, got, tc.want)
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	dial := func(origin, auth string) error {
		h := http.Header{}
		if origin != "" {
			h.Set("Origin", origin)
		}
		h.Set("Cookie", c.Name+"="+c.Value)
		conn, res, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(base, "http")+"/socket", &websocket.DialOptions{HTTPHeader: h})
		if err != nil {
			if res != nil {
				return errors.New(res.Status)
			}
			return err
		}
		defer conn.CloseNow() //nolint:errcheck // test
		if err := conn.Write(ctx, websocket.MessageText, []byte(`{"type":"hello","versions":["0.1"],"role":"consumer","identity":{"agent":"t","instance":"t"},"capabilities":{}`+auth+`}`)); err != nil {
			return err
		}
		_, b, err := conn.Read(ctx)
		if err != nil {
			return err
		}
		if !bytes.Contains(b, []byte(`"hello"`)) {
			return errors.New("no hello: " + string(b))
		}
		return nil
	}
	withSecret := `,"auth":{"login":"` + l.secret + `"}`
	if err := dial(base, withSecret); err != nil {
		t.Errorf("socket from the page's origin with its login: %v", err)
	}
	for name, tc := range map[string]struct{ origin, auth string }{
		"foreign origin":                 {"http://evil.example", withSecret},
		"no Origin":                      {"", withSecret},
		"hello without the login":        {base, ""},
		"hello with another login":       {base, `,"auth":{"login":"` + other.secret + `"}`},
		"hello with a malformed auth":    {base, `,"auth":"` + l.secret + `"`},
		"hello with the cookie as login": {base, `,"auth":{"login":"` + c.Value + `"}`},
	} {
		if err := dial(tc.origin, tc.auth); err == nil {
			t.Errorf("socket with the cookie, %s: accepted", name)
		}
	}
}

// A browser that logs in again (another tab, with the login URL) keeps its
// login: the first tab's secret still opens the stream.
func TestLoginAgainKeepsTheLogin(t *testing.T) {
	t.Parallel()
	base, _ := startRelay(t, testToken, fleetpage.Config{})
	first := loginCookie(t, base)
	res := do(t, base, req{method: http.MethodPost, path: "/app/login", body: `{"token":"` + testToken + `"}`, origin: base, cookie: first.cookie})
	var body struct{ Login string }
	_ = json.NewDecoder(res.Body).Decode(&body)
	if res.StatusCode != http.StatusOK || body.Login != first.secret {
		t.Errorf("a second login with the cookie: %d, secret kept %v", res.StatusCode, body.Login == first.secret)
	}
	for _, c := range res.Cookies() {
		if c.Value != first.cookie.Value {
			t.Error("a second login replaced the browser's cookie")
		}
	}
	if code := status(t, base, req{login: first, origin: base}); code != http.StatusOK {
		t.Errorf("the first tab after the second login: %d", code)
	}
	// A wrong token with the cookie is still refused, and the cookie alone
	// logs nothing in.
	if code := status(t, base, req{method: http.MethodPost, path: "/app/login", body: `{"token":"nope"}`, origin: base, cookie: first.cookie}); code != http.StatusForbidden {
		t.Errorf("a wrong token with a live cookie: %d, want 403", code)
	}
}

func TestLoginRefusals(t *testing.T) {
	t.Parallel()
	base, _ := startRelay(t, testToken, fleetpage.Config{})
	cases := []struct {
		name string
		r    req
		want int
	}{
		{"wrong token", req{body: `{"token":"nope"}`, origin: base}, http.StatusForbidden},
		{"empty token", req{body: `{"token":"  "}`, origin: base}, http.StatusForbidden},
		{"not JSON", req{body: `token=x`, origin: base}, http.StatusBadRequest},
		{"foreign origin", req{body: `{"token":"` + testToken + `"}`, origin: "http://evil.example"}, http.StatusForbidden},
		{"GET", req{method: http.MethodGet, origin: base}, http.StatusMethodNotAllowed},
	}
	for _, tc := range cases {
		tc.r.path = "/app/login"
		if tc.r.method == "" {
			tc.r.method = http.MethodPost
		}
		res := do(t, base, tc.r)
		if res.StatusCode != tc.want {
			t.Errorf("%s: %d, want %d", tc.name, res.StatusCode, tc.want)
		}
		if len(res.Cookies()) != 0 {
			t.Errorf("%s: a refused login set a cookie", tc.name)
		}
		if !strings.Contains(res.Header.Get("Content-Type"), "json") {
			t.Errorf("%s: error body is not JSON", tc.name)
		}
	}
}

func TestLogout(t *testing.T) {
	t.Parallel()
	base, _ := startRelay(t, testToken, fleetpage.Config{})
	c := loginCookie(t, base)
	if code := status(t, base, req{login: c, origin: base}); code != http.StatusOK {
		t.Fatalf("before logout: %d", code)
	}
	if code := status(t, base, req{method: http.MethodPost, path: "/app/logout", login: c, origin: "http://evil.example"}); code != http.StatusForbidden {
		t.Errorf("logout from a foreign origin: %d, want 403", code)
	}
	// The cookie alone (a stolen one) clears itself but ends nothing.
	do(t, base, req{method: http.MethodPost, path: "/app/logout", cookie: c.cookie, origin: base})
	if code := status(t, base, req{login: c, origin: base}); code != http.StatusOK {
		t.Fatalf("a logout with the cookie alone ended the login: %d", code)
	}
	res := do(t, base, req{method: http.MethodPost, path: "/app/logout", login: c, origin: base})
	if res.StatusCode != http.StatusOK {
		t.Fatalf("logout: %d", res.StatusCode)
	}
	cleared := false
	for _, k := range res.Cookies() {
		cleared = cleared || (k.Name == cookieName(base) && k.MaxAge < 0)
	}
	if !cleared {
		t.Error("logout did not clear the cookie")
	}
	if code := status(t, base, req{login: c, origin: base}); code != http.StatusUnauthorized {
		t.Errorf("after logout the old cookie: %d, want 401", code)
	}
}

func TestLoginExpiresAndIsBounded(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	now := time.Now()
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	base, _ := startRelay(t, testToken, fleetpage.Config{SessionTTL: time.Hour, MaxLogins: 2, Now: clock})
	tick := func() { mu.Lock(); now = now.Add(time.Second); mu.Unlock() }
	first := loginCookie(t, base)
	tick()
	second := loginCookie(t, base)
	tick()
	third := loginCookie(t, base)
	if code := status(t, base, req{login: first, origin: base}); code != http.StatusUnauthorized {
		t.Errorf("login past MaxLogins kept the oldest: %d", code)
	}
	for _, c := range []*login{second, third} {
		if code := status(t, base, req{login: c, origin: base}); code != http.StatusOK {
			t.Errorf("recent login refused: %d", code)
		}
	}
	mu.Lock()
	now = now.Add(time.Hour + time.Second)
	mu.Unlock()
	if code := status(t, base, req{login: third, origin: base}); code != http.StatusUnauthorized {
		t.Errorf("expired login accepted: %d", code)
	}
}

func TestTokenNeverLogged(t *testing.T) {
	t.Parallel()
	base, logs := startRelay(t, testToken, fleetpage.Config{})
	c := loginCookie(t, base)
	status(t, base, req{login: c, origin: base})
	status(t, base, req{path: "/stream?live=0&access_token=" + testToken})
	do(t, base, req{method: http.MethodPost, path: "/app/login", body: `{"token":"` + testToken + `x"}`, origin: base})
	do(t, base, req{method: http.MethodPost, path: "/app/logout", login: c, origin: base})
	out := logs.String()
	if !strings.Contains(out, "fleet page login") {
		t.Fatalf("the log holds no login line (is debug logging on?):\n%s", out)
	}
	for _, secret := range []string{testToken, c.cookie.Value, c.secret} {
		if strings.Contains(out, secret) {
			t.Errorf("a secret reached the log:\n%s", out)
		}
	}
}

func TestWatchOnlyRelayNeedsNoLogin(t *testing.T) {
	t.Parallel()
	base, _ := startRelay(t, "", fleetpage.Config{})
	res := do(t, base, req{path: "/app/auth"})
	b, _ := io.ReadAll(res.Body)
	if !bytes.Contains(b, []byte(`"required":false`)) {
		t.Errorf("auth on a watch-only relay: %s", b)
	}
	if code := status(t, base, req{method: http.MethodPost, path: "/app/login", body: `{"token":"x"}`, origin: base}); code != http.StatusConflict {
		t.Errorf("login on a watch-only relay: %d, want 409", code)
	}
}

func TestLoginURL(t *testing.T) {
	t.Parallel()
	if got := fleetpage.LoginURL("http://127.0.0.1:8787", "a+b/c"); got != "http://127.0.0.1:8787/#token=a%2Bb%2Fc" {
		t.Errorf("LoginURL: %s", got)
	}
	if got := fleetpage.LoginURL("http://h:1/", ""); got != "http://h:1/" {
		t.Errorf("LoginURL without a token: %s", got)
	}
}

func TestLoginSurvivesRestartWithSameToken(t *testing.T) {
	t.Parallel()
	cfg := fleetpage.Config{LoginsFile: filepath.Join(t.TempDir(), "page-login.key")}
	first, _ := startRelay(t, testToken, cfg)
	c := loginCookie(t, first)
	again, _ := startRelay(t, testToken, cfg)
	// A browser keeps one cookie per host: the restarted relay, on another
	// port here, is handed it under its own name.
	moved := func(l *login, base string) *login {
		k := *l.cookie
		k.Name = cookieName(base)
		return &login{cookie: &k, secret: l.secret}
	}
	if code := status(t, again, req{login: moved(c, again), origin: again}); code != http.StatusOK {
		t.Errorf("a relay restarted with the same token refused the login: %d", code)
	}
	other, _ := startRelay(t, testToken+"-rotated", cfg)
	if code := status(t, other, req{login: moved(c, other), origin: other}); code != http.StatusUnauthorized {
		t.Errorf("a relay with a new token admitted the old login: %d", code)
	}
	tampered := moved(c, again)
	tampered.cookie.Value = c.cookie.Value[:len(c.cookie.Value)-2] + "AA"
	if code := status(t, again, req{login: tampered, origin: again}); code != http.StatusUnauthorized {
		t.Errorf("a tampered cookie: %d", code)
	}
}

// TestLogoutOutlivesRestart: a relay restarted with the same token and
// logins file takes back its logins, but not once one of them logged out.
func TestLogoutOutlivesRestart(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "home", "page-login.key")
	cfg := fleetpage.Config{LoginsFile: file}
	first, _ := startRelay(t, testToken, cfg)
	a, b := loginCookie(t, first), loginCookie(t, first)
	if st, err := os.Stat(file); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("logins file: %v %v, want mode 0600", st, err)
	}
	again, _ := startRelay(t, testToken, cfg)
	moved := func(l *login, base string) *login {
		k := *l.cookie
		k.Name = cookieName(base)
		return &login{cookie: &k, secret: l.secret}
	}
	if code := status(t, again, req{login: moved(a, again), origin: again}); code != http.StatusOK {
		t.Fatalf("a login after a restart: %d, want 200", code)
	}
	if code := status(t, again, req{method: http.MethodPost, path: "/app/logout", login: moved(a, again), origin: again}); code != http.StatusOK {
		t.Fatalf("logout: %d", code)
	}
	if code := status(t, again, req{login: moved(b, again), origin: again}); code != http.StatusUnauthorized {
		t.Errorf("another browser's login after logout: %d, want 401 (logout ends every login)", code)
	}
	restarted, _ := startRelay(t, testToken, cfg)
	for name, c := range map[string]*login{"logged out": a, "other": b} {
		if code := status(t, restarted, req{login: moved(c, restarted), origin: restarted}); code != http.StatusUnauthorized {
			t.Errorf("the %s cookie after logout and restart: %d, want 401", name, code)
		}
	}
	c := loginCookie(t, restarted)
	if code := status(t, restarted, req{login: c, origin: restarted}); code != http.StatusOK {
		t.Errorf("a fresh login after the restart: %d", code)
	}
	volatile, _ := startRelay(t, testToken, fleetpage.Config{})
	if code := status(t, volatile, req{login: moved(c, volatile), origin: volatile}); code != http.StatusUnauthorized {
		t.Errorf("a relay without a logins file took a login from another run: %d", code)
	}
}

// The login cookie is Secure, and the answer carries HSTS, when the browser
// came through a TLS-terminating proxy that says so, on a relay told a
// proxy fronts it (--behind-proxy); without that, the header is anyone's
// to forge and changes nothing.
func TestCookieSecureBehindTLSProxy(t *testing.T) {
	t.Parallel()
	for _, behind := range []bool{false, true} {
		base, _ := startRelayWith(t, testToken, fleetpage.Config{}, relay.Config{BehindProxy: behind})
		for _, tc := range []struct {
			proto string
			want  bool
		}{{"", false}, {"http", false}, {"https", true}, {" HTTPS ", true}, {"http, https", true}, {"https, http", false}} {
			// The browser's page is where the proxy said it was.
			origin := base
			if tc.want {
				origin = "https" + strings.TrimPrefix(base, "http")
			}
			tc.want = tc.want && behind
			res := do(t, base, req{method: http.MethodPost, path: "/app/login", body: `{"token":"` + testToken + `"}`,
				origin: origin, site: "same-origin", header: map[string]string{"X-Forwarded-Proto": tc.proto}})
			var got *http.Cookie
			for _, c := range res.Cookies() {
				if c.Name == cookieName(base) {
					got = c
				}
			}
			if got == nil || got.Secure != tc.want {
				t.Errorf("behind proxy %v, X-Forwarded-Proto %q: cookie %+v, want Secure %v", behind, tc.proto, got, tc.want)
			}
			if hsts := res.Header.Get("Strict-Transport-Security"); (hsts != "") != tc.want {
				t.Errorf("behind proxy %v, X-Forwarded-Proto %q: Strict-Transport-Security %q, want it %v", behind, tc.proto, hsts, tc.want)
			}
		}
	}
}

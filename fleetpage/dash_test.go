package fleetpage_test

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/aep-kimi/aep-kimi/aep"
	"github.com/aep-kimi/aep-kimi/fleetpage"
	"github.com/aep-kimi/aep-kimi/internal/httpguard"
	"github.com/aep-kimi/aep-kimi/internal/testkit/browsertest"
)

const dashToken = "dash-test-token-0123456789abcdef"

func startDash(t *testing.T, relays ...string) string {
	t.Helper()
	ups := make([]fleetpage.Upstream, len(relays))
	for i, r := range relays {
		ups[i] = fleetpage.Upstream{URL: r, Token: testToken}
	}
	h, err := fleetpage.NewDash(fleetpage.Config{Token: dashToken}, ups)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(httpguard.Hosts(nil)(h))
	t.Cleanup(srv.Close)
	return srv.URL
}

func TestDashRefusesWithoutLogin(t *testing.T) {
	t.Parallel()
	relayA, _ := startRelay(t, testToken, fleetpage.Config{})
	dash := startDash(t, relayA)
	if code := status(t, dash, req{path: "/r/0/stream?live=0&from=all"}); code != http.StatusUnauthorized {
		t.Errorf("dash stream without a login: %d, want 401", code)
	}
	if code := status(t, dash, req{path: "/r/7/stream"}); code != http.StatusNotFound {
		t.Errorf("no such relay: %d, want 404", code)
	}
	c := dashLogin(t, dash)
	if code := status(t, dash, req{path: "/r/0/stream?live=0&from=all", login: c, origin: dash}); code != http.StatusOK {
		t.Errorf("dash stream logged in: %d, want 200", code)
	}
	if code := status(t, dash, req{path: "/r/0/stream?live=0&from=all", login: c, origin: "http://evil.example"}); code != http.StatusUnauthorized {
		t.Errorf("dash stream from a foreign origin: %d, want 401", code)
	}
	if code := status(t, dash, req{path: "/r/0/stream?live=0&from=all", cookie: c.cookie, origin: dash}); code != http.StatusUnauthorized {
		t.Errorf("dash stream with the cookie alone: %d, want 401", code)
	}
	// The relay's own token does not log in to the dash.
	if code := status(t, dash, req{method: http.MethodPost, path: "/app/login", body: `{"token":"` + testToken + `"}`, origin: dash}); code != http.StatusForbidden {
		t.Errorf("dash login with a relay's token: %d, want 403", code)
	}
}

// TestBrowserDash reads two relays in one page: one session id on both is
// two sessions, each labelled with its relay, and an answer goes to the
// relay its request came from.
func TestBrowserDash(t *testing.T) {
	t.Parallel()
	b := browsertest.New(t, 1200, 900)
	relayA, _ := startRelay(t, testToken, fleetpage.Config{})
	relayB, _ := startRelay(t, testToken, fleetpage.Config{})
	emA, emB := dialEmitter(t, relayA), dialEmitter(t, relayB)
	held := aep.NewID()
	emA.send(emA.event("s1", "session.started", 0, map[string]any{"data": map[string]any{"label": "laptop work"}}))
	emB.send(emB.event("s1", "session.started", 0, map[string]any{"data": map[string]any{"label": "team work"}}),
		emB.event("s1", "attention.requested", -1, permission(held, "control")))
	dash := startDash(t, relayA, relayB)
	nameA, nameB := hostOf(t, relayA), hostOf(t, relayB)

	b.MustRun("open the dash", chromedp.Navigate(fleetpage.LoginURL(dash, dashToken)))
	b.WaitJS("both relays live", `document.getElementById('conn').dataset.conn === 'live'`)
	b.WaitJS("s1 from each relay", `document.querySelector('[data-session="s1"][data-relay=`+browsertest.Quote(nameA)+`]') && document.querySelector('[data-session="s1"][data-relay=`+browsertest.Quote(nameB)+`]')`)
	var text string
	b.Eval("row text", `document.querySelector('[data-session="s1"][data-relay=`+browsertest.Quote(nameB)+`]').textContent`, &text)
	if !strings.Contains(text, nameB) || !strings.Contains(text, "team work") {
		t.Errorf("relay B's row does not name its relay: %q", text)
	}
	b.WaitJS("relay B's held request, its roster read", `document.querySelector('`+sel("data-attention", held)+`[data-reach="ok"] [data-option]') !== null`)
	b.Click("click Deny", sel("data-attention", held)+` [data-option="deny"]`)
	cmd := emB.command()
	if cmd["subject"] != held || cmd["session"] != "s1" {
		t.Fatalf("relay B got %v", cmd)
	}
	cmdID, _ := cmd["id"].(string)
	emB.send(emB.event("s1", "control.accepted", -1, map[string]any{"cause": cmdID}),
		emB.event("s1", "attention.answered", -1, map[string]any{"subject": held, "data": map[string]any{"answer": map[string]any{"option": "deny"}}}))
	b.WaitJS("settled through the dash", `document.querySelector('`+sel("data-attention", held)+`') === null`)
}

// dashLogin logs in to the dash at base as its page does.
func dashLogin(t *testing.T, base string) *login {
	t.Helper()
	res := do(t, base, req{method: http.MethodPost, path: "/app/login", body: `{"token":"` + dashToken + `"}`, origin: base})
	b, _ := io.ReadAll(res.Body)
	var body struct {
		Login string `json:"login"`
	}
	_ = json.Unmarshal(b, &body)
	for _, k := range res.Cookies() {
		if k.Name == cookieName(base) && body.Login != "" {
			return &login{cookie: k, secret: body.Login}
		}
	}
	t.Fatalf("dash login: %d %s", res.StatusCode, b)
	return nil
}

func hostOf(t *testing.T, base string) string {
	t.Helper()
	host := strings.TrimPrefix(base, "http://")
	if _, _, err := net.SplitHostPort(host); err != nil {
		t.Fatal(err)
	}
	return host
}

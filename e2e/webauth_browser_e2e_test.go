// Page login in one real Chromium: cookies a page on another local port
// must not be able to use.

package e2e

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/coder/websocket"

	"github.com/aep-kimi/aep-kimi/aep"
	"github.com/aep-kimi/aep-kimi/fleetpage"
	"github.com/aep-kimi/aep-kimi/internal/testkit/browsertest"
	"github.com/aep-kimi/aep-kimi/internal/testkit/stacktest"
	"github.com/aep-kimi/aep-kimi/internal/testkit/stacktest/pagetest"
)

// In one Chromium: the relay's page logs in, a page on another 127.0.0.1
// port receives the login cookie (browsers do not scope cookies by port),
// and a plain client replaying it is refused, while the real page keeps
// working: live events, an answer reaching the emitter, a reload. A dash
// logged in beside it in the same browser does not log it out.
func TestE2EPageCookieOnOtherPort(t *testing.T) {
	t.Parallel()
	b := browsertest.New(t, 1200, 900)
	base, _, _, token := stacktest.TokenRelay(t)
	em := stacktest.OpenSocket(t, base, stacktest.Bearer(token), `{"type":"hello","versions":["0.1"],"role":"emitter","identity":{"agent":"kimi-code","instance":"e2e"},`+
		`"capabilities":{"control":{"accepts":["control.attention.respond"]}}}`)
	emit := func(evs ...string) {
		t.Helper()
		for _, ev := range evs {
			if err := em.C.Write(em.Ctx, websocket.MessageText, []byte(ev)); err != nil {
				t.Fatal(err)
			}
		}
	}
	held := aep.NewID()
	emit(stacktest.KimiEvent("s1", "session.started", 0, `,"data":{"title":"cookie test"}`),
		stacktest.KimiEvent("s1", "attention.requested", 1, `,"id":`+browsertest.Quote(held)+`,"subject":"Shell","data":{"kind":"permission","prompt":"Run Shell","options":[{"id":"allow","label":"Allow"},{"id":"deny","label":"Deny"}],"respond_via":["control"]}`))

	// Another local listener: it records every cookie the browser sends it.
	var mu sync.Mutex
	var sent []string
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		if c := r.Header.Get("Cookie"); c != "" {
			sent = append(sent, c)
		}
		mu.Unlock()
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, `<!doctype html><title>another port</title><p>hello</p>`)
	}))
	defer other.Close()

	b.MustRun("open the login URL", chromedp.Navigate(fleetpage.LoginURL(base, token)))
	b.WaitJS("the page is live", pagetest.PageIsLive)
	b.WaitJS("the held request's buttons", `document.querySelector('[data-attention=`+browsertest.Quote(held)+`] [data-option="deny"]') !== null`)

	b.MustRun("visit the other port", chromedp.Navigate(other.URL+"/"))
	mu.Lock()
	jar := strings.Join(sent, "; ")
	mu.Unlock()
	stolen := regexp.MustCompile(`(aep_fleet\w*)=([^;\s]+)`).FindStringSubmatch(jar)
	if stolen == nil {
		t.Fatalf("the page on the other port got no login cookie (it got %q): the attack this test replays needs it", jar)
	}
	h := http.Header{}
	h.Set("Cookie", stolen[1]+"="+stolen[2])
	if code := stacktest.StatusOf(t, base+"/stream?live=0&from=all", h); code != http.StatusUnauthorized {
		t.Errorf("the stolen cookie replayed by a plain client read /stream: %d, want 401", code)
	}
	h.Set("Origin", base)
	h.Set("Sec-Fetch-Site", "same-origin")
	if code := stacktest.StatusOf(t, base+"/stream?live=0&from=all", h); code != http.StatusUnauthorized {
		t.Errorf("the stolen cookie with forged browser headers read /stream: %d, want 401", code)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if c, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(base, "http")+"/socket", &websocket.DialOptions{HTTPHeader: h}); err == nil {
		_ = c.Write(ctx, websocket.MessageText, []byte(stacktest.ConsumerHello("")))
		if _, f, err := c.Read(ctx); err == nil && strings.Contains(string(f), `"hello"`) {
			t.Errorf("the stolen cookie opened the socket: %s", f)
		}
		c.CloseNow()
	}

	// Back on the relay's page in the same tab: still logged in (the tab
	// keeps its secret), live, and an answer reaches the emitter.
	b.MustRun("back to the relay", chromedp.Navigate(base+"/"))
	if !pagetest.Within(b, pagetest.PageIsLive, 20*time.Second) {
		t.Fatal("the relay's page is no longer live after a reload")
	}
	emit(stacktest.KimiEvent("s2", "session.started", 0, `,"data":{"title":"arrived live"}`))
	b.WaitJS("a live event on the page", `document.querySelector('[data-session="s2"]') !== null`)
	b.Click("click Deny", `[data-attention=`+browsertest.Quote(held)+`] [data-option="deny"]`)
	if f := em.Next(t, "control.attention.respond"); f == nil || f["subject"] != held {
		t.Fatalf("the page's answer did not reach the emitter: %v", f)
	}

	// A dash on this host, logged in in the same browser.
	dash, dashToken := stacktest.StartDash(t, base, token)
	b.MustRun("open the dash's login URL", chromedp.Navigate(fleetpage.LoginURL(dash, dashToken)))
	b.WaitJS("the dash is live", pagetest.PageIsLive)
	b.MustRun("back to the relay", chromedp.Navigate(base+"/"))
	if !pagetest.Within(b, pagetest.PageIsLive, 20*time.Second) {
		t.Error("logging in to the dash logged the relay's page out")
	}
	b.MustRun("the dash again", chromedp.Navigate(dash+"/"))
	if !pagetest.Within(b, pagetest.PageIsLive, 20*time.Second) {
		t.Error("the dash's page is no longer logged in")
	}
	b.MustRun("visit the other port again", chromedp.Navigate(other.URL+"/again"))
	mu.Lock()
	last := sent[len(sent)-1]
	mu.Unlock()
	if names := regexp.MustCompile(`aep_fleet\w*=`).FindAllString(last, -1); len(names) != 2 {
		t.Errorf("the browser holds %d login cookies for the relay and the dash (%v), want one each", len(names), names)
	}

	// A new tab has the cookie but not the tab's secret: it logs in
	// through the URL, as a first visit does.
	tab, closeTab := b.Tab()
	defer closeTab()
	tab.MustRun("open the relay's page", chromedp.Navigate(base+"/"))
	if err := tab.Within(`document.getElementById('conn').dataset.conn === 'login-needed'`, 20*time.Second); err != nil {
		t.Errorf("a new tab without the login URL: %v, want login-needed", err)
	}
	// Logging in there keeps the browser's login: the first tab stays in.
	tab.MustRun("the login URL", chromedp.Navigate("about:blank"), chromedp.Navigate(fleetpage.LoginURL(base, token)))
	if err := tab.Within(pagetest.PageIsLive, 20*time.Second); err != nil {
		t.Errorf("the new tab's login: %v", err)
	}
	b.MustRun("reload the first tab", chromedp.Navigate(base+"/"))
	if !pagetest.Within(b, pagetest.PageIsLive, 20*time.Second) {
		t.Error("a login in a second tab logged the first one out")
	}
}

package fleetpage_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/aep-kimi/aep-kimi/fleetpage"
	"github.com/aep-kimi/aep-kimi/internal/testkit/browsertest"
	"github.com/aep-kimi/aep-kimi/relay"
)

// noteRegister marks, on the page's clock, each registration of a service
// worker the page asks for.
const noteRegister = `(() => {
  const register = ServiceWorkerContainer.prototype.register;
  ServiceWorkerContainer.prototype.register = function (...args) {
    performance.mark('test: service worker registered');
    return register.apply(this, args);
  };
})()`

// firstRenderJS reads, on the page's clock, when the replay the first
// render draws ended and when each thing it does not draw was asked for.
const firstRenderJS = `(() => {
  const res = performance.getEntriesByType('resource');
  const path = (e) => new URL(e.name).pathname + new URL(e.name).search;
  const first = (p) => { const e = res.find((x) => path(x).startsWith(p)); return e ? e.startTime : -1; };
  const replay = res.find((e) => path(e).startsWith('/stream?live=0'));
  const sw = performance.getEntriesByName('test: service worker registered')[0];
  return { replayEnd: replay ? replay.responseEnd : -1, rules: first('/rules'), usage: first('/notify/usage'),
    sw: sw ? sw.startTime : -1, auth: res.filter((e) => path(e) === '/app/auth').length };
})()`

// In Chromium: the first render waits on nothing it does not draw. A page
// opened at the login URL asks for no login check of its own (the login's
// answer is one); the rules, the usage limits and the service worker's
// registration are asked for only once the replay the first render draws
// has ended, and they still are.
func TestBrowserFirstRenderWaitsOnNothingElse(t *testing.T) {
	b := browsertest.New(t, 1280, 900)
	rl := newRestartableRelay(t)
	em := dialEmitter(t, rl.base())
	em.send(em.event("s1", "session.started", 0, map[string]any{"data": map[string]any{"label": "fix the build"}}))
	b.MustRun("note the service worker's registration", chromedp.ActionFunc(func(ctx context.Context) error {
		_, err := page.AddScriptToEvaluateOnNewDocument(noteRegister).Do(ctx)
		return err
	}))
	b.MustRun("log in", chromedp.Navigate(fleetpage.LoginURL(rl.base(), testToken)))
	b.WaitJS("live, with the rules and the usage limits asked for and the service worker registered",
		`document.getElementById('conn').dataset.conn === 'live'
		  && performance.getEntriesByName('test: service worker registered').length > 0
		  && performance.getEntriesByType('resource').some((e) => new URL(e.name).pathname === '/rules')
		  && performance.getEntriesByType('resource').some((e) => new URL(e.name).pathname === '/notify/usage')`)
	var got struct {
		ReplayEnd, Rules, Usage, SW float64
		Auth                        int
	}
	b.Eval("when each was asked for", firstRenderJS, &got)
	if got.ReplayEnd <= 0 {
		t.Fatalf("no replay read: %+v", got)
	}
	if got.Auth != 0 {
		t.Errorf("the page asked /app/auth %d times after its login answered", got.Auth)
	}
	for _, c := range []struct {
		what string
		at   float64
	}{{"the rules", got.Rules}, {"the usage limits", got.Usage}, {"the service worker's registration", got.SW}} {
		if c.at < got.ReplayEnd {
			t.Errorf("%s asked for at %.1f ms, before the replay the first render draws ended (%.1f ms)", c.what, c.at, got.ReplayEnd)
		}
	}
}

// In Chromium: the page's socket opens while its modules still load.
// boot.js opens it once the login has answered, and the page takes it
// over when it connects. Here app.js is held back until a socket has been
// asked for: a page whose socket waited for its modules would never ask
// while app.js is held. The page then goes live on that socket.
func TestBrowserSocketOpensWhileModulesLoad(t *testing.T) {
	b := browsertest.New(t, 1280, 900)
	page, err := fleetpage.New(fleetpage.Config{Token: testToken, LoginsFile: filepath.Join(t.TempDir(), "page-login.key")})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := relay.NewServer(relay.Config{Token: testToken, Page: page, DrainTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	asked := make(chan struct{})
	var once sync.Once
	var earlySocket atomic.Bool
	h := srv.Handler()
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/socket":
			once.Do(func() { close(asked) })
		case "/app/app.js":
			select {
			case <-asked:
				earlySocket.Store(true)
			case <-time.After(10 * time.Second):
			case <-r.Context().Done():
			}
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(func() { ts.CloseClientConnections(); ts.Close() })
	b.MustRun("log in", chromedp.Navigate(fleetpage.LoginURL(ts.URL, testToken)))
	b.WaitJS("live", `document.getElementById('conn').dataset.conn === 'live'`)
	if !earlySocket.Load() {
		t.Fatal("no socket was asked for while app.js was held: the socket waits for the page's modules")
	}
}

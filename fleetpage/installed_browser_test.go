package fleetpage_test

import (
	"context"
	"testing"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/aep-kimi/aep-kimi/fleetpage"
	"github.com/aep-kimi/aep-kimi/internal/testkit/browsertest"
)

// secretIn reads whether the page's login secret is in each storage area.
const secretIn = `[sessionStorage.getItem('aep-fleet-login') !== null, localStorage.getItem('aep-fleet-login') !== null]`

// standalone answers the page's display-mode standalone query as an
// installed app's browser does, before the page's scripts run: Chromium
// does not emulate display-mode (Emulation.setEmulatedMedia leaves it
// "browser").
const standalone = `(() => {
  const mm = window.matchMedia.bind(window);
  window.matchMedia = (q) => {
    const l = mm(q);
    if (/display-mode:\s*standalone/.test(q)) Object.defineProperty(l, 'matches', { value: true });
    return l;
  };
})()`

// openAt opens a tab of b's browser at url, shown as an installed app or
// as a tab.
func openAt(t *testing.T, b *browsertest.Browser, url string, installed bool) (*browsertest.Browser, func()) {
	t.Helper()
	tab, closeTab := b.Tab()
	if installed {
		tab.MustRun("show the page as an installed app", chromedp.ActionFunc(func(ctx context.Context) error {
			_, err := page.AddScriptToEvaluateOnNewDocument(standalone).Do(ctx)
			return err
		}))
	}
	tab.MustRun("open "+url, chromedp.Navigate(url))
	var standalone bool
	tab.Eval("the display mode", `matchMedia('(display-mode: standalone)').matches`, &standalone)
	if standalone != installed {
		t.Fatalf("display-mode standalone matches %v, want %v", standalone, installed)
	}
	return tab, closeTab
}

// wantSecret checks where the page keeps its login secret.
func wantSecret(t *testing.T, tab *browsertest.Browser, what string, session, local bool) {
	t.Helper()
	var in []bool
	tab.Eval(what, secretIn, &in)
	if len(in) != 2 || in[0] != session || in[1] != local {
		t.Errorf("%s: secret in session storage, local storage = %v, want [%v %v]", what, in, session, local)
	}
}

// In Chromium: the page shown as an installed app and logged in with the
// login URL stays logged in when closed and opened again at its start URL
// (its socket streams what comes next), and a tab of the same browser
// neither takes that login up nor, not logged in or logging in itself,
// clears it; the login ending (a tab logs out) and logging out clear it, a
// new login clears another's, and a tab's login, as before, lasts only as
// long as the tab.
func TestBrowserInstalledKeepsLogin(t *testing.T) {
	b := browsertest.New(t, 360, 800)
	base, _ := startRelay(t, testToken, fleetpage.Config{})
	em := dialEmitter(t, base)
	em.send(em.event("s1", "session.started", 0, map[string]any{"data": map[string]any{"label": "fix the build"}}))
	const live = `document.getElementById('conn').dataset.conn === 'live'`
	const loginNeeded = `document.getElementById('conn').dataset.conn === 'login-needed' && !document.getElementById('login-form').hidden`

	app, closeApp := openAt(t, b, fleetpage.LoginURL(base, testToken), true)
	app.WaitJS("the installed page live", live+` && document.querySelector('#fleet [data-session="s1"]') !== null`)
	wantSecret(t, app, "logged in, installed", false, true)
	closeApp()

	app, closeApp = openAt(t, b, base+"/", true)
	app.WaitJS("the installed page live again without the login URL", live)
	em.send(em.event("s2", "session.started", 0, nil))
	app.WaitJS("the socket streams", `document.querySelector('#fleet [data-session="s2"]') !== null`)

	tab, closeTab := openAt(t, b, base+"/", false)
	tab.WaitJS("a tab needs its own login", loginNeeded)
	wantSecret(t, tab, "a tab beside the installed page", false, true)
	closeTab()
	// The tab logs in (the same browser: the relay keeps the login): the
	// installed page's secret stays.
	tab, closeTab = openAt(t, b, fleetpage.LoginURL(base, testToken), false)
	tab.WaitJS("the tab live", live)
	wantSecret(t, tab, "a tab logged in beside the installed page", true, true)
	wantSecret(t, app, "the installed page after a tab's login", false, true)

	// The tab logs out: the login ends for the installed page too, which
	// forgets it.
	tab.Click("log out in the tab", "#logout")
	app.WaitJS("the installed page told its login ended", `document.getElementById('conn').dataset.conn === 'login-needed' && document.getElementById('notice').textContent.includes('logged-out')`)
	wantSecret(t, app, "the installed page after its login ended", false, false)
	closeTab()
	closeApp()
	app, closeApp = openAt(t, b, base+"/", true)
	app.WaitJS("the installed page needs the login again", loginNeeded)

	// A new login leaves no other login's secret in either area; logging
	// out of it in the installed page clears it.
	app.MustRun("an old login's secret in session storage", chromedp.Evaluate(`sessionStorage.setItem('aep-fleet-login', 'old')`, nil),
		chromedp.Navigate("about:blank"), chromedp.Navigate(fleetpage.LoginURL(base, testToken)))
	app.WaitJS("the installed page live", live)
	wantSecret(t, app, "a new login", false, true)
	app.Click("log out", "#logout")
	app.WaitJS("logged out", `document.getElementById('conn').dataset.conn === 'login-needed'`)
	wantSecret(t, app, "logged out", false, false)
	closeApp()
	app, closeApp = openAt(t, b, base+"/", true)
	app.WaitJS("the installed page needs the login again", loginNeeded)
	closeApp()

	tab, closeTab = openAt(t, b, fleetpage.LoginURL(base, testToken), false)
	tab.WaitJS("the tab live", live)
	wantSecret(t, tab, "logged in, a tab", true, false)
	closeTab()
	tab, _ = openAt(t, b, base+"/", false)
	tab.WaitJS("a new tab needs the login again", loginNeeded)
}

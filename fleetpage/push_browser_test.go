package fleetpage_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/aep-kimi/aep-kimi/aep"
	"github.com/aep-kimi/aep-kimi/fleetpage"
	"github.com/aep-kimi/aep-kimi/internal/httpguard"
	"github.com/aep-kimi/aep-kimi/internal/testkit/browsertest"
	"github.com/aep-kimi/aep-kimi/internal/testkit/poll"
	"github.com/aep-kimi/aep-kimi/notify"
)

// answerLinks stands in for the relay's answer links on the page's own
// origin: each POST is recorded and answered with the status its token was
// given, and a JSON body with its code (the notifier's codes, so the
// service worker is held to them).
type answerLinks struct {
	mu     sync.Mutex
	status map[string]int
	code   map[string]string
	posts  []string
}

func (a *answerLinks) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	tok := strings.TrimPrefix(r.URL.Path, "/test-answer/")
	a.mu.Lock()
	defer a.mu.Unlock()
	if r.Method != http.MethodPost {
		http.Error(w, "POST answers", http.StatusMethodNotAllowed)
		return
	}
	a.posts = append(a.posts, tok)
	st := a.status[tok]
	if st == 0 {
		st = http.StatusNotFound
	}
	body := map[string]any{}
	if c := a.code[tok]; c != "" {
		body = map[string]any{"code": c, "error": c, "detail": "words"}
	}
	httpguard.WriteJSON(w, st, body)
}

func (a *answerLinks) set(tok string, status int, code string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.status[tok] = status
	a.code[tok] = code
}

func (a *answerLinks) posted() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.posts...)
}

// pushPage is the page in Chromium with its service worker running, behind
// a front that serves test answer links on the page's origin.
type pushPage struct {
	*browsertest.Push
	b      *browsertest.Browser
	origin string
	links  *answerLinks
}

func newPushPage(t *testing.T, width, height int) (*pushPage, *emitter) {
	// A browser of its own: Chromium never finds a page installable in a
	// context off the record, as New's are.
	b := browsertest.NewOwn(t, width, height)
	base, _ := startRelay(t, testToken, fleetpage.Config{})
	target, _ := url.Parse(base)
	links := &answerLinks{status: map[string]int{}, code: map[string]string{}}
	mux := http.NewServeMux()
	mux.Handle("/test-answer/", links)
	mux.Handle("/", httputil.NewSingleHostReverseProxy(target))
	front := httptest.NewServer(mux)
	t.Cleanup(front.Close)
	p := &pushPage{Push: b.EnablePush(front.URL), b: b, origin: front.URL, links: links}
	b.MustRun("log in", chromedp.Navigate(fleetpage.LoginURL(front.URL, testToken)))
	p.Ready()
	return p, dialEmitter(t, base)
}

// requestPush is the payload the relay pushes for a held request (the Web
// Push API's), its answer links on the page's origin.
func (p *pushPage) requestPush(tag, session, id, title string, links ...string) map[string]any {
	answers := []any{}
	for i, opt := range []string{"allow", "deny"} {
		answers = append(answers, map[string]any{"option": opt, "label": strings.ToUpper(opt[:1]) + opt[1:], "url": p.origin + "/test-answer/" + links[i]})
	}
	return map[string]any{"v": 1, "tag": tag, "title": title, "body": "fix the build · runs anyway in 45s",
		"open": p.origin + "/?" + url.Values{"session": {session}, "request": {id}}.Encode(), "close": false, "answers": answers}
}

// In Chromium at phone width: the page installs (Chrome finds no
// installability error in its manifest, icons and worker) and its service
// worker controls it; a push shows a notification with the request's
// answers as actions; a later push with the same tag and close replaces it
// without actions; an action POSTs its answer link and the notification
// becomes the outcome (Denied, Already answered on 409, Refused by the
// agent, Sent but not yet confirmed on 202, Too late on 410), and one the
// relay could not deliver keeps its actions; a
// tap on the notification shows the open page the request, scrolled to and
// marked; the link to a request no longer waiting opens its session.
func TestBrowserPush(t *testing.T) {
	p, em := newPushPage(t, 360, 800)
	var errs []*page.InstallabilityError
	var manifestErrs []*page.AppManifestError
	p.b.MustRun("installability", chromedp.ActionFunc(func(ctx context.Context) error {
		var err error
		if errs, err = page.GetInstallabilityErrors().Do(ctx); err != nil {
			return err
		}
		_, manifestErrs, _, _, err = page.GetAppManifest().Do(ctx)
		return err
	}))
	for _, e := range errs {
		t.Errorf("not installable: %s %v", e.ErrorID, e.ErrorArguments)
	}
	for _, e := range manifestErrs {
		t.Errorf("manifest: %s (line %d)", e.Message, e.Line)
	}

	held, settled := aep.NewID(), aep.NewID()
	em.send(
		em.event("s1", "session.started", 0, map[string]any{"data": map[string]any{"label": "fix the build"}}),
		em.event("s2", "session.started", 0, map[string]any{"data": map[string]any{"label": "write the docs"}}),
	)
	// Enough sessions that the request sits below the fold at 360 px.
	for i := range 12 {
		em.send(em.event("f"+strconv.Itoa(i), "session.started", 0, map[string]any{"data": map[string]any{"label": "filler " + strconv.Itoa(i)}}))
	}
	for range 6 {
		em.send(em.event("s1", "attention.requested", -1, permission(aep.NewID(), "control")))
	}
	em.send(
		em.event("s1", "attention.requested", -1, permission(held, "control")),
		em.event("s2", "attention.requested", -1, permission(settled, "control")),
		em.event("s2", "attention.answered", -1, map[string]any{"subject": settled, "data": map[string]any{"answer": map[string]any{"option": "deny"}, "via": "control"}}),
	)

	p.DeliverJSON(p.requestPush("req-1", "s1", held, "Shell: rm -rf build/", "allow-1", "deny-1"))
	n := p.Notification("for the request", func(n browsertest.Notification) bool { return n.Tag == "req-1" })
	if n.Title != "Shell: rm -rf build/" || n.Body != "fix the build · runs anyway in 45s" || !n.Renotify || !n.RequireInteraction || n.Silent {
		t.Errorf("the request's notification: %+v", n)
	}
	if len(n.Actions) != 2 || n.Actions[0].Title != "Allow" || n.Actions[1].Title != "Deny" || n.Actions[1].Action != "answer:1" {
		t.Errorf("actions %+v, want Allow and Deny", n.Actions)
	}
	if n.Data.Open != p.origin+"/?request="+held+"&session=s1" || len(n.Data.Answers) != 2 {
		t.Errorf("data %+v", n.Data)
	}

	// A tap on the notification itself answers nothing and shows the open
	// page the request.
	p.Tap("req-1", "")
	p.b.WaitJS("the linked request marked", `document.querySelector('`+sel("data-attention", held)+`')?.dataset.linked === ''`)
	var inView bool
	p.b.Eval("in view", `(() => { const r = document.querySelector('`+sel("data-attention", held)+`').getBoundingClientRect(); return location.hash === '#/request/s1/`+held+`' && r.top >= 0 && r.bottom <= innerHeight; })()`, &inView)
	if !inView {
		t.Error("the linked request is not in view at 360 px, or the page's address does not name it")
	}
	if got := p.links.posted(); len(got) != 0 {
		t.Fatalf("a tap without an action answered: %v", got)
	}

	// The request is over elsewhere: same tag, close, no actions.
	p.DeliverJSON(map[string]any{"v": 1, "tag": "req-1", "title": "Answered elsewhere", "body": "Shell: rm -rf build/", "close": true,
		"open": p.origin + "/?request=" + held + "&session=s1"})
	n = p.Notification("replaced", func(n browsertest.Notification) bool { return n.Tag == "req-1" && n.Title == "Answered elsewhere" })
	if len(n.Actions) != 0 || n.Renotify || !n.Silent {
		t.Errorf("the closing update: %+v", n)
	}
	if got := p.Shown("req-1"); len(got) != 1 {
		t.Errorf("notifications tagged req-1: %+v, want the one replaced", got)
	}

	// Actions: each POSTs its link once; the reply becomes the notification.
	for i, c := range []struct {
		status int
		code   string
		action string
		want   string
	}{
		{http.StatusOK, "", "answer:1", "Denied"}, {http.StatusOK, "", "answer:0", "Allowed"},
		{http.StatusConflict, notify.CodeAnswerUsed, "answer:1", "Already answered"},
		{http.StatusConflict, notify.CodeAnswerRefused, "answer:0", "Refused by the agent"},
		{http.StatusAccepted, notify.CodeAnswerUnconfirmed, "answer:0", "Sent, not yet confirmed"},
		{http.StatusGone, notify.CodeAnswerExpired, "answer:0", "Too late"},
	} {
		tag, a, d := "req-a"+strconv.Itoa(i), "allow-a"+strconv.Itoa(i), "deny-a"+strconv.Itoa(i)
		chosen := map[string]string{"answer:0": a, "answer:1": d}[c.action]
		p.links.set(chosen, c.status, c.code)
		p.DeliverJSON(p.requestPush(tag, "s1", held, "Shell: rm -rf build/", a, d))
		p.Notification("for "+tag, func(n browsertest.Notification) bool { return n.Tag == tag && len(n.Actions) == 2 })
		before := len(p.links.posted())
		res := p.Tap(tag, c.action)
		if res.Status != c.status || res.Title != c.want {
			t.Errorf("%s on %s answered %d: %+v, want %q", c.action, tag, c.status, res, c.want)
		}
		got := p.Notification("with the outcome of "+tag, func(n browsertest.Notification) bool { return n.Tag == tag && n.Title == c.want })
		if len(got.Actions) != 0 || got.Body != "Shell: rm -rf build/" {
			t.Errorf("the outcome of %s: %+v", tag, got)
		}
		if posts := p.links.posted()[before:]; len(posts) != 1 || posts[0] != chosen {
			t.Errorf("%s POSTed %v, want [%s]", c.action, posts, chosen)
		}
	}

	// Not delivered: the link is unspent, so the request keeps its actions.
	p.links.set("allow-u", http.StatusServiceUnavailable, notify.CodeAnswerFailed)
	p.DeliverJSON(p.requestPush("req-u", "s1", held, "Shell: rm -rf build/", "allow-u", "deny-u"))
	p.Notification("for req-u", func(n browsertest.Notification) bool { return n.Tag == "req-u" && len(n.Actions) == 2 })
	if res := p.Tap("req-u", "answer:0"); res.Status != http.StatusServiceUnavailable {
		t.Errorf("undelivered answer: %+v", res)
	}
	p.Notification("req-u again, with its actions", func(n browsertest.Notification) bool {
		return n.Tag == "req-u" && len(n.Actions) == 2 && strings.HasPrefix(n.Body, "Not sent: the relay could not deliver it")
	})

	// The link to a request no longer waiting opens its session.
	p.b.MustRun("open the settled request's link", chromedp.Evaluate(`location.hash = '#/request/s2/`+settled+`'`, nil))
	p.b.WaitJS("its session open", `!document.getElementById('session-pane').hidden && document.getElementById('session-title').textContent.includes('write the docs')`)
}

// In Chromium: a page opened without the login URL (an installed page
// opens at its start URL) offers a field for it; a paste that is not one
// is refused in words; the login URL pasted logs in, and the token leaves
// the address.
func TestBrowserPasteLogin(t *testing.T) {
	b := browsertest.New(t, 360, 800)
	base, _ := startRelay(t, testToken, fleetpage.Config{})
	b.MustRun("open the start URL", chromedp.Navigate(base+"/"))
	b.WaitJS("the login field", `!document.getElementById('login-form').hidden && document.getElementById('conn').dataset.conn === 'login-needed'`)
	b.MustRun("paste a wrong URL", chromedp.SetValue("#login-url", base+"/", chromedp.ByID))
	b.Click("log in", "#login-form button")
	b.WaitJS("the refusal", `document.getElementById('notice').textContent.includes('not a login URL')`)
	b.MustRun("paste the login URL", chromedp.SetValue("#login-url", fleetpage.LoginURL(base, testToken), chromedp.ByID))
	b.Click("log in", "#login-form button")
	// The page reloads to log in: a read during the reload finds no page.
	if !poll.Until(browsertest.Wait, func() bool {
		var live bool
		err := b.Run(chromedp.Evaluate(`document.getElementById('conn').dataset.conn === 'live' && document.getElementById('login-form').hidden`, &live))
		return err == nil && live
	}) {
		t.Fatal("the pasted login URL did not log in")
	}
	var href string
	b.Eval("the address", `location.href`, &href)
	if strings.Contains(href, testToken) {
		t.Fatalf("the token stayed in the address: %s", href)
	}
}

// In Chromium dressed as Safari on an iPhone, in a tab (no Push API, as
// iOS gives a page not installed): the notifications pane says to install
// the page first and offers no button that cannot work.
func TestBrowserNotifyNeedsInstallOnIOS(t *testing.T) {
	b := browsertest.New(t, 390, 844)
	base, _ := startRelay(t, testToken, fleetpage.Config{})
	const iPhone = "Mozilla/5.0 (iPhone; CPU iPhone OS 17_4 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.4 Mobile/15E148 Safari/604.1"
	b.MustRun("an iPhone's Safari tab", emulation.SetUserAgentOverride(iPhone), chromedp.ActionFunc(func(ctx context.Context) error {
		_, err := page.AddScriptToEvaluateOnNewDocument(`delete window.PushManager`).Do(ctx)
		return err
	}))
	b.MustRun("log in", chromedp.Navigate(fleetpage.LoginURL(base, testToken)))
	b.WaitJS("live", `document.getElementById('conn').dataset.conn === 'live'`)
	b.Click("the notifications pane", "#notify-toggle")
	// This relay has no notifier: the failed device list is said after the
	// install note, not in its place.
	b.WaitJS("the iOS note", `document.getElementById('notify-note').textContent.includes('does not send notifications') && document.getElementById('notify-on').disabled`)
	var note string
	b.Eval("the note", `document.getElementById('notify-note').textContent`, &note)
	if !strings.Contains(note, "Add to Home Screen") {
		t.Errorf("the note %q lost the install advice", note)
	}
	var device string
	b.Eval("the device's name", `document.getElementById('notify-device').placeholder`, &device)
	if device != "Safari on iPhone" {
		t.Errorf("device named %q, want Safari on iPhone", device)
	}
}

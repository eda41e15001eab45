package browsertest

import (
	"context"
	"encoding/json"
	"strings"
	"time"

	"github.com/aep-kimi/aep-kimi/internal/testkit/poll"
	"github.com/chromedp/cdproto/browser"
	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/cdproto/serviceworker"
	"github.com/chromedp/cdproto/target"
	"github.com/chromedp/chromedp"
)

// pollNotifications paces the reads of the shown notifications: each read
// makes Chromium reconcile the notifications it stored with those shown,
// which under load can drop one that is still being shown.
const pollNotifications = 500 * time.Millisecond

// Push drives the fleet page's service worker at one origin the way a push
// service and a person's taps would: a push delivered over the DevTools
// protocol, the notifications the worker shows, and the worker's own click
// handler run on one of them.
type Push struct {
	b      *Browser
	origin string
	regs   chan serviceworker.RegistrationID
	regID  serviceworker.RegistrationID
}

// Notification is one notification the worker shows.
type Notification struct {
	Title, Body, Tag string
	Actions          []struct{ Action, Title string }
	Data             struct {
		Open    string
		Answers []struct{ Option, Label, URL string }
	}
	Renotify, Silent, RequireInteraction bool
}

// Tapped is what the worker's click handler did: the answer link's HTTP
// status (0: none was posted) and the outcome it shows.
type Tapped struct {
	Status int
	Title  string
}

// EnablePush grants origin notifications and watches for its service worker;
// call it before the page loads, then Ready once it has.
func (b *Browser) EnablePush(origin string) *Push {
	b.t.Helper()
	p := &Push{b: b, origin: strings.TrimSuffix(origin, "/"), regs: make(chan serviceworker.RegistrationID, 8)}
	chromedp.ListenTarget(b.Ctx, func(ev any) {
		if e, ok := ev.(*serviceworker.EventWorkerRegistrationUpdated); ok {
			for _, r := range e.Registrations {
				if strings.HasPrefix(r.ScopeURL, p.origin+"/") && !r.IsDeleted {
					select {
					case p.regs <- r.RegistrationID:
					default:
					}
				}
			}
		}
	})
	b.MustRun("grant notifications", serviceworker.Enable(),
		browser.GrantPermissions([]browser.PermissionType{browser.PermissionTypeNotifications}).
			WithOrigin(p.origin).WithBrowserContextID(b.bctx))
	return p
}

// Ready waits until the page's service worker controls the page.
func (p *Push) Ready() {
	p.b.t.Helper()
	p.b.WaitJS("the service worker controls the page", `navigator.serviceWorker.controller !== null`)
	select {
	case p.regID = <-p.regs:
	case <-time.After(Wait):
		p.b.t.Fatal("no service worker registration reported")
	}
}

// Deliver hands the worker a push message carrying payload (its plaintext:
// the push service has decrypted it), as the browser's push service would.
func (p *Push) Deliver(payload []byte) {
	p.b.t.Helper()
	p.b.MustRun("deliver a push", serviceworker.DeliverPushMessage(p.origin, p.regID, string(payload)))
}

// DeliverJSON delivers v as JSON.
func (p *Push) DeliverJSON(v any) {
	p.b.t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		p.b.t.Fatal(err)
	}
	p.Deliver(b)
}

const notificationsJS = `navigator.serviceWorker.ready.then(r => r.getNotifications(%s)).then(ns => ns.map(n => ({
  title: n.title, body: n.body, tag: n.tag, actions: n.actions.map(a => ({action: a.action, title: a.title})),
  data: n.data, renotify: n.renotify, silent: n.silent, requireInteraction: n.requireInteraction })))`

// Shown returns the notifications shown now, those tagged tag when tag is
// not empty.
func (p *Push) Shown(tag string) []Notification {
	p.b.t.Helper()
	filter := ""
	if tag != "" {
		filter = "{tag: " + Quote(tag) + "}"
	}
	var ns []Notification
	ctx, cancel := context.WithTimeout(p.b.Ctx, 10*time.Second)
	defer cancel()
	if err := Await(ctx, strings.Replace(notificationsJS, "%s", filter, 1), &ns); err != nil {
		p.b.t.Fatalf("notifications: %v", err)
	}
	return ns
}

// Notification waits until the worker shows a notification that satisfies
// ok, and returns it.
func (p *Push) Notification(what string, ok func(Notification) bool) Notification {
	p.b.t.Helper()
	var found Notification
	var ns []Notification
	read := false
	if !poll.Every(Wait, pollNotifications, func() bool {
		// The first read waits a pace too: read at once, it can meet the
		// notification while Chromium is still showing it, and drop it.
		if !read {
			read = true
			return false
		}
		ns = p.Shown("")
		for _, n := range ns {
			if ok(n) {
				found = n
				return true
			}
		}
		return false
	}) {
		p.b.t.Fatalf("no notification %s; shown: %+v", what, ns)
	}
	return found
}

// Tap runs the worker's click handler on the notification tagged tag, with
// action ("" taps the notification itself): what a person's tap runs. The
// DevTools protocol has no notification click, so the test calls the
// function the worker's notificationclick listener calls, in the worker.
func (p *Push) Tap(tag, action string) Tapped {
	p.b.t.Helper()
	sw, done := p.worker()
	defer done()
	var res Tapped
	expr := `self.registration.getNotifications({tag: ` + Quote(tag) + `}).then(ns => {
	  if (!ns.length) throw new Error('no notification tagged ' + ` + Quote(tag) + `);
	  return self.aepPush.handleClick(ns[0], ` + Quote(action) + `);
	})`
	ctx, cancel := context.WithTimeout(sw, Wait)
	defer cancel()
	if err := Await(ctx, expr, &res); err != nil {
		p.b.t.Fatalf("tap %q on %s: %v", action, tag, err)
	}
	return res
}

// worker is a DevTools session in the page's service worker, until done.
// While a session is attached, Chromium shows no notification for a push
// delivered to the worker, so each tap attaches for itself and detaches
// after; the chromedp context (which would close the worker's target when
// cancelled) ends with the browser.
func (p *Push) worker() (ctx context.Context, done func()) {
	p.b.t.Helper()
	var infos []*target.Info
	p.b.MustRun("targets", chromedp.ActionFunc(func(ctx context.Context) error {
		var err error
		infos, err = target.GetTargets().Do(ctx)
		return err
	}))
	for _, ti := range infos {
		if ti.Type != "service_worker" || !strings.HasPrefix(ti.URL, p.origin+"/") {
			continue
		}
		ctx, _ := chromedp.NewContext(p.b.Ctx, chromedp.WithTargetID(ti.TargetID))
		if err := chromedp.Run(ctx); err != nil {
			p.b.t.Fatalf("attach to the service worker: %v", err)
		}
		c := chromedp.FromContext(ctx)
		return ctx, func() {
			err := target.DetachFromTarget().WithSessionID(c.Target.SessionID).Do(cdp.WithExecutor(p.b.Ctx, c.Browser))
			if err != nil {
				p.b.t.Fatalf("detach from the service worker: %v", err)
			}
		}
	}
	p.b.t.Fatalf("no service worker target among %d", len(infos))
	return nil, nil
}

// Await evaluates a promise-valued expression in ctx into out.
func Await(ctx context.Context, expr string, out any) error {
	return chromedp.Run(ctx, chromedp.Evaluate(expr, out, func(p *runtime.EvaluateParams) *runtime.EvaluateParams {
		return p.WithAwaitPromise(true)
	}))
}

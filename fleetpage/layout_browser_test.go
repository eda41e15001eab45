package fleetpage_test

import (
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"

	"github.com/aep-kimi/aep-kimi/aep"
	"github.com/aep-kimi/aep-kimi/fleetpage"
	"github.com/aep-kimi/aep-kimi/internal/testkit/browsertest"
)

// contrastJS is the worst WCAG contrast ratio of the page's text colours
// (every state colour and the muted grey) against its two backgrounds, in
// the scheme in force, with the pair that gives it.
const contrastJS = `(() => {
  const rgb = (v, prop) => { const p = document.createElement('span'); p.style[prop] = v; document.body.append(p);
    const c = getComputedStyle(p)[prop]; p.remove(); return c.match(/[\d.]+/g).slice(0, 3).map(Number); };
  const lum = ([r, g, b]) => { const f = (c) => { c /= 255; return c <= 0.03928 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4; };
    return 0.2126 * f(r) + 0.7152 * f(g) + 0.0722 * f(b); };
  const ratio = (a, b) => { const [x, y] = [lum(a), lum(b)].sort((m, n) => n - m); return (x + 0.05) / (y + 0.05); };
  let worst = { ratio: 99, pair: '' };
  for (const fg of ['--fg', '--muted', '--c-waiting', '--c-running', '--c-ok', '--c-failed', '--c-denied', '--c-ended']) {
    for (const bg of ['--bg', '--card', '--selected']) {
      const r = ratio(rgb('var(' + fg + ')', 'color'), rgb('var(' + bg + ')', 'backgroundColor'));
      if (r < worst.ratio) worst = { ratio: r, pair: fg + ' on ' + bg };
    }
  }
  return worst;
})()`

// rectJS is the bounding box of the element a selector names.
func rectJS(sel string) string {
	return `(() => { const r = document.querySelector(` + browsertest.Quote(sel) + `).getBoundingClientRect(); return { left: r.left, right: r.right, top: r.top, bottom: r.bottom, width: r.width, height: r.height }; })()`
}

// heldGate is the adapter's held request in run, as the gate words it:
// its four options, a deadline, denied at zero.
func heldGate(id, run string, expires time.Time) map[string]any {
	ask := permission(id, "control")
	ask["run"] = run
	d := ask["data"].(map[string]any)
	d["options"] = []any{map[string]any{"id": "allow", "label": "Allow"}, map[string]any{"id": "allow_session", "label": "Allow for this session"},
		map[string]any{"id": "deny", "label": "Deny"}, map[string]any{"id": "cancel", "label": "Cancel"}}
	d["expires_at"] = aep.FormatTime(expires)
	d["x-kimi-code-on-expiry"] = "deny"
	return ask
}

type box struct{ Left, Right, Top, Bottom, Width, Height float64 }

// In Chromium, the layout for the job: at 1280 px the open session sits
// beside the list (not below it) with its row highlighted; every age, wait
// and countdown ticks in place each second with what happens at zero; the
// answer buttons (the gate's four and the page's cancel) share one row, at
// 1280 px and at 360 px, no word broken; an answer leaves a trace; at 360 px the
// session covers the list and its back control returns to it; touch
// screens get no keyboard hint; both schemes keep text at WCAG AA.
func TestBrowserLayout(t *testing.T) {
	b := browsertest.New(t, 1280, 900)
	rl := newRestartableRelay(t)
	em := dialEmitter(t, rl.base())
	held := aep.NewID()
	ask := heldGate(held, "r1", time.Now().Add(90*time.Second))
	em.send(
		em.event("s1", "session.started", 0, map[string]any{"data": map[string]any{"label": "fix the build"}}),
		em.event("s1", "run.started", -1, map[string]any{"run": "r1"}),
		em.event("s1", "attention.requested", -1, ask),
		em.event("s2", "session.started", 0, map[string]any{"data": map[string]any{"label": "write the docs"}}),
		em.event("s2", "run.started", -1, map[string]any{"run": "r2"}),
	)
	b.MustRun("log in", chromedp.Navigate(fleetpage.LoginURL(rl.base(), testToken)))
	item := sel("data-attention", held)
	b.WaitJS("the held request, its cancel offered", `document.querySelector('`+item+` [data-cancel]') !== null`)

	// Time ticks: the countdown says what happens at zero and changes
	// within 2 s, the wait and a fleet row's age too, none redrawn.
	b.MustRun("note the time texts", chromedp.Evaluate(`window.__t = {
	  item: document.querySelector('`+item+`'), cd: document.querySelector('`+item+` [data-countdown]').textContent,
	  wait: document.querySelector('`+item+` [data-since]').textContent,
	  row: document.querySelector('#fleet [data-session="s2"]'), age: document.querySelector('#fleet [data-session="s2"] [data-since]').textContent }`, nil))
	var cd string
	b.Eval("the countdown", `window.__t.cd`, &cd)
	if !strings.HasPrefix(cd, " · denied in 1m") {
		t.Errorf("countdown %q, want what happens at zero (denied in 1m..s)", cd)
	}
	var ticked bool
	b.MustRun("the countdown, the wait and the row's age tick within 2 s", chromedp.Sleep(2100*time.Millisecond), chromedp.Evaluate(`
	  document.querySelector('`+item+`') === window.__t.item && document.querySelector('#fleet [data-session="s2"]') === window.__t.row
	  && window.__t.item.querySelector('[data-countdown]').textContent !== window.__t.cd
	  && window.__t.item.querySelector('[data-since]').textContent !== window.__t.wait
	  && window.__t.row.querySelector('[data-since]').textContent !== window.__t.age`, &ticked))
	if !ticked {
		var now string
		b.Eval("the texts now", `JSON.stringify([window.__t.item.querySelector('[data-countdown]').textContent, window.__t.item.querySelector('[data-since]').textContent, window.__t.row.querySelector('[data-since]').textContent, window.__t])`, &now)
		t.Errorf("within 2 s the time texts did not all change in place: %s", now)
	}

	// The answers sit on one row, the cancel with them.
	sameRow := `(() => { const bs = [...document.querySelectorAll('` + item + ` [data-option], ` + item + ` [data-cancel]')], edge = document.querySelector('` + item + `').getBoundingClientRect().right;
	  const tops = bs.map(b => Math.round(b.getBoundingClientRect().top));
	  return bs.length === 5 && tops.every(t => t === tops[0]) && bs.every(b => b.getBoundingClientRect().right <= edge && b.scrollWidth <= b.clientWidth
	    && b.textContent.split(' ').every((w) => { const i = b.textContent.indexOf(w), r = document.createRange(); r.setStart(b.firstChild, i); r.setEnd(b.firstChild, i + w.length); return r.getClientRects().length === 1; })); })()`
	var one bool
	b.Eval("the answer buttons' rows", sameRow, &one)
	if !one {
		t.Error("at 1280 px the answer buttons do not sit on one row")
	}

	// Wide: the session opens beside the list, its row highlighted.
	b.Click("open s1", `#fleet [data-session="s1"] button`)
	b.WaitJS("the session view", `document.getElementById('session-pane').dataset.session === 's1'`)
	var list, detail box
	b.Eval("the list's box", rectJS("#fleet"), &list)
	b.Eval("the detail's box", rectJS("[data-detail]"), &detail)
	if detail.Left < list.Right || detail.Top > list.Top+list.Height/2 {
		t.Errorf("at 1280 px the session is not beside the list: list %+v, detail %+v", list, detail)
	}
	if detail.Width < 600 {
		t.Errorf("at 1280 px the session view is %v px wide: the desktop's space goes unused", detail.Width)
	}
	var hl struct {
		Current   string
		Bg, Other string
	}
	b.Eval("the selection", `({ current: document.querySelector('#fleet [data-session="s1"] button').getAttribute('aria-current'),
	  bg: getComputedStyle(document.querySelector('#fleet [data-session="s1"] button')).backgroundColor,
	  other: getComputedStyle(document.querySelector('#fleet [data-session="s2"] button')).backgroundColor })`, &hl)
	if hl.Current != "true" || hl.Bg == hl.Other {
		t.Errorf("the selected row is not highlighted: %+v", hl)
	}

	// An answer leaves a trace where the request was.
	b.Click("deny", item+" "+sel("data-option", "deny"))
	c := em.command()
	cmdID, _ := c["id"].(string)
	em.send(em.event("s1", "attention.answered", -1, map[string]any{"subject": held, "cause": cmdID, "data": map[string]any{"answer": map[string]any{"option": "deny"}, "via": "control"}}))
	b.WaitJS("the request leaves, its trace says who denied it", `document.querySelector('`+item+`') === null && /^Denied by owner from the page, /.test((document.querySelector('`+sel("data-answered", held)+`')||{}).textContent)`)

	// Nobody answers a request that runs anyway at zero: at zero it leaves
	// the inbox and its trace says what happened.
	lapsed := aep.NewID()
	lapse := heldGate(lapsed, "r2", time.Now().Add(2*time.Second))
	lapse["data"].(map[string]any)["x-kimi-code-on-expiry"] = "allow"
	em.send(em.event("s2", "attention.requested", -1, lapse))
	b.WaitJS("the lapsing request's countdown", `(document.querySelector('`+sel("data-attention", lapsed)+` [data-countdown]')||{}).textContent?.includes('runs anyway in')`)
	b.WaitJS("at zero, its trace", `document.querySelector('`+sel("data-attention", lapsed)+`') === null && (document.querySelector('`+sel("data-answered", lapsed)+`')||{}).textContent?.startsWith('Nobody answered: it ran anyway, ')`)

	// A second request, for the phone.
	held2 := aep.NewID()
	item2 := sel("data-attention", held2)
	em.send(em.event("s2", "attention.requested", -1, heldGate(held2, "r2", time.Now().Add(90*time.Second))))

	// Both schemes keep the state colours readable.
	for _, scheme := range []string{"light", "dark"} {
		var worst struct {
			Ratio float64
			Pair  string
		}
		b.MustRun("scheme "+scheme, emulation.SetEmulatedMedia().WithFeatures([]*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: scheme}}),
			chromedp.Evaluate(contrastJS, &worst))
		if worst.Ratio < 4.5 {
			t.Errorf("%s scheme: %s has contrast %.2f, below WCAG AA (4.5)", scheme, worst.Pair, worst.Ratio)
		}
	}

	// A phone: the session covers the list; back returns to it.
	b.MustRun("phone width", chromedp.EmulateViewport(360, 740))
	var covers bool
	b.Eval("the session over the list", `(() => { const p = document.querySelector('[data-detail]'), r = p.getBoundingClientRect();
	  return r.left === 0 && r.top === 0 && r.width === innerWidth && r.height === innerHeight && p.contains(document.elementFromPoint(innerWidth / 2, innerHeight / 2)); })()`, &covers)
	if !covers {
		var d box
		b.Eval("the detail's box", rectJS("[data-detail]"), &d)
		t.Errorf("at 360 px the session does not cover the list: %+v", d)
	}
	// Read after two frames: the rows take the new width before paint (a
	// ResizeObserver), which a script running straight after the resize
	// would not see yet.
	var overflow bool
	b.EvalAwait("overflow", browsertest.AfterFrames(`document.documentElement.scrollWidth > innerWidth`), &overflow)
	if overflow {
		t.Error("at 360 px the page scrolls sideways")
	}
	b.Click("back", "#session-close")
	b.WaitJS("the request again", `document.querySelector('`+item2+`') !== null`)
	b.Eval("the answer buttons' rows at 360 px", strings.ReplaceAll(sameRow, item, item2), &one)
	if !one {
		t.Error("at 360 px the answer buttons do not sit on one row")
	}
	b.WaitJS("the list again", `document.getElementById('session-pane').hidden && document.querySelector('#fleet [data-session="s1"] button').getAttribute('aria-current') === null`)

	// The keyboard hint shows with a mouse, not on a touch screen.
	var hint string
	b.Eval("the hint with a mouse", `getComputedStyle(document.querySelector('.keys')).display`, &hint)
	if hint == "none" {
		var m string
		b.Eval("media", `JSON.stringify([matchMedia('(hover: none)').matches, matchMedia('(pointer: coarse)').matches, matchMedia('(pointer: none)').matches, matchMedia('(pointer: fine)').matches])`, &m)
		t.Errorf("the keyboard hint is hidden with a mouse: %s", m)
	}
	b.MustRun("a touch screen", emulation.SetTouchEmulationEnabled(true).WithMaxTouchPoints(5))
	b.Eval("the hint on touch", `getComputedStyle(document.querySelector('.keys')).display`, &hint)
	if hint != "none" {
		var m string
		b.Eval("media", `JSON.stringify([matchMedia('(hover: none)').matches, matchMedia('(pointer: coarse)').matches])`, &m)
		t.Errorf("the keyboard hint shows on a touch screen (display %s; hover:none, pointer:coarse = %s)", hint, m)
	}
}

package fleetpage_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"

	"github.com/aep-kimi/aep-kimi/aep"
	"github.com/aep-kimi/aep-kimi/fleetpage"
	"github.com/aep-kimi/aep-kimi/internal/testkit/browsertest"
)

// virtualSessions is the fleet of TestBrowserVirtualList: far more rows
// than a screen holds, in two groups.
const virtualSessions = 500

// windowJS checks the fleet list as drawn: each group's rows are a run of
// its whole order (sorted by title: s000, s002, ... idle; s001, s003, ...
// working), each at its place in the list (line and column); the list is
// as tall as all its rows; every point of the viewport over the list shows
// a row or a heading, never a gap where rows should be; and it says how
// many rows are in the document.
const windowJS = `(() => {
  const want = { working: [], idle: [] };
  for (let i = 0; i < %d; i++) (i %% 2 ? want.working : want.idle).push('s' + String(i).padStart(3, '0'));
  const out = { drawn: document.querySelectorAll('#fleet li[data-session]').length, problems: [] };
  for (const g of ['working', 'idle']) {
    const ul = document.querySelector('#fleet .group[data-group="' + g + '"] ul');
    const rows = [...ul.children];
    if (!rows.length) continue;
    const cs = getComputedStyle(ul);
    const tracks = cs.display === 'grid' ? cs.gridTemplateColumns.split(' ').map(parseFloat) : [];
    const cols = Math.max(1, tracks.length);
    const step = cols > 1 ? tracks[0] + (parseFloat(cs.columnGap) || 0) : 0;
    const box = ul.getBoundingClientRect();
    const pitch = rows[0].getBoundingClientRect().height;
    const at = rows.map((li) => want[g].indexOf(li.dataset.session)).sort((a, b) => a - b);
    if (at[0] < 0 || at.some((x, k) => k > 0 && x !== at[k - 1] + 1)) out.problems.push(g + ': rows ' + at.join() + ' are not a run of the order');
    for (const li of rows) {
      const i = want[g].indexOf(li.dataset.session), r = li.getBoundingClientRect();
      const top = box.top + Math.floor(i / cols) * pitch, left = box.left + (i %% cols) * step;
      if (Math.abs(r.top - top) > 1 || Math.abs(r.left - left) > 1) out.problems.push(g + ': ' + li.dataset.session + ' at ' + r.left + ',' + r.top + ', want ' + left + ',' + top);
    }
    const whole = Math.ceil(want[g].length / cols) * pitch;
    if (Math.abs(box.height - whole) > 1) out.problems.push(g + ': list ' + box.height + ' px tall, want ' + whole);
  }
  const f = document.getElementById('fleet').getBoundingClientRect();
  for (let y = Math.max(f.top, 0) + 1; y < Math.min(f.bottom, innerHeight); y += 13) {
    const e = document.elementFromPoint(f.left + 12, y);
    if (!e || !(e.closest('li[data-session]') || e.closest('h3') || e.matches('section.group'))) out.problems.push('at y ' + Math.round(y) + ': ' + (e ? e.tagName + ' ' + e.className : 'nothing'));
  }
  return out;
})()`

type listView struct {
	Drawn    int
	Problems []string
}

// In Chromium, with 500 sessions the fleet list keeps only the rows near
// the viewport in the document, wide and at phone width; wherever it is
// scrolled, the rows shown are the right ones, in order, with no gap; a
// session that changes off screen costs no DOM write (and its row is
// current when scrolled to); the open session's highlight and a focused
// row survive scrolling away and back.
func TestBrowserVirtualList(t *testing.T) {
	b := browsertest.New(t, 1280, 900)
	rl := newRestartableRelay(t)
	em := dialEmitter(t, rl.base())
	var evs []map[string]any
	for i := 0; i < virtualSessions; i++ {
		s := fmt.Sprintf("s%03d", i)
		evs = append(evs, em.event(s, "session.started", 0, map[string]any{"data": map[string]any{"label": "session " + s}}))
		if i%2 == 1 {
			evs = append(evs, em.event(s, "run.started", -1, map[string]any{"run": "r-" + s}))
		}
	}
	post(t, rl.base(), evs...)
	b.MustRun("log in", chromedp.Navigate(fleetpage.LoginURL(rl.base(), testToken)))
	b.WaitJS("the whole fleet", fmt.Sprintf(`document.getElementById('conn').dataset.conn === 'live' && document.getElementById('fleet-count').textContent === '%d of %d'`, virtualSessions, virtualSessions))
	b.MustRun("sort by title", chromedp.Evaluate(`(() => { const s = document.getElementById('sort'); s.value = 'title'; s.dispatchEvent(new Event('input')); return true; })()`, nil))
	b.WaitJS("the title order", `document.querySelector('#fleet .group[data-group="working"] li').dataset.session === 's001'`)

	check := func(where string, maxDrawn int) listView {
		t.Helper()
		var w listView
		b.MustRun("settle", chromedp.Sleep(250*time.Millisecond))
		b.Eval("the list at "+where, fmt.Sprintf(windowJS, virtualSessions), &w)
		if w.Drawn == 0 || w.Drawn > maxDrawn {
			t.Errorf("%s: %d rows in the document of %d sessions, want 1 to %d", where, w.Drawn, virtualSessions, maxDrawn)
		}
		if len(w.Problems) > 0 {
			t.Errorf("%s: %s", where, strings.Join(w.Problems, "\n"))
		}
		return w
	}
	scroll := func(where string, js string) {
		t.Helper()
		b.MustRun("scroll to "+where, chromedp.Evaluate(js+`; true`, nil))
	}
	check("the top", 120)
	for _, at := range []string{"0.2", "0.5", "0.77", "1"} {
		scroll(at, `scrollTo(0, (document.documentElement.scrollHeight - innerHeight) * `+at+`)`)
		check(at+" of the page", 120)
	}

	// A session far down the list changes: nothing in the list is written
	// (the clock's rewriting of ages aside); scrolled to, its row is current.
	scroll("the top", `scrollTo(0, 0)`)
	b.MustRun("settle", chromedp.Sleep(250*time.Millisecond))
	b.MustRun("watch the list", chromedp.Evaluate(`(() => {
	  window.__writes = [];
	  window.__v = aepFleet.state.version;
	  new MutationObserver((rs) => { for (const r of rs) {
	    const n = r.target.nodeType === 1 ? r.target : r.target.parentElement;
	    if (r.type !== 'attributes' && n && n.closest('[data-since]')) continue;
	    __writes.push(r.type + ' ' + (r.attributeName || '') + ' ' + (n ? n.outerHTML.slice(0, 120) : ''));
	  } }).observe(document.getElementById('fleet'), { subtree: true, childList: true, characterData: true, attributes: true });
	  return true; })()`, nil))
	changed := em.event("s499", "progress.status", -1, map[string]any{"data": map[string]any{"message": "still at it"}})
	post(t, rl.base(), changed)
	b.WaitJS("the change applied", `aepFleet.state.version > window.__v`)
	b.MustRun("some frames", chromedp.Sleep(400*time.Millisecond))
	var writes []string
	b.Eval("the list's writes", `window.__writes`, &writes)
	if len(writes) > 0 {
		t.Errorf("a session off screen changed and the list was written %d times: %s", len(writes), strings.Join(writes, "\n"))
	}
	scroll("s499", `(() => { const ul = document.querySelector('#fleet .group[data-group="working"] ul'); scrollTo(0, ul.getBoundingClientRect().bottom + scrollY - innerHeight / 2); })()`)
	b.WaitJS("s499's row, current", `(() => { const a = [...document.querySelectorAll('#fleet [data-session="s499"] .meta [data-since]')].at(-1);
	  return a !== undefined && Number(a.dataset.since) === aepFleet.S.session(aepFleet.state, 's499').lastTime; })()`)

	// The open session's highlight survives its row leaving and coming back.
	scroll("the top", `scrollTo(0, 0)`)
	check("the top again", 120)
	b.Click("open s001", `#fleet [data-session="s001"] button`)
	b.WaitJS("the session view", `document.getElementById('session-pane').dataset.session === 's001'`)
	check("the top, a session open", 120)
	scroll("the bottom", `scrollTo(0, document.documentElement.scrollHeight)`)
	check("the bottom, a session open", 120)
	b.WaitJS("s001's row gone from the document", `document.querySelector('#fleet [data-session="s001"]') === null`)
	scroll("the top", `scrollTo(0, 0)`)
	b.WaitJS("s001 highlighted again, alone", `document.querySelector('#fleet [data-session="s001"] button')?.getAttribute('aria-current') === 'true'
	  && document.querySelector('#fleet [data-session="s001"]')?.dataset.selected === '' && document.querySelectorAll('#fleet [aria-current]').length === 1`)

	// Closing the session focuses its row; the focused row stays drawn
	// while scrolled away (keyboard focus is not dropped).
	b.MustRun("close the session", chromedp.KeyEvent("\x1b"))
	b.WaitJS("s001's row focused", `document.activeElement === document.querySelector('#fleet [data-session="s001"] button')`)
	b.WaitJS("the rows in the list's order in the document (Tab follows it)", `[...document.querySelectorAll('#fleet .group[data-group="working"] li')].every((li, k, all) => k === 0 || li.dataset.session > all[k - 1].dataset.session)`)
	scroll("3,000 px down", `scrollTo(0, 3000)`)
	b.MustRun("settle", chromedp.Sleep(250*time.Millisecond))
	var focused bool
	b.Eval("the focus", `document.activeElement === document.querySelector('#fleet [data-session="s001"] button')`, &focused)
	if !focused {
		t.Error("the focused row was dropped when scrolled 3,000 px away")
	}
	b.MustRun("blur", chromedp.Evaluate(`document.activeElement.blur(); true`, nil))

	// At phone width, one column: still bounded, still right.
	b.MustRun("phone width", emulation.SetDeviceMetricsOverride(360, 740, 2, true))
	scroll("the top", `scrollTo(0, 0)`)
	check("the top at 360 px", 60)
	scroll("half way", `scrollTo(0, (document.documentElement.scrollHeight - innerHeight) * 0.5)`)
	check("half way at 360 px", 60)
}

// In Chromium, the latest-first order goes by the second of each session's
// last event (the ages the rows show): sessions whose last events fall in
// one second are listed by id whichever came last within it, so a busy
// fleet's rows do not move with every event.
func TestBrowserOrderBySecond(t *testing.T) {
	b := browsertest.New(t, 1280, 900)
	rl := newRestartableRelay(t)
	em := dialEmitter(t, rl.base())
	base := time.Now().Truncate(time.Second).Add(-3 * time.Second)
	at := map[string]time.Duration{"s-c": 1500 * time.Millisecond, "s-b": 900 * time.Millisecond, "s-a": 100 * time.Millisecond, "s-d": -500 * time.Millisecond}
	var evs []map[string]any
	for s, d := range at {
		ev := em.event(s, "session.started", 0, nil)
		ev["time"] = aep.FormatTime(base.Add(d))
		evs = append(evs, ev)
	}
	post(t, rl.base(), evs...)
	b.MustRun("log in", chromedp.Navigate(fleetpage.LoginURL(rl.base(), testToken)))
	order := `(() => [...document.querySelectorAll('#fleet .group[data-group="idle"] li')]
	  .map((li) => [li.getBoundingClientRect(), li.dataset.session]).sort((x, y) => x[0].top - y[0].top || x[0].left - y[0].left).map((x) => x[1]).join(' '))()`
	b.WaitJS("the four sessions", `document.getElementById('fleet-count').textContent === '4 of 4'`)
	b.MustRun("settle", chromedp.Sleep(250*time.Millisecond))
	var got string
	b.Eval("the order", order, &got)
	if want := "s-c s-a s-b s-d"; got != want {
		t.Errorf("idle sessions listed %q, want %q (latest second first, then by id)", got, want)
	}
}

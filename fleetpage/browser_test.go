package fleetpage_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
	"github.com/coder/websocket"

	"github.com/aep-kimi/aep-kimi/aep"
	"github.com/aep-kimi/aep-kimi/fleetpage"
	"github.com/aep-kimi/aep-kimi/internal/testkit/browsertest"
	"github.com/aep-kimi/aep-kimi/internal/testkit/poll"
	"github.com/aep-kimi/aep-kimi/internal/testkit/relaycall"
	"github.com/aep-kimi/aep-kimi/mapping"
	"github.com/aep-kimi/aep-kimi/relay"
)

// restartableRelay is a real relay with the page on a fixed loopback
// address that a test can stop and start again (a relay restart: the
// in-memory buffer is gone, the address is the same).
type restartableRelay struct {
	t          *testing.T
	addr       string
	loginsFile string // kept across restarts, as up keeps it under AEP_HOME
	mu         sync.Mutex
	stop       func()
}

func newRestartableRelay(t *testing.T) *restartableRelay {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &restartableRelay{t: t, addr: ln.Addr().String(), loginsFile: filepath.Join(t.TempDir(), "page-login.key")}
	r.serve(ln)
	t.Cleanup(r.halt)
	return r
}

func (r *restartableRelay) base() string { return "http://" + r.addr }

func (r *restartableRelay) serve(ln net.Listener) {
	page, err := fleetpage.New(fleetpage.Config{Token: testToken, LoginsFile: r.loginsFile})
	if err != nil {
		r.t.Fatal(err)
	}
	srv, err := relay.NewServer(relay.Config{Token: testToken, Page: page, DrainTimeout: 2 * time.Second})
	if err != nil {
		r.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(ctx, ln) }()
	r.mu.Lock()
	r.stop = func() { cancel(); <-done }
	r.mu.Unlock()
}

func (r *restartableRelay) halt() {
	r.mu.Lock()
	stop := r.stop
	r.stop = nil
	r.mu.Unlock()
	if stop != nil {
		stop()
	}
}

func (r *restartableRelay) restart() {
	r.halt()
	var ln net.Listener
	var err error
	if !poll.Until(5*time.Second, func() bool { ln, err = net.Listen("tcp", r.addr); return err == nil }) {
		r.t.Fatalf("relisten %s: %v", r.addr, err)
	}
	r.serve(ln)
}

// emitter is a real socket emitter that claims sessions and answers the
// commands routed to it, as the adapter's gate does.
type emitter struct {
	t      *testing.T
	c      *websocket.Conn
	ctx    context.Context
	frames chan map[string]any
	seq    map[string]int64
}

func dialEmitter(t *testing.T, base string) *emitter {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	h := http.Header{}
	h.Set("Authorization", "Bearer "+testToken)
	c, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(base, "http")+"/socket", &websocket.DialOptions{HTTPHeader: h})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.CloseNow() })
	hello := `{"type":"hello","versions":["0.1"],"role":"emitter","identity":{"agent":"kimi-code","instance":"test"},` +
		`"capabilities":{"control":{"accepts":["control.attention.respond","control.cancel","` + mapping.TypeRate + `"]}}}`
	if err := c.Write(ctx, websocket.MessageText, []byte(hello)); err != nil {
		t.Fatal(err)
	}
	e := &emitter{t: t, c: c, ctx: ctx, frames: make(chan map[string]any, 64), seq: map[string]int64{}}
	go func() {
		for {
			_, b, err := c.Read(ctx)
			if err != nil {
				close(e.frames)
				return
			}
			var f map[string]any
			if json.Unmarshal(b, &f) == nil {
				e.frames <- f
			}
		}
	}()
	return e
}

// event builds a sequenced kimi-code event for session; seq < 0 takes the
// session's next.
func (e *emitter) event(session, typ string, seq int64, fields map[string]any) map[string]any {
	if seq < 0 {
		seq = e.seq[session]
	}
	e.seq[session] = seq + 1
	ev := map[string]any{
		"aep": "0.1", "id": aep.NewID(), "type": typ, "time": aep.FormatTime(time.Now()),
		"source": aep.SourceURI("test", "kimi-code", session), "agent": "kimi-code", "session": session,
		"seq": seq, "epoch": 1,
	}
	for k, v := range fields {
		ev[k] = v
	}
	return ev
}

func (e *emitter) send(evs ...map[string]any) {
	e.t.Helper()
	for _, ev := range evs {
		b, _ := json.Marshal(ev)
		if err := e.c.Write(e.ctx, websocket.MessageText, b); err != nil {
			e.t.Fatalf("emit %s: %v", ev["type"], err)
		}
	}
}

// post sends events by HTTP, as kimi-hook's adapter does after a restart.
func post(t *testing.T, base string, evs ...map[string]any) {
	t.Helper()
	lines := make([][]byte, len(evs))
	for i, ev := range evs {
		lines[i], _ = json.Marshal(ev)
	}
	relaycall.PostLines(t, base, testToken, lines...)
}

// command waits for the next command routed to the emitter (a vendor's
// x.VENDOR.control.* included).
func (e *emitter) command() map[string]any {
	e.t.Helper()
	timer := time.NewTimer(browsertest.Wait)
	defer timer.Stop()
	for {
		select {
		case f, ok := <-e.frames:
			if !ok {
				e.t.Fatal("emitter socket closed before a command came")
			}
			if typ, _ := f["type"].(string); aep.IsCommand(typ) {
				return f
			}
		case <-timer.C:
			e.t.Fatal("no command reached the emitter")
		}
	}
}

func permission(id, via string) map[string]any {
	return map[string]any{"id": id, "subject": "Shell", "capture": "redacted", "severity": "notice", "data": map[string]any{
		"kind": "permission", "prompt": "Run Shell: rm -rf build/",
		"options":     []any{map[string]any{"id": "allow", "label": "Allow"}, map[string]any{"id": "deny", "label": "Deny"}},
		"respond_via": []any{via},
	}}
}

func sel(attr, v string) string { return fmt.Sprintf(`[%s=%s]`, attr, browsertest.Quote(v)) }

// TestBrowserFleet drives the page in Chromium against a real relay and a
// real socket emitter: sessions appear live and grouped, the inbox honours
// respond_via and the roster, a click sends the command and only the stream
// settles it, and a relay restart resumes with no gap and no duplicate.
func TestBrowserFleet(t *testing.T) {
	b := browsertest.New(t, 1200, 900)
	rl := newRestartableRelay(t)
	em := dialEmitter(t, rl.base())

	held, oob, orphan := aep.NewID(), aep.NewID(), aep.NewID()
	em.send(
		em.event("s1", "session.started", 0, map[string]any{"data": map[string]any{"label": "fix the build", "gen_ai.request.model": "kimi-k2"}}),
		em.event("s1", "run.started", -1, map[string]any{"run": "r1"}),
		em.event("s1", "tool.requested", -1, map[string]any{"run": "r1", "subject": "Shell", "data": map[string]any{"tool": map[string]any{"name": "Shell", "call_id": "c1"}}}),
		em.event("s1", "delegation.subagent.started", -1, map[string]any{"run": "r1", "data": map[string]any{"child": map[string]any{"session": "s1-sub", "agent": "kimi-code"}, "agent_type": "coder"}}),
		em.event("s1-sub", "session.started", 0, map[string]any{"data": map[string]any{"parent": map[string]any{"session": "s1", "run": "r1"}}}),
		em.event("s1", "attention.requested", -1, merge(permission(held, "control"), map[string]any{"run": "r1"})),
		em.event("s2", "session.started", 0, nil),
		em.event("s2", "attention.requested", -1, permission(oob, "oob")),
		// What Kimi says about s2's tokens (a kimi web step, from the
		// bridge's companion session of s2): only s2 shows them, in its own
		// card.
		em.event("s2.web", "x.kimi-code.web.turn.step.completed", 0, map[string]any{"kimisession": "s2", "data": map[string]any{
			"gen_ai.usage.input_tokens": 12000, "gen_ai.usage.output_tokens": 300, "x-kimi-code-context-tokens": 53739, "x-kimi-code-context-limit": 131072}}),
	)
	// The subagent's own work, and two background tasks of s1's run: one
	// finishes (its completion names it), one still runs.
	subTool := map[string]any{"run": "sr1", "subject": "ReadFile", "data": map[string]any{"tool": map[string]any{"name": "ReadFile", "call_id": "c9"}}}
	em.send(
		em.event("s1-sub", "run.started", -1, map[string]any{"run": "sr1"}),
		em.event("s1-sub", "tool.requested", -1, subTool),
		em.event("s1-sub", "tool.completed", -1, merge(subTool, map[string]any{"data": map[string]any{"tool": map[string]any{"name": "ReadFile", "call_id": "c9"}, "duration_ms": 12}})),
		em.event("s1-sub", "run.finished", -1, map[string]any{"run": "sr1"}),
		em.event("s1", "x.kimi-code.progress.task_started", -1, map[string]any{"run": "r1", "subject": "bash-1", "data": map[string]any{"task_id": "bash-1", "kind": "process"}}),
		em.event("s1", "x.kimi-code.progress.task_started", -1, map[string]any{"run": "r1", "subject": "bash-2", "data": map[string]any{"task_id": "bash-2", "kind": "process"}}),
		em.event("s1", "progress.status", -1, map[string]any{"run": "r1", "subject": "task.completed", "data": map[string]any{"task_id": "bash-1", "severity": "info", "duration_ms": 1500}}),
	)
	// A subagent inside s1's own session, as Kimi runs them: the Agent call
	// starts it, its Grep call happens between its start and its stop.
	inSession := aep.NewID()
	agentTool := map[string]any{"run": "r1", "subject": "Agent", "data": map[string]any{"tool": map[string]any{"name": "Agent", "call_id": "c6"}}}
	grepTool := map[string]any{"run": "r1", "subject": "Grep", "data": map[string]any{"tool": map[string]any{"name": "Grep", "call_id": "c7"}}}
	em.send(
		em.event("s1", "tool.requested", -1, agentTool),
		em.event("s1", "delegation.subagent.started", -1, map[string]any{"id": inSession, "run": "r1", "subject": "explorer"}),
		em.event("s1", "tool.requested", -1, grepTool),
		em.event("s1", "tool.completed", -1, grepTool),
		em.event("s1", "tool.completed", -1, agentTool),
		em.event("s1", "delegation.subagent.stopped", -1, map[string]any{"run": "r1", "subject": "explorer", "cause": inSession}),
	)
	// A request captured at metadata carries no prompt: the page says so.
	gatedReq := aep.NewID()
	em.send(em.event("s6", "session.started", 0, nil), em.event("s6", "attention.requested", -1, map[string]any{
		"id": gatedReq, "subject": "Shell", "capture": "metadata", "data": map[string]any{"kind": "permission", "respond_via": []any{"oob"}}}))
	// s3's emitter is gone: its request cannot be delivered.
	post(t, rl.base(), em.event("s3", "session.started", 0, nil), em.event("s3", "attention.requested", -1, permission(orphan, "control")))

	b.MustRun("open the page without the token", chromedp.Navigate(rl.base()+"/"))
	b.WaitJS("the page says why it cannot connect", `document.getElementById('notice').textContent.includes('not logged in') && document.getElementById('conn').dataset.conn === 'login-needed'`)
	// Only the fragment differs: leave the page first, or the browser just
	// scrolls.
	b.MustRun("open the login URL", chromedp.Navigate("about:blank"), chromedp.Navigate(fleetpage.LoginURL(rl.base(), testToken)))
	b.WaitJS("the held request's buttons", `document.querySelector('`+sel("data-attention", held)+` `+sel("data-option", "deny")+`') !== null`)
	var url string
	b.Eval("location", `location.href`, &url)
	if strings.Contains(url, testToken) {
		t.Errorf("the token stayed in the address bar: %s", url)
	}
	b.WaitJS("s1 needs you", `document.querySelector('[data-session="s1"][data-state="needs-you"]') !== null`)
	b.WaitJS("the page title counts what needs you", `document.title.startsWith('(4)')`)
	b.WaitJS("capture honesty", `document.querySelector('`+sel("data-attention", gatedReq)+`').textContent.includes('gated at capture')`)

	// Search and filters narrow the fleet view.
	setInput := func(id, v string) {
		b.MustRun("set "+id, chromedp.Evaluate(`(e => { e.value = `+browsertest.Quote(v)+`; e.dispatchEvent(new Event('input')); })(document.getElementById(`+browsertest.Quote(id)+`))`, nil))
	}
	b.MustRun("type a title", chromedp.SendKeys("#search", "fix the build", chromedp.ByID))
	b.WaitJS("only s1 matches", `[...document.querySelectorAll('#fleet [data-session]')].map(e => e.dataset.session).join() === 's1'`)
	setInput("search", "Shell")
	b.WaitJS("a tool name matches", `[...document.querySelectorAll('#fleet [data-session]')].map(e => e.dataset.session).join() === 's1'`)
	setInput("search", "attention.requested")
	b.WaitJS("an event type matches", `document.querySelectorAll('#fleet [data-session]').length === 4`)
	setInput("search", "")
	setInput("f-state", "idle")
	b.WaitJS("only idle sessions", `[...document.querySelectorAll('#fleet [data-session]')].every(e => e.dataset.state === 'idle') && document.querySelector('#fleet [data-session="s1-sub"]') !== null`)
	setInput("f-state", "")
	b.WaitJS("every session again", `document.querySelectorAll('#fleet [data-session]').length === 5`)
	b.WaitJS("s2's row says its tokens, s1's none", `document.querySelector('#fleet [data-session="s2"] .meta').textContent.includes('12.3k tokens · context 41%') && !document.querySelector('#fleet [data-session="s1"] .meta').textContent.includes('token')`)
	b.WaitJS("the reply field and the cancel button", `document.querySelector('`+sel("data-attention", held)+` [data-reply]') && document.querySelector('`+sel("data-attention", held)+` [data-cancel]')`)

	var oobButtons int
	var oobText, orphanText string
	b.Eval("oob buttons", `document.querySelectorAll('`+sel("data-attention", oob)+` button, `+sel("data-attention", oob)+` [data-reply]').length`, &oobButtons)
	b.Eval("oob text", `document.querySelector('`+sel("data-attention", oob)+`').textContent`, &oobText)
	if oobButtons != 0 || !strings.Contains(oobText, "Answer in Kimi") {
		t.Errorf("an oob request must be information only: %d controls, text %q", oobButtons, oobText)
	}
	b.WaitJS("s3 not reachable", `(document.querySelector('`+sel("data-attention", orphan)+`')||{}).textContent.includes('Not reachable')`)
	var orphanButtons int
	b.Eval("orphan buttons", `document.querySelectorAll('`+sel("data-attention", orphan)+` button').length`, &orphanButtons)
	b.Eval("orphan text", `document.querySelector('`+sel("data-attention", orphan)+`').textContent`, &orphanText)
	if orphanButtons != 0 {
		t.Errorf("a session with no live claimant offers %d buttons: %q", orphanButtons, orphanText)
	}

	// Deny: the command reaches the emitter; until the stream settles it the
	// request stays pending.
	b.Click("click Deny", sel("data-attention", held)+" "+sel("data-option", "deny"))
	cmd := em.command()
	if cmd["type"] != "control.attention.respond" || cmd["subject"] != held {
		t.Fatalf("command: %v", cmd)
	}
	if ans, _ := cmd["data"].(map[string]any)["answer"].(map[string]any); ans["option"] != "deny" {
		t.Fatalf("answer: %v", cmd["data"])
	}
	b.WaitJS("the sent note", `(document.querySelector('`+sel("data-attention", held)+` [data-note]')||{}).textContent?.includes('sent')`)
	var still bool
	b.Eval("pending until settled", `document.querySelector('`+sel("data-attention", held)+`') !== null`, &still)
	if !still {
		t.Error("the request left the inbox before the stream settled it (optimistic state)")
	}
	cmdID, _ := cmd["id"].(string)
	em.send(
		em.event("s1", "control.accepted", -1, map[string]any{"cause": cmdID}),
		em.event("s1", "attention.answered", -1, map[string]any{"subject": held, "cause": cmdID, "data": map[string]any{"answer": map[string]any{"option": "deny"}, "via": "control"}}),
		em.event("s1", "tool.denied", -1, map[string]any{"run": "r1", "subject": "Shell", "data": map[string]any{"tool": map[string]any{"name": "Shell", "call_id": "c1"}, "by": "control"}}),
	)
	b.WaitJS("the settled request leaves the inbox", `document.querySelector('`+sel("data-attention", held)+`') === null`)
	b.WaitJS("s1 back to working", `document.querySelector('[data-session="s1"][data-state="working"]') !== null`)

	// The session view shows the denied tool.
	b.Click("open s1", `[data-session="s1"] button`)
	b.WaitJS("the timeline", `(document.querySelector('#timeline [data-tool="c1"]')||{}).dataset?.kind === 'denied'`)
	b.WaitJS("no token facts for a session without figures", `!document.getElementById('session-facts').textContent.includes('token')`)
	b.WaitJS("a finished background task with its duration", `(document.querySelector('#timeline [data-run="r1"] [data-task="bash-1"][data-task-state="finished"]')||{}).textContent?.includes('1.5 s')`)
	b.WaitJS("a running background task with its age", `document.querySelector('#timeline [data-task="bash-2"][data-task-state="running"] [data-since]') !== null`)
	b.WaitJS("an in-session subagent's call nested under its start, the Agent call outside", `document.querySelector('#timeline [data-run="r1"] [data-scope="`+inSession+`"] [data-tool="c7"]') !== null && document.querySelector('#timeline [data-scope] [data-tool="c6"]') === null && document.querySelector('#timeline [data-scope] [data-tool="c1"]') === null`)
	b.WaitJS("the subagent's work nested under its delegation", `(document.querySelector('#timeline [data-child="s1-sub"] [data-nested="s1-sub"] [data-run="sr1"] [data-tool="c9"]')||{}).dataset?.kind === 'completed'`)
	// Ages tick in place: the run's age changes, the timeline is not redrawn.
	b.MustRun("note the run's age", chromedp.Evaluate(`window.__run = document.querySelector('#timeline [data-run="r1"]'); window.__age = window.__run.querySelector('[data-since]').textContent`, nil))
	b.WaitJS("the age ticks without a redraw", `document.querySelector('#timeline [data-run="r1"]') === window.__run && window.__run.querySelector('[data-since]').textContent !== window.__age`)
	b.MustRun("open the subagent from its delegation", chromedp.Evaluate(`document.querySelector('#timeline [data-child="s1-sub"] button').click()`, nil))
	b.WaitJS("the child session's view", `document.getElementById('session-pane').dataset.session === 's1-sub'`)
	b.MustRun("back", chromedp.KeyEvent(kb.Escape))
	b.Click("open s2", `[data-session="s2"] button`)
	b.WaitJS("s2's token facts", `[...document.querySelectorAll('#session-facts dt')].some(dt => dt.textContent === 'tokens' && dt.nextElementSibling.textContent === '12.3k tokens · context 41%')`)
	b.MustRun("back from s2", chromedp.KeyEvent(kb.Escape))

	// Relay restart: the in-memory buffer is gone; the emitter's next events
	// arrive by HTTP, with a redelivered one, and a new session begins.
	before := int64(em.seq["s1"])
	// Record the page's replays from here on: a resume asks for what it
	// missed, never the whole buffer again.
	b.MustRun("watch the page's fetches", chromedp.Evaluate(`window.__streams = []; { const f = window.fetch; window.fetch = (u, o) => { if (String(u).includes('/stream')) window.__streams.push(String(u)); return f(u, o); }; }`, nil))
	rl.restart()
	redelivered := em.event("s1", "run.finished", before, map[string]any{"run": "r1"})
	post(t, rl.base(), redelivered)
	post(t, rl.base(), redelivered, em.event("s1", "session.ended", -1, map[string]any{"data": map[string]any{"reason": "normal"}}),
		em.event("s4", "session.started", 0, nil), em.event("s4", "run.started", -1, map[string]any{"run": "r4"}),
		em.event("s4", "tool.requested", -1, map[string]any{"run": "r4", "subject": "Shell", "data": map[string]any{"tool": map[string]any{"name": "Shell", "call_id": "c4"}}}))
	b.WaitJS("reconnected", `document.getElementById('conn').dataset.conn === 'live'`)
	b.WaitJS("s1 ended after the restart", `document.querySelector('[data-session="s1"][data-state="ended"]') !== null`)
	b.WaitJS("a session begun across the restart", `document.querySelector('[data-session="s4"]') !== null`)
	b.WaitJS("its whole story", `aepFleet.S.ordered(aepFleet.state, 's4').map(e => e.seq).join() === '0,1,2'`)
	var streams []string
	b.Eval("the page's replays after the restart", `window.__streams`, &streams)
	if len(streams) == 0 || !strings.Contains(streams[0], "filter=") {
		t.Errorf("the resume asked for no new sessions' lifecycle: %q", streams)
	}
	for _, u := range streams {
		if !strings.Contains(u, "filter=") {
			t.Errorf("after a reconnect the page replayed the whole buffer: %s", u)
		}
	}
	var seqs []int64
	b.Eval("s1's positions", `aepFleet.S.ordered(aepFleet.state, 's1').filter(e => Number.isInteger(e.seq)).map(e => e.seq)`, &seqs)
	for i, s := range seqs {
		if s != int64(i) {
			t.Fatalf("s1 after the restart: seqs %v, want 0..%d once each", seqs, len(seqs)-1)
		}
	}
	if len(seqs) != int(em.seq["s1"]) {
		t.Errorf("s1 holds %d sequenced events, the emitter sent %d", len(seqs), em.seq["s1"])
	}

	// Keyboard only: move down the inbox (oldest first, the new request
	// last) and choose the second option.
	em2 := dialEmitter(t, rl.base())
	typed := aep.NewID()
	em2.send(em2.event("s5", "session.started", 0, nil), em2.event("s5", "attention.requested", -1, permission(typed, "control")))
	b.WaitJS("the new request's buttons, its roster read", `document.querySelector('`+sel("data-attention", typed)+`[data-reach="ok"] [data-option]') !== null`)
	focused := false
	for i := 0; i < 10 && !focused; i++ {
		b.MustRun("j", chromedp.KeyEvent("j"))
		b.Eval("focus", `document.activeElement === document.querySelector('`+sel("data-attention", typed)+`')`, &focused)
	}
	if !focused {
		t.Fatal("j never moved the focus to the newest request")
	}
	b.MustRun("choose option 2", chromedp.KeyEvent("2"))
	kcmd := em2.command()
	if ans, _ := kcmd["data"].(map[string]any)["answer"].(map[string]any); kcmd["subject"] != typed || ans["option"] != "deny" {
		t.Errorf("keyboard answer: %v", kcmd)
	}

	// Dark and light schemes follow the system's preference.
	bg := func(scheme string) string {
		var c string
		b.MustRun("scheme "+scheme, emulation.SetEmulatedMedia().WithFeatures([]*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: scheme}}),
			chromedp.Evaluate(`getComputedStyle(document.body).backgroundColor`, &c))
		return c
	}
	if light, dark := bg("light"), bg("dark"); light == dark {
		t.Errorf("the page looks the same in light and dark schemes (%s)", light)
	}

	// Log out: the cookie no longer opens the stream.
	b.MustRun("log out", chromedp.Click("#logout", chromedp.ByID))
	b.WaitJS("logged out", `document.getElementById('conn').dataset.conn === 'login-needed'`)
	var after int
	b.EvalAwait("the stream after logout", `fetch('/stream?live=0').then(r => r.status)`, &after)
	if after != http.StatusUnauthorized {
		t.Errorf("the stream after logout: %d, want 401", after)
	}

	// 360 px: nothing wider than the screen.
	b.MustRun("phone width", chromedp.EmulateViewport(360, 740))
	var overflow bool
	b.Eval("overflow", `document.documentElement.scrollWidth > window.innerWidth`, &overflow)
	if overflow {
		t.Error("at 360 px the page scrolls sideways")
	}
}

func merge(a, b map[string]any) map[string]any {
	out := map[string]any{}
	for k, v := range a {
		out[k] = v
	}
	for k, v := range b {
		out[k] = v
	}
	return out
}

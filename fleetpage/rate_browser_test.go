package fleetpage_test

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/aep-kimi/aep-kimi/fleetpage"
	"github.com/aep-kimi/aep-kimi/internal/testkit/browsertest"
	"github.com/aep-kimi/aep-kimi/internal/testkit/relaytest"
	"github.com/aep-kimi/aep-kimi/mapping"
	"github.com/aep-kimi/aep-kimi/relay"
)

// typeNote sets a rating's note as a person's typing does, past the
// field's own length limit when asked to (a paste, a page tampered with).
func typeNote(b *browsertest.Browser, run, text string) {
	b.MustRun("type the note", chromedp.Evaluate(`(() => {
	  const n = document.querySelector('[data-rate-note='+JSON.stringify(`+browsertest.Quote(run)+`)+']');
	  n.removeAttribute('maxlength');
	  n.value = `+browsertest.Quote(text)+`;
	  n.dispatchEvent(new Event('input', { bubbles: true }));
	})()`, nil))
}

// In Chromium, against a real relay with people: an answerer rates a
// finished turn thumbs down with a note from the session view; the rating
// reaches the emitter stamped with them, and what the emitter records shows
// on the turn for everyone: who, the verdict and the note as text (markup
// in it stays inert), the note left out for a watcher, whose ceiling is
// metadata; a watcher is offered no rating, an open turn none either; a
// note too long or holding a control character is refused on the page and
// nothing is sent.
func TestBrowserRateRun(t *testing.T) {
	people, alice, bob := aliceAndBob(t)
	page, err := fleetpage.New(fleetpage.Config{Token: testToken, People: people, LoginsFile: filepath.Join(t.TempDir(), "page-login.key")})
	if err != nil {
		t.Fatal(err)
	}
	srv := relaytest.RunServer(t, relay.Config{Token: testToken, Page: page, People: people})
	em := dialEmitter(t, srv.URL)
	fin := em.event("s1", "run.finished", 2, map[string]any{"run": "r1", "data": map[string]any{"duration_ms": 4100}})
	em.send(
		em.event("s1", "session.started", 0, map[string]any{"capture": "redacted", "data": map[string]any{"label": "ship it", "cwd": "~/src/aep-kimi"}}),
		em.event("s1", "run.started", 1, map[string]any{"run": "r1", "data": map[string]any{"trigger": "user"}}),
		fin,
		em.event("s1", "run.started", 3, map[string]any{"run": "r2", "data": map[string]any{"trigger": "user"}}),
	)

	a := browsertest.New(t, 1200, 900)
	a.MustRun("bob logs in", chromedp.Navigate(fleetpage.LoginURL(srv.URL, bob)))
	a.WaitJS("bob's name and role", `(document.getElementById('whoami')||{}).textContent === 'bob · answer'`)
	a.Click("open s1", `#fleet [data-session="s1"] button`)
	a.WaitJS("the finished turn's thumbs", `document.querySelectorAll('[data-rate="r1"] [data-verdict]').length === 2`)
	var open int
	a.Eval("the open turn's rating", `document.querySelectorAll('[data-rate="r2"]').length`, &open)
	if open != 0 {
		t.Error("the page offers to rate a turn still running")
	}

	// Refused on the page: nothing is sent.
	typeNote(a, "r1", strings.Repeat("x", mapping.MaxNoteRunes+1))
	a.Click("thumbs down", `[data-rate="r1"] [data-verdict="down"]`)
	a.WaitJS("the page refuses the long note", `(document.querySelector('[data-rate-status="r1"]')||{}).textContent?.includes('longer than 500')`)
	typeNote(a, "r1", "bad \u001b[2J")
	a.Click("thumbs down", `[data-rate="r1"] [data-verdict="down"]`)
	a.WaitJS("the page refuses the control character", `(document.querySelector('[data-rate-status="r1"]')||{}).textContent?.includes('control character')`)
	select {
	case f := <-em.frames:
		if typ, _ := f["type"].(string); typ == mapping.TypeRate {
			t.Fatalf("a refused rating reached the emitter: %v", f)
		}
	case <-time.After(300 * time.Millisecond):
	}

	const note = `it only retried the test <img src=x onerror="window.pwned=1">`
	typeNote(a, "r1", note)
	a.Click("thumbs down", `[data-rate="r1"] [data-verdict="down"]`)
	cmd := em.command()
	data, _ := cmd["data"].(map[string]any)
	if cmd["type"] != mapping.TypeRate || cmd["run"] != "r1" || cmd[mapping.ExtBy] != "bob" || cmd["capture"] != "redacted" ||
		data["rating"] != float64(-1) || data["comment"] != note {
		b, _ := json.Marshal(cmd)
		t.Fatalf("bob's rating as the emitter got it: %s", b)
	}
	// The emitter records it as the emitter core does (emitter/rate.go).
	em.send(
		em.event("s1", "control.accepted", 4, map[string]any{"cause": cmd["id"], "data": map[string]any{}}),
		em.event("s1", mapping.TypeFeedback, 5, map[string]any{"run": "r1", "cause": fin["id"], "capture": "redacted",
			"data": map[string]any{"rating": -1, "label": mapping.LabelThumbsDown, "source": "human", mapping.DataBy: "bob",
				mapping.DataSurface: "page", "comment": note}}),
	)
	shown := `document.querySelector('#timeline [data-kind="feedback"][data-verdict="down"][data-by="bob"]')`
	a.WaitJS("the rating on the turn", shown+` !== null`)
	var text string
	a.Eval("its words", shown+`.textContent`, &text)
	if !strings.Contains(text, "rated thumbs down by bob (page)") || !strings.Contains(text, `<img src=x onerror="window.pwned=1">`) {
		t.Errorf("the rating reads %q", text)
	}
	var inert bool
	a.Eval("the note stayed text", `window.pwned === undefined && document.querySelector('#timeline img') === null`, &inert)
	if !inert {
		t.Error("the note's markup became part of the page")
	}
	a.WaitJS("the turn's heading counts it", `(document.querySelector('[data-run="r1"] > div')||{}).textContent?.includes(' · rated 1 down')`)

	// The watcher: the rating without its note, and no way to rate.
	w := browsertest.New(t, 1200, 900)
	w.MustRun("alice logs in", chromedp.Navigate(fleetpage.LoginURL(srv.URL, alice)))
	w.WaitJS("alice's name and role", `(document.getElementById('whoami')||{}).textContent === 'alice · watch'`)
	w.Click("open s1", `#fleet [data-session="s1"] button`)
	w.WaitJS("the rating on the turn", shown+` !== null`)
	w.Eval("its words", shown+`.textContent`, &text)
	if text != "rated thumbs down by bob (page)" {
		t.Errorf("the watcher reads %q: the note is above their ceiling", text)
	}
	var forms int
	w.Eval("rating controls", `document.querySelectorAll('[data-rate], [data-verdict]:is(button)').length`, &forms)
	if forms != 0 {
		t.Errorf("the watcher's page offers %d rating controls", forms)
	}
}

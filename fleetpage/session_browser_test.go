package fleetpage_test

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/aep-kimi/aep-kimi/fleetpage"
	"github.com/aep-kimi/aep-kimi/internal/testkit/browsertest"
	"github.com/aep-kimi/aep-kimi/internal/testkit/relaycall"
	"github.com/aep-kimi/aep-kimi/internal/testkit/relaytest"
	"github.com/aep-kimi/aep-kimi/relay"
)

// sessionStreams are recorded sessions (the adapter's captures of real Kimi
// runs, a kimi web session through the bridge) and the attention cases: a
// call denied from the terminal, calls a rule answered, gates that timed
// out, a request the notifier sent on.
var sessionStreams = []string{"capture-basic", "capture-web", "capture-tool-failure", "capture-subagent", "capture-background",
	"attention-control", "attention-rule", "attention-gate-expiry", "attention-routed"}

var (
	ulidText = regexp.MustCompile(`(?:^|[^0-9A-Za-z])([0-9A-HJKMNP-TV-Z]{26})(?:[^0-9A-Za-z]|$)`)
	isoTime  = regexp.MustCompile(`\d{4}-\d{2}-\d{2}T\d{2}:\d{2}`)
)

// visibleText is what a person reads in the session view: the text of
// every element rendered, so nothing inside a collapsed details but its
// summary.
const visibleText = `(() => [...(function* walk(n) {
  for (const c of n.childNodes) {
    if (c.nodeType === Node.TEXT_NODE) { if (c.parentElement.checkVisibility()) yield c.data; }
    else yield* walk(c);
  }
})(document.getElementById('session-pane'))].join(' '))()`

// The session view reads in plain words: over recorded sessions, no event
// id, run id, ULID, event type or ISO time shows outside a collapsed
// details; a held call's request comes before what became of the call;
// and each session's badge tells a denial, a rule's answer and a timeout
// apart.
func TestBrowserSessionWords(t *testing.T) {
	b := browsertest.New(t, 1280, 900)
	page, err := fleetpage.New(fleetpage.Config{Token: testToken, LoginsFile: filepath.Join(t.TempDir(), "page-login.key")})
	if err != nil {
		t.Fatal(err)
	}
	srv := relaytest.RunServer(t, relay.Config{Token: testToken, Page: page})
	for _, name := range sessionStreams {
		raw, err := os.ReadFile(filepath.Join("..", "relay", "consumer", "testdata", "streams", name+".jsonl"))
		if err != nil {
			t.Fatal(err)
		}
		var lines [][]byte
		for _, l := range bytes.Split(bytes.TrimSpace(raw), []byte("\n")) {
			// Commands ride only the socket: the relay stores the ones it
			// routes, and the session's own events say what came of them.
			if !bytes.Contains(l, []byte(`"type": "control.`)) || bytes.Contains(l, []byte(`"seq"`)) {
				lines = append(lines, l)
			}
		}
		relaycall.PostLines(t, srv.URL, testToken, lines...)
	}
	b.MustRun("log in", chromedp.Navigate(fleetpage.LoginURL(srv.URL, testToken)))
	b.WaitJS("live", `document.getElementById('conn').dataset.conn === 'live'`)
	var lanes []string
	b.Eval("the sessions", `[...aepFleet.state.sessions.keys()].filter(Boolean)`, &lanes)
	if len(lanes) < len(sessionStreams) {
		t.Fatalf("the page holds %d sessions: %q", len(lanes), lanes)
	}
	for _, lane := range lanes {
		b.MustRun("open "+lane, chromedp.Evaluate(`import('/app/app.js').then((m) => m.openSession(`+browsertest.Quote(lane)+`))`, nil))
		b.WaitJS("its view", `document.getElementById('session-pane').dataset.session === `+browsertest.Quote(lane))
		var seen struct {
			Text  string
			IDs   []string
			Types []string
		}
		b.Eval("what the view shows", `(() => {
			const s = aepFleet.S.session(aepFleet.state, `+browsertest.Quote(lane)+`);
			const evs = aepFleet.S.ordered(aepFleet.state, s.id);
			return { text: `+visibleText+`, ids: [...evs.map((e) => e.id), ...s.runs.map((r) => r.id)],
				types: [...new Set(evs.map((e) => e.type))] };
		})()`, &seen)
		var bad []string
		for _, id := range seen.IDs {
			if len(id) >= 8 && strings.Contains(seen.Text, id) {
				bad = append(bad, "id "+id)
			}
		}
		for _, typ := range seen.Types {
			if strings.Contains(seen.Text, typ) {
				bad = append(bad, "type "+typ)
			}
		}
		bad = append(bad, ulidText.FindAllString(seen.Text, -1)...)
		bad = append(bad, isoTime.FindAllString(seen.Text, -1)...)
		if len(bad) > 0 {
			t.Errorf("session %s shows outside its details: %q\n%s", lane, bad, seen.Text)
		}
	}

	// The request, then what became of the call it held.
	denied := "3f2a9c1d-7b6e-4c1a-9d0e-5a8b7c6d5e4f"
	b.MustRun("open the denied session", chromedp.Evaluate(`import('/app/app.js').then((m) => m.openSession(`+browsertest.Quote(denied)+`))`, nil))
	b.WaitJS("its view", `document.getElementById('session-pane').dataset.session === `+browsertest.Quote(denied))
	var order []string
	b.Eval("the timeline's lines", `[...document.querySelectorAll('#timeline .items > li')].map((li) => li.dataset.kind)`, &order)
	if !strings.HasSuffix(strings.Join(order, " "), "attention denied") || strings.Count(strings.Join(order, " "), "attention") != 1 {
		t.Errorf("the denied call's lines: %q, want its request, then the call denied", order)
	}
	b.MustRun("close it, every row drawn", chromedp.Evaluate(`document.getElementById('session-close').click()`, nil), chromedp.EmulateViewport(1280, 4000))
	badges := map[string]string{denied: "1 denied", "5e7c2a10-rule-4c1a-9d0e-5a8b7c6d5e4f": "by rule", "gate-deny-2": "1 timed out", "gate-allow-1": "1 timed out"}
	for lane, want := range badges {
		var badge string
		b.WaitJS("the row", `document.querySelector('#fleet [data-session=`+browsertest.Quote(lane)+`] .badge') !== null`)
		b.Eval("the badge", `document.querySelector('#fleet [data-session=`+browsertest.Quote(lane)+`] .badge').textContent`, &badge)
		if !strings.Contains(badge, want) {
			t.Errorf("session %s's badge %q, want it to say %q", lane, badge, want)
		}
	}
}

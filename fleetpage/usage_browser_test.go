package fleetpage_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/aep-kimi/aep-kimi/fleetpage"
	"github.com/aep-kimi/aep-kimi/internal/testkit/browsertest"
	"github.com/aep-kimi/aep-kimi/mapping"
	"github.com/aep-kimi/aep-kimi/notify"
	"github.com/aep-kimi/aep-kimi/relay"
)

// The page marks a session near its context limit at the relay's own
// --notify-usage context threshold (60% here, not the default 80%): a
// sign and words in its facts and in the row's accessible name, a bar
// beside them; a session under the threshold is not marked, and one that
// crosses it live is; a usage alert's link opens its pane, which says its
// burn.
func TestBrowserNearContextMark(t *testing.T) {
	spec, err := notify.ParseUsage("tokens=1M,context=60%")
	if err != nil {
		t.Fatal(err)
	}
	n, err := notify.New(notify.Config{Home: t.TempDir(), PublicURL: "http://127.0.0.1:1", Usage: spec})
	if err != nil {
		t.Fatal(err)
	}
	base, _ := startRelayWith(t, testToken, fleetpage.Config{}, relay.Config{Notify: n})
	step := func(session string, seq int64, ctx int64) map[string]any {
		return map[string]any{"aep": "0.1", "id": fmt.Sprintf("01JZUSAGE%s%04d", strings.ToUpper(session), seq), "type": "x.kimi-code.web.turn.step.completed",
			"time": "2026-07-03T10:00:0" + fmt.Sprint(seq) + "Z", "source": "aep://devbox/agent/kimi-code/web/session/" + session, "agent": "kimi-code",
			"session": session, "seq": seq, "epoch": 0, "capture": "metadata",
			"data": map[string]any{mapping.DataInputTokens: 1500, mapping.DataOutputTokens: 100, mapping.DataContextTokens: ctx, mapping.DataContextLimit: 100_000}}
	}
	post(t, base, step("full", 0, 70_000), step("roomy", 0, 59_999))

	b := browsertest.New(t, 1280, 900)
	b.MustRun("log in", chromedp.Navigate(fleetpage.LoginURL(base, testToken)))
	b.WaitJS("live", `document.getElementById('conn').dataset.conn === 'live'`)
	row := func(s string) string {
		return `document.querySelector('#fleet ` + sel("data-session", s) + ` button.row')`
	}
	b.WaitJS("the full session marked", row("full")+` !== null && `+row("full")+`.dataset.near === ''`)
	var got struct {
		Meta, Name, Roomy, RoomyName string
		RoomyNear                    bool
	}
	b.WaitJS("the roomy session drawn", row("roomy")+` !== null`)
	b.Eval("the rows", `({meta: `+row("full")+`.querySelector('.meta').textContent, name: `+row("full")+`.getAttribute('aria-label'),
		roomy: `+row("roomy")+`.querySelector('.meta').textContent, roomyName: `+row("roomy")+`.getAttribute('aria-label'),
		roomyNear: 'near' in `+row("roomy")+`.dataset})`, &got)
	if !strings.Contains(got.Meta, "\u26a0 near context limit · 1.6k tokens · context 70%") || !strings.HasSuffix(got.Name, ", near its context limit") {
		t.Errorf("the full session's row: %q, named %q", got.Meta, got.Name)
	}
	if got.RoomyNear || strings.Contains(got.Roomy, "near") || strings.Contains(got.RoomyName, "near") {
		t.Errorf("the roomy session is marked: %+v", got)
	}
	var border string
	b.Eval("the bar", `getComputedStyle(`+row("full")+`).borderRightStyle`, &border)
	if border != "double" {
		t.Errorf("the mark's bar: border-right-style %q", border)
	}

	// Crossing live marks it.
	post(t, base, step("roomy", 1, 60_000))
	b.WaitJS("the roomy session marked once it crossed", `'near' in `+row("roomy")+`.dataset`)

	// A usage alert's link opens the page at the session.
	b.MustRun("follow an alert's link", chromedp.Navigate(base+"/?session=roomy"))
	b.WaitJS("its pane", `document.getElementById('session-pane').dataset.session === 'roomy'`)
	var facts string
	b.Eval("its facts", `document.getElementById('session-facts').textContent`, &facts)
	if !strings.Contains(facts, "burn3.2k tokens in the hour up to its latest step") || !strings.Contains(facts, "near context limit") {
		t.Errorf("the pane's facts: %q", facts)
	}
	shootPage(t, b, "near")
}

package fleetpage_test

import (
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/aep-kimi/aep-kimi/aep"
	"github.com/aep-kimi/aep-kimi/fleetpage"
	"github.com/aep-kimi/aep-kimi/internal/testkit/browsertest"
)

// In Chromium, a waiting request the relay's notifier sent to a phone
// says so on its card, with how long ago, ticking: "sent to alice's
// Pixel 8 3s ago" (the words tail and pending use).
func TestBrowserSentTo(t *testing.T) {
	b := browsertest.New(t, 1280, 900)
	rl := newRestartableRelay(t)
	em := dialEmitter(t, rl.base())
	held := aep.NewID()
	em.send(
		em.event("s1", "session.started", 0, nil),
		em.event("s1", "run.started", -1, map[string]any{"run": "r1"}),
		em.event("s1", "attention.requested", -1, heldGate(held, "r1", time.Now().Add(90*time.Second))),
	)
	b.MustRun("log in", chromedp.Navigate(fleetpage.LoginURL(rl.base(), testToken)))
	item := sel("data-attention", held)
	b.WaitJS("the held request", `document.querySelector('`+item+`') !== null`)
	routed := em.event("s1", "attention.routed", -1, map[string]any{
		"source": "aep://test/agent/aep-kimi-notify", "agent": "aep-kimi-notify", "subject": held, "cause": held,
		"time": aep.FormatTime(time.Now().Add(-3 * time.Second)), "data": map[string]any{"to": "push:alice's Pixel 8", "via": "push"},
	})
	delete(routed, "seq")
	delete(routed, "epoch")
	em.send(routed)
	b.WaitJS("the card says where it was sent", `/^ · sent to alice's Pixel 8 \d+s ago$/.test((document.querySelector('`+item+` [data-sent]')||{}).textContent)`)
	var first string
	b.Eval("the age", `document.querySelector('`+item+` [data-sent] [data-since]').textContent`, &first)
	b.WaitJS("the age ticks", `document.querySelector('`+item+` [data-sent] [data-since]').textContent !== `+"`"+first+"`")
}

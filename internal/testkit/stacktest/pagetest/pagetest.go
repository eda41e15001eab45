// Package pagetest drives a Stack's fleet page in a headless Chromium. It is
// apart from stacktest so that only the end-to-end packages that open the
// page link chromedp.
package pagetest

import (
	"fmt"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/aep-kimi/aep-kimi/fleetpage"
	"github.com/aep-kimi/aep-kimi/internal/testkit/browsertest"
	"github.com/aep-kimi/aep-kimi/internal/testkit/stacktest"
)

// PageIsLive is true once the page reads every relay live.
const PageIsLive = `document.getElementById('conn').dataset.conn === 'live'`

// OpenPage opens the stack's fleet page, logged in, and waits for it to be
// live.
func OpenPage(t *testing.T, st *stacktest.Stack) *browsertest.Browser {
	t.Helper()
	b := browsertest.New(t, 1200, 900)
	b.MustRun("open the login URL", chromedp.Navigate(fleetpage.LoginURL(st.RelayURL, st.Token)))
	b.WaitJS("the page is live", PageIsLive)
	return b
}

// PageSeqIDs is what the page holds for a session once it holds at least
// Want sequenced events: their ids, in the page's derivation order.
func PageSeqIDs(b *browsertest.Browser, session string, want int) []string {
	b.WaitJS("the page to hold the log's events", fmt.Sprintf(`aepFleet.S.ordered(aepFleet.state, %s).filter(e => Number.isInteger(e.seq)).length >= %d`, browsertest.Quote(session), want))
	var ids []string
	b.Eval("the page's events", `aepFleet.S.ordered(aepFleet.state, `+browsertest.Quote(session)+`).filter(e => Number.isInteger(e.seq)).map(e => e.id)`, &ids)
	return ids
}

// Within polls a JavaScript expression for at most d and reports whether it
// came true.
func Within(b *browsertest.Browser, expr string, d time.Duration) bool {
	return b.Within(expr, d) == nil
}

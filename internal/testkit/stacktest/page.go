package stacktest

import (
	"fmt"
	"slices"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/aep-kimi/aep-kimi/aep"
	"github.com/aep-kimi/aep-kimi/fleetpage"
	"github.com/aep-kimi/aep-kimi/internal/testkit/browsertest"
)

// OpenPage opens the stack's fleet page, logged in, and waits for it to be
// live.
func (st *Stack) OpenPage(t *testing.T) *browsertest.Browser {
	t.Helper()
	b := browsertest.New(t, 1200, 900)
	b.MustRun("open the login URL", chromedp.Navigate(fleetpage.LoginURL(st.RelayURL, st.Token)))
	b.WaitJS("the page is live", `document.getElementById('conn').dataset.conn === 'live'`)
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

// LogIDs is the adapter log's order of a session: its ids by (epoch, seq).
func LogIDs(ev []*aep.Event) []string {
	sorted := slices.Clone(ev)
	slices.SortStableFunc(sorted, func(a, b *aep.Event) int {
		if c := a.EpochOrZero() - b.EpochOrZero(); c != 0 {
			return int(c)
		}
		return int(*a.Seq - *b.Seq)
	})
	ids := make([]string, len(sorted))
	for i, e := range sorted {
		ids[i] = e.ID
	}
	return ids
}

package stacktest

import (
	"fmt"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/aep-kimi/aep-kimi/aep"
	"github.com/aep-kimi/aep-kimi/internal/testkit/browsertest"
)

// PageIsLive is true once the page reads every relay live.
const PageIsLive = `document.getElementById('conn').dataset.conn === 'live'`

// Within polls a JavaScript expression for at most d and reports whether it
// came true.
func Within(b *browsertest.Browser, expr string, d time.Duration) bool {
	return b.Run(chromedp.Poll(expr, nil, chromedp.WithPollingInterval(100*time.Millisecond), chromedp.WithPollingTimeout(d))) == nil
}

// KimiEvent is a sequenced kimi-code event of session as an emitter sends it.
func KimiEvent(session, typ string, seq int, rest string) string {
	return fmt.Sprintf(`{"aep":"0.1","id":%q,"type":%q,"time":%q,"source":"aep://e2e/kimi-code/%s","agent":"kimi-code","session":%q,"seq":%d,"epoch":1%s}`,
		aep.NewID(), typ, aep.FormatTime(time.Now()), session, session, seq, rest)
}

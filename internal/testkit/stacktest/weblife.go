package stacktest

import (
	"testing"
	"time"

	"github.com/aep-kimi/aep-kimi/bridgeweb"
	"github.com/aep-kimi/aep-kimi/internal/testkit/kimiharness"
)

// MaxEndLag is the bound: no session outlives its server by more.
const MaxEndLag = 5 * time.Second

// WaitAttached waits until the bridge follows a server and returns when.
func (ws *WebStack) WaitAttached(t *testing.T, web *kimiharness.Web) time.Time {
	t.Helper()
	ws.WaitHealth(t, "attached "+web.Base, func(h bridgeweb.Health) bool {
		for _, in := range h.Instances {
			if in.URL == web.Base && in.State == bridgeweb.KapConnected && in.PID == web.PID {
				return true
			}
		}
		return false
	})
	return time.Now()
}

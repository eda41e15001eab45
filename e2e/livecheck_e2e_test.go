// The upstream live checker against the real relay on each store.

package e2e

import (
	"testing"

	"github.com/aep-kimi/aep-kimi/internal/testkit/livecheck"
	"github.com/aep-kimi/aep-kimi/internal/testkit/stacktest"
)

// The upstream live checker against the real relay on each store, with the
// control checks aimed at a real target: the hook adapter serving a running
// Kimi session (print mode, the model slow to answer), and bridge-web in
// primary mode serving a kimi web session whose running turn the checker
// cancels. Authenticated, with --evict (the relay's per-session buffer is
// 8). Like TestLiveChecker in relay/, it needs AEP_NODE and AEP_SPEC.
func TestE2ELiveCheckerControl(t *testing.T) {
	t.Parallel()
	checker := livecheck.Require(t)
	stacktest.Binaries(t)
	for _, store := range []string{"memory", "jetstream"} {
		t.Run(store, func(t *testing.T) {
			relayEnv := func() []string {
				return []string{"AEP_STORE=" + store, "AEP_HOME=" + t.TempDir(), "AEP_BUFFER=8"}
			}
			t.Run("adapter", func(t *testing.T) { stacktest.LiveCheckAdapter(t, checker, relayEnv()) })
			t.Run("bridge-web", func(t *testing.T) { stacktest.LiveCheckBridgeWeb(t, checker, relayEnv()) })
		})
	}
}

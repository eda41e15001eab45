// aep-setup's hooks loaded by the real Kimi and every hook of the
// installed version fired into the running adapter.

package hooks

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aep-kimi/aep-kimi/aep"
	"github.com/aep-kimi/aep-kimi/internal/testkit/kimiharness"
	"github.com/aep-kimi/aep-kimi/internal/testkit/stacktest"
	"github.com/aep-kimi/aep-kimi/setup"
)

// The hooks aep-setup registers load in the real Kimi (`kimi doctor` passes)
// and real sessions fire every one of the installed version's 20 hooks into
// the running adapter: the kimi web scenario (permission pair, compaction,
// queue and interrupt, rejection, the 60 s heartbeat, archive) plus the
// print-mode subagent, background-task and stop-failure scenarios.
func TestE2ESetupFiresEveryHook(t *testing.T) {
	t.Parallel()
	kimi := kimiharness.Require(t)
	st := stacktest.StartStack(t)

	webMock := kimiharness.StartMock(t, kimiharness.ScenarioFile(t, "web"))
	webHome := st.RegisterWithSetup(t, kimi, webMock.Port)
	web := kimiharness.StartWeb(t, kimi, webHome, t.TempDir())
	kimiharness.DriveWeb(t, web, true)
	st.WaitEvent(t, func(e *aep.Event) bool { return e.Type == "session.ended" }) // the archive's SessionEnd hook
	web.Shutdown(t)

	for _, name := range []string{"subagent", "background", "stop-failure"} {
		script := kimiharness.ScenarioFile(t, name)
		sc, err := kimiharness.ReadScript(script)
		if err != nil {
			t.Fatal(err)
		}
		mock := kimiharness.StartMock(t, script)
		home := st.RegisterWithSetup(t, kimi, mock.Port)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		out, err := kimiharness.Print(ctx, kimi, home, t.TempDir(), sc.Prompt)
		cancel()
		if err != nil && name != "stop-failure" {
			t.Fatalf("%s: kimi -p: %v\n%s", name, err, out)
		}
	}
	st.WaitQuiet(t)
	counts := st.HookCounts(t)
	var missing []string
	for _, ev := range setup.HookEvents("2.1.0") {
		if counts[ev] == 0 {
			missing = append(missing, ev)
		}
	}
	if len(missing) > 0 {
		t.Fatalf("hooks never fired into the adapter: %s (seen %v)", strings.Join(missing, ", "), counts)
	}
	for name := range st.SessionLogs(t) {
		stacktest.ValidateWithCLI(t, filepath.Join(st.Home, "logs", "kimi-code", name))
	}
}

// `up`'s banner as its first output, clean of log lines; only the built
// binary's real stdout shows it.

package e2e

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aep-kimi/aep-kimi/aep"
	"github.com/aep-kimi/aep-kimi/internal/testkit/netaddr"
	"github.com/aep-kimi/aep-kimi/internal/testkit/stacktest"
)

// up's banner is the first thing it prints (no log line before it), its
// next steps leave out registering the hooks once config.toml has them as
// the adapter needs, and it lists the --notify targets (issue 36).
func TestE2EUpBannerClean(t *testing.T) {
	t.Parallel()
	home, kimiHome := t.TempDir(), t.TempDir()
	rport, aport := netaddr.FreePort(t), netaddr.FreePort(t)
	hookTo := fmt.Sprintf("http://127.0.0.1:%d", aport)
	run := func(extra ...string) string {
		t.Helper()
		args := append([]string{"up", "--relay-listen", fmt.Sprintf("127.0.0.1:%d", rport), "--adapter-listen", fmt.Sprintf("127.0.0.1:%d", aport),
			"--web=false", "--kimi-home", kimiHome, "--notify", "webhook:http://127.0.0.1:9/hook?key=sekrit"}, extra...)
		up := stacktest.StartDaemon(t, hookTo, []string{"AEP_TOKEN=e2e-" + aep.NewID(), "AEP_HOME=" + home, "AEP_NOTIFY_PUSH_ALLOW="}, args...)
		up.Stop(t)
		return up.Logs.String()
	}
	out := run()
	if first, _, _ := strings.Cut(out, "\n"); first != "aep-kimi up: running (Ctrl-C to stop)" {
		t.Fatalf("up's first line is %q, not the banner's:\n%s", first, out)
	}
	if !strings.Contains(out, "  store    jetstream in "+filepath.Join(home, "relay")+": the history outlives a restart of up") {
		t.Fatalf("the banner does not say where the history is kept:\n%s", out)
	}
	if !strings.Contains(out, "  notify   webhook:") || strings.Contains(out, "sekrit") {
		t.Fatalf("the banner does not list the --notify target, or shows its secret:\n%s", out)
	}
	if !strings.Contains(out, "1. register the hooks with Kimi:  aep-setup write kimi-code\n") {
		t.Fatalf("nothing registered, yet no step to register:\n%s", out)
	}
	write := []string{"write", "kimi-code", "--home", kimiHome, "--daemon", hookTo, "--aep-home", home, "--kimi-version", "2.1.0",
		"--hook-cmd", filepath.Join(stacktest.Binaries(t), "kimi-hook")}
	if code, o := stacktest.SetupCLI(t, write...); code != 0 {
		t.Fatalf("aep-setup write: exit %d\n%s", code, o)
	}
	out = run()
	if strings.Contains(out, "register the hooks") || !strings.Contains(out, "hooks    registered in "+filepath.Join(kimiHome, "config.toml")) ||
		!strings.Contains(out, "1. watch the stream:") {
		t.Fatalf("hooks registered, yet the banner says to register them:\n%s", out)
	}
	// The gate needs the --control registration: until then, the step stays.
	out = run("--control")
	if !strings.Contains(out, "1. register the hooks with Kimi:  aep-setup write kimi-code --control\n") {
		t.Fatalf("the gate on a plain registration, without the step to fix it:\n%s", out)
	}
}

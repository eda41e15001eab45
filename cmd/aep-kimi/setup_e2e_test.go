package main

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/aep-kimi/aep-kimi/internal/testkit/kimiharness"
	"github.com/aep-kimi/aep-kimi/setup"
)

// registerWithSetup writes a Kimi home whose provider is the mock and whose
// hooks are registered by `aep-setup write kimi-code`, then checks that
// `kimi doctor` accepts it.
func (st *stack) registerWithSetup(t *testing.T, kimi string, mockPort int) string {
	t.Helper()
	home := t.TempDir()
	kimiharness.WriteWebConfig(t, home, mockPort)
	out, err := exec.Command(filepath.Join(binaries(t), "aep-setup"), "write", "kimi-code",
		"--home", home, "--daemon", st.hookTo, "--aep-home", st.home, "--kimi", kimi).CombinedOutput()
	if err != nil {
		t.Fatalf("aep-setup write: %v\n%s", err, out)
	}
	doctor := exec.Command(kimi, "doctor")
	doctor.Env = kimiharness.Env(home)
	if out, err := doctor.CombinedOutput(); err != nil {
		t.Fatalf("kimi doctor rejects the config aep-setup wrote: %v\n%s", err, out)
	}
	return home
}

// hookCounts reads the adapter's per-event hook counters.
func (st *stack) hookCounts(t *testing.T) map[string]int {
	t.Helper()
	resp, err := http.Get(st.hookTo + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	re := regexp.MustCompile(`^aepkimi_adapter_hooks_total\{event="([A-Za-z]+)"\} (\d+)`)
	out := map[string]int{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if m := re.FindStringSubmatch(sc.Text()); m != nil {
			var n int
			json.Unmarshal([]byte(m[2]), &n)
			out[m[1]] = n
		}
	}
	return out
}

// The hooks aep-setup registers load in the real Kimi (`kimi doctor` passes)
// and real sessions fire every one of the installed version's 20 hooks into
// the running adapter: the kimi web scenario (permission pair, compaction,
// queue and interrupt, rejection, the 60 s heartbeat, archive) plus the
// print-mode subagent, background-task and stop-failure scenarios.
func TestE2ESetupFiresEveryHook(t *testing.T) {
	kimi := kimiharness.Require(t)
	st := startStack(t)

	webMock := kimiharness.StartMock(t, kimiharness.ScenarioFile(t, "web"))
	webHome := st.registerWithSetup(t, kimi, webMock.Port)
	web := kimiharness.StartWeb(t, kimi, webHome, t.TempDir())
	kimiharness.DriveWeb(t, web, true)
	web.Shutdown(t)

	for _, name := range []string{"subagent", "background", "stop-failure"} {
		script := kimiharness.ScenarioFile(t, name)
		sc, err := kimiharness.ReadScript(script)
		if err != nil {
			t.Fatal(err)
		}
		mock := kimiharness.StartMock(t, script)
		home := st.registerWithSetup(t, kimi, mock.Port)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		out, err := kimiharness.Print(ctx, kimi, home, t.TempDir(), sc.Prompt)
		cancel()
		if err != nil && name != "stop-failure" {
			t.Fatalf("%s: kimi -p: %v\n%s", name, err, out)
		}
	}
	st.waitQuiet(t)
	counts := st.hookCounts(t)
	var missing []string
	for _, ev := range setup.HookEvents("2.1.0") {
		if counts[ev] == 0 {
			missing = append(missing, ev)
		}
	}
	if len(missing) > 0 {
		t.Fatalf("hooks never fired into the adapter: %s (seen %v)", strings.Join(missing, ", "), counts)
	}
	for name := range st.sessionLogs(t) {
		validateWithCLI(t, filepath.Join(st.home, "logs", "kimi-code", name))
	}
}

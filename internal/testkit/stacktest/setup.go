package stacktest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/aep-kimi/aep-kimi/internal/testkit/httpcall"
	"github.com/aep-kimi/aep-kimi/internal/testkit/kimiharness"
)

// RegisterWithSetup writes a Kimi home whose provider is the mock and whose
// hooks are registered by `aep-setup write kimi-code`, which asks kimi its
// version, then checks that `kimi doctor` accepts it.
func (st *Stack) RegisterWithSetup(t *testing.T, kimi string, mockPort int) string {
	t.Helper()
	home := st.writeSetupHome(t, mockPort, "--kimi", kimi)
	doctor := exec.Command(kimi, "doctor")
	doctor.Env = kimiharness.Env(home)
	started := time.Now()
	out, err := doctor.CombinedOutput()
	kimiharness.LogLaunch("doctor", home, started, doctor.ProcessState)
	if err != nil {
		t.Fatalf("kimi doctor rejects the config aep-setup wrote: %v\n%s", err, out)
	}
	return home
}

// SetupHome is RegisterWithSetup for the harness's Kimi version, without
// starting Kimi to ask it or to run its doctor: each Kimi start costs
// seconds of CPU, and one check of the registration is enough.
func (st *Stack) SetupHome(t *testing.T, mockPort int) string {
	t.Helper()
	return st.writeSetupHome(t, mockPort, "--kimi-version", kimiharness.KimiVersion)
}

// writeSetupHome writes a Kimi home for the mock on mockPort whose hooks
// `aep-setup write kimi-code VERSION-ARGS` registered.
func (st *Stack) writeSetupHome(t *testing.T, mockPort int, version ...string) string {
	t.Helper()
	home := t.TempDir()
	kimiharness.WriteWebConfig(t, home, mockPort)
	out, err := exec.Command(filepath.Join(Binaries(t), "aep-setup"), append([]string{"write", "kimi-code",
		"--home", home, "--daemon", st.HookTo, "--aep-home", st.Home}, version...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("aep-setup write: %v\n%s", err, out)
	}
	return home
}

// HookCounts reads the adapter's per-event hook counters.
func (st *Stack) HookCounts(t *testing.T) map[string]int {
	t.Helper()
	body := httpcall.Get(t, st.HookTo+"/metrics", "").Body
	re := regexp.MustCompile(`^aepkimi_adapter_hooks_total\{event="([A-Za-z]+)"\} (\d+)`)
	out := map[string]int{}
	sc := bufio.NewScanner(bytes.NewReader(body))
	for sc.Scan() {
		if m := re.FindStringSubmatch(sc.Text()); m != nil {
			var n int
			json.Unmarshal([]byte(m[2]), &n)
			out[m[1]] = n
		}
	}
	return out
}

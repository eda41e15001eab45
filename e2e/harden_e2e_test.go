// A log torn by a crash mid-append, repaired on the adapter's next
// start: a real process's restart on real files.

package e2e

import (
	"bytes"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aep-kimi/aep-kimi/adapter"
	"github.com/aep-kimi/aep-kimi/internal/journal"
	"github.com/aep-kimi/aep-kimi/internal/testkit/stacktest"
)

// The adapter died mid-append (power loss, full disk) and left a partial
// line. After a restart the next hook's event lands on a line of its own:
// `aep-kimi validate` passes, the cut bytes are in a quarantine file,
// /metrics counts it and `aep-kimi quarantine` lists it.
func TestE2ETornLogTailRepaired(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("end-to-end")
	}
	st := stacktest.StartStack(t)
	st.RunHook(t, `{"hook_event_name":"SessionStart","session_id":"torn-e2e","source":"startup"}`)
	st.RunHook(t, `{"hook_event_name":"UserPromptSubmit","session_id":"torn-e2e","prompt":[{"type":"text","text":"hi"}],"is_steer":false}`)
	st.Adapter.Stop(t)
	log := filepath.Join(st.Home, "logs", "kimi-code", adapter.LogFileName("torn-e2e"))
	torn := []byte(`{"specversion":"0.1","id":"01K`)
	f, err := os.OpenFile(log, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.Write(torn)
	f.Close()

	st.StartAdapter(t)
	st.RunHook(t, `{"hook_event_name":"Stop","session_id":"torn-e2e","stop_hook_active":false}`)
	bin := filepath.Join(stacktest.Binaries(t), "aep-kimi")
	if out, err := exec.Command(bin, "validate", log).CombinedOutput(); err != nil {
		t.Fatalf("validate: %v\n%s", err, out)
	}
	qs, _ := filepath.Glob(log + journal.TornSuffix + "*")
	if len(qs) != 1 {
		t.Fatalf("quarantine files: %v", qs)
	}
	if b, _ := os.ReadFile(qs[0]); !bytes.Equal(b, torn) {
		t.Fatalf("quarantine holds %q", b)
	}
	resp, err := http.Get(st.HookTo + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	m, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(m), `aepkimi_adapter_log_torn_tails_total{action="cut"} 1`) {
		t.Error("/metrics does not count the torn tail")
	}
	if n := strings.Count(st.Adapter.Logs.String(), "partial line"); n != 1 {
		t.Errorf("the repair logged %d times, want once", n)
	}
	out, err := exec.Command(bin, "quarantine", "--home", st.Home).CombinedOutput()
	if err != nil || !strings.Contains(string(out), qs[0]) {
		t.Fatalf("quarantine: %v\n%s", err, out)
	}
}

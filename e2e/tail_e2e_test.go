// `aep-kimi tail` on real sessions: lines that fit the terminal and tell
// like sessions apart, as a person reads them.

package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/aep-kimi/aep-kimi/aep"
	"github.com/aep-kimi/aep-kimi/internal/testkit/stacktest"
)

// Two sessions at once in one project, their ids alike for the first 8
// characters after Kimi's session_ prefix: `tail` in a 100-column terminal
// (the built binary, COLUMNS=100) prints no line over 100 characters,
// labels the two with the project and ids that differ, continues the
// respond command over lines rather than cut it, and shows it only for the
// request still waiting, not for the one answered.
func TestE2ETailFitsAndTellsSessionsApart(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("end to end: builds and runs the binaries")
	}
	st := stacktest.StartStack(t, "AEP_KIMI_CONTROL=1", "AEP_ATTENTION_TIMEOUT_MS=45000", "AEP_CAPTURE=redacted")
	stamp := strings.ToLower(aep.NewID())
	shop, api := "session_73700a68-b5bf-"+stamp, "session_73700a68-1c2d-"+stamp
	dir := filepath.Join(t.TempDir(), "acme-shop")
	long := "go test ./... -run 'TestSomethingRatherLong|TestAnotherEquallyLongName' -count=1 -race -timeout 10m"
	var held []<-chan string
	for _, id := range []string{shop, api} {
		stacktest.Reply(t, st.Hook(t, map[string]any{"hook_event_name": "SessionStart", "session_id": id, "cwd": dir, "source": "startup"}))
	}
	for _, id := range []string{shop, api} {
		held = append(held, st.HeldGate(t, id, "call_1", long))
	}
	st.WaitCLI(t, func(s string) bool { return strings.Count(s, "request ") == 2 }, "pending")
	if code, out := st.Cli(t, "respond", "--option", "deny", api); code != 0 {
		t.Fatalf("respond: exit %d: %s", code, out)
	}
	if !stacktest.Denies(stacktest.Reply(t, held[1])) {
		t.Fatal("the answered gate did not deny")
	}

	var out string
	st.WaitCLI(t, func(string) bool {
		cmd := exec.Command(filepath.Join(stacktest.Binaries(t), "aep-kimi"), "tail", "--from", "all", "--once", "--state", "none")
		cmd.Env = append(os.Environ(), "AEP_TOKEN="+st.Token, "AEP_RELAY="+st.RelayURL, "COLUMNS=100")
		b, err := cmd.CombinedOutput()
		out = string(b)
		return err == nil && strings.Contains(out, "denied by owner (cli)")
	}, "pending")
	for _, l := range strings.Split(strings.TrimRight(out, "\n"), "\n") {
		if n := utf8.RuneCountInString(l); n > 100 {
			t.Errorf("%d characters: %s", n, l)
		}
	}
	// Once both are known, every row names its own.
	for _, want := range []string{"acme-shop · 73700a68-b ", "acme-shop · 73700a68-1 "} {
		if !regexp.MustCompile(`(?m)^\S+  ` + regexp.QuoteMeta(want)).MatchString(out) {
			t.Errorf("no row labelled %q:\n%s", want, out)
		}
	}
	if regexp.MustCompile(`(?m)^\S+  [^↳]*session_`).MatchString(out) {
		t.Errorf("a label keeps Kimi's session_ prefix:\n%s", out)
	}
	// The waiting request's command names its session by the label's short
	// id, so it fits the row (a longer one continues over lines a shell
	// joins: TestContinuedCommand).
	if n := strings.Count(out, "aep-kimi respond"); n != 1 ||
		!regexp.MustCompile(`↳ aep-kimi respond --option deny 73700a68-b [0-9A-Z]{26}\n`).MatchString(out) {
		t.Errorf("%d answer commands; want one, for the request still waiting:\n%s", n, out)
	}
	t.Logf("tail at 100 columns:\n%s", out)
}

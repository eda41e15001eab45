// Hostile text held at the gate and printed by every terminal command:
// escaped in each, checked on the built binaries' real output.

package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aep-kimi/aep-kimi/aep"
	"github.com/aep-kimi/aep-kimi/internal/spool"
	"github.com/aep-kimi/aep-kimi/internal/testkit/stacktest"
	"github.com/aep-kimi/aep-kimi/relay/consumer"
)

// A hostile tool command, held at the gate, is printed by every command that
// shows event data (pending, tail with and without colour, respond's
// several-pending error, map, validate, quarantine): none prints a raw
// control character, and tail on a terminal sends only its own colours.
func TestE2ETerminalControlsEscaped(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("end to end: builds and runs the binaries")
	}
	st := stacktest.StartStack(t, "AEP_KIMI_CONTROL=1", "AEP_ATTENTION_TIMEOUT_MS=45000", "AEP_CAPTURE=redacted")
	session := "term-" + strings.ToLower(aep.NewID())
	if out := stacktest.Reply(t, st.Hook(t, map[string]any{"hook_event_name": "SessionStart", "session_id": session,
		"source": "startup", "session_title": "title " + stacktest.TerminalAttacks[0].Seq + stacktest.TerminalAttacks[3].Seq})); out != "" {
		t.Fatalf("SessionStart reply %q", out)
	}
	for i, a := range stacktest.TerminalAttacks {
		st.HeldGate(t, session, fmt.Sprintf("call_%d", i), "echo "+a.Seq+" done")
	}
	st.WaitCLI(t, func(s string) bool { return strings.Count(s, "request ") == len(stacktest.TerminalAttacks) }, "pending")

	check := func(name, out string, allowed ...string) {
		t.Helper()
		if raw := stacktest.RawControl(out, allowed...); raw != "" {
			t.Errorf("%s prints a raw control character: %s", name, raw)
		}
	}
	code, out := st.Cli(t, "pending")
	if code != 0 || !strings.Contains(out, `echo \x1b]52;c;ZXZpbA==\x07 done`) {
		t.Errorf("pending (exit %d) does not show the command escaped:\n%s", code, out)
	}
	check("pending", out)

	code, out = st.Cli(t, "tail", "--from", "all", "--once", "--state", "none", "--no-color")
	if code != 0 || !strings.Contains(out, `\u009b2K`) {
		t.Errorf("tail --no-color (exit %d) does not show the command escaped:\n%s", code, out)
	}
	check("tail --no-color", out)

	if out, err := st.OnTerminal(t, "tail", "--from", "all", "--once", "--state", "none"); err != nil {
		t.Logf("tail on a terminal not checked: %v", err)
	} else {
		if !strings.Contains(out, "\x1b[1m\x1b[35m") || !strings.Contains(out, `\u202eexe.txt`) {
			t.Errorf("tail on a terminal is not coloured, or the command not escaped:\n%q", out)
		}
		check("tail (colour)", out, consumer.Colours...)
	}

	code, out = st.Cli(t, "respond", "--option", "deny", session)
	if code != stacktest.ExitSeveralPending || !strings.Contains(out, `\x1b[1A`) {
		t.Errorf("respond SESSION with several pending: exit %d, want %d listing them escaped:\n%s", code, stacktest.ExitSeveralPending, out)
	}
	check("respond's error", out)

	// map: a hook payload carrying the command at capture full; its JSON
	// output stays JSON and says the same.
	cmdText := "echo"
	for _, a := range stacktest.TerminalAttacks {
		cmdText += " " + a.Seq
	}
	payload, _ := json.Marshal(stacktest.BashCall(session, "c1", cmdText))
	mapCode, mapOut := st.CliIn(t, bytes.NewReader(payload), "map", "--capture", "full")
	check("map", mapOut)
	var ev struct {
		Data struct {
			Args struct{ Command string } `json:"args"`
		} `json:"data"`
	}
	if err := json.Unmarshal([]byte(mapOut), &ev); err != nil || ev.Data.Args.Command != cmdText {
		t.Errorf("map's output (exit %d) no longer decodes to the command: %v %q\n%s", mapCode, err, ev.Data.Args.Command, mapOut)
	}

	// validate: the session log, under a name carrying the sequences, with
	// one violation so every line names the file.
	logs := st.SessionLogs(t)
	var logBytes []byte
	for _, b := range logs {
		logBytes = append(logBytes, b...)
	}
	if !bytes.Contains(logBytes, []byte(`\u001b]52`)) {
		t.Fatalf("the session log does not carry the command:\n%s", logBytes)
	}
	hostileName := filepath.Join(t.TempDir(), "log"+strings.ReplaceAll(cmdText, "/", "_")+".jsonl")
	if err := os.WriteFile(hostileName, append(logBytes, '\n'), 0o600); err != nil {
		t.Fatal(err)
	}
	_, out = st.Cli(t, "validate", hostileName)
	if !strings.Contains(out, "blank line") {
		t.Errorf("validate found no violation to report:\n%s", out)
	}
	check("validate", out)

	// quarantine: a spool record set aside with a reason quoting its input,
	// as the adapter writes it.
	qhome := t.TempDir()
	dir := spool.Dir(qhome)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	rec := filepath.Join(dir, "000001"+spool.Ext)
	if err := os.WriteFile(rec, payload, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := spool.Quarantine(rec, "unreadable hook "+cmdText); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"quarantine", "--home", qhome}, {"quarantine", "--home", qhome, "--json"}} {
		_, out = st.Cli(t, args...)
		if !strings.Contains(out, "unreadable hook") {
			t.Errorf("%s lists no record:\n%s", strings.Join(args, " "), out)
		}
		check(strings.Join(args, " "), out)
	}
}

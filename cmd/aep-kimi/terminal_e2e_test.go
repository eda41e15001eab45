package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/aep-kimi/aep-kimi/aep"
	"github.com/aep-kimi/aep-kimi/internal/spool"
	"github.com/aep-kimi/aep-kimi/relay/consumer"
)

// terminalAttacks are what a prompt-injected model puts in a tool command to
// reach the operator's terminal: each must reach it escaped.
var terminalAttacks = []struct{ name, seq string }{
	{"OSC 52 clipboard write", "\x1b]52;c;ZXZpbA==\x07"},
	{"erase line", "\x1b[2K"},
	{"cursor up", "\x1b[1A"},
	{"one-byte CSI", "\u009b2K"},
	{"bidi override", "\u202eexe.txt\u2066x\u2069"},
}

// rawControl names the first terminal control in out that is not one of our
// own colour codes (allowed lists the exact sequences the command may send).
var rawControlRE = regexp.MustCompile("[\x00-\x08\x0b-\x1f\x7f\u0080-\u009f\u200e\u200f\u061c\u202a-\u202e\u2066-\u2069]")

func rawControl(out string, allowed ...string) string {
	for _, a := range allowed {
		out = strings.ReplaceAll(out, a, "")
	}
	if loc := rawControlRE.FindStringIndex(out); loc != nil {
		from, to := max(loc[0]-30, 0), min(loc[1]+30, len(out))
		return fmt.Sprintf("%q at %d: …%q…", out[loc[0]:loc[1]], loc[0], out[from:to])
	}
	return ""
}

// A hostile tool command, held at the gate, is printed by every command that
// shows event data (pending, tail with and without colour, respond's
// several-pending error, map, validate, quarantine): none prints a raw
// control character, and tail on a terminal sends only its own colours.
func TestE2ETerminalControlsEscaped(t *testing.T) {
	if testing.Short() {
		t.Skip("end to end: builds and runs the binaries")
	}
	st := startStack(t, "AEP_KIMI_CONTROL=1", "AEP_ATTENTION_TIMEOUT_MS=45000", "AEP_CAPTURE=redacted")
	session := "term-" + strings.ToLower(aep.NewID())
	if out := reply(t, st.hook(t, map[string]any{"hook_event_name": "SessionStart", "session_id": session,
		"source": "startup", "session_title": "title " + terminalAttacks[0].seq + terminalAttacks[3].seq})); out != "" {
		t.Fatalf("SessionStart reply %q", out)
	}
	for i, a := range terminalAttacks {
		st.heldGate(t, session, fmt.Sprintf("call_%d", i), "echo "+a.seq+" done")
	}
	st.waitCLI(t, func(s string) bool { return strings.Count(s, "request ") == len(terminalAttacks) }, "pending")

	check := func(name, out string, allowed ...string) {
		t.Helper()
		if raw := rawControl(out, allowed...); raw != "" {
			t.Errorf("%s prints a raw control character: %s", name, raw)
		}
	}
	code, out := st.cli(t, "pending")
	if code != 0 || !strings.Contains(out, `echo \x1b]52;c;ZXZpbA==\x07 done`) {
		t.Errorf("pending (exit %d) does not show the command escaped:\n%s", code, out)
	}
	check("pending", out)

	code, out = st.cli(t, "tail", "--from", "all", "--once", "--state", "none", "--no-color")
	if code != 0 || !strings.Contains(out, `\u009b2K`) {
		t.Errorf("tail --no-color (exit %d) does not show the command escaped:\n%s", code, out)
	}
	check("tail --no-color", out)

	if out, err := st.onTerminal(t, "tail", "--from", "all", "--once", "--state", "none"); err != nil {
		t.Logf("tail on a terminal not checked: %v", err)
	} else {
		if !strings.Contains(out, "\x1b[1m\x1b[35m") || !strings.Contains(out, `\u202eexe.txt`) {
			t.Errorf("tail on a terminal is not coloured, or the command not escaped:\n%q", out)
		}
		check("tail (colour)", out, consumer.Colours...)
	}

	code, out = st.cli(t, "respond", "--option", "deny", session)
	if code != exitSeveralPending || !strings.Contains(out, `\x1b[1A`) {
		t.Errorf("respond SESSION with several pending: exit %d, want %d listing them escaped:\n%s", code, exitSeveralPending, out)
	}
	check("respond's error", out)

	// map: a hook payload carrying the command at capture full; its JSON
	// output stays JSON and says the same.
	cmdText := "echo"
	for _, a := range terminalAttacks {
		cmdText += " " + a.seq
	}
	payload, _ := json.Marshal(bashCall(session, "c1", cmdText))
	mapCode, mapOut := st.cliIn(t, bytes.NewReader(payload), "map", "--capture", "full")
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
	logs := st.sessionLogs(t)
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
	_, out = st.cli(t, "validate", hostileName)
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
		_, out = st.cli(t, args...)
		if !strings.Contains(out, "unreadable hook") {
			t.Errorf("%s lists no record:\n%s", strings.Join(args, " "), out)
		}
		check(strings.Join(args, " "), out)
	}
}

// onTerminal runs an aep-kimi subcommand with its stdout and stderr on a
// pseudo-terminal and returns what the terminal received.
func (st *stack) onTerminal(t testing.TB, args ...string) (string, error) {
	t.Helper()
	master, slave, err := openPTY()
	if err != nil {
		return "", err
	}
	defer master.Close()
	cmd := exec.Command(filepath.Join(binaries(t), "aep-kimi"), args...)
	// Rows fit the terminal: wide enough that the escaped text the checks
	// look for is not clipped.
	env := []string{"AEP_TOKEN=" + st.token, "AEP_RELAY=" + st.relayURL, "COLUMNS=400"}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "NO_COLOR=") && !strings.HasPrefix(kv, "COLUMNS=") {
			env = append(env, kv)
		}
	}
	cmd.Env, cmd.Stdout, cmd.Stderr = env, slave, slave
	var got bytes.Buffer
	done := make(chan struct{})
	go func() { io.Copy(&got, master); close(done) }() // ends with EIO once the slave is gone
	err = cmd.Run()
	slave.Close()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the terminal never drained")
	}
	if err != nil {
		return got.String(), fmt.Errorf("aep-kimi %s: %w\n%s", strings.Join(args, " "), err, got.String())
	}
	// The terminal turns each newline into CR LF.
	return strings.ReplaceAll(got.String(), "\r\n", "\n"), nil
}

package stacktest

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TerminalAttacks are what a prompt-injected model puts in a tool command to
// reach the operator's terminal: each must reach it escaped.
var TerminalAttacks = []struct{ name, Seq string }{
	{"OSC 52 clipboard write", "\x1b]52;c;ZXZpbA==\x07"},
	{"erase line", "\x1b[2K"},
	{"cursor up", "\x1b[1A"},
	{"one-byte CSI", "\u009b2K"},
	{"bidi override", "\u202eexe.txt\u2066x\u2069"},
}

// RawControl names the first terminal control in out that is not one of our
// own colour codes (allowed lists the exact sequences the command may send).
var RawControlRE = regexp.MustCompile("[\x00-\x08\x0b-\x1f\x7f\u0080-\u009f\u200e\u200f\u061c\u202a-\u202e\u2066-\u2069]")

func RawControl(out string, allowed ...string) string {
	for _, a := range allowed {
		out = strings.ReplaceAll(out, a, "")
	}
	if loc := RawControlRE.FindStringIndex(out); loc != nil {
		from, to := max(loc[0]-30, 0), min(loc[1]+30, len(out))
		return fmt.Sprintf("%q at %d: …%q…", out[loc[0]:loc[1]], loc[0], out[from:to])
	}
	return ""
}

// OnTerminal runs an aep-kimi subcommand with its stdout and stderr on a
// pseudo-terminal and returns what the terminal received.
func (st *Stack) OnTerminal(t testing.TB, args ...string) (string, error) {
	t.Helper()
	master, slave, err := OpenPTY()
	if err != nil {
		return "", err
	}
	defer master.Close()
	cmd := exec.Command(filepath.Join(Binaries(t), "aep-kimi"), args...)
	// Rows fit the terminal: wide enough that the escaped text the checks
	// look for is not clipped.
	env := []string{"AEP_TOKEN=" + st.Token, "AEP_RELAY=" + st.RelayURL, "COLUMNS=400"}
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

package kimiharness

import (
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/aep-kimi/aep-kimi/internal/testkit/netaddr"
	"github.com/aep-kimi/aep-kimi/internal/testkit/poll"
)

// pasteGap is the pause before a submitting Enter (see Submit).
const pasteGap = 500 * time.Millisecond

// screenTimeout bounds each wait for text on the TUI's screen.
const screenTimeout = 45 * time.Second

// TUI is an interactive kimi running in a detached tmux pane on a private
// tmux server.
type TUI struct {
	socket string
}

// StartTUI runs the interactive kimi on home in workdir, in a 160x45 tmux
// pane; it skips the test when tmux is not installed and stops with the
// test.
func StartTUI(t testing.TB, kimi, home, workdir string) *TUI {
	t.Helper()
	if _, err := exec.LookPath("tmux"); err != nil {
		t.Skip("skipping: the TUI runner needs tmux, which is not installed")
	}
	u := &TUI{socket: fmt.Sprintf("aep-kimi-%d", netaddr.FreePort(t))}
	var env []string
	for _, kv := range kimiEnv(home) {
		env = append(env, shellQuote(kv))
	}
	// A private server, so the pane gets this environment and nobody
	// else's sessions; the shell lingers after kimi exits so the last
	// screen can still be read.
	script := fmt.Sprintf("cd %s && env %s %s; sleep 30", shellQuote(workdir), strings.Join(env, " "), shellQuote(kimi))
	u.tmux(t, "-f", "/dev/null", "new-session", "-d", "-s", "kimi", "-x", "160", "-y", "45", "sh", "-c", script)
	t.Cleanup(func() { exec.Command("tmux", "-L", u.socket, "kill-server").Run() }) //nolint:errcheck // gone already is fine
	return u
}

func (u *TUI) tmux(t testing.TB, args ...string) string {
	t.Helper()
	out, err := exec.Command("tmux", append([]string{"-L", u.socket}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("tmux %s: %v: %s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// Screen is the pane's current text.
func (u *TUI) Screen(t testing.TB) string {
	t.Helper()
	return u.tmux(t, "capture-pane", "-p", "-t", "kimi")
}

// WaitFor waits until text is on the screen and returns the screen.
func (u *TUI) WaitFor(t testing.TB, text string) string {
	t.Helper()
	var s string
	// Each look runs tmux: a few a second are enough.
	if !poll.Every(screenTimeout, 250*time.Millisecond, func() bool {
		s = u.Screen(t)
		return strings.Contains(s, text)
	}) {
		t.Fatalf("the TUI never showed %q; screen:\n%s", text, s)
	}
	return s
}

// Keys sends tmux key names (Enter, C-m, 1).
func (u *TUI) Keys(t testing.TB, keys ...string) {
	t.Helper()
	u.tmux(t, append([]string{"send-keys", "-t", "kimi"}, keys...)...)
}

// Submit types text and submits it. The text and the submitting key go
// separately: sent together, the Enter can arrive as a modified Enter that
// inserts a newline. The Enter waits until the screen shows the text's last
// word once more than before: the text has arrived whole.
func (u *TUI) Submit(t testing.TB, text string) {
	t.Helper()
	words := strings.Fields(text)
	if len(words) == 0 {
		t.Fatal("Submit: no text")
	}
	last := words[len(words)-1]
	before := strings.Count(u.Screen(t), last)
	u.tmux(t, "send-keys", "-t", "kimi", "-l", text)
	var s string
	if !poll.Every(screenTimeout, 100*time.Millisecond, func() bool {
		s = u.Screen(t)
		return strings.Count(s, last) > before
	}) {
		t.Fatalf("the TUI never showed the typed %q; screen:\n%s", text, s)
	}
	// Not a synchronisation: the text is on screen, but keys that follow
	// typing this closely are taken as part of a paste, which turns the
	// Enter into a newline (seen in a quiet CI run once the pause was
	// gone); a person's pause before Enter is what Kimi's input expects.
	time.Sleep(pasteGap)
	u.Keys(t, "C-m")
}

// RunTUI drives one interactive session: trust the working directory, send
// prompt, approve the tool call it leads to once, wait for answer, and /exit
// (the one way to get SessionEnd with reason "exit").
func RunTUI(t testing.TB, kimi, home, workdir, prompt, answer string) {
	t.Helper()
	u := StartTUI(t, kimi, home, workdir)
	u.WaitFor(t, "Trust this folder")
	u.Keys(t, "Enter")
	u.WaitFor(t, "Welcome to Kimi Code")
	u.Submit(t, prompt)
	u.WaitFor(t, "Approve once")
	u.Keys(t, "1")
	u.WaitFor(t, answer)
	u.Submit(t, "/exit")
	u.WaitFor(t, "Bye!")
}

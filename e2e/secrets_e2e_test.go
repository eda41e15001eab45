// Where secrets may appear: login tokens only on a terminal, token
// files, and files replaced whole, read from the built binaries' output.

package e2e

import (
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/aep-kimi/aep-kimi/fleetpage"
	"github.com/aep-kimi/aep-kimi/internal/testkit/browsertest"
	"github.com/aep-kimi/aep-kimi/internal/testkit/netaddr"
	"github.com/aep-kimi/aep-kimi/internal/testkit/poll"
	"github.com/aep-kimi/aep-kimi/internal/testkit/relaycall"
	"github.com/aep-kimi/aep-kimi/internal/testkit/safefiletest"
	"github.com/aep-kimi/aep-kimi/internal/testkit/stacktest"
)

// The dash's own login token reaches its stdout only on a terminal: piped
// (a log, a redirect), the banner names a private file holding the login
// URL instead.
func TestE2EDashLoginOnlyOnTerminal(t *testing.T) {
	t.Parallel()
	stacktest.Binaries(t)
	if runtime.GOOS == "windows" {
		t.Skip("no pseudo-terminal")
	}
	home := stacktest.HomeWithToken(t, "relay-token-0123456789abcdef")
	env := stacktest.CleanEnv(home)
	args := []string{"dash", "--relay", "http://127.0.0.1:9", "--listen", "127.0.0.1:0", "--home", home}

	piped := stacktest.StartBannered(t, env, false, "  page", args...)
	out := piped.Out.String() + piped.Err.String()
	if strings.Contains(out, "#token=") {
		t.Errorf("piped, the dash printed its login token:\n%s", out)
	}
	m := stacktest.LoginFileLine.FindStringSubmatch(piped.Out.String())
	if m == nil {
		t.Fatalf("piped, the banner names no login file:\n%s", out)
	}
	if m[1] != filepath.Join(home, fleetpage.DashOpenFileName) {
		t.Errorf("login file %s, want %s", m[1], filepath.Join(home, fleetpage.DashOpenFileName))
	}
	st, err := os.Stat(m[1])
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("login file %s: %v %v", m[1], st, err)
	}
	if page, _ := os.ReadFile(m[1]); !strings.Contains(string(page), "#token=") {
		t.Errorf("the login file holds no login URL:\n%s", page)
	}

	tty := stacktest.StartBannered(t, env, true, "  page", args...)
	if !regexp.MustCompile(`page\s+http://127\.0\.0\.1:\d+/#token=\S{20,}`).MatchString(tty.Out.String()) {
		t.Errorf("on a terminal, the dash did not print its login URL:\n%s", tty.Out.String())
	}
}

// A dash reading a relay off this machine, given no token file for it,
// never sends it the local token ($AEP_HOME/token): the relay sees the
// page's requests with no credential, and the dash says how to name one.
// A loopback relay beside it still gets the local token.
func TestE2EDashRemoteRelayGetsNoLocalToken(t *testing.T) {
	t.Parallel()
	stacktest.Binaries(t)
	const token = "local-relay-token-0123456789abcdef"
	home := stacktest.HomeWithToken(t, token)
	remote, local := &stacktest.HeaderLog{}, &stacktest.HeaderLog{}
	remoteURL := stacktest.ServeOn(t, netaddr.NonLoopbackIPv4(t), remote)
	localURL := stacktest.ServeOn(t, "127.0.0.1", local)

	d := stacktest.StartBannered(t, stacktest.CleanEnv(home), false, "  page",
		"dash", "--relay", remoteURL, "--relay", localURL, "--listen", "127.0.0.1:0", "--home", home)
	// Written before the banner, but through another pipe.
	if !poll.Until(5*time.Second, func() bool { return strings.Contains(d.Err.String(), "--relay "+remoteURL+",TOKEN_FILE") }) {
		t.Errorf("the dash did not say how to log in to %s:\n%s", remoteURL, d.Err.String())
	}
	// The login: the file the banner names (or, should the banner carry
	// the URL itself, that URL: this test is about what the relays see).
	login := regexp.MustCompile(`http://127\.0\.0\.1:\d+/#token=\S+`).FindString(d.Out.String())
	if m := stacktest.LoginFileLine.FindStringSubmatch(d.Out.String()); m != nil {
		login = (&url.URL{Scheme: "file", Path: m[1]}).String()
	}
	if login == "" {
		t.Fatalf("no login in the banner:\n%s", d.Out.String())
	}
	b := browsertest.New(t, 1000, 700)
	b.MustRun("open the dash", chromedp.Navigate(login))
	if !poll.Until(20*time.Second, func() bool { return len(remote.Requests()) > 0 && len(local.Requests()) > 0 }) {
		t.Fatalf("the page never reached both relays through the dash: remote %q, local %q\ndash:\n%s%s",
			remote.Requests(), local.Requests(), d.Out.String(), d.Err.String())
	}
	for _, r := range remote.Requests() {
		if strings.Contains(r, token) || !strings.HasSuffix(r, "|  | ") {
			t.Errorf("the remote relay was sent a credential: %s", r)
		}
	}
	for _, r := range local.Requests() {
		if !strings.Contains(r, "| Bearer "+token+" |") {
			t.Errorf("the loopback relay was not sent the local token: %s", r)
		}
	}
}

// `up` prints the page's login URL (it carries the relay token) only when
// stdout is a terminal: piped into a log, a journal or a file, the banner
// names aep-kimi open instead, and no line holds the token.
func TestE2EUpBannerTokenOnlyOnTerminal(t *testing.T) {
	t.Parallel()
	stacktest.Binaries(t)
	const token = "up-relay-token-0123456789abcdef"
	home := stacktest.HomeWithToken(t, token)
	args := []string{"up", "--relay-listen", "127.0.0.1:0", "--adapter-listen", "127.0.0.1:0", "--web=false"}

	piped := stacktest.StartBannered(t, stacktest.CleanEnv(home), false, "aep-kimi tail", args...)
	if out := piped.Out.String() + piped.Err.String(); strings.Contains(out, token) || strings.Contains(out, "#token=") {
		t.Errorf("piped, up printed the relay token:\n%s", out)
	}
	if !regexp.MustCompile(`page\s+http://127\.0\.0\.1:\d+/\s.*aep-kimi open`).MatchString(piped.Out.String()) {
		t.Errorf("piped, the page line does not point at aep-kimi open:\n%s", piped.Out.String())
	}

	// A home of its own: the first up still holds its store.
	tty := stacktest.StartBannered(t, stacktest.CleanEnv(stacktest.HomeWithToken(t, token)), true, "aep-kimi tail", args...)
	if !regexp.MustCompile(`page\s+http://127\.0\.0\.1:\d+/#token=` + token).MatchString(tty.Out.String()) {
		t.Errorf("on a terminal, up did not print the page's login URL:\n%s", tty.Out.String())
	}
}

// `export --token-file F` follows a token-protected relay with the token
// kept in a private file (one readable by others is refused, exit 2 with
// one line); `--token T`, which puts the token on the command line where
// every local user can read it, still works but warns.
func TestE2EExportTokenFile(t *testing.T) {
	t.Parallel()
	stacktest.Binaries(t)
	const token = "export-relay-token-0123456789abcdef"
	rport := netaddr.FreePort(t)
	relayURL := fmt.Sprintf("http://127.0.0.1:%d", rport)
	home := t.TempDir()
	stacktest.StartDaemon(t, relayURL, stacktest.CleanEnv(home, "AEP_TOKEN="+token), "relay", "--listen", fmt.Sprintf("127.0.0.1:%d", rport))
	relaycall.PostLines(t, relayURL, token, stacktest.JsEvent(t, "tf", 0))

	tokenFile := filepath.Join(t.TempDir(), "relay.token")
	if err := os.WriteFile(tokenFile, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	follow := func(auth ...string) (stderr string, delivered bool) {
		t.Helper()
		var mu sync.Mutex
		n := 0
		sink := stacktest.ServeOn(t, "127.0.0.1", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			n++
			mu.Unlock()
			w.WriteHeader(http.StatusNoContent)
		}))
		args := append([]string{"export", "ce", "--relay", relayURL, "--sink", sink, "--state", "none"}, auth...)
		e := stacktest.StartBannered(t, stacktest.CleanEnv(home), false, "", args...)
		poll.Until(15*time.Second, func() bool {
			mu.Lock()
			delivered = n > 0
			mu.Unlock()
			select {
			case <-e.Exited():
				return true
			default:
				return delivered
			}
		})
		return e.Err.String(), delivered
	}
	if stderr, ok := follow("--token-file", tokenFile); !ok || strings.Contains(stderr, "warning") {
		t.Errorf("--token-file: delivered %v; stderr:\n%s", ok, stderr)
	}
	if stderr, ok := follow("--token", token); !ok || !strings.Contains(stderr, "--token puts the relay token on the command line") {
		t.Errorf("--token: delivered %v, want a delivery and a warning; stderr:\n%s", ok, stderr)
	}
	if err := os.Chmod(tokenFile, 0o644); err != nil {
		t.Fatal(err)
	}
	if msg := stacktest.RunRefused(t, stacktest.CleanEnv(home), "export", "ce", "--relay", relayURL, "--sink", "http://127.0.0.1:9", "--token-file", tokenFile); !strings.Contains(msg, "readable by others") {
		t.Errorf("a world-readable --token-file: %s", msg)
	}
}

// `aep-kimi open` replaces $AEP_HOME/open.html whole: a symbolic or hard
// link planted at its path is replaced, never written through (the page
// holds the token), and a reader racing repeated runs sees the old page or
// the new one, never a torn or empty file.
func TestE2EOpenFileReplacedAtomically(t *testing.T) {
	t.Parallel()
	bin := stacktest.Binaries(t)
	const token = "open-relay-token-0123456789abcdef"
	home := stacktest.HomeWithToken(t, token)
	noOpener := t.TempDir() // PATH without xdg-open or open
	env := append(stacktest.CleanEnv(home), "PATH="+noOpener)
	open := func() {
		t.Helper()
		cmd := exec.Command(filepath.Join(bin, "aep-kimi"), "open", "--relay", "http://127.0.0.1:9", "--home", home)
		cmd.Env = env
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("aep-kimi open: %v\n%s", err, out)
		}
	}
	path := filepath.Join(home, fleetpage.OpenFileName)
	safefiletest.Replaced(t, path, 0o600, open)
	safefiletest.NeverTorn(t, path, 40, open, func(b []byte) bool { return strings.HasSuffix(string(b), "</a>\n") })
}

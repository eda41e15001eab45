package fleetpage_test

import (
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/aep-kimi/aep-kimi/fleetpage"
	"github.com/aep-kimi/aep-kimi/internal/testkit/browsertest"
	"github.com/aep-kimi/aep-kimi/internal/testkit/relaytest"
	"github.com/aep-kimi/aep-kimi/internal/testkit/safefiletest"
	"github.com/aep-kimi/aep-kimi/relay"
)

// The login file is private, redirects to the login URL, and is replaced
// whole: a link planted at its path (symbolic or hard) is replaced, its
// target untouched, and a reader racing the writes sees the old page or
// the new one, never a torn or empty file.
func TestWriteLoginFile(t *testing.T) {
	t.Parallel()
	home := filepath.Join(t.TempDir(), "home")
	login := fleetpage.LoginURL("http://127.0.0.1:9", "tok&en")
	path, err := fleetpage.WriteLoginFile(home, fleetpage.OpenFileName, login)
	if err != nil {
		t.Fatal(err)
	}
	page, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(page), `content="0;url=http://127.0.0.1:9/#token=tok%26en"`) {
		t.Errorf("the page does not redirect to the login URL:\n%s", page)
	}
	if st, _ := os.Stat(path); runtime.GOOS != "windows" && st.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, want 0600", st.Mode().Perm())
	}

	write := func() {
		t.Helper()
		if _, err := fleetpage.WriteLoginFile(home, fleetpage.OpenFileName, login); err != nil {
			t.Fatal(err)
		}
	}
	safefiletest.Replaced(t, path, 0, write)
	safefiletest.NeverTorn(t, path, 300, write, func(b []byte) bool { return strings.HasSuffix(string(b), "</a>\n") })
}

// TestOpenFileLogsIn opens the login file in Chromium: it lands on a real
// relay's page, logged in, with no token left in the address bar.
func TestOpenFileLogsIn(t *testing.T) {
	const token = "open-file-token-0123456789"
	home := t.TempDir()
	log := slog.New(slog.DiscardHandler)
	page, err := fleetpage.New(fleetpage.Config{Token: token, Logger: log, LoginsFile: filepath.Join(home, fleetpage.LoginsFileName)})
	if err != nil {
		t.Fatal(err)
	}
	srv := relaytest.RunServer(t, relay.Config{Token: token, Logger: log, Page: page})
	path, err := fleetpage.WriteLoginFile(home, fleetpage.OpenFileName, fleetpage.LoginURL(srv.URL, token))
	if err != nil {
		t.Fatal(err)
	}
	b := browsertest.New(t, 1000, 700)
	b.MustRun("open the file", chromedp.Navigate((&url.URL{Scheme: "file", Path: path}).String()),
		chromedp.WaitReady("#conn", chromedp.ByQuery)) // the redirect done
	b.WaitJS("the page is live, logged in", `location.protocol === 'http:' && document.getElementById('conn').dataset.conn === 'live'`)
	var href string
	b.Eval("location", `location.href`, &href)
	if strings.Contains(href, token) {
		t.Errorf("the token stayed in the address bar: %s", href)
	}
}

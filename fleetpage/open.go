package fleetpage

import (
	"context"
	"errors"
	"fmt"
	"html"
	"os/exec"
	"path/filepath"
	"runtime"
	"time"

	"github.com/aep-kimi/aep-kimi/internal/atomicfile"
	"github.com/aep-kimi/aep-kimi/internal/safefile"
)

// File names under the AEP home.
const (
	// OpenFileName is the page `aep-kimi open` hands the browser: it sends
	// the browser on to the relay page's login URL.
	OpenFileName = "open.html"
	// DashOpenFileName is the same for the page of `aep-kimi dash`.
	DashOpenFileName = "dash.html"
	// LoginsFileName keeps the page's login generation: logins outlive a
	// relay restart, a logout too.
	LoginsFileName = "page-login.key"
)

// openerTimeout bounds the desktop opener (xdg-open, open): it hands the
// file to the browser and returns.
const openerTimeout = 10 * time.Second

// ErrNoOpener is returned by Open where the desktop has no opener.
var ErrNoOpener = errors.New("no desktop opener")

// WriteLoginFile writes home/name, a page that replaces itself with
// loginURL, and returns its absolute path. The login URL carries a token,
// so the file is private (0600 in a private directory), and it is replaced
// atomically: a reader never sees half of it, and a link planted at its
// path is replaced, never written through.
func WriteLoginFile(home, name, loginURL string) (string, error) {
	if err := safefile.PrivateDir(home); err != nil {
		return "", fmt.Errorf("AEP home: %w", err)
	}
	path, err := filepath.Abs(filepath.Join(home, name))
	if err != nil {
		return "", err
	}
	q := html.EscapeString(loginURL)
	page := "<!doctype html>\n<meta charset=\"utf-8\">\n<meta name=\"referrer\" content=\"no-referrer\">\n" +
		"<meta http-equiv=\"refresh\" content=\"0;url=" + q + "\">\n" +
		"<title>aep-kimi fleet page</title>\n<a href=\"" + q + "\">Open the fleet page</a>\n"
	if err := atomicfile.Write(path, []byte(page), atomicfile.Options{}); err != nil {
		return "", fmt.Errorf("write %s: %w", name, err)
	}
	return path, nil
}

// Open hands target (a file's path, never a URL with a token: a command
// line is readable by every local user) to the desktop's opener: xdg-open,
// or open on macOS. It returns ErrNoOpener, naming it, where there is none.
func Open(ctx context.Context, target string) error {
	opener := "xdg-open"
	if runtime.GOOS == "darwin" {
		opener = "open"
	}
	path, err := exec.LookPath(opener)
	if err != nil {
		return fmt.Errorf("%w: no %s here", ErrNoOpener, opener)
	}
	ctx, cancel := context.WithTimeout(ctx, openerTimeout)
	defer cancel()
	if err := exec.CommandContext(ctx, path, target).Run(); err != nil {
		return fmt.Errorf("%s failed: %w", opener, err)
	}
	return nil
}

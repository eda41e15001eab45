package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"html"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"time"

	"github.com/aep-kimi/aep-kimi/fleetpage"
	"github.com/aep-kimi/aep-kimi/internal/cli"
	"github.com/aep-kimi/aep-kimi/internal/safefile"
	"github.com/aep-kimi/aep-kimi/relay"
)

// openerTimeout bounds the desktop opener (xdg-open, open): it hands the URL
// to the browser and returns.
const openerTimeout = 10 * time.Second

// PageLoginFileName names the file under AEP_HOME that keeps the fleet
// page's login generation: logins outlive a relay restart, a logout too.
const PageLoginFileName = "page-login.key"

// withPage gives the relay its fleet page, logging in with the relay's token
// and keeping its login generation under home.
func withPage(cfg *relay.Config, home string) error {
	p, err := fleetpage.New(fleetpage.Config{Token: cfg.Token, Logger: cfg.Logger, LoginsFile: filepath.Join(home, PageLoginFileName)})
	if err != nil {
		return err
	}
	cfg.Page = p
	return nil
}

// relayClient is what a command that reads a relay needs: its URL and
// the token file.
type relayClient struct{ url, tokenFile string }

// relayClientFlags registers --relay and --token-file.
func relayClientFlags(fs *flag.FlagSet, getenv func(string) string) *relayClient {
	var rc relayClient
	fs.StringVar(&rc.url, "relay", envOr(getenv, "AEP_RELAY", DefaultRelayURL), "relay base URL (env AEP_RELAY)")
	fs.StringVar(&rc.tokenFile, "token-file", getenv("AEP_TOKEN_FILE"), "file holding the relay token (env AEP_TOKEN_FILE; AEP_TOKEN also works)")
	return &rc
}

// OpenFileName names the file `aep-kimi open` hands the browser, under
// AEP_HOME: a page that sends the browser on to the login URL.
const OpenFileName = "open.html"

// openCommand is `aep-kimi open`: write the fleet page's login URL (the
// token in its fragment, which the browser never sends to a server) into a
// private file under AEP_HOME that redirects to it, and open that file with
// the desktop's opener when there is one. The opener gets the file's path,
// not the URL: a command line is readable by every local user, the file
// only by its owner.
func openCommand(getenv func(string) string, io stdio) cli.Command {
	return cli.Command{
		Name:    "open",
		Summary: "open the fleet page (the relay's web view) logged in",
		Forms:   []string{"[--relay URL] [--token-file F] [--home DIR] [--print]"},
		About: "Opens the fleet page logged in: writes $AEP_HOME/" + OpenFileName + " (mode 0600), which sends the\n" +
			"browser to the login URL, prints its path and opens it (xdg-open or open, when present).\n" +
			"The token rides after # in that URL: browsers never send that part to a server; the page\n" +
			"trades it for a session cookie and drops it from the address bar.",
		Env:  []string{"AEP_TOKEN"},
		Args: cli.NoArgs,
		Flags: func(fs *flag.FlagSet) cli.Run {
			rc := relayClientFlags(fs, getenv)
			home := fs.String("home", aepHome(getenv), "AEP home, where "+OpenFileName+" is written (env AEP_HOME)")
			printOnly := fs.Bool("print", false, "only print the login URL (it carries the token)")
			return func(ctx context.Context, _ []string) int {
				return runOpen(ctx, *rc, *home, *printOnly, getenv, io)
			}
		},
	}
}

// runOpen opens (or prints) the page's login.
func runOpen(ctx context.Context, rc relayClient, home string, printOnly bool, getenv func(string) string, io stdio) int {
	token, err := relayToken(getenv, rc.tokenFile)
	if err != nil {
		fmt.Fprintf(io.err, "aep-kimi open: %v\n", err)
		return 2
	}
	u := fleetpage.LoginURL(rc.url, token)
	if printOnly {
		fmt.Fprintln(io.out, u)
		return 0
	}
	target := u
	if token != "" {
		if target, err = writeOpenFile(home, u); err != nil {
			fmt.Fprintf(io.err, "aep-kimi open: %v\n", err)
			return 1
		}
	}
	fmt.Fprintln(io.out, target)
	opener := "xdg-open"
	if runtime.GOOS == "darwin" {
		opener = "open"
	}
	path, err := exec.LookPath(opener)
	if err != nil {
		fmt.Fprintf(io.err, "aep-kimi open: no %s here: open the file above in a browser\n", opener)
		return 0
	}
	octx, cancel := context.WithTimeout(ctx, openerTimeout)
	defer cancel()
	if err := exec.CommandContext(octx, path, target).Run(); err != nil {
		fmt.Fprintf(io.err, "aep-kimi open: %s failed (%v): open the file above in a browser\n", opener, err)
	}
	return 0
}

// writeOpenFile writes home/open.html, mode 0600 in a private directory and
// never through a link, as a page that replaces itself with loginURL, and
// returns its path.
func writeOpenFile(home, loginURL string) (string, error) {
	if err := safefile.PrivateDir(home); err != nil {
		return "", fmt.Errorf("AEP home: %w", err)
	}
	path, err := filepath.Abs(filepath.Join(home, OpenFileName))
	if err != nil {
		return "", err
	}
	f, err := safefile.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return "", fmt.Errorf("write %s: %w", OpenFileName, err)
	}
	q := html.EscapeString(loginURL)
	page := "<!doctype html>\n<meta charset=\"utf-8\">\n<meta name=\"referrer\" content=\"no-referrer\">\n" +
		"<meta http-equiv=\"refresh\" content=\"0;url=" + q + "\">\n" +
		"<title>aep-kimi fleet page</title>\n<a href=\"" + q + "\">Open the fleet page</a>\n"
	_, werr := f.WriteString(page)
	if err := errors.Join(werr, f.Close()); err != nil {
		return "", fmt.Errorf("write %s: %w", OpenFileName, err)
	}
	return path, nil
}

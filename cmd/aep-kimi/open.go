package main

import (
	"context"
	"flag"
	"fmt"
	"net/http"

	"github.com/aep-kimi/aep-kimi/fleetpage"
	"github.com/aep-kimi/aep-kimi/internal/cli"
	"github.com/aep-kimi/aep-kimi/internal/tlsconf"
	"github.com/aep-kimi/aep-kimi/internal/tokenfile"
	"github.com/aep-kimi/aep-kimi/relay/client"
)

// relayClient is what a command that reads a relay needs: its URL, the
// token file and the CA bundle trusted for an https relay.
type relayClient struct {
	url, tokenFile, caFile string
	getenv                 func(string) string
}

// http is the HTTP client for the relay: nil (the default) without --ca.
func (rc *relayClient) http() (*http.Client, error) { return tlsconf.HTTPClient(rc.caFile) }

// token is the relay token: --token-file, else AEP_TOKEN, else
// $AEP_HOME/token.
func (rc *relayClient) token() (string, error) { return tokenfile.Client(rc.getenv, rc.tokenFile) }

// relayClientFlags registers --relay and --token-file.
func relayClientFlags(fs *flag.FlagSet, getenv func(string) string) *relayClient {
	rc := relayClient{getenv: getenv}
	fs.StringVar(&rc.url, "relay", client.URLFromEnv(getenv), "relay base URL (env AEP_RELAY)")
	fs.StringVar(&rc.tokenFile, "token-file", getenv("AEP_TOKEN_FILE"), "file holding the relay token (env AEP_TOKEN_FILE; AEP_TOKEN also works)")
	return &rc
}

// relayConnFlags is relayClientFlags and --ca, for a command that connects
// to the relay.
func relayConnFlags(fs *flag.FlagSet, getenv func(string) string) *relayClient {
	rc := relayClientFlags(fs, getenv)
	tlsconf.CAFlag(fs, &rc.caFile, getenv)
	return rc
}

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
		About: "Opens the fleet page logged in: writes $AEP_HOME/" + fleetpage.OpenFileName + " (mode 0600), which sends the\n" +
			"browser to the login URL, prints its path and opens it (xdg-open or open, when present).\n" +
			"The token rides after # in that URL: browsers never send that part to a server; the page\n" +
			"trades it for a session cookie and drops it from the address bar.",
		Env:  []string{"AEP_TOKEN"},
		Args: cli.NoArgs,
		Flags: func(fs *flag.FlagSet) cli.Run {
			rc := relayClientFlags(fs, getenv)
			home := fs.String("home", tokenfile.AEPHome(getenv), "AEP home, where "+fleetpage.OpenFileName+" is written (env AEP_HOME)")
			printOnly := fs.Bool("print", false, "only print the login URL (it carries the token)")
			return func(ctx context.Context, _ []string) int {
				return runOpen(ctx, *rc, *home, *printOnly, getenv, io)
			}
		},
	}
}

// runOpen opens (or prints) the page's login.
func runOpen(ctx context.Context, rc relayClient, home string, printOnly bool, getenv func(string) string, io stdio) int {
	token, err := rc.token()
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
		if target, err = fleetpage.WriteLoginFile(home, fleetpage.OpenFileName, u); err != nil {
			fmt.Fprintf(io.err, "aep-kimi open: %v\n", err)
			return 1
		}
	}
	fmt.Fprintln(io.out, target)
	if err := fleetpage.Open(ctx, target); err != nil {
		fmt.Fprintf(io.err, "aep-kimi open: %v: open the file above in a browser\n", err)
	}
	return 0
}

// commandLineToken is the relay token of a command that takes both
// --token-file and --token (tokenfile.CommandLine), with a warning when it
// came from the command line, which every local user can read.
func commandLineToken(getenv func(string) string, file, token, name string, io stdio) (string, error) {
	tok, onCommandLine, err := tokenfile.CommandLine(getenv, file, token)
	if onCommandLine {
		fmt.Fprintf(io.err, "aep-kimi %s: warning: --token puts the relay token on the command line, where every local user can read it; use --token-file\n", name)
	}
	return tok, err
}

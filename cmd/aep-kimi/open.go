package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"time"

	"github.com/aep-kimi/aep-kimi/fleetpage"
	"github.com/aep-kimi/aep-kimi/relay"
)

// openerTimeout bounds the desktop opener (xdg-open, open): it hands the URL
// to the browser and returns.
const openerTimeout = 10 * time.Second

// withPage gives the relay its fleet page, logging in with the relay's token.
func withPage(cfg *relay.Config) error {
	p, err := fleetpage.New(fleetpage.Config{Token: cfg.Token, Logger: cfg.Logger})
	if err != nil {
		return err
	}
	cfg.Page = p
	return nil
}

// relayClientFlags are the flags of a command that reads a relay: its URL
// and the token file.
func relayClientFlags(fs *flag.FlagSet) (relayURL, tokenFile *string) {
	relayURL = fs.String("relay", envOr(os.Getenv, "AEP_RELAY", DefaultRelayURL), "relay base URL (env AEP_RELAY)")
	tokenFile = fs.String("token-file", os.Getenv("AEP_TOKEN_FILE"), "file holding the relay token (env AEP_TOKEN_FILE; AEP_TOKEN also works)")
	return relayURL, tokenFile
}

// runOpen is `aep-kimi open`: print the fleet page's login URL (the token in
// its fragment, which the browser never sends to a server) and open it with
// the desktop's opener when there is one.
func runOpen(ctx context.Context, args []string, io stdio) int {
	fs := flag.NewFlagSet("aep-kimi open", flag.ContinueOnError)
	fs.SetOutput(io.err)
	relayURL, tokenFile := relayClientFlags(fs)
	printOnly := fs.Bool("print", false, "only print the URL")
	fs.Usage = func() {
		fmt.Fprintln(io.err, "usage: aep-kimi open [--relay URL] [--token-file F] [--print]")
		fmt.Fprintln(io.err, "\nPrints the fleet page's URL and opens it in the browser (xdg-open or open, when present).")
		fmt.Fprintln(io.err, "The token rides after #: browsers never send that part to a server; the page trades it")
		fmt.Fprintln(io.err, "for a session cookie and drops it from the address bar.")
		fmt.Fprintln(io.err, "\nFlags:")
		fs.PrintDefaults()
	}
	if code, ok := parseFlags(fs, args, io, 0); !ok {
		return code
	}
	token, err := relayToken(os.Getenv, *tokenFile)
	if err != nil {
		fmt.Fprintf(io.err, "aep-kimi open: %v\n", err)
		return 2
	}
	u := fleetpage.LoginURL(*relayURL, token)
	fmt.Fprintln(io.out, u)
	if *printOnly {
		return 0
	}
	opener := "xdg-open"
	if runtime.GOOS == "darwin" {
		opener = "open"
	}
	path, err := exec.LookPath(opener)
	if err != nil {
		fmt.Fprintf(io.err, "aep-kimi open: no %s here: open the URL above in a browser\n", opener)
		return 0
	}
	octx, cancel := context.WithTimeout(ctx, openerTimeout)
	defer cancel()
	if err := exec.CommandContext(octx, path, u).Run(); err != nil {
		fmt.Fprintf(io.err, "aep-kimi open: %s failed (%v): open the URL above in a browser\n", opener, err)
	}
	return 0
}

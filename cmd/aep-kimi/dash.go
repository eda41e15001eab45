package main

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/aep-kimi/aep-kimi/fleetpage"
	"github.com/aep-kimi/aep-kimi/internal/cli"
	"github.com/aep-kimi/aep-kimi/internal/httpdrain"
	"github.com/aep-kimi/aep-kimi/internal/httpguard"
)

// DefaultDashListen is where `aep-kimi dash` serves: loopback only.
const DefaultDashListen = "127.0.0.1:8790"

// dashDrain bounds the dash's shutdown: its open streams are proxies that
// end with it.
const dashDrain = 2 * time.Second

// dashCommand is `aep-kimi dash --relay URL[,TOKEN_FILE] ...`: the fleet
// page fed from several relays, on its own loopback port, each session
// labelled with its relay.
func dashCommand(getenv func(string) string, io stdio) cli.Command {
	return cli.Command{
		Name:    "dash",
		Summary: "serve the fleet page fed from several relays, on a loopback port",
		Forms:   []string{"--relay URL[,TOKEN_FILE] [--relay ...] [--listen ADDR]"},
		About: "Serves the fleet page fed from several relays (a laptop's and a team's) on a loopback port.\n" +
			"The relays' tokens stay in this process; the page logs in with a fresh token of its own,\n" +
			"carried after # in the URL printed at start.",
		Examples: []string{"aep-kimi dash --relay http://127.0.0.1:8787 --relay https://relay.example:8787,$HOME/.aep/team.token"},
		Args:     cli.NoArgs,
		Flags: func(fs *flag.FlagSet) cli.Run {
			listen := fs.String("listen", DefaultDashListen, "loopback address to serve the page on")
			var relays []string
			fs.Func("relay", "a relay to read: URL or URL,TOKEN_FILE (repeat for each; without a file, AEP_TOKEN or $AEP_HOME/token)", func(s string) error {
				relays = append(relays, s)
				return nil
			})
			return func(ctx context.Context, _ []string) int { return runDash(ctx, *listen, relays, getenv, io) }
		},
	}
}

// runDash serves the dash until ctx is done.
func runDash(ctx context.Context, listen string, relays []string, getenv func(string) string, io stdio) int {
	if len(relays) == 0 {
		fmt.Fprintln(io.err, "aep-kimi dash: give at least one --relay URL[,TOKEN_FILE]")
		return 2
	}
	if !httpguard.LoopbackListen(listen) {
		fmt.Fprintf(io.err, "aep-kimi dash: --listen %s is not loopback: the dash holds the relays' tokens and serves only this machine\n", listen)
		return 2
	}
	ups, err := dashUpstreams(relays, getenv)
	if err != nil {
		fmt.Fprintf(io.err, "aep-kimi dash: %v\n", err)
		return 2
	}
	var b [24]byte
	if _, err := rand.Read(b[:]); err != nil {
		fmt.Fprintf(io.err, "aep-kimi dash: %v\n", err)
		return 1
	}
	token := base64.RawURLEncoding.EncodeToString(b[:])
	log := newLogger(io.err, false)
	h, err := fleetpage.NewDash(fleetpage.Config{Token: token, Logger: log}, ups)
	if err != nil {
		fmt.Fprintf(io.err, "aep-kimi dash: %v\n", err)
		return 2
	}
	ep := httpdrain.NewEndpoint("dash", listen, httpguard.Hosts(nil)(h))
	addr, err := ep.Listen()
	if err != nil {
		fmt.Fprintf(io.err, "aep-kimi dash: %v\n", err)
		return 1
	}
	errc, err := ep.Serve()
	if err != nil {
		fmt.Fprintf(io.err, "aep-kimi dash: %v\n", err)
		return 1
	}
	fmt.Fprintf(io.out, "aep-kimi dash: reading %d relay(s) (Ctrl-C to stop)\n", len(ups))
	for _, u := range ups {
		fmt.Fprintf(io.out, "  relay  %s\n", u.URL)
	}
	fmt.Fprintf(io.out, "  page   %s\n", fleetpage.LoginURL("http://"+loopbackFor(addr), token))
	select {
	case err := <-errc:
		fmt.Fprintf(io.err, "aep-kimi dash: %v\n", err)
		return 1
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), dashDrain)
	defer cancel()
	if err := ep.Shutdown(sctx); err != nil {
		_ = ep.Close() // the proxied streams end with the process
	}
	return 0
}

// dashUpstreams reads each --relay value: URL, or URL,TOKEN_FILE.
func dashUpstreams(values []string, getenv func(string) string) ([]fleetpage.Upstream, error) {
	out := make([]fleetpage.Upstream, 0, len(values))
	for _, v := range values {
		u, file, _ := strings.Cut(v, ",")
		u = strings.TrimSpace(u)
		if u == "" {
			return nil, errors.New("--relay: empty URL")
		}
		tok, err := relayToken(getenv, strings.TrimSpace(file))
		if err != nil {
			return nil, fmt.Errorf("--relay %s: %w", u, err)
		}
		out = append(out, fleetpage.Upstream{URL: u, Token: tok})
	}
	return out, nil
}

package main

import (
	"context"
	"flag"
	"fmt"

	"github.com/aep-kimi/aep-kimi/fleetpage"
	"github.com/aep-kimi/aep-kimi/internal/cli"
	"github.com/aep-kimi/aep-kimi/internal/logging"
	"github.com/aep-kimi/aep-kimi/internal/tlsconf"
	"github.com/aep-kimi/aep-kimi/internal/tokenfile"
	"github.com/aep-kimi/aep-kimi/relay/consumer"
)

// dashCommand is `aep-kimi dash --relay URL[,TOKEN_FILE] ...`: the fleet
// page fed from several relays, on its own loopback port, each session
// labelled with its relay.
func dashCommand(getenv func(string) string, io stdio) cli.Command {
	return cli.Command{
		Name:    "dash",
		Summary: "serve the fleet page fed from several relays, on a loopback port",
		Forms:   []string{"--relay URL[,TOKEN_FILE] [--relay ...] [--ca FILE] [--listen ADDR] [--home DIR]"},
		About: "Serves the fleet page fed from several relays (a laptop's and a team's) on a loopback port.\n" +
			"The relays' tokens stay in this process; the page logs in with a fresh token of its own,\n" +
			"carried after # in its login URL: printed at start when stdout is a terminal, else written\n" +
			"to $AEP_HOME/" + fleetpage.DashOpenFileName + " (mode 0600), whose path is printed.\n\n" +
			"A relay given without a token file gets AEP_TOKEN or $AEP_HOME/token only when it is on\n" +
			"this machine (loopback); any other is read without a token unless its file is named.",
		Env:      []string{"AEP_TOKEN"},
		Examples: []string{"aep-kimi dash --relay http://127.0.0.1:8787 --relay https://relay.example:8787,$HOME/.aep/team.token"},
		Args:     cli.NoArgs,
		Flags: func(fs *flag.FlagSet) cli.Run {
			listen := fs.String("listen", fleetpage.DefaultDashListen, "loopback address to serve the page on")
			home := fs.String("home", tokenfile.AEPHome(getenv), "AEP home, where "+fleetpage.DashOpenFileName+" is written off a terminal (env AEP_HOME)")
			var relays []string
			var caFile string
			tlsconf.CAFlag(fs, &caFile, getenv)
			fs.Func("relay", "a relay to read: URL or URL,TOKEN_FILE (repeat for each; without a file, AEP_TOKEN or $AEP_HOME/token, for a loopback URL only)", func(s string) error {
				relays = append(relays, s)
				return nil
			})
			return func(ctx context.Context, _ []string) int {
				return runDash(ctx, *listen, *home, caFile, relays, getenv, io)
			}
		},
	}
}

// runDash serves the dash until ctx is done.
func runDash(ctx context.Context, listen, home, caFile string, relays []string, getenv func(string) string, io stdio) int {
	if len(relays) == 0 {
		fmt.Fprintln(io.err, "aep-kimi dash: give at least one --relay URL[,TOKEN_FILE]")
		return 2
	}
	ups, err := fleetpage.ParseUpstreams(relays, getenv, io.err)
	if err != nil {
		fmt.Fprintf(io.err, "aep-kimi dash: %v\n", err)
		return 2
	}
	hc, err := tlsconf.HTTPClient(caFile)
	if err != nil {
		fmt.Fprintf(io.err, "aep-kimi dash: %v\n", err)
		return 2
	}
	for i := range ups {
		ups[i].HTTP = hc
	}
	d, err := fleetpage.NewDashServer(listen, ups, logging.New(io.err, false))
	if err != nil {
		fmt.Fprintf(io.err, "aep-kimi dash: %v\n", err)
		return 2
	}
	if err := d.Listen(); err != nil {
		fmt.Fprintf(io.err, "aep-kimi dash: %v\n", err)
		return 1
	}
	if err := d.WriteStart(io.out, ups, consumer.IsTerminal(io.out), home); err != nil {
		fmt.Fprintf(io.err, "aep-kimi dash: %v\n", err)
		return 1
	}
	if err := d.Serve(ctx); err != nil {
		fmt.Fprintf(io.err, "aep-kimi dash: %v\n", err)
		return 1
	}
	return 0
}

package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"path/filepath"

	"github.com/aep-kimi/aep-kimi/adapter"
	"github.com/aep-kimi/aep-kimi/internal/cli"
	"github.com/aep-kimi/aep-kimi/internal/httpguard"
	"github.com/aep-kimi/aep-kimi/internal/logging"
	"github.com/aep-kimi/aep-kimi/internal/tokenfile"
	"github.com/aep-kimi/aep-kimi/relay"
	"github.com/aep-kimi/aep-kimi/relay/consumer"
	"github.com/aep-kimi/aep-kimi/station"
)

// upOptions is `aep-kimi up`'s surface: the components' own flags.
type upOptions struct {
	home, relayListen, adapterListen string
	public, verbose                  bool
	bridge                           bridgeChoice
	life                             lifecycleOptions
	otlp                             upOTLP
	relay                            station.RelayOptions
	gate                             gateOptions
}

// upCommand is `aep-kimi up`: the relay, the adapter and (unless
// --web=false) the kimi web bridge, in one process sharing one token.
func upCommand(getenv func(string) string, io stdio) cli.Command {
	return cli.Command{
		Name:    "up",
		Summary: "run the relay, the hook adapter and the kimi web bridge together",
		Forms: []string{"[--home DIR] [--relay-listen ADDR] [--adapter-listen ADDR] [--web=false] [--public]\n" +
			"[--store memory|jetstream ...] [--otlp URL] [--control [--on-timeout allow|deny]]"},
		About: "Runs the relay, the hook adapter and the kimi web bridge (which attaches each kimi web server as it starts),\n" +
			"sharing one relay token kept in $AEP_HOME/token. Every component reads its usual environment\n" +
			"(see aep-kimi relay -h, aep-kimi adapter -h, aep-kimi bridge-web -h).",
		Env:  []string{"AEP_TOKEN", "AEP_TOKEN_FILE", "AEP_PORT", "AEP_KIMI_ADDR", "AEP_KIMI_CONTROL", "AEP_KIMI_ON_TIMEOUT", "AEP_INSTRUCT"},
		Args: cli.NoArgs,
		Flags: func(fs *flag.FlagSet) cli.Run {
			var o upOptions
			fs.StringVar(&o.home, "home", tokenfile.AEPHome(getenv), "AEP home: token, logs, spool (env AEP_HOME)")
			fs.StringVar(&o.relayListen, "relay-listen", "", "relay address (default 127.0.0.1:$AEP_PORT, else 127.0.0.1:8787)")
			fs.StringVar(&o.adapterListen, "adapter-listen", "", "hook intake address (default $AEP_KIMI_ADDR, else 127.0.0.1:8398)")
			fs.BoolVar(&o.public, "public", cli.EnvBool(getenv, "AEP_PUBLIC", false), "listen on all interfaces (env AEP_PUBLIC); a token is always required then")
			fs.BoolVar(&o.verbose, "v", false, "debug logging")
			o.bridge.flags(fs, getenv)
			o.life.flags(fs, getenv)
			o.otlp.flags(fs)
			o.relay.BindFlags(fs, getenv)
			o.gate.flags(fs, getenv)
			return func(ctx context.Context, _ []string) int {
				if err := upRun(ctx, o, getenv, io); err != nil {
					fmt.Fprintf(io.err, "aep-kimi up: %v\n", err)
					return exitFor(err)
				}
				return 0
			}
		},
	}
}

func upRun(ctx context.Context, o upOptions, getenv func(string) string, io stdio) error {
	log := logging.New(io.err, o.verbose)
	exp, err := o.otlp.exporter(o.home, log.With("component", "otlp-export"))
	if err != nil {
		return station.Usage(err)
	}
	host := "127.0.0.1"
	if o.public {
		host = "0.0.0.0"
	}
	if o.public && httpguard.TrimToken(getenv("AEP_TOKEN")) == "" && getenv("AEP_TOKEN_FILE") == "" {
		return station.Usage(errors.New("--public listens on all interfaces and needs a token you chose: set AEP_TOKEN or AEP_TOKEN_FILE"))
	}
	token, tokenFile, err := tokenfile.Shared(getenv, o.home)
	if err != nil {
		return station.Usage(err)
	}
	rcfg, err := relay.ConfigFromEnv(getenv)
	if err != nil {
		return station.Usage(err)
	}
	rcfg.Token, rcfg.Logger = token, log.With("component", "relay")
	rcfg.Listen = o.relayListen
	if rcfg.Listen == "" {
		rcfg.Listen = net.JoinHostPort(host, cli.EnvOr(getenv, "AEP_PORT", "8787"))
	}
	// The one token guards all three: any of them off loopback needs it.
	o.relay.Store.Home, o.relay.Public = o.home, o.public
	rsrv, closeStore, err := station.NewRelay(ctx, rcfg, o.relay, getenv)
	if err != nil {
		if !station.IsUsage(err) {
			err = fmt.Errorf("relay: %w", err)
		}
		return err
	}
	defer closeStore()
	relayAddr := rcfg.Listen
	stn, err := station.Listen(rsrv, relayAddr)
	if err != nil {
		return err
	}
	defer stn.Close() // what is bound, if up stops short of running
	relayURL := stn.RelayURL()

	o.gate.kimiHome = o.bridge.opts.kimiHome // up's one --kimi-home
	ao := adapterOptions{listen: o.adapterListen, relayURL: relayURL, home: o.home, allowedHosts: o.relay.AllowedHosts, life: o.life, gate: o.gate}
	if ao.listen == "" {
		ao.listen = cli.EnvOr(getenv, "AEP_KIMI_ADDR", net.JoinHostPort(host, "8398"))
	}
	ad, err := newAdapter(ao, token, getenv, log.With("component", "adapter"))
	if err != nil {
		return station.Usage(err)
	}
	aaddr, err := ad.Listen()
	if err != nil {
		return err
	}
	stn.Add(station.Component{Name: "adapter", Run: ad.Run}, func() { ad.Close() })
	o.bridge.opts.allowedHosts = o.relay.AllowedHosts
	br, bridgeNote, err := o.bridge.start(o.home, relayURL, token, getenv, log.With("component", "bridge"))
	if err != nil {
		return station.Usage(err)
	}
	if br != nil {
		stn.Add(station.Component{Name: "bridge", Run: br.Run}, nil)
	}
	if exp != nil {
		exp.Relay, exp.Token = relayURL, token
		stn.Add(station.Component{Name: "otlp-export", Run: exp.Run}, nil)
	}
	station.Banner{
		RelayAddr: stn.Addr().String(), RelayURL: relayURL, AdapterURL: "http://" + aaddr.String(),
		Token: token, TokenFile: tokenFile, HookToken: adapter.TokenPath(o.home), Logs: filepath.Join(o.home, "logs", "kimi-code"),
		Bridge: bridgeNote, Control: bannerGate(ad, cli.EnvBool(getenv, "AEP_INSTRUCT", false)),
		Public: o.public,
	}.Write(io.out, consumer.IsTerminal(io.out))
	return stn.Run(ctx)
}

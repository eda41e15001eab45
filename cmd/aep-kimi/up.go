package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
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

// TokenFileName is the relay token `up` keeps under $AEP_HOME (0600).
const TokenFileName = "token"

// upOptions is `aep-kimi up`'s surface: the components' own flags.
type upOptions struct {
	home, relayListen, adapterListen string
	allowedHosts                     string
	public, verbose                  bool
	bridge                           bridgeChoice
	life                             lifecycleOptions
	otlp                             upOTLP
	store                            storeOptions
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
			fs.StringVar(&o.home, "home", aepHome(getenv), "AEP home: token, logs, spool (env AEP_HOME)")
			fs.StringVar(&o.relayListen, "relay-listen", "", "relay address (default 127.0.0.1:$AEP_PORT, else 127.0.0.1:8787)")
			fs.StringVar(&o.adapterListen, "adapter-listen", "", "hook intake address (default $AEP_KIMI_ADDR, else 127.0.0.1:8398)")
			fs.BoolVar(&o.public, "public", cli.EnvBool(getenv, "AEP_PUBLIC", false), "listen on all interfaces (env AEP_PUBLIC); a token is always required then")
			allowedHostsFlag(fs, &o.allowedHosts, getenv)
			fs.BoolVar(&o.verbose, "v", false, "debug logging")
			o.bridge.flags(fs, getenv)
			o.life.flags(fs, getenv)
			o.otlp.flags(fs)
			o.store.flags(fs, getenv)
			o.gate.flags(fs, getenv)
			return func(ctx context.Context, _ []string) int {
				if err := upRun(ctx, o, getenv, io); err != nil {
					fmt.Fprintf(io.err, "aep-kimi up: %v\n", err)
					var ue usageError
					if errors.As(err, &ue) {
						return 2
					}
					return 1
				}
				return 0
			}
		},
	}
}

// usageError marks a configuration mistake (exit 2) rather than a failure.
type usageError struct{ error }

func upRun(ctx context.Context, o upOptions, getenv func(string) string, io stdio) error {
	log := logging.New(io.err, o.verbose)
	exp, err := o.otlp.exporter(o.home, log.With("component", "otlp-export"))
	if err != nil {
		return usageError{err}
	}
	host := "127.0.0.1"
	if o.public {
		host = "0.0.0.0"
	}
	if o.public && httpguard.TrimToken(getenv("AEP_TOKEN")) == "" && getenv("AEP_TOKEN_FILE") == "" {
		return usageError{errors.New("--public listens on all interfaces and needs a token you chose: set AEP_TOKEN or AEP_TOKEN_FILE")}
	}
	token, tokenFile, err := upToken(getenv, o.home)
	if err != nil {
		return usageError{err}
	}

	rcfg, err := relayConfigFromEnv(getenv)
	if err != nil {
		return usageError{err}
	}
	if rcfg.AllowedHosts, err = parseAllowedHosts(o.allowedHosts); err != nil {
		return usageError{err}
	}
	if err := o.store.validate(); err != nil {
		return usageError{err}
	}
	rcfg.Token, rcfg.Logger = token, log.With("component", "relay")
	relayAddr := o.relayListen
	if relayAddr == "" {
		relayAddr = net.JoinHostPort(host, cli.EnvOr(getenv, "AEP_PORT", "8787"))
	}
	// The one token guards all three: any of them off loopback needs it.
	if err := httpguard.CheckExposure(relayAddr, o.public, token); err != nil {
		return usageError{err}
	}
	if err := withPage(&rcfg, o.home, getenv); err != nil {
		return usageError{err}
	}
	withRules(&rcfg, o.home)
	o.store.home = o.home
	closeStore, err := o.store.open(ctx, &rcfg)
	if err != nil {
		return fmt.Errorf("relay: %w", err)
	}
	defer closeStore()
	rsrv, err := relay.NewServer(rcfg)
	if err != nil {
		return usageError{err}
	}
	limitHeap(getenv, rcfg.BufferBytes, rcfg.Logger)
	stn, err := station.Listen(rsrv, relayAddr)
	if err != nil {
		return err
	}
	defer stn.Close() // what is bound, if up stops short of running
	relayURL := stn.RelayURL()

	o.gate.kimiHome = o.bridge.opts.kimiHome // up's one --kimi-home
	ao := adapterOptions{listen: o.adapterListen, relayURL: relayURL, home: o.home, allowedHosts: o.allowedHosts, life: o.life, gate: o.gate}
	if ao.listen == "" {
		ao.listen = cli.EnvOr(getenv, "AEP_KIMI_ADDR", net.JoinHostPort(host, "8398"))
	}
	ad, err := newAdapter(ao, token, getenv, log.With("component", "adapter"))
	if err != nil {
		return usageError{err}
	}
	aaddr, err := ad.Listen()
	if err != nil {
		return err
	}
	stn.Add(station.Component{Name: "adapter", Run: ad.Run}, func() { ad.Close() })
	o.bridge.opts.allowedHosts = o.allowedHosts
	br, bridgeNote, err := o.bridge.start(o.home, relayURL, token, getenv, log.With("component", "bridge"))
	if err != nil {
		return usageError{err}
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

// upToken is the one token `up` shares: AEP_TOKEN, or AEP_TOKEN_FILE, or
// $AEP_HOME/token, created (0600) on first run.
func upToken(getenv func(string) string, home string) (token, file string, err error) {
	if t := httpguard.TrimToken(getenv("AEP_TOKEN")); t != "" {
		return t, "", nil
	}
	file = getenv("AEP_TOKEN_FILE")
	if file == "" {
		file = filepath.Join(home, TokenFileName)
		if _, statErr := os.Lstat(file); errors.Is(statErr, os.ErrNotExist) {
			if err := tokenfile.Create(file); err != nil {
				return "", "", err
			}
		}
		token, err = tokenfile.ReadHome(file)
		return token, file, err
	}
	token, err = relayToken(getenv, file)
	return token, file, err
}

package main

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"path/filepath"

	"golang.org/x/sync/errgroup"

	"github.com/aep-kimi/aep-kimi/adapter"
	"github.com/aep-kimi/aep-kimi/fleetpage"
	"github.com/aep-kimi/aep-kimi/internal/cli"
	"github.com/aep-kimi/aep-kimi/internal/httpguard"
	"github.com/aep-kimi/aep-kimi/internal/safefile"
	"github.com/aep-kimi/aep-kimi/relay"
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
}

// upCommand is `aep-kimi up`: the relay, the adapter and (unless
// --web=false) the kimi web bridge, in one process sharing one token.
func upCommand(getenv func(string) string, io stdio) cli.Command {
	return cli.Command{
		Name:    "up",
		Summary: "run the relay, the hook adapter and the kimi web bridge together",
		Forms: []string{"[--home DIR] [--relay-listen ADDR] [--adapter-listen ADDR] [--web=false] [--public]\n" +
			"[--store memory|jetstream ...] [--otlp URL]"},
		About: "Runs the relay, the hook adapter and the kimi web bridge (which attaches each kimi web server as it starts),\n" +
			"sharing one relay token kept in $AEP_HOME/token. Every component reads its usual environment\n" +
			"(see aep-kimi relay -h, aep-kimi adapter -h, aep-kimi bridge-web -h).",
		Env:  []string{"AEP_TOKEN", "AEP_TOKEN_FILE", "AEP_PORT", "AEP_KIMI_ADDR", "AEP_KIMI_CONTROL", "AEP_INSTRUCT"},
		Args: cli.NoArgs,
		Flags: func(fs *flag.FlagSet) cli.Run {
			var o upOptions
			fs.StringVar(&o.home, "home", aepHome(getenv), "AEP home: token, logs, spool (env AEP_HOME)")
			fs.StringVar(&o.relayListen, "relay-listen", "", "relay address (default 127.0.0.1:$AEP_PORT, else 127.0.0.1:8787)")
			fs.StringVar(&o.adapterListen, "adapter-listen", "", "hook intake address (default $AEP_KIMI_ADDR, else 127.0.0.1:8398)")
			fs.BoolVar(&o.public, "public", envBool(getenv, "AEP_PUBLIC", false), "listen on all interfaces (env AEP_PUBLIC); a token is always required then")
			allowedHostsFlag(fs, &o.allowedHosts, getenv)
			fs.BoolVar(&o.verbose, "v", false, "debug logging")
			o.bridge.flags(fs, getenv)
			o.life.flags(fs, getenv)
			o.otlp.flags(fs)
			o.store.flags(fs, getenv)
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
	log := newLogger(io.err, o.verbose)
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
		relayAddr = net.JoinHostPort(host, envOr(getenv, "AEP_PORT", "8787"))
	}
	// The one token guards all three: any of them off loopback needs it.
	if err := httpguard.CheckExposure(relayAddr, o.public, token); err != nil {
		return usageError{err}
	}
	if err := withPage(&rcfg, o.home); err != nil {
		return usageError{err}
	}
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
	// What is bound before every component runs is released if up stops
	// short of running them.
	var release []func()
	defer func() {
		for _, r := range release {
			r()
		}
	}()
	rln, err := net.Listen("tcp", relayAddr)
	if err != nil {
		return fmt.Errorf("relay: %w", err)
	}
	release = append(release, func() { rln.Close() })
	relayURL := "http://" + loopbackFor(rln.Addr())

	ao := adapterOptions{listen: o.adapterListen, relayURL: relayURL, home: o.home, allowedHosts: o.allowedHosts, life: o.life}
	if ao.listen == "" {
		ao.listen = envOr(getenv, "AEP_KIMI_ADDR", net.JoinHostPort(host, "8398"))
	}
	ad, err := newAdapterDaemon(ao, token, getenv, log.With("component", "adapter"))
	if err != nil {
		return usageError{err}
	}
	aaddr, err := ad.srv.Listen()
	if err != nil {
		return err
	}
	release = append(release, func() { ad.srv.Close() })
	o.bridge.opts.allowedHosts = o.allowedHosts
	br, bridgeNote, err := o.bridge.start(o.home, relayURL, token, getenv, log.With("component", "bridge"))
	if err != nil {
		return usageError{err}
	}
	release = nil // from here each component releases its own

	printUp(io, upReport{
		relay: "http://" + rln.Addr().String(), page: fleetpage.LoginURL(relayURL, token), adapter: "http://" + aaddr.String(), home: o.home,
		tokenFile: tokenFile, noToken: token == "", bridge: bridgeNote, control: controlNote(getenv), public: o.public,
	})
	intake := []component{{"adapter", ad.run}}
	if br != nil {
		intake = append(intake, component{"bridge", br.run})
	}
	if exp != nil {
		exp.Relay, exp.Token = relayURL, token
		intake = append(intake, component{"otlp-export", exp.Run})
	}
	return supervise(ctx, component{"relay", func(ctx context.Context) error { return rsrv.Serve(ctx, rln) }}, intake...)
}

// component is one part of up, run until its context is done.
type component struct {
	name string
	run  func(context.Context) error
}

// supervise runs the relay and the intake daemons (adapter, bridge) until
// ctx is done or any of them fails or stops on its own; then it stops them
// all and returns the first failure. Shutdown order: intake stops and
// flushes to the relay first; then the relay drains its consumers.
func supervise(ctx context.Context, collector component, intake ...component) error {
	g, gctx := errgroup.WithContext(ctx)
	// The relay outlives the intake: its context ends only once they stop.
	relayCtx, stopRelay := context.WithCancel(context.WithoutCancel(ctx))
	g.Go(func() error { return collector.untilDone(relayCtx) })
	g.Go(func() error {
		defer stopRelay()
		ig, ictx := errgroup.WithContext(gctx)
		for _, c := range intake {
			ig.Go(func() error { return c.untilDone(ictx) })
		}
		return ig.Wait()
	})
	return g.Wait()
}

// untilDone runs the component; one that returns before its context is
// done has failed, even without an error.
func (c component) untilDone(ctx context.Context) error {
	err := c.run(ctx)
	if err == nil && ctx.Err() == nil {
		err = fmt.Errorf("%s stopped on its own", c.name)
	}
	return err
}

// loopbackFor is the address to reach a listener from this machine.
func loopbackFor(a net.Addr) string {
	tcp, ok := a.(*net.TCPAddr)
	if !ok || !tcp.IP.IsUnspecified() {
		return a.String()
	}
	return net.JoinHostPort("127.0.0.1", fmt.Sprint(tcp.Port))
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
			if err := writeNewToken(file); err != nil {
				return "", "", err
			}
		}
		token, err = readHomeToken(file)
		return token, file, err
	}
	token, err = relayToken(getenv, file)
	return token, file, err
}

func writeNewToken(path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("token: %w", err)
	}
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return fmt.Errorf("token: %w", err)
	}
	f, err := safefile.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("token: %w", err)
	}
	_, werr := f.WriteString(base64.RawURLEncoding.EncodeToString(b[:]) + "\n")
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	return werr
}

func controlNote(getenv func(string) string) string {
	gate := "off (AEP_KIMI_CONTROL=1 to hold tool calls for an answer)"
	if envBool(getenv, "AEP_KIMI_CONTROL", false) {
		gate = "ON: PreToolUse held for an answer (aep-kimi respond)"
	}
	instruct := "off (AEP_INSTRUCT=1)"
	if envBool(getenv, "AEP_INSTRUCT", false) {
		instruct = "ON (aep-kimi instruct)"
	}
	return "gate " + gate + "; instruct " + instruct
}

type upReport struct {
	relay, page, adapter, home, tokenFile, bridge, control string
	public, noToken                                        bool
}

func printUp(io stdio, r upReport) {
	tok := "AEP_TOKEN (from the environment)"
	switch {
	case r.noToken:
		tok = "none (" + r.tokenFile + " is empty): watch-only, control refused"
	case r.tokenFile != "":
		tok = r.tokenFile + " (0600)"
	}
	fmt.Fprintf(io.out, "aep-kimi up: running (Ctrl-C to stop)\n")
	fmt.Fprintf(io.out, "  relay    %s   AEP 0.1: POST /events, GET /stream, WS /socket; token %s\n", r.relay, tok)
	fmt.Fprintf(io.out, "  page     %s   the fleet page (the part after # logs the browser in; aep-kimi open opens it)\n", r.page)
	fmt.Fprintf(io.out, "  adapter  %s   kimi-hook posts here; hook token %s; logs %s\n", r.adapter,
		adapter.TokenPath(r.home), filepath.Join(r.home, "logs", "kimi-code"))
	fmt.Fprintf(io.out, "  bridge   %s\n", r.bridge)
	fmt.Fprintf(io.out, "  control  %s\n", r.control)
	if r.public {
		fmt.Fprintf(io.out, "  WARNING  listening on all interfaces: put TLS in front for anything off this host\n")
	}
	fmt.Fprintf(io.out, "\nNext:\n")
	fmt.Fprintf(io.out, "  1. register the hooks with Kimi:  aep-setup write kimi-code\n")
	fmt.Fprintf(io.out, "  2. watch the stream:              aep-kimi tail\n")
}

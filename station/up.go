package station

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"strings"

	"github.com/aep-kimi/aep-kimi/adapter"
	"github.com/aep-kimi/aep-kimi/export"
	"github.com/aep-kimi/aep-kimi/internal/cli"
	"github.com/aep-kimi/aep-kimi/internal/httpguard"
	"github.com/aep-kimi/aep-kimi/internal/tlsconf"
	"github.com/aep-kimi/aep-kimi/internal/tokenfile"
	"github.com/aep-kimi/aep-kimi/relay"
)

// DefaultUpStore is the store `aep-kimi up` runs without --store
// [AEP_STORE]: the embedded JetStream store under $AEP_HOME/relay, so the
// page, `tail --from all` and `audit` still have the history after a
// restart. It syncs every batch and adds about 0.1 s to the start.
const DefaultUpStore = relay.StoreJetStream

// UpOptions is `aep-kimi up`'s surface: the components' own flags, bound
// once for all of them.
type UpOptions struct {
	Home, RelayListen, AdapterListen string
	Public, Verbose                  bool
	Bridge                           BridgeChoice
	Life                             adapter.Lifecycle
	Relay                            RelayOptions
	Gate                             Gate
	LogSync                          LogSync
	// BannerWritten, when set, is called once the banner is written.
	BannerWritten func()
}

// BindFlags registers up's flags, their defaults read through getenv.
func (o *UpOptions) BindFlags(fs *flag.FlagSet, getenv func(string) string) {
	fs.StringVar(&o.Home, "home", tokenfile.AEPHome(getenv), "AEP home: token, logs, spool (env AEP_HOME)")
	fs.StringVar(&o.RelayListen, "relay-listen", "", "relay address (default 127.0.0.1:$AEP_PORT, else 127.0.0.1:8787)")
	fs.StringVar(&o.AdapterListen, "adapter-listen", "", "hook intake address (default $AEP_KIMI_ADDR, else 127.0.0.1:8398)")
	fs.BoolVar(&o.Public, "public", cli.EnvBool(getenv, "AEP_PUBLIC", false), "listen on all interfaces (env AEP_PUBLIC); a token is always required then")
	fs.BoolVar(&o.Verbose, "v", false, "debug logging")
	o.Bridge.BindFlags(fs, getenv)
	o.Life.BindFlags(fs, getenv)
	o.Relay.Store.Store = DefaultUpStore
	o.Relay.BindFlags(fs, getenv)
	o.Gate.BindFlags(fs, getenv)
	o.LogSync.BindFlags(fs, getenv)
}

// Up runs the relay, the adapter, the kimi web bridge (unless --web=false)
// and exp (the OTLP exporter, when not nil: its relay and token are set
// here) in one process sharing one token, the banner written on out (the
// login URL only when login), until ctx ends or one of them fails. A
// configuration mistake is a UsageError.
func Up(ctx context.Context, o UpOptions, exp *export.Live, getenv func(string) string, out io.Writer, login bool, log *slog.Logger) error {
	host := "127.0.0.1"
	if o.Public {
		host = "0.0.0.0"
	}
	if o.Public && httpguard.TrimToken(getenv("AEP_TOKEN")) == "" && getenv("AEP_TOKEN_FILE") == "" {
		return Usage(errors.New("--public listens on all interfaces and needs a token you chose: set AEP_TOKEN or AEP_TOKEN_FILE"))
	}
	token, tokenFile, err := tokenfile.Shared(getenv, o.Home)
	if err != nil {
		return Usage(err)
	}
	rcfg, err := relay.ConfigFromEnv(getenv)
	if err != nil {
		return Usage(err)
	}
	rcfg.Token, rcfg.Logger = token, log.With("component", "relay")
	rcfg.Listen = o.RelayListen
	if rcfg.Listen == "" {
		rcfg.Listen = net.JoinHostPort(host, cli.EnvOr(getenv, "AEP_PORT", "8787"))
	}
	// The one token guards all three: any of them off loopback needs it.
	o.Relay.Store.Home, o.Relay.Public = o.Home, o.Public
	// The TLS the relay serves, applied here so the components in this
	// process trust exactly the certificates it serves.
	self, err := o.Relay.TLS.apply(&rcfg, o.Home)
	if err != nil {
		return err
	}
	rsrv, beside, closeStore, err := NewRelay(ctx, rcfg, o.Relay, getenv)
	if err != nil {
		if !IsUsage(err) {
			err = fmt.Errorf("relay: %w", err)
		}
		return err
	}
	defer closeStore()
	stn, err := Listen(rsrv, rcfg.Listen)
	if err != nil {
		return err
	}
	defer stn.Close() // what is bound, if up stops short of running
	relayURL := stn.RelayURL()
	for _, c := range beside {
		stn.Add(c, nil)
	}
	if c, ok := self.warmer(); ok {
		stn.Add(c, nil)
	}
	var relayHTTP *http.Client
	if self != nil {
		relayURL = "https" + strings.TrimPrefix(relayURL, "http")
		relayHTTP = &http.Client{Transport: tlsconf.Transport(self.self)}
	}

	o.Gate.KimiHome = o.Bridge.Opts.KimiHome // up's one --kimi-home
	ao := AdapterOptions{Listen: o.AdapterListen, RelayURL: relayURL, RelayHTTP: relayHTTP, Home: o.Home, AllowedHosts: o.Relay.AllowedHosts, Life: o.Life, Gate: o.Gate, LogSync: o.LogSync}
	if ao.Listen == "" {
		ao.Listen = cli.EnvOr(getenv, "AEP_KIMI_ADDR", net.JoinHostPort(host, "8398"))
	}
	ad, err := NewAdapter(ao, token, getenv, log.With("component", "adapter"))
	if err != nil {
		return Usage(err)
	}
	aaddr, err := ad.Listen()
	if err != nil {
		return err
	}
	stn.Add(Component{Name: "adapter", Run: ad.Run}, func() { ad.Close() })
	o.Bridge.Opts.AllowedHosts, o.Bridge.Opts.LogSync = o.Relay.AllowedHosts, o.LogSync
	br, bridgeNote, err := o.Bridge.start(o.Home, relayURL, relayHTTP, token, getenv, log.With("component", "bridge"))
	if err != nil {
		return Usage(err)
	}
	if br != nil {
		stn.Add(Component{Name: "bridge", Run: br.Run}, nil)
	}
	if exp != nil {
		exp.Relay, exp.Token, exp.HTTPClient = relayURL, token, relayHTTP
		stn.Add(Component{Name: "otlp-export", Run: exp.Run}, nil)
	}
	Banner{
		RelayAddr: stn.Addr().String(), RelayURL: relayURL, AdapterURL: "http://" + aaddr.String(),
		Token: token, TokenFile: tokenFile, HookToken: adapter.TokenPath(o.Home), Logs: filepath.Join(o.Home, "logs", "kimi-code"),
		Bridge: bridgeNote, Control: BannerGate(ad, cli.EnvBool(getenv, "AEP_INSTRUCT", false)),
		Public: o.Public, Hooks: hooksRegistered(o.Gate.KimiHome, ad), Notify: o.Relay.Notify.names(o.Home),
		Store: storeNote(o.Relay.Store),
	}.Write(out, login)
	if o.BannerWritten != nil {
		o.BannerWritten()
	}
	return stn.Run(ctx)
}

// storeNote says where the relay keeps its history, for the banner.
func storeNote(o relay.StoreOptions) string {
	switch {
	case strings.TrimSpace(o.Store) != relay.StoreJetStream:
		return "memory: the history is lost when up stops (--store jetstream keeps it)"
	case o.URL != "":
		return "jetstream on the NATS of --nats (stream " + o.Stream + "): the history outlives up"
	}
	return "jetstream in " + filepath.Join(o.Home, relay.StoreDirName) + ": the history outlives a restart of up"
}

package station

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"time"

	"github.com/aep-kimi/aep-kimi/access"
	"github.com/aep-kimi/aep-kimi/fleetpage"
	"github.com/aep-kimi/aep-kimi/internal/cli"
	"github.com/aep-kimi/aep-kimi/internal/httpguard"
	"github.com/aep-kimi/aep-kimi/internal/tokenfile"
	"github.com/aep-kimi/aep-kimi/relay"
	"github.com/aep-kimi/aep-kimi/rules"
)

// WithPage gives the relay its fleet page, logging in with the relay's
// token and keeping its login generation under home. AEP_LOGIN_TTL sets
// how long a browser login lasts.
func WithPage(cfg *relay.Config, home string, getenv func(string) string) error {
	pcfg := fleetpage.Config{Token: cfg.Token, Logger: cfg.Logger, LoginsFile: filepath.Join(home, fleetpage.LoginsFileName), People: cfg.People}
	if v := strings.TrimSpace(getenv("AEP_LOGIN_TTL")); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < time.Second {
			return fmt.Errorf("AEP_LOGIN_TTL=%q is not a duration of a second or more (e.g. 12h, 30m)", v)
		}
		pcfg.SessionTTL = d
	}
	p, err := fleetpage.New(pcfg)
	if err != nil {
		return err
	}
	cfg.Page = p
	return nil
}

// WithPeople gives the relay the people's tokens kept in home (aep-kimi
// token): on a relay with a token of its own, they log in too, each with
// their role and capture ceiling.
func WithPeople(cfg *relay.Config, home string) {
	if cfg.Token != "" {
		cfg.People = access.OpenRoster(home, cfg.Logger.With("component", "access"))
	}
}

// WithRules gives the relay the fleet's rules, kept in home.
func WithRules(cfg *relay.Config, home string) {
	cfg.Rules = rules.Open(rules.Config{Path: filepath.Join(home, rules.FileName), Logger: cfg.Logger.With("component", "rules")})
}

// UsageError marks a configuration mistake (exit 2) rather than a failure.
type UsageError struct{ Err error }

func (e UsageError) Error() string { return e.Err.Error() }
func (e UsageError) Unwrap() error { return e.Err }

// IsUsage reports a configuration mistake.
func IsUsage(err error) bool {
	var ue UsageError
	return errors.As(err, &ue)
}

// RelayOptions are the relay's settings besides its environment (which
// relay.ConfigFromEnv reads), shared by `relay` and `up`.
type RelayOptions struct {
	// AllowedHosts is --allowed-hosts, unparsed.
	AllowedHosts string
	// Public is --public: listening on every interface is meant.
	Public bool
	// Store is the store flags; its Home is the AEP home, where the fleet
	// page's logins and the rules are kept too.
	Store relay.StoreOptions
	// Notify is the notification flags.
	Notify NotifyOptions
	// TLS is how the relay serves TLS, or that a proxy does.
	TLS TLSOptions
}

// NewRelay builds the relay on cfg (its listen address, token and logger
// set): allowed hosts, the exposure checks (off loopback needs a token,
// and TLS or a TLS-terminating proxy), the TLS it serves, the people, the fleet page, the rules and the notifier under the home,
// the store opened, and the heap limit. beside is what runs beside the
// relay (the notifier, the ACME certificates' first request); the closer closes the store. A configuration
// mistake is a UsageError; a store that cannot open is a failure.
func NewRelay(ctx context.Context, cfg relay.Config, o RelayOptions, getenv func(string) string) (srv *relay.Server, beside []Component, closeStore func(), err error) {
	if cfg.AllowedHosts, err = httpguard.ParseAllowedHostsFlag(o.AllowedHosts); err != nil {
		return nil, nil, nil, Usage(err)
	}
	// The names it has certificates for are names it answers to.
	cfg.AllowedHosts = append(cfg.AllowedHosts, o.TLS.ACMEDomains...)
	if err := o.Store.Validate(); err != nil {
		return nil, nil, nil, Usage(err)
	}
	if err := httpguard.CheckExposure(cfg.Listen, o.Public, cfg.Token); err != nil {
		return nil, nil, nil, Usage(err)
	}
	if err := o.TLS.Validate(); err != nil {
		return nil, nil, nil, Usage(err)
	}
	if err := httpguard.CheckTransport(cfg.Listen, o.Public, cfg.TLS != nil || o.TLS.Enabled(), o.TLS.BehindProxy); err != nil {
		return nil, nil, nil, Usage(err)
	}
	st, err := o.TLS.apply(&cfg, o.Store.Home)
	if err != nil {
		return nil, nil, nil, err
	}
	// The targets are read before anything else logs, so a bad --notify
	// is the one line the command prints.
	n, err := o.Notify.notifier(cfg, o.Store.Home, cfg.Logger.With("component", "notify"))
	if err != nil {
		return nil, nil, nil, err
	}
	if n != nil {
		cfg.Notify = n
	}
	WithPeople(&cfg, o.Store.Home)
	if err := WithPage(&cfg, o.Store.Home, getenv); err != nil {
		return nil, nil, nil, Usage(err)
	}
	WithRules(&cfg, o.Store.Home)
	closeStore, err = o.Store.Open(ctx, &cfg)
	if err != nil {
		return nil, nil, nil, err
	}
	srv, err = relay.NewServer(cfg)
	if err != nil {
		closeStore()
		return nil, nil, nil, Usage(err)
	}
	if n != nil {
		// Following the stream from before the relay serves: no request
		// admitted at start goes unseen.
		if err := n.Attach(srv); err != nil {
			closeStore()
			return nil, nil, nil, err
		}
		beside = append(beside, Component{Name: "notify", Run: func(ctx context.Context) error { return n.Run(ctx, srv) }})
	}
	if c, ok := st.warmer(); ok {
		beside = append(beside, c)
	}
	relay.LimitHeap(getenv, cfg.BufferBytes, cfg.Logger)
	return srv, beside, closeStore, nil
}

// BindFlags registers --allowed-hosts, the store and the TLS flags, shared by
// `relay` and `up`; each binds its own --home into Store.Home and --public.
func (o *RelayOptions) BindFlags(fs *flag.FlagSet, getenv func(string) string) {
	httpguard.AllowedHostsFlag(fs, &o.AllowedHosts, getenv)
	o.Store.BindFlags(fs, getenv)
	o.Notify.BindFlags(fs, getenv)
	o.TLS.BindFlags(fs, getenv)
}

// Usage marks err as a configuration mistake.
func Usage(err error) error { return UsageError{Err: err} }

// RelayFlags is `aep-kimi relay`'s surface: the relay's own flags over
// its environment, and the options it shares with up.
type RelayFlags struct {
	Listen, TokenFile string
	Verbose           bool
	BufferBytes       int64
	MaxConns          int
	RelayOptions
}

// BindFlags registers the relay command's flags, their defaults read
// through getenv.
func (o *RelayFlags) BindFlags(fs *flag.FlagSet, getenv func(string) string) {
	fs.StringVar(&o.Listen, "listen", "", "listen address (default 127.0.0.1:$AEP_PORT, else "+relay.DefaultListen+")")
	fs.BoolVar(&o.Public, "public", cli.EnvBool(getenv, "AEP_PUBLIC", false), "listen on all interfaces when --listen is not given (env AEP_PUBLIC); needs a token of 16+ bytes")
	fs.StringVar(&o.TokenFile, "token-file", getenv("AEP_TOKEN_FILE"), "file holding the token, when AEP_TOKEN is not set (env AEP_TOKEN_FILE)")
	fs.Int64Var(&o.BufferBytes, "buffer-bytes", 0, fmt.Sprintf("byte budget of the whole replay buffer (env AEP_BUFFER_BYTES, default %d)", relay.DefaultBufferBytes))
	fs.IntVar(&o.MaxConns, "max-connections", 0, fmt.Sprintf("most streams and sockets served at once, emitters' included; more are refused with 503 (env AEP_MAX_CONNECTIONS, default %d)", relay.DefaultMaxConnections))
	fs.StringVar(&o.Store.Home, "home", tokenfile.AEPHome(getenv),
		"AEP home; the embedded jetstream store keeps its files in HOME/"+relay.StoreDirName+" (env AEP_HOME)")
	o.RelayOptions.BindFlags(fs, getenv)
	fs.BoolVar(&o.Verbose, "v", false, "log every request (debug level)")
}

// Config is the relay's configuration: its environment, then the token
// (AEP_TOKEN, else --token-file, re-read when the file is replaced), the
// listen address and the budgets the flags give.
func (o RelayFlags) Config(getenv func(string) string) (relay.Config, error) {
	cfg, err := relay.ConfigFromEnv(getenv)
	if err == nil {
		cfg.Token, err = tokenfile.Server(getenv, o.TokenFile)
	}
	if err != nil {
		return cfg, err
	}
	if cfg.Token != "" && httpguard.TrimToken(getenv("AEP_TOKEN")) == "" {
		// The token came from its file: a replaced file replaces it, and
		// ends what the old one opened.
		file := o.TokenFile
		cfg.TokenSource = func() (string, error) { return tokenfile.Read(file, true) }
	}
	switch {
	case o.Listen != "":
		cfg.Listen = o.Listen
	case o.Public:
		cfg.Listen = net.JoinHostPort("0.0.0.0", cli.EnvOr(getenv, "AEP_PORT", "8787"))
	case cfg.Listen == "":
		cfg.Listen = relay.DefaultListen
	}
	if o.BufferBytes > 0 {
		cfg.BufferBytes = o.BufferBytes
	}
	if o.MaxConns != 0 {
		cfg.MaxConnections = o.MaxConns
	}
	return cfg, nil
}

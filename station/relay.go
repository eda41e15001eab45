package station

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/aep-kimi/aep-kimi/fleetpage"
	"github.com/aep-kimi/aep-kimi/internal/httpguard"
	"github.com/aep-kimi/aep-kimi/relay"
	"github.com/aep-kimi/aep-kimi/rules"
)

// WithPage gives the relay its fleet page, logging in with the relay's
// token and keeping its login generation under home. AEP_LOGIN_TTL sets
// how long a browser login lasts.
func WithPage(cfg *relay.Config, home string, getenv func(string) string) error {
	pcfg := fleetpage.Config{Token: cfg.Token, Logger: cfg.Logger, LoginsFile: filepath.Join(home, fleetpage.LoginsFileName)}
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
}

// NewRelay builds the relay on cfg (its listen address, token and logger
// set): allowed hosts, the exposure check (off loopback needs a token),
// the fleet page and the rules under the home, the store opened, and the
// heap limit. The closer closes the store. A configuration mistake is a
// UsageError; a store that cannot open is a failure.
func NewRelay(ctx context.Context, cfg relay.Config, o RelayOptions, getenv func(string) string) (*relay.Server, func(), error) {
	var err error
	if cfg.AllowedHosts, err = httpguard.ParseAllowedHostsFlag(o.AllowedHosts); err != nil {
		return nil, nil, Usage(err)
	}
	if err := o.Store.Validate(); err != nil {
		return nil, nil, Usage(err)
	}
	if err := httpguard.CheckExposure(cfg.Listen, o.Public, cfg.Token); err != nil {
		return nil, nil, Usage(err)
	}
	if err := WithPage(&cfg, o.Store.Home, getenv); err != nil {
		return nil, nil, Usage(err)
	}
	WithRules(&cfg, o.Store.Home)
	closeStore, err := o.Store.Open(ctx, &cfg)
	if err != nil {
		return nil, nil, err
	}
	srv, err := relay.NewServer(cfg)
	if err != nil {
		closeStore()
		return nil, nil, Usage(err)
	}
	relay.LimitHeap(getenv, cfg.BufferBytes, cfg.Logger)
	return srv, closeStore, nil
}

// BindFlags registers --allowed-hosts and the store flags, shared by
// `relay` and `up`; each binds its own --home into Store.Home and --public.
func (o *RelayOptions) BindFlags(fs *flag.FlagSet, getenv func(string) string) {
	httpguard.AllowedHostsFlag(fs, &o.AllowedHosts, getenv)
	o.Store.BindFlags(fs, getenv)
}

// Usage marks err as a configuration mistake.
func Usage(err error) error { return UsageError{Err: err} }

package station

import (
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"time"

	"github.com/aep-kimi/aep-kimi/internal/httpdrain"
	"github.com/aep-kimi/aep-kimi/notify"
	"github.com/aep-kimi/aep-kimi/relay"
)

// NotifyOptions are the notification flags, shared by `relay` and `up`.
type NotifyOptions struct {
	// Targets are the --notify specs, unparsed.
	Targets []string
	// PublicURL is --public-url ("" means the relay's own address).
	PublicURL string
	// After is --notify-after.
	After time.Duration
	// PushAllow is AEP_NOTIFY_PUSH_ALLOW: where a Web Push service may be
	// besides public addresses (tests and labs; no flag on purpose).
	PushAllow string
	// Usage is --notify-usage, unparsed.
	Usage string
}

// BindFlags registers --notify, --public-url and --notify-after.
func (o *NotifyOptions) BindFlags(fs *flag.FlagSet, getenv func(string) string) {
	fs.Func("notify", "send waiting requests to TARGET, repeatable: ntfy:URL, slack:URL or webhook:URL (secrets from files; see README)", func(s string) error {
		o.Targets = append(o.Targets, s)
		return nil
	})
	fs.StringVar(&o.PublicURL, "public-url", getenv("AEP_PUBLIC_URL"), "the relay's address as phones and chat apps reach it, for answer links (env AEP_PUBLIC_URL; default the relay's own address)")
	o.PushAllow = getenv("AEP_NOTIFY_PUSH_ALLOW")
	fs.DurationVar(&o.After, "notify-after", 0, "wait this long before notifying, and send nothing if the request was answered by then")
	fs.StringVar(&o.Usage, "notify-usage", getenv("AEP_NOTIFY_USAGE"), "notify once per session when it crosses a threshold: context=PERCENT% (how full its context is), tokens=COUNT (tokens used), comma-separated, e.g. context=80%,tokens=200k (env AEP_NOTIFY_USAGE)")
}

// notifier builds the relay's notifier: its targets parsed, its links
// built on the public URL (the listen address when none is given), its
// keys under home. A relay without a token answers nothing, so it has no
// notifier; --notify on one is a usage error.
func (o NotifyOptions) notifier(cfg relay.Config, home string, log *slog.Logger) (*notify.Notifier, error) {
	usage, err := notify.ParseUsage(o.Usage)
	if err != nil {
		return nil, Usage(err)
	}
	if cfg.Token == "" {
		if len(o.Targets) > 0 {
			return nil, Usage(errors.New("--notify needs a token: answers from notifications are control commands (set AEP_TOKEN or AEP_TOKEN_FILE)"))
		}
		if len(usage) > 0 {
			return nil, Usage(errors.New("--notify-usage needs a token: the relay's notifier runs only with one (set AEP_TOKEN or AEP_TOKEN_FILE)"))
		}
		return nil, nil
	}
	allow, err := notify.ParsePushAllow(o.PushAllow)
	if err != nil {
		return nil, Usage(err)
	}
	ncfg := notify.Config{Home: home, PublicURL: o.PublicURL, After: o.After, Logger: log, PushServiceAllow: allow, Usage: usage}
	if ncfg.PublicURL == "" {
		addr, err := net.ResolveTCPAddr("tcp", cfg.Listen)
		if err != nil {
			return nil, Usage(fmt.Errorf("--public-url: the relay's address %q: %w", cfg.Listen, err))
		}
		ncfg.PublicURL = localPublicURL(addr, cfg.TLS != nil)
		if !addr.IP.IsLoopback() && len(o.Targets) > 0 {
			log.Warn("answer links point at this machine's loopback address: set --public-url to the address phones reach the relay at", "links", ncfg.PublicURL)
		}
	}
	if _, err := notify.ParsePublicURL(ncfg.PublicURL); err != nil {
		return nil, Usage(err)
	}
	for _, spec := range o.Targets {
		t, err := notify.ParseTargetIn(spec, home)
		if err != nil {
			return nil, Usage(err)
		}
		ncfg.Targets = append(ncfg.Targets, t)
	}
	return notify.New(ncfg)
}

// localPublicURL is where answer links point without --public-url: the
// relay's own address, over https when it serves TLS itself (an http://
// link to a TLS port answers a bare 400, never the request).
func localPublicURL(addr net.Addr, tls bool) string {
	u := httpdrain.LocalURL(addr)
	if tls {
		u = "https://" + strings.TrimPrefix(u, "http://")
	}
	return u
}

// names are the --notify targets as logs name them (secrets elided), for
// up's banner; a target that does not parse (refused at start) is left out.
func (o NotifyOptions) names(home string) []string {
	var out []string
	for _, spec := range o.Targets {
		if t, err := notify.ParseTargetIn(spec, home); err == nil {
			out = append(out, t.Name())
		}
	}
	return out
}

package main

import (
	"flag"
	"fmt"
	"log/slog"
	"time"

	"github.com/aep-kimi/aep-kimi/bridgeweb"
)

// bridgeChoice is whether and how `up` runs the kimi web bridge.
type bridgeChoice struct {
	// force runs the bridge (the default): it watches the instance registry
	// and attaches each kimi web server as it starts, so one started after
	// up is followed without a restart.
	force bool
	opts  bridgeWebOptions
}

func (b *bridgeChoice) flags(fs *flag.FlagSet, getenv func(string) string) {
	fs.BoolVar(&b.force, "web", true, "run the kimi web bridge, which follows every kimi web server as it starts and stops (--web=false: hooks only)")
	// The bridge's own defaults and environment, through a throwaway flag
	// set; up exposes the few it needs under its own names.
	b.opts.flags(flag.NewFlagSet("bridge-web", flag.ContinueOnError), getenv)
	fs.StringVar(&b.opts.mode, "mode", b.opts.mode, "bridge mode: companion (next to the hook adapter) or primary (env AEP_KIMI_WEB_MODE)")
	fs.StringVar(&b.opts.listen, "bridge-listen", b.opts.listen, "bridge /healthz and /metrics address (env AEP_KIMI_WEB_ADDR)")
	fs.StringVar(&b.opts.kimiHome, "kimi-home", b.opts.kimiHome, "Kimi's home, where kimi web registers itself (env KIMI_CODE_HOME)")
	allowRemoteKapFlag(fs, &b.opts.allowRemoteKap, getenv)
}

// start builds the bridge (unless --web=false) and says what happened, for
// up's report.
func (b *bridgeChoice) start(home, relayURL, token string, getenv func(string) string, log *slog.Logger) (daemon, string, error) {
	if !b.force {
		return nil, "not started (--web=false)", nil
	}
	_, _, err := bridgeweb.Discover(b.opts.kimiHome, time.Now(), bridgeweb.DefaultStaleInstance, nil, b.opts.allowRemoteKap)
	found := err == nil
	o := b.opts
	o.home, o.relayURL = home, relayURL
	d, err := newBridgeWeb(o, token, getenv, log)
	if err != nil {
		return nil, "", err
	}
	note := fmt.Sprintf("http://%s   %s mode, following kimi web", o.listen, o.mode)
	if !found {
		note += " (none running yet: each one is attached as it starts)"
	}
	return d, note, nil
}

package main

import (
	"flag"
	"fmt"
	"log/slog"
	"time"

	"github.com/aep-kimi/aep-kimi/adapter"
	"github.com/aep-kimi/aep-kimi/internal/cli"
	"github.com/aep-kimi/aep-kimi/mapping"
	"github.com/aep-kimi/aep-kimi/setup"
	"github.com/aep-kimi/aep-kimi/station"
)

// gateOptions is the held gate's surface, shared by adapter and up: whether
// PreToolUse is held for an answer, what happens when nobody answers, and
// where Kimi's config.toml says how long Kimi waits.
type gateOptions struct {
	control   bool
	onTimeout string
	kimiHome  string
}

func (g *gateOptions) flags(fs *flag.FlagSet, getenv func(string) string) {
	fs.BoolVar(&g.control, "control", cli.EnvBool(getenv, "AEP_KIMI_CONTROL", false),
		"hold each tool call (PreToolUse) for an answer from the fleet; register the hooks with aep-setup write kimi-code --control (env AEP_KIMI_CONTROL)")
	fs.StringVar(&g.onTimeout, "on-timeout", cli.EnvOr(getenv, "AEP_KIMI_ON_TIMEOUT", adapter.DefaultOnTimeout),
		"when nobody answers a held call before Kimi stops waiting: allow (Kimi runs it) or deny (env AEP_KIMI_ON_TIMEOUT)")
	g.kimiHome = kimiHome(getenv)
}

// apply puts the gate on cfg. With the gate on it reads the PreToolUse
// timeout Kimi has registered, so the gate never holds longer than Kimi
// waits; a hook not registered yet keeps to the wait each kimi-hook
// declares.
func (g gateOptions) apply(cfg *adapter.Config, log *slog.Logger) error {
	switch g.onTimeout {
	case "", mapping.OnExpiryAllow, mapping.OnExpiryDeny: // "": the adapter's default
	default:
		return fmt.Errorf("--on-timeout %q: want allow or deny (AEP_KIMI_ON_TIMEOUT)", g.onTimeout)
	}
	cfg.Control.Gate, cfg.Control.OnTimeout = g.control, g.onTimeout
	if !g.control {
		return nil
	}
	path := setup.Config{Home: g.kimiHome}.ConfigPath()
	secs, ok, err := setup.PreToolUseTimeout(g.kimiHome)
	switch {
	case err != nil:
		log.Warn("cannot read the hooks Kimi has registered; the gate keeps within the wait each hook declares", "err", err)
	case !ok:
		log.Info("no AEP PreToolUse hook registered yet; the gate keeps within the wait each hook declares",
			"config", path, "register", setup.WriteCommand(setupFor(cfg.Control)))
	default:
		cfg.Control.KimiTimeout = time.Duration(secs) * time.Second
		if adapter.GateWindow(cfg.Control.KimiTimeout) <= 0 {
			return fmt.Errorf("the PreToolUse timeout in %s is %ds, too short to hold a tool call for an answer: run `%s`",
				path, secs, setup.WriteCommand(setupFor(cfg.Control)))
		}
	}
	return nil
}

// setupFor is the registration a gate configuration needs.
func setupFor(c adapter.Control) setup.Config {
	return setup.Config{Control: c.Gate, HoldMs: int(c.HoldTimeout.Milliseconds())}
}

// bannerGate is the gate's part of up's banner: off, or how long it holds,
// what happens then, and the registration it needs.
func bannerGate(srv *adapter.Server, instruct bool) station.Control {
	c := station.Control{Instruct: instruct, Setup: setup.WriteCommand(setup.Config{})}
	g, on := srv.Gate()
	if !on {
		return c
	}
	c.Gate = true
	c.Hold = time.Duration(g.EffectiveHoldMs) * time.Millisecond
	c.OnTimeout = g.OnTimeout
	c.Setup = setup.WriteCommand(setup.Config{Control: true, HoldMs: int(g.HoldMs)})
	if g.EffectiveHoldMs < g.HoldMs {
		c.KimiTimeout = time.Duration(g.KimiTimeoutS) * time.Second
	}
	return c
}

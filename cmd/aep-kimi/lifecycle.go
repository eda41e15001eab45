package main

import (
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/aep-kimi/aep-kimi/adapter"
)

// lifecycleOptions are the windows of a session nobody can watch (a hook
// from another machine, a platform without a process watcher): quiet after
// the heartbeat window, ended after the idle limit. `adapter` and `up` both
// take them.
type lifecycleOptions struct {
	staleAfter, idleEnd time.Duration
	envErr              error
}

func (o *lifecycleOptions) flags(fs *flag.FlagSet, getenv func(string) string) {
	o.staleAfter = o.fromEnv(getenv, "AEP_KIMI_STALE_AFTER", adapter.DefaultStaleAfter)
	o.idleEnd = o.fromEnv(getenv, "AEP_KIMI_IDLE_END", adapter.DefaultIdleEnd)
	fs.DurationVar(&o.staleAfter, "stale-after", o.staleAfter,
		"heartbeat window: a session without a hook this long reads stale, and offline on the stream when its Kimi process is not watched (env AEP_KIMI_STALE_AFTER)")
	fs.DurationVar(&o.idleEnd, "idle-end", o.idleEnd,
		"idle limit: a session whose Kimi process is not watched ends (reason timeout) after this much silence (env AEP_KIMI_IDLE_END)")
}

func (o *lifecycleOptions) fromEnv(getenv func(string) string, key string, def time.Duration) time.Duration {
	v := strings.TrimSpace(getenv(key))
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		o.envErr = fmt.Errorf("%s=%q is not a positive duration (e.g. 150s, 30m)", key, v)
		return def
	}
	return d
}

// apply sets the windows on an adapter configuration; a zero window takes
// the adapter's default.
func (o lifecycleOptions) apply(cfg *adapter.Config) error {
	stale, idle := o.staleAfter, o.idleEnd
	if stale == 0 {
		stale = adapter.DefaultStaleAfter
	}
	if idle == 0 {
		idle = adapter.DefaultIdleEnd
	}
	switch {
	case o.envErr != nil:
		return o.envErr
	case stale < 0 || idle < 0:
		return fmt.Errorf("--stale-after and --idle-end must be positive durations")
	case idle <= stale:
		return fmt.Errorf("--idle-end (%s) must be longer than --stale-after (%s): a session goes quiet before it ends", idle, stale)
	}
	cfg.StaleAfter, cfg.IdleEnd = stale, idle
	return nil
}

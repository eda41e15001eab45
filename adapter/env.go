package adapter

import (
	"flag"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/aep-kimi/aep-kimi/emitter"
	"github.com/aep-kimi/aep-kimi/internal/cli"
)

// ConfigFromEnv reads the adapter's capture, redaction and control
// environment: the posture every source shares (emitter.PostureFromEnv),
// AEP_INSTRUCT, AEP_KIMI_GATE_TOOLS, AEP_ATTENTION_TIMEOUT_MS and the
// bounds AEP_KIMI_MAX_OPEN_LOGS, AEP_KIMI_MAX_SESSIONS, AEP_KIMI_MAX_WATCHES.
func ConfigFromEnv(getenv func(string) string) (Config, error) {
	var cfg Config
	p, err := emitter.PostureFromEnv(getenv)
	if err != nil {
		return cfg, err
	}
	cfg.Posture = p
	cfg.Control.Instruct = cli.EnvBool(getenv, "AEP_INSTRUCT", false)
	for _, t := range strings.Split(getenv("AEP_KIMI_GATE_TOOLS"), ",") {
		if t = strings.TrimSpace(t); t != "" {
			cfg.Control.GateTools = append(cfg.Control.GateTools, t)
		}
	}
	if v := strings.TrimSpace(getenv("AEP_ATTENTION_TIMEOUT_MS")); v != "" {
		ms, err := strconv.Atoi(v)
		if err != nil || ms <= 0 {
			return cfg, fmt.Errorf("AEP_ATTENTION_TIMEOUT_MS=%q is not a positive number of milliseconds", v)
		}
		cfg.Control.HoldTimeout = time.Duration(ms) * time.Millisecond
	}
	err = cli.EnvPositiveInts(getenv, []cli.EnvInt{
		{Name: "AEP_KIMI_MAX_OPEN_LOGS", Dst: &cfg.MaxOpenLogs}, {Name: "AEP_KIMI_MAX_SESSIONS", Dst: &cfg.MaxSessions},
		{Name: "AEP_KIMI_MAX_WATCHES", Dst: &cfg.MaxWatches},
	})
	return cfg, err
}

// Lifecycle is the windows of a session nobody can watch (a hook from
// another machine, a platform without a process watcher): quiet after the
// heartbeat window, ended after the idle limit. `adapter` and `up` both
// bind them.
type Lifecycle struct {
	StaleAfter, IdleEnd time.Duration
	envErr              error
}

// BindFlags registers --stale-after and --idle-end, their defaults read
// from AEP_KIMI_STALE_AFTER and AEP_KIMI_IDLE_END.
func (o *Lifecycle) BindFlags(fs *flag.FlagSet, getenv func(string) string) {
	o.StaleAfter = o.fromEnv(getenv, "AEP_KIMI_STALE_AFTER", DefaultStaleAfter)
	o.IdleEnd = o.fromEnv(getenv, "AEP_KIMI_IDLE_END", DefaultIdleEnd)
	fs.DurationVar(&o.StaleAfter, "stale-after", o.StaleAfter,
		"heartbeat window: a session without a hook this long reads stale, and offline on the stream when its Kimi process is not watched (env AEP_KIMI_STALE_AFTER)")
	fs.DurationVar(&o.IdleEnd, "idle-end", o.IdleEnd,
		"idle limit: a session whose Kimi process is not watched ends (reason timeout) after this much silence (env AEP_KIMI_IDLE_END)")
}

func (o *Lifecycle) fromEnv(getenv func(string) string, key string, def time.Duration) time.Duration {
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

// Apply sets the windows on cfg; a zero window takes the default.
func (o Lifecycle) Apply(cfg *Config) error {
	stale, idle := o.StaleAfter, o.IdleEnd
	if stale == 0 {
		stale = DefaultStaleAfter
	}
	if idle == 0 {
		idle = DefaultIdleEnd
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

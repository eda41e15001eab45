package station

import (
	"flag"
	"fmt"

	"github.com/aep-kimi/aep-kimi/emitter"
	"github.com/aep-kimi/aep-kimi/internal/cli"
	"github.com/aep-kimi/aep-kimi/internal/syncmode"
)

// LogSync is --log-sync (AEP_LOG_SYNC): when the session logs of the
// adapter and the bridge reach the disk. adapter, bridge-web and up bind it
// once each; up hands its value to both sources.
type LogSync struct{ Mode string }

// BindFlags registers --log-sync, its default read through getenv.
func (l *LogSync) BindFlags(fs *flag.FlagSet, getenv func(string) string) {
	fs.StringVar(&l.Mode, "log-sync", cli.EnvOr(getenv, "AEP_LOG_SYNC", string(syncmode.Default)),
		"when session logs reach the disk: always (a hook is acknowledged once its events are synced; one sync serves the hooks that arrive meanwhile), "+
			"interval (acknowledged once written, synced within "+syncmode.Every.String()+"), or none (the OS flushes when it will); "+
			"answers and decisions are synced before they are acknowledged in every mode (env AEP_LOG_SYNC)")
}

// Apply sets cfg's Sync, or says what is wrong with the flag.
func (l LogSync) Apply(cfg *emitter.Config) error {
	m, err := syncmode.Parse(l.Mode)
	if err != nil {
		return fmt.Errorf("--log-sync: %w", err)
	}
	cfg.Sync = m
	return nil
}

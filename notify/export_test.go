package notify

import (
	"time"

	"github.com/aep-kimi/aep-kimi/internal/defaults"
)

// Settle and Tick are the product's feed pace, for a test that needs it.
const (
	Settle = settle
	Tick   = tick
)

// SetFeedPace sets cfg's settle and tick where they are not set yet.
func SetFeedPace(cfg *Config, settle, tick time.Duration) {
	defaults.Set(&cfg.settle, settle)
	defaults.Set(&cfg.tick, tick)
}

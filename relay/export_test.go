package relay

import "time"

// SetFollowHeartbeat sets the heartbeat of the stream follower cfg opens
// (followHeartbeat in the product).
func SetFollowHeartbeat(cfg *JetStreamConfig, d time.Duration) { cfg.heartbeat = d }

// Package periodic is the one ticker loop of the long-lived components: a
// source's housekeeping and polling, the relay's credential watch.
package periodic

import (
	"context"
	"time"
)

// Every calls fn every d until ctx is done; fn runs on the caller's
// goroutine, so a slow call delays the next rather than overlapping it.
func Every(ctx context.Context, d time.Duration, fn func()) {
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			fn()
		}
	}
}

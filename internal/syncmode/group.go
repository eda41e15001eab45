package syncmode

import "sync"

// Group is a group commit: callers that each wrote something wait for a
// sync that began after their write, one sync runs at a time, and the
// writes made while it runs are all covered by the next. A write covered by
// a sync that failed stays failed: a later sync succeeding says nothing of
// pages the kernel may have dropped. The zero value is ready to use.
type Group struct {
	mu      sync.Mutex
	cond    sync.Cond
	syncing bool
	synced  uint64 // every write up to this one is durable
	failed  uint64 // a sync covering the writes up to this one failed
	err     error
}

// Wait returns once write n (writes are numbered from 1 by the caller) is
// durable, or the error of the sync that covered it. upto reports the
// number of the last write completed, read as a sync begins; sync makes
// every completed write durable.
func (g *Group) Wait(n uint64, upto func() uint64, sync func() error) error {
	if n == 0 {
		return nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.cond.L == nil {
		g.cond.L = &g.mu
	}
	for {
		if n <= g.failed {
			return g.err
		}
		if n <= g.synced {
			return nil
		}
		if g.syncing {
			g.cond.Wait()
			continue
		}
		g.syncing = true
		g.mu.Unlock()
		to := upto()
		err := sync()
		g.mu.Lock()
		g.syncing = false
		if err != nil {
			g.failed, g.err = max(g.failed, to), err
		} else {
			g.synced = max(g.synced, to)
		}
		g.cond.Broadcast()
	}
}

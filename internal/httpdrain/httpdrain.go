// Package httpdrain shuts an http.Server down without waiting on
// connections that never started a request.
//
// net/http's Shutdown counts a connection that has been accepted but has not
// sent its first request as busy for up to 5 s, and HTTP clients routinely
// keep such a spare open in their pool. A daemon with a 5 s drain budget
// would then miss it for nothing. Track closes those spares during shutdown.
package httpdrain

import (
	"context"
	"net"
	"net/http"
	"sync"
	"time"
)

// Grace spares a connection accepted this recently: its first request may
// be on the wire.
const Grace = 200 * time.Millisecond

// Tracker records which connections have not started a request. Install it
// with Track, shut down with Shutdown. The zero value is ready to use.
type Tracker struct {
	mu    sync.Mutex
	fresh map[net.Conn]time.Time
}

// Track installs t as hs.ConnState (keeping any hook already there) and
// returns t.
func Track(hs *http.Server) *Tracker {
	t := &Tracker{}
	prev := hs.ConnState
	hs.ConnState = func(c net.Conn, st http.ConnState) {
		t.observe(c, st)
		if prev != nil {
			prev(c, st)
		}
	}
	return t
}

func (t *Tracker) observe(c net.Conn, st http.ConnState) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if st == http.StateNew {
		if t.fresh == nil {
			t.fresh = map[net.Conn]time.Time{}
		}
		t.fresh[c] = time.Now()
		return
	}
	delete(t.fresh, c)
}

// Shutdown runs hs.Shutdown(ctx) while closing, every Grace/4, connections
// that have sat unused since accept for Grace.
func (t *Tracker) Shutdown(ctx context.Context, hs *http.Server) error {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(Grace / 4)
		defer tick.Stop()
		for {
			t.sweep()
			select {
			case <-done:
				return
			case <-tick.C:
			}
		}
	}()
	err := hs.Shutdown(ctx)
	close(done)
	wg.Wait()
	return err
}

func (t *Tracker) sweep() {
	t.mu.Lock()
	defer t.mu.Unlock()
	for c, since := range t.fresh {
		if time.Since(since) >= Grace {
			_ = c.Close()
			delete(t.fresh, c)
		}
	}
}

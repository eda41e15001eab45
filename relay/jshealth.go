package relay

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/aep-kimi/aep-kimi/internal/backoff"
	"github.com/aep-kimi/aep-kimi/internal/periodic"
)

const (
	// storeCheckInterval paces asking the NATS server whether the stream
	// can store: the embedded server's health (a stream with a write error,
	// JetStream shut down), an external one's stream info.
	storeCheckInterval = time.Second
	// storeReadyWait bounds the wait for the embedded server's readiness
	// before its failed check is asked again: ready at once when it runs.
	storeReadyWait = time.Second
	// storeProbeInterval is how often, while the store is known unavailable,
	// one batch is let through to try it; the others are refused at once.
	// storeProbeTimeout bounds that batch's wait for the stream.
	storeProbeInterval = time.Second
	storeProbeTimeout  = 2 * time.Second
	// storeRetryAfter is the Retry-After, in seconds, of a batch the store
	// did not take.
	storeRetryAfter = 2
	// spaceProbeBytes is what the embedded store's directory must take (a
	// file written and synced, then removed) before the relay restarts
	// JetStream after a write error: a disk still full would fail it again.
	spaceProbeBytes = 1 << 20
	// restartMin and restartMax pace those restarts.
	restartMin = time.Second
	restartMax = 30 * time.Second
)

// storeHealth is whether the store can make events durable: what the
// server's own checks say and what the last batch met. While it cannot,
// batches are refused at once, but for one at a time that tries the
// stream, at most one every storeProbeInterval after a failed try: a batch
// that is stored proves it back. The zero value
// is a healthy store that logs nothing.
type storeHealth struct {
	log *slog.Logger

	mu   sync.Mutex
	down bool
	// byServer says the server's check found the store down, so that check
	// may also find it back; a batch's failure is undone by a batch.
	byServer bool
	reason   string
	since    time.Time
	probeAt  time.Time
	probing  bool
	// lost is closed when the store goes down: batches waiting for the
	// stream then stop waiting. A fresh one is made when it comes back.
	lost chan struct{}

	outages, refused, restarts atomic.Uint64
}

// admit decides whether a batch may try the stream: yes while the store is
// up (lost then ends the wait should it go down meanwhile), and for one
// probe at a time while it is down because batches failed.
func (h *storeHealth) admit() (probe bool, lost <-chan struct{}, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.down {
		if h.lost == nil {
			h.lost = make(chan struct{})
		}
		return false, h.lost, nil
	}
	// What the server's check found is its to clear: no batch tries.
	if now := time.Now(); !h.byServer && !h.probing && !now.Before(h.probeAt) {
		h.probing = true
		return true, nil, nil
	}
	h.refused.Add(1)
	return false, nil, fmt.Errorf("%w: %s", errStoreUnavailable, h.reason)
}

// done records what a batch met: stored proves the store up, a failure
// takes it down. A batch that wrote nothing (redeliveries, live-only
// events) proves nothing.
func (h *storeHealth) done(probe, wrote bool, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if probe {
		h.probing = false
		if wrote {
			h.probeAt = time.Now().Add(storeProbeInterval)
		}
	}
	switch {
	case err == nil && wrote:
		h.upLocked(false)
	case err != nil && !errors.Is(err, errStoreUnavailable):
		h.downLocked(err.Error(), false)
	}
}

// fail takes the store down for reason.
func (h *storeHealth) fail(reason string, byServer bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.downLocked(reason, byServer)
}

// ok brings the store back: the server's check does only when it was what
// found the store down.
func (h *storeHealth) ok(byServer bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.upLocked(byServer)
}

func (h *storeHealth) downLocked(reason string, byServer bool) {
	if h.down {
		h.reason = reason
		h.byServer = h.byServer || byServer
		return
	}
	h.down, h.byServer, h.reason, h.since = true, byServer, reason, time.Now()
	// The next batch tries at once; after a failed try, one a second.
	h.probeAt = h.since
	if h.lost != nil {
		close(h.lost)
		h.lost = nil
	}
	h.outages.Add(1)
	if h.log != nil {
		h.log.Warn("jetstream store: cannot make events durable; refusing batches until it can", "reason", reason)
	}
}

func (h *storeHealth) upLocked(byServer bool) {
	if !h.down || (byServer && !h.byServer) {
		return
	}
	if h.log != nil {
		h.log.Info("jetstream store: storing events again", "down_for", time.Since(h.since).Round(time.Millisecond), "reason_was", h.reason)
	}
	h.down, h.byServer, h.reason, h.since = false, false, "", time.Time{}
}

func (h *storeHealth) status() storeStatus {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.down {
		return storeStatus{Error: h.reason, Since: h.since}
	}
	return storeStatus{OK: true}
}

func (h *storeHealth) available() float64 {
	if h.status().OK {
		return 1
	}
	return 0
}

// storeStatus implements storeReporter.
func (b *JetStreamBackend) storeStatus() storeStatus { return b.health.status() }

// watchStore asks the server every storeCheckInterval whether the stream
// can store, until ctx ends; an embedded server found unable to is
// restarted once its disk has room again.
func (b *JetStreamBackend) watchStore(ctx context.Context) {
	bo := backoff.Backoff{Min: restartMin, Max: restartMax}
	var nextRestart time.Time
	periodic.Every(ctx, storeCheckInterval, func() {
		err := b.checkStore(ctx)
		if err == nil {
			b.health.ok(true)
			return
		}
		b.health.fail(err.Error(), true)
		if b.srv == nil || time.Now().Before(nextRestart) {
			return
		}
		if err := b.restartJetStream(ctx); err != nil {
			b.log.Debug("jetstream store: JetStream not restarted yet", "err", err)
			nextRestart = time.Now().Add(bo.Next())
			return
		}
		bo = backoff.Backoff{Min: restartMin, Max: restartMax}
		b.health.ok(true)
	})
}

// checkStore is the server's word on the stream: the embedded server's
// health (JetStream shut down, a write error the stream keeps), an
// external NATS's answer to a stream info request.
func (b *JetStreamBackend) checkStore(ctx context.Context) error {
	if b.srv != nil {
		opts := &server.HealthzOptions{Account: server.DEFAULT_GLOBAL_ACCOUNT, Stream: b.name}
		h := b.srv.Healthz(opts)
		if h.Error != "" && b.srv.ReadyForConnections(storeReadyWait) {
			// The server's check gives its own readiness a millisecond,
			// which a goroutine descheduled on a busy machine misses while
			// the server is up ("startup did not complete"): a failure
			// counts when it holds once the server is known ready.
			h = b.srv.Healthz(opts)
		}
		if h.Error != "" {
			return errors.New(h.Error)
		}
		return nil
	}
	ictx, cancel := context.WithTimeout(ctx, natsAttemptTimeout)
	defer cancel()
	if _, err := b.stream.Info(ictx); err != nil {
		return fmt.Errorf("stream %s: %w", b.name, err)
	}
	return nil
}

// restartJetStream brings the embedded server's JetStream back after a
// write error, as a configuration reload of the server does once it has
// disabled JetStream: a stream that met a write error (a full disk) keeps
// failing every write until it is loaded again from its files. It first
// checks that the store's directory takes a write.
func (b *JetStreamBackend) restartJetStream(ctx context.Context) error {
	if err := probeSpace(b.dir); err != nil {
		return err
	}
	b.log.Info("jetstream store: restarting JetStream: the disk takes writes again")
	if b.srv.JetStreamEnabled() {
		if err := b.srv.ShutdownJetStream(); err != nil {
			return fmt.Errorf("shutting JetStream down: %w", err)
		}
	}
	// A reload with the options the server runs with restarts JetStream
	// when it is not running.
	if err := b.srv.ReloadOptions(b.serverOpts()); err != nil {
		return fmt.Errorf("restarting JetStream: %w", err)
	}
	if !b.srv.JetStreamEnabled() {
		return errors.New("restarting JetStream: still disabled (see the nats log lines)")
	}
	// The stream's blocks were reopened: sync through the new files.
	b.sync.reopen()
	err := b.retryNATS(ctx, "stream "+b.name, func(ctx context.Context) error {
		_, err := b.js.CreateOrUpdateStream(ctx, b.scfg)
		return err
	})
	if err != nil {
		return fmt.Errorf("stream %s after restarting JetStream: %w", b.name, err)
	}
	if err := b.checkStore(ctx); err != nil {
		return fmt.Errorf("after restarting JetStream: %w", err)
	}
	b.health.restarts.Add(1)
	return nil
}

// probeSpace writes spaceProbeBytes to a file in dir, syncs and removes it.
func probeSpace(dir string) error {
	f, err := os.CreateTemp(dir, ".space-probe-*")
	if err != nil {
		return fmt.Errorf("space probe: %w", err)
	}
	defer os.Remove(f.Name())
	_, err = f.Write(make([]byte, spaceProbeBytes))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("space probe: %w", err)
	}
	return nil
}

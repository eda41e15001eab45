package relay

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/aep-kimi/aep-kimi/internal/backoff"
)

const (
	// natsAttemptTimeout bounds one JetStream request while the store starts
	// or recovers. A request sent before a cluster has elected its meta
	// leader gets no answer at all: it is asked again, not waited out. The
	// first is given natsFirstAttempt, each next one twice the last.
	natsAttemptTimeout = 2 * time.Second
	natsFirstAttempt   = 250 * time.Millisecond
	// natsRetryMin and natsRetryMax pace those attempts.
	natsRetryMin = 50 * time.Millisecond
	natsRetryMax = time.Second
)

// JetStream API error codes a starting cluster answers with until it has
// placed its peers.
const (
	jsErrNoPeers               jetstream.ErrorCode = 10005 // no suitable peers for placement
	jsErrInsufficientResources jetstream.ErrorCode = 10023
)

// retryNATS calls attempt, each call bounded by natsAttemptTimeout, until it
// succeeds, fails in a way no waiting cures, or ctx ends. It logs what it
// waits for once each time that changes, and how long it waited.
func (b *JetStreamBackend) retryNATS(ctx context.Context, op string, attempt func(context.Context) error) error {
	bo := backoff.Backoff{Min: natsRetryMin, Max: natsRetryMax}
	start := time.Now()
	waiting := ""
	for limit := natsFirstAttempt; ; limit = min(2*limit, natsAttemptTimeout) {
		actx, cancel := context.WithTimeout(ctx, limit)
		err := attempt(actx)
		cancel()
		if err == nil {
			if waiting != "" {
				b.log.Info("jetstream store: "+op+" answered", "waited", time.Since(start).Round(time.Millisecond))
			}
			return nil
		}
		what, ok := b.waitingFor(err)
		if !ok {
			return err
		}
		b.log.Debug("jetstream store: attempt failed", "op", op, "limit", limit, "err", err)
		if what != waiting {
			b.log.Info("jetstream store: "+op+": waiting for "+what, "err", err)
			waiting = what
		}
		if ctx.Err() != nil || !bo.Wait(ctx) {
			return fmt.Errorf("waited %v for %s: %w", time.Since(start).Round(time.Millisecond), what, err)
		}
	}
}

// waitingFor says what a failed NATS request waits for, when waiting can
// cure it.
func (b *JetStreamBackend) waitingFor(err error) (string, bool) {
	var apiErr *jetstream.APIError
	switch {
	case errors.Is(err, nats.ErrNoServers):
		return "a NATS server to connect to", true
	case errors.Is(err, jetstream.ErrJetStreamNotEnabled):
		return "JetStream on the NATS server", true
	case errors.As(err, &apiErr) && (apiErr.ErrorCode == jsErrNoPeers || apiErr.ErrorCode == jsErrInsufficientResources):
		return "JetStream peers to place the stream's " + strconv.Itoa(b.replicas) + " replicas", true
	case errors.As(err, &apiErr) && apiErr.Code == 503:
		return "the JetStream cluster (" + apiErr.Description + ")", true
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, nats.ErrTimeout), errors.Is(err, nats.ErrNoResponders),
		errors.Is(err, nats.ErrConnectionReconnecting), errors.Is(err, jetstream.ErrNoStreamResponse):
		return "the JetStream meta leader", true
	}
	return "", false
}

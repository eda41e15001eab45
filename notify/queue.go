package notify

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/aep-kimi/aep-kimi/internal/backoff"
)

// Delivery bounds.
const (
	// QueueSize is how many messages wait for one target; more are
	// dropped (counted and logged), so a target that is down never holds
	// memory or the relay.
	QueueSize = 64
	// MaxAttempts is how often one message is tried before it is given up.
	MaxAttempts = 5
	// SendTimeout bounds one attempt.
	SendTimeout = 10 * time.Second
	// retryMin and retryMax bound the wait between attempts.
	retryMin = 500 * time.Millisecond
	retryMax = 30 * time.Second
)

// Delivery results, the labels of aepkimi_notify_deliveries_total.
const (
	resultSent    = "sent"
	resultFailed  = "failed"  // given up after MaxAttempts, or refused for good
	resultDropped = "dropped" // the target's queue was full
	resultRetried = "retried"
)

// ErrPermanent marks a Send error no retry can mend (a push subscription
// the push service no longer knows, a refused request): the queue gives
// the message up at once. Targets wrap it: fmt.Errorf("...: %w", ErrPermanent).
var ErrPermanent = errors.New("permanent")

// Metrics counts what the delivery queues did; one set per notifier.
type Metrics struct {
	deliveries *prometheus.CounterVec
	latency    prometheus.Histogram
}

// NewMetrics makes the delivery metrics; register Collectors with the
// registry that serves them.
func NewMetrics() *Metrics {
	m := &Metrics{
		deliveries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "aepkimi_notify_deliveries_total",
			Help: "Notification deliveries, by kind of target (push, ntfy, slack, webhook) and result (sent, retried, failed, dropped).",
		}, []string{"target", "result"}),
		latency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "aepkimi_notify_delivery_seconds",
			Help:    "From a message being queued to its target taking it, retries included.",
			Buckets: prometheus.ExponentialBuckets(0.005, 3, 10),
		}),
	}
	return m
}

// Collectors are the metrics to register.
func (m *Metrics) Collectors() []prometheus.Collector {
	return []prometheus.Collector{m.deliveries, m.latency}
}

// queued is one message waiting for its target, and who hears its fate.
type queued struct {
	m      Message
	at     time.Time
	result func(error) // nil error: sent; called once, from the queue's goroutine
}

// Queue delivers messages to one target in order, each retried with the
// project's backoff up to MaxAttempts. Put never blocks: a full queue
// drops the message (counted, logged once per run of drops). Run it with
// Run; a Queue is safe for concurrent use.
type Queue struct {
	target Target
	kind   string // metric label: the kind of target, never a secret
	log    *slog.Logger
	met    *Metrics
	// wait is the pause between attempts; tests shorten it.
	wait func(ctx context.Context, b *backoff.Backoff) bool

	ch       chan queued
	mu       sync.Mutex
	dropping bool // logged the current run of drops
}

// NewQueue makes the queue of target; kind labels its metrics (push,
// ntfy, slack, webhook).
func NewQueue(target Target, kind string, met *Metrics, log *slog.Logger) *Queue {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if met == nil {
		met = NewMetrics()
	}
	return &Queue{target: target, kind: kind, log: log, met: met, ch: make(chan queued, QueueSize),
		wait: func(ctx context.Context, b *backoff.Backoff) bool { return b.Wait(ctx) }}
}

// Target is the queue's target.
func (q *Queue) Target() Target { return q.target }

// Put queues m; result, when set, hears whether it was sent (nil) or given
// up. It reports false when the queue was full and m was dropped (result
// is not called).
func (q *Queue) Put(m Message, result func(error)) bool {
	select {
	case q.ch <- queued{m: m, at: time.Now(), result: result}:
		q.mu.Lock()
		q.dropping = false
		q.mu.Unlock()
		return true
	default:
	}
	q.met.deliveries.WithLabelValues(q.kind, resultDropped).Inc()
	q.mu.Lock()
	first := !q.dropping
	q.dropping = true
	q.mu.Unlock()
	if first {
		q.log.Warn("notification dropped: the target's queue is full (it is down or slow); more drops are counted in aepkimi_notify_deliveries_total",
			"target", q.target.Name(), "queue", QueueSize, "kind", m.Kind, "tag", m.Tag)
	}
	return false
}

// Run delivers until ctx ends; what is still queued then is not sent.
func (q *Queue) Run(ctx context.Context) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case it := <-q.ch:
			err := q.deliver(ctx, it.m)
			if err == nil {
				q.met.latency.Observe(time.Since(it.at).Seconds())
			}
			if it.result != nil {
				it.result(err)
			}
		}
	}
}

// deliver tries m until it is sent, refused for good, out of attempts or
// ctx ends.
func (q *Queue) deliver(ctx context.Context, m Message) error {
	b := backoff.Backoff{Min: retryMin, Max: retryMax}
	var err error
	for attempt := 1; ; attempt++ {
		actx, cancel := context.WithTimeout(ctx, SendTimeout)
		err = q.target.Send(actx, m)
		cancel()
		switch {
		case err == nil:
			q.met.deliveries.WithLabelValues(q.kind, resultSent).Inc()
			return nil
		case ctx.Err() != nil:
			return ctx.Err()
		case errors.Is(err, ErrPermanent) || attempt >= MaxAttempts:
			q.met.deliveries.WithLabelValues(q.kind, resultFailed).Inc()
			q.log.Warn("notification not delivered", "target", q.target.Name(), "kind", m.Kind, "tag", m.Tag, "attempts", attempt, "err", err)
			return err
		}
		q.met.deliveries.WithLabelValues(q.kind, resultRetried).Inc()
		q.log.Debug("notification delivery failed; retrying", "target", q.target.Name(), "attempt", attempt, "err", err)
		if !q.wait(ctx, &b) {
			return ctx.Err()
		}
	}
}

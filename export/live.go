package export

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/errgroup"

	"github.com/aep-kimi/aep-kimi/aep"
	"github.com/aep-kimi/aep-kimi/internal/backoff"
	"github.com/aep-kimi/aep-kimi/internal/defaults"
	"github.com/aep-kimi/aep-kimi/relay/client"
	"github.com/aep-kimi/aep-kimi/relay/wire"
)

// Live exporter defaults.
const (
	// DefaultBatchSize bounds the events in one delivery.
	DefaultBatchSize = 512
	// DefaultQueue bounds the events held between the relay and the sink;
	// with the batch it is the exporter's whole memory of pending events.
	DefaultQueue = 4096
)

// Sink turns events into deliveries for one receiver.
type Sink interface {
	// Prepare builds the delivery of events; events it cannot represent
	// are reported in skipped (out of the bridge's scope, or unmappable)
	// and not delivered.
	Prepare(events []*aep.Event) (d Delivery, skipped int, err error)
}

// Delivery is one prepared batch. Send is called until it returns nil or a
// PermanentError; it keeps its own progress between attempts, so what a
// receiver acknowledged is not sent again.
type Delivery interface {
	Send(ctx context.Context) error
}

// PermanentError is a refusal retrying cannot fix (a 4xx other than 408 and
// 429): the batch is counted as dropped and the exporter moves on.
type PermanentError struct{ Err error }

func (e *PermanentError) Error() string { return e.Err.Error() }
func (e *PermanentError) Unwrap() error { return e.Err }

// Metrics counts a live exporter's progress for /metrics.
type Metrics struct {
	received, delivered, skipped, dropped, retries prometheus.Counter
	pending                                        prometheus.Gauge
}

// NewMetrics registers the exporter metrics for mode (ce, otlp, ocsf) on reg.
func NewMetrics(reg prometheus.Registerer, mode string) *Metrics {
	labels := prometheus.Labels{"mode": mode}
	c := func(name, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Name: "aepkimi_export_" + name, Help: help, ConstLabels: labels})
	}
	m := &Metrics{
		received:  c("received_total", "Events read from the relay."),
		delivered: c("delivered_total", "Events the receiver acknowledged."),
		skipped:   c("skipped_total", "Events outside the bridge's scope (no record)."),
		dropped:   c("dropped_total", "Events the receiver refused for good."),
		retries:   c("retries_total", "Failed delivery attempts that were retried."),
		pending: prometheus.NewGauge(prometheus.GaugeOpts{Name: "aepkimi_export_pending", Help: "Events read but not yet acknowledged.",
			ConstLabels: labels}),
	}
	reg.MustRegister(m.received, m.delivered, m.skipped, m.dropped, m.retries, m.pending)
	return m
}

// Live follows a relay and delivers every matching event to a Sink, at
// least once: positions are persisted only after the receiver acknowledged
// the events before them, and every connection replays the relay's buffer
// with the persisted positions skipping what was delivered, so a restart
// leaves no gap and re-sends at most the batch in flight (receivers dedupe
// by event id).
type Live struct {
	// Relay is the relay's base URL, Token its bearer token, Filter an
	// attr-match filter (JSON, optional).
	Relay, Token, Filter string
	// StatePath is the position file; empty keeps positions in memory.
	StatePath string
	Sink      Sink
	// BatchSize and Queue default to DefaultBatchSize and DefaultQueue.
	BatchSize int
	Queue     int
	// BackoffMin and BackoffMax bound retry and reconnect delays.
	BackoffMin, BackoffMax time.Duration
	Log                    *slog.Logger
	Metrics                *Metrics
	HTTPClient             *http.Client
}

// Run exports until ctx ends (nil) or the relay refuses the subscription.
func (l *Live) Run(ctx context.Context) error {
	if l.Sink == nil {
		return errors.New("export: no sink")
	}
	log := l.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	m := l.Metrics
	if m == nil {
		m = NewMetrics(prometheus.NewRegistry(), "")
	}
	batchSize, queue := l.BatchSize, l.Queue
	defaults.SetPositive(&batchSize, DefaultBatchSize)
	defaults.SetPositive(&queue, DefaultQueue)
	load := func() (*client.TailState, error) {
		if l.StatePath == "" {
			return client.NewTailState(), nil
		}
		return client.LoadTailState(l.StatePath)
	}
	// committed holds what the receiver has; seen (the tailer's) what was
	// read. Only committed reaches the file.
	committed, err := load()
	if err != nil {
		return err
	}
	seen, _ := load()
	ch := make(chan *aep.Event, queue)
	g, gctx := errgroup.WithContext(ctx)
	tailer, err := client.NewTailer(client.TailConfig{
		URL: l.Relay, Token: l.Token, Filter: l.Filter,
		State: seen, Live: true, ReplayAll: true,
		HTTPClient: l.HTTPClient, BackoffMin: l.BackoffMin, BackoffMax: l.BackoffMax,
		OnEvent: func(ev *aep.Event) {
			m.received.Inc()
			m.pending.Inc()
			select {
			case ch <- ev:
			case <-gctx.Done():
			}
		},
		OnStatus: func(st client.TailStatus) {
			switch st.Kind {
			case client.TailUnreachable:
				if st.Attempt == 1 {
					log.Warn("export: relay unreachable; retrying", "err", st.Err)
				}
			case client.TailConnected:
				log.Info("export: connected to the relay")
			case client.TailExhausted:
				log.Warn("export: relay no longer holds events after the saved position", "detail", st.Detail)
			}
		},
	})
	if err != nil {
		return err
	}
	g.Go(func() error {
		err := tailer.Run(gctx)
		if err == nil && ctx.Err() == nil {
			err = errors.New("export: relay stream ended")
		}
		return err
	})
	g.Go(func() error {
		bo := backoff.Backoff{Min: l.BackoffMin, Max: l.BackoffMax}
		batch := make([]*aep.Event, 0, batchSize)
		for {
			select {
			case <-gctx.Done():
				return nil
			case ev := <-ch:
				batch = append(batch, ev)
			}
			// Take what is already queued, up to a batch: under load
			// batches fill, when idle each event goes out at once.
		fill:
			for len(batch) < batchSize {
				select {
				case ev := <-ch:
					batch = append(batch, ev)
				default:
					break fill
				}
			}
			if !l.deliver(gctx, batch, committed, &bo, m, log) {
				return nil
			}
			m.pending.Sub(float64(len(batch)))
			clear(batch)
			batch = batch[:0]
		}
	})
	err = g.Wait()
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// deliver sends one batch until acknowledged or refused for good, then
// commits its positions; false means ctx ended first.
func (l *Live) deliver(ctx context.Context, batch []*aep.Event, committed *client.TailState, bo *backoff.Backoff, m *Metrics, log *slog.Logger) bool {
	d, skipped, err := l.Sink.Prepare(batch)
	m.skipped.Add(float64(skipped))
	sent := len(batch) - skipped
	for err == nil && d != nil {
		start := time.Now()
		if err = d.Send(ctx); err == nil || ctx.Err() != nil {
			break
		}
		var perm *PermanentError
		if errors.As(err, &perm) {
			break
		}
		m.retries.Inc()
		log.Warn("export: delivery failed; retrying", "events", sent, "err", err)
		bo.Up(time.Since(start))
		if !bo.Wait(ctx) {
			return false
		}
		err = nil
	}
	if ctx.Err() != nil {
		return false
	}
	if err != nil {
		m.dropped.Add(float64(sent))
		log.Error("export: events dropped", "events", sent, "err", err)
	} else {
		m.delivered.Add(float64(sent))
	}
	*bo = backoff.Backoff{Min: l.BackoffMin, Max: l.BackoffMax}
	for _, ev := range batch {
		if ev.Session != "" && ev.Seq != nil && aep.ScopeOf(ev.Type) == aep.ScopeSession {
			committed.Advance(ev.Session, wire.Position{Epoch: ev.EpochOrZero(), Seq: *ev.Seq})
		}
	}
	if l.StatePath != "" {
		if err := committed.Save(l.StatePath); err != nil {
			log.Error("export: saving positions", "err", err)
		}
	}
	return true
}

// StatusError is a receiver's answer other than 2xx.
type StatusError struct{ Code int }

func (e *StatusError) Error() string { return fmt.Sprintf("HTTP %d", e.Code) }

// statusError classifies an HTTP response: nil for 2xx, retryable for 408,
// 429 and 5xx, permanent otherwise; either way a *StatusError within.
func statusError(resp *http.Response) error {
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return nil
	}
	err := &StatusError{Code: resp.StatusCode}
	switch {
	case resp.StatusCode == http.StatusRequestTimeout, resp.StatusCode == http.StatusTooManyRequests, resp.StatusCode >= 500:
		return err
	}
	return &PermanentError{Err: err}
}

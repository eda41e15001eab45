package emitter

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/aep-kimi/aep-kimi/internal/journal"
)

// Metrics makes a source's metrics on its private registry (no global
// state, one set per source), each named aepkimi_<Spec.Name>_<name> and
// registered as it is made.
type Metrics struct {
	reg *prometheus.Registry
	ns  string
}

// Counter is a new counter.
func (m Metrics) Counter(name, help string) prometheus.Counter {
	return register(m.reg, prometheus.NewCounter(prometheus.CounterOpts{Name: m.ns + name, Help: help}))
}

// CounterVec is a new counter with labels.
func (m Metrics) CounterVec(name, help string, labels ...string) *prometheus.CounterVec {
	return register(m.reg, prometheus.NewCounterVec(prometheus.CounterOpts{Name: m.ns + name, Help: help}, labels))
}

// Gauge is a new gauge.
func (m Metrics) Gauge(name, help string) prometheus.Gauge {
	return register(m.reg, prometheus.NewGauge(prometheus.GaugeOpts{Name: m.ns + name, Help: help}))
}

// GaugeVec is a new gauge with labels.
func (m Metrics) GaugeVec(name, help string, labels ...string) *prometheus.GaugeVec {
	return register(m.reg, prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: m.ns + name, Help: help}, labels))
}

// GaugeFunc is a gauge read from f at each scrape.
func (m Metrics) GaugeFunc(name, help string, f func() float64) {
	register(m.reg, prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: m.ns + name, Help: help}, f))
}

// CounterFunc is a counter read from f at each scrape.
func (m Metrics) CounterFunc(name, help string, f func() float64) {
	register(m.reg, prometheus.NewCounterFunc(prometheus.CounterOpts{Name: m.ns + name, Help: help}, f))
}

// Histogram is a new histogram with the given buckets.
func (m Metrics) Histogram(name, help string, buckets []float64) prometheus.Histogram {
	return register(m.reg, prometheus.NewHistogram(prometheus.HistogramOpts{Name: m.ns + name, Help: help, Buckets: buckets}))
}

func register[C prometheus.Collector](reg *prometheus.Registry, c C) C {
	reg.MustRegister(c)
	return c
}

// metrics are the ones every source has.
type metrics struct {
	reg        *prometheus.Registry
	events     *prometheus.CounterVec
	eventLabel func(string) string
	logErrors  prometheus.Counter
	logRecover prometheus.Counter
	tornTails  *prometheus.CounterVec
	commands   *prometheus.CounterVec
	evicted    prometheus.Counter
	durable    prometheus.Gauge
}

func newMetrics[S Member](c *Core[S]) *metrics {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	for _, col := range c.cfg.Collectors {
		reg.MustRegister(col)
	}
	r := Metrics{reg: reg, ns: "aepkimi_" + c.spec.Name + "_"}
	m := &metrics{
		reg:        reg,
		eventLabel: c.spec.EventLabel,
		events:     r.CounterVec("events_total", "AEP events emitted, by type (a bounded set: the rest count as other or as their family).", "type"),
		logErrors:  r.Counter("log_errors_total", "Failed JSONL log appends and syncs."),
		logRecover: r.Counter("log_recovery_incomplete_total", "Session logs whose recovery passed over unparsable lines or could not be read to the end."),
		tornTails: r.CounterVec("log_torn_tails_total",
			"Session logs found ending in a partial line when opened, by what was done (cut: moved to a .torn- file; completed).", "action"),
		commands: r.CounterVec("commands_total", "Control commands by type and outcome.", "type", "outcome"),
		evicted:  r.Counter("sessions_evicted_total", "Sessions dropped from memory (idle, or over the session cap); their state comes back from the log."),
		durable: r.Gauge("logs_durable",
			"1 while the session logs reach the disk as their sync mode promises, 0 since a write or sync failed (a full disk) until one succeeds again; /healthz says why."),
	}
	m.durable.Set(1)
	for _, a := range []string{journal.RepairCut, journal.RepairCompleted} {
		m.tornTails.WithLabelValues(a)
	}
	r.GaugeFunc("open_logs", "Session log files open (bounded by the handle cap).", func() float64 { return float64(c.handles.Open()) })
	r.GaugeFunc("relay_outbox_depth", "Events waiting in the relay outbox.", func() float64 { _, n := c.relay(); return float64(n) })
	r.CounterFunc("relay_drops_total", "Events the relay outbox dropped (debug/info first).", func() float64 {
		if ps, ok := c.cfg.Publisher.(journal.PublisherStatus); ok {
			return float64(ps.Drops())
		}
		return 0
	})
	return m
}

// Registry is the source's metrics registry, to serve on /metrics: the
// core's metrics, the source's own (Metrics) and Config.Collectors.
func (c *Core[S]) Registry() *prometheus.Registry { return c.metrics.reg }

// Metrics makes the source's own metrics on its registry.
func (c *Core[S]) Metrics() Metrics {
	return Metrics{reg: c.metrics.reg, ns: "aepkimi_" + c.spec.Name + "_"}
}

// Emitted, AppendFailed and RecoveryIncomplete count for the session
// streams (journal.Counters).
func (m *metrics) Emitted(typ string) { m.events.WithLabelValues(m.eventLabel(typ)).Inc() }

func (m *metrics) AppendFailed() { m.logErrors.Inc() }

func (m *metrics) RecoveryIncomplete() { m.logRecover.Inc() }

// tornTail counts and reports, once, a session log repaired as it opened.
func (c *Core[S]) tornTail(r journal.Repair) {
	c.metrics.tornTails.WithLabelValues(r.Action).Inc()
	r.Report(c.log)
}

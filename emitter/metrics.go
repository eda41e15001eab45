package emitter

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/aep-kimi/aep-kimi/internal/journal"
)

// metrics lives in a private registry, one per source, which the source
// registers its own metrics on (Core.Registry).
type metrics struct {
	reg        *prometheus.Registry
	events     *prometheus.CounterVec
	eventLabel func(string) string
	logErrors  prometheus.Counter
	logRecover prometheus.Counter
	tornTails  *prometheus.CounterVec
	commands   *prometheus.CounterVec
	evicted    prometheus.Counter
}

func newMetrics[S Member](c *Core[S]) *metrics {
	ns := "aepkimi_" + c.spec.Name + "_"
	m := &metrics{
		reg:        prometheus.NewRegistry(),
		eventLabel: c.spec.EventLabel,
		events: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: ns + "events_total", Help: "AEP events emitted, by type (a bounded set: the rest count as other or as their family).",
		}, []string{"type"}),
		logErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: ns + "log_errors_total", Help: "Failed JSONL log appends.",
		}),
		logRecover: prometheus.NewCounter(prometheus.CounterOpts{
			Name: ns + "log_recovery_incomplete_total", Help: "Session logs whose recovery passed over unparsable lines or could not be read to the end.",
		}),
		tornTails: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: ns + "log_torn_tails_total",
			Help: "Session logs found ending in a partial line when opened, by what was done (cut: moved to a .torn- file; completed).",
		}, []string{"action"}),
		commands: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: ns + "commands_total", Help: "Control commands by type and outcome.",
		}, []string{"type", "outcome"}),
		evicted: prometheus.NewCounter(prometheus.CounterOpts{
			Name: ns + "sessions_evicted_total", Help: "Sessions dropped from memory (idle, or over the session cap); their state comes back from the log.",
		}),
	}
	for _, a := range []string{journal.RepairCut, journal.RepairCompleted} {
		m.tornTails.WithLabelValues(a)
	}
	m.reg.MustRegister(m.events, m.logErrors, m.logRecover, m.tornTails, m.commands, m.evicted,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: ns + "open_logs", Help: "Session log files open (bounded by the handle cap).",
		}, func() float64 { return float64(c.handles.Open()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: ns + "relay_outbox_depth", Help: "Events waiting in the relay outbox.",
		}, func() float64 { _, n := c.Relay(); return float64(n) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: ns + "relay_drops_total", Help: "Events the relay outbox dropped (debug/info first).",
		}, func() float64 {
			if ps, ok := c.cfg.Publisher.(journal.PublisherStatus); ok {
				return float64(ps.Drops())
			}
			return 0
		}))
	for _, col := range c.cfg.Collectors {
		m.reg.MustRegister(col)
	}
	return m
}

// Registry is the source's metrics registry: the core's metrics are on it,
// the source registers its own and serves it on /metrics.
func (c *Core[S]) Registry() *prometheus.Registry { return c.metrics.reg }

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

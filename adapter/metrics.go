package adapter

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/aep-kimi/aep-kimi/aep"
	"github.com/aep-kimi/aep-kimi/internal/journal"
	"github.com/aep-kimi/aep-kimi/mapping"
)

// metrics lives in a private registry: no global state, one set per Server.
type metrics struct {
	reg          *prometheus.Registry
	hooks        *prometheus.CounterVec
	events       *prometheus.CounterVec
	roundTrip    prometheus.Histogram
	badRequests  *prometheus.CounterVec
	spoolBacklog prometheus.Gauge
	spooled      prometheus.Counter
	quarantined  prometheus.Counter
	duplicates   prometheus.Counter
	parked       prometheus.Counter
	parkExpired  prometheus.Counter
	synthesized  prometheus.Counter
	logRecover   prometheus.Counter
	logErrors    prometheus.Counter
	notDurable   prometheus.Counter
	evicted      prometheus.Counter
	// eventTypes is the closed set of type label values; any other type
	// counts as "other".
	eventTypes map[string]bool
	channel    *prometheus.GaugeVec
	sessions   *prometheus.GaugeVec
	commands   *prometheus.CounterVec
	holds      prometheus.Gauge
}

func newMetrics(s *Server) *metrics {
	m := &metrics{
		reg: prometheus.NewRegistry(),
		hooks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "aepkimi_adapter_hooks_total", Help: "Hook payloads taken, by hook event name.",
		}, []string{"event"}),
		events: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "aepkimi_adapter_events_total", Help: "AEP events emitted, by type.",
		}, []string{"type"}),
		roundTrip: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "aepkimi_adapter_hook_roundtrip_seconds",
			Help:    "From kimi-hook reading stdin to the adapter's reply being ready (held gates included).",
			Buckets: []float64{.0005, .001, .002, .005, .01, .025, .05, .1, .25, .5, 1, 5, 30, 60},
		}),
		badRequests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "aepkimi_adapter_bad_requests_total", Help: "Hook requests refused, by reason.",
		}, []string{"reason"}),
		spoolBacklog: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "aepkimi_adapter_spool_backlog", Help: "Spool records waiting to be ingested.",
		}),
		spooled: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "aepkimi_adapter_spool_ingested_total", Help: "Spool records ingested.",
		}),
		quarantined: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "aepkimi_adapter_spool_quarantined_total", Help: "Spool records moved to quarantine (unparseable).",
		}),
		duplicates: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "aepkimi_adapter_duplicate_deliveries_total", Help: "Hook deliveries skipped because they were already taken.",
		}),
		parked: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "aepkimi_adapter_reorder_parked_total", Help: "Hooks that waited for an event they depend on.",
		}),
		parkExpired: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "aepkimi_adapter_reorder_expired_total", Help: "Parked hooks that proceeded without the event they waited for.",
		}),
		synthesized: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "aepkimi_adapter_attention_from_result_total", Help: "Attention requests opened from a PermissionResult whose request never arrived.",
		}),
		logRecover: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "aepkimi_adapter_log_recovery_incomplete_total", Help: "Session logs whose recovery passed over unparsable lines or could not be read to the end.",
		}),
		logErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "aepkimi_adapter_log_errors_total", Help: "Failed JSONL log appends.",
		}),
		notDurable: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "aepkimi_adapter_not_durable_total", Help: "Hooks answered 503 not-durable (their events did not reach the log; kimi-hook spools them), spooled retries included.",
		}),
		evicted: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "aepkimi_adapter_sessions_evicted_total", Help: "Sessions dropped from memory (idle, or over the session cap); their state comes back from the log.",
		}),
		eventTypes: eventTypeSet(),
		channel: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "aepkimi_adapter_channel_state", Help: "Hook channel state: 1 for the current state.",
		}, []string{"state"}),
		sessions: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "aepkimi_adapter_sessions", Help: "Sessions in memory by hook-channel state.",
		}, []string{"state"}),
		commands: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "aepkimi_adapter_commands_total", Help: "Control commands by type and outcome.",
		}, []string{"type", "outcome"}),
		holds: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "aepkimi_adapter_held_hooks", Help: "PreToolUse hooks held at the control gate.",
		}),
	}
	m.reg.MustRegister(m.hooks, m.events, m.roundTrip, m.badRequests, m.spoolBacklog, m.spooled,
		m.quarantined, m.duplicates, m.parked, m.parkExpired, m.synthesized, m.logErrors, m.logRecover, m.notDurable, m.evicted,
		m.channel, m.sessions, m.commands, m.holds,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "aepkimi_adapter_open_logs", Help: "Session log files open (bounded by the handle cap).",
	}, func() float64 { return float64(s.handles.Open()) }))
	m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "aepkimi_adapter_relay_outbox_depth", Help: "Events waiting in the relay outbox.",
	}, func() float64 {
		if ps, ok := s.cfg.Publisher.(journal.PublisherStatus); ok {
			return float64(ps.OutboxDepth())
		}
		return 0
	}))
	m.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "aepkimi_adapter_relay_drops_total", Help: "Events the relay outbox dropped (debug/info first).",
	}, func() float64 {
		if ps, ok := s.cfg.Publisher.(journal.PublisherStatus); ok {
			return float64(ps.Drops())
		}
		return 0
	}))
	return m
}

// Emitted and AppendFailed count for the session streams
// (journal.Counters).
func (m *metrics) Emitted(typ string) { m.events.WithLabelValues(m.eventLabel(typ)).Inc() }

// eventLabel keeps the type label to a closed set: an invented hook name
// maps to its own extension type, which must not become a series of its own.
func (m *metrics) eventLabel(typ string) string {
	if m.eventTypes[typ] {
		return typ
	}
	return "other"
}

// eventTypeSet is every type the adapter emits for known hooks: the AEP
// registry's and the mapping's extension types.
func eventTypeSet() map[string]bool {
	set := map[string]bool{}
	for _, t := range aep.RegisteredTypes() {
		set[t.Type] = true
	}
	for _, t := range mapping.HookExtensionTypes() {
		set[t] = true
	}
	return set
}

func (m *metrics) AppendFailed() { m.logErrors.Inc() }

func (m *metrics) RecoveryIncomplete() { m.logRecover.Inc() }

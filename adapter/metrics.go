package adapter

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/aep-kimi/aep-kimi/aep"
	"github.com/aep-kimi/aep-kimi/mapping"
)

// metrics are the adapter's own, on its core's registry (the core counts
// events, log errors, commands and evictions): no global state, one set per
// Server.
type metrics struct {
	reg          *prometheus.Registry
	hooks        *prometheus.CounterVec
	roundTrip    prometheus.Histogram
	badRequests  *prometheus.CounterVec
	spoolBacklog prometheus.Gauge
	spooled      prometheus.Counter
	quarantined  prometheus.Counter
	duplicates   prometheus.Counter
	parked       prometheus.Counter
	parkExpired  prometheus.Counter
	synthesized  prometheus.Counter
	notDurable   prometheus.Counter
	channel      *prometheus.GaugeVec
	sessions     *prometheus.GaugeVec
	holds        prometheus.Gauge
	expired      *prometheus.CounterVec
}

func newMetrics(s *Server) *metrics {
	m := &metrics{
		reg: s.core.Registry(),
		hooks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "aepkimi_adapter_hooks_total", Help: "Hook payloads taken, by hook event name.",
		}, []string{"event"}),
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
		notDurable: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "aepkimi_adapter_not_durable_total", Help: "Hooks answered 503 not-durable (their events did not reach the log; kimi-hook spools them), spooled retries included.",
		}),
		channel: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "aepkimi_adapter_channel_state", Help: "Hook channel state: 1 for the current state.",
		}, []string{"state"}),
		sessions: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "aepkimi_adapter_sessions", Help: "Sessions in memory by hook-channel state.",
		}, []string{"state"}),
		holds: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "aepkimi_adapter_held_hooks", Help: "PreToolUse hooks held at the control gate.",
		}),
		expired: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "aepkimi_adapter_gate_expired_total",
			Help: "Held PreToolUse hooks nobody answered, by why (deadline: the gate's own; hook-ended: Kimi stopped waiting first) and what was applied (allow, deny).",
		}, []string{"why", "applied"}),
	}
	m.reg.MustRegister(m.hooks, m.roundTrip, m.badRequests, m.spoolBacklog, m.spooled,
		m.quarantined, m.duplicates, m.parked, m.parkExpired, m.synthesized, m.notDurable,
		m.channel, m.sessions, m.holds, m.expired)
	return m
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

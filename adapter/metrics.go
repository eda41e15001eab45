package adapter

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/aep-kimi/aep-kimi/aep"
	"github.com/aep-kimi/aep-kimi/emitter"
	"github.com/aep-kimi/aep-kimi/mapping"
)

// metrics are the adapter's own, on its core's registry (the core counts
// events, log errors, commands and evictions).
type metrics struct {
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
	noResult     prometheus.Counter
}

func newMetrics(r emitter.Metrics) *metrics {
	return &metrics{
		hooks: r.CounterVec("hooks_total", "Hook payloads taken, by hook event name.", "event"),
		roundTrip: r.Histogram("hook_roundtrip_seconds",
			"From kimi-hook reading stdin to the adapter's reply being ready (held gates included).",
			[]float64{.0005, .001, .002, .005, .01, .025, .05, .1, .25, .5, 1, 5, 30, 60}),
		badRequests:  r.CounterVec("bad_requests_total", "Hook requests refused, by reason.", "reason"),
		spoolBacklog: r.Gauge("spool_backlog", "Spool records waiting to be ingested."),
		spooled:      r.Counter("spool_ingested_total", "Spool records ingested."),
		quarantined:  r.Counter("spool_quarantined_total", "Spool records moved to quarantine (unparseable)."),
		duplicates:   r.Counter("duplicate_deliveries_total", "Hook deliveries skipped because they were already taken."),
		parked:       r.Counter("reorder_parked_total", "Hooks that waited for an event they depend on."),
		parkExpired:  r.Counter("reorder_expired_total", "Parked hooks that proceeded without the event they waited for."),
		synthesized:  r.Counter("attention_from_result_total", "Attention requests opened from a PermissionResult whose request never arrived."),
		notDurable: r.Counter("not_durable_total",
			"Hooks answered 503 not-durable (their events did not reach the log; kimi-hook spools them), spooled retries included."),
		channel:  r.GaugeVec("channel_state", "Hook channel state: 1 for the current state.", "state"),
		sessions: r.GaugeVec("sessions", "Sessions in memory by hook-channel state.", "state"),
		holds:    r.Gauge("held_hooks", "PreToolUse hooks held at the control gate."),
		expired: r.CounterVec("gate_expired_total",
			"Held PreToolUse hooks nobody answered, by why (deadline: the gate's own; hook-ended: Kimi stopped waiting first) and what was applied (allow, deny).",
			"why", "applied"),
		noResult: r.Counter("tools_without_result_total",
			"Tool calls still without a result when their session ended: the PostToolUse hook never arrived (Kimi ends post-tool hooks at turn end; one still starting then is lost)."),
	}
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

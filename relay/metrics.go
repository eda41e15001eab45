package relay

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/aep-kimi/aep-kimi/relay/wire"
)

// Label values. Bindings: http (POST /events), ws (/socket), sse (/stream).
const (
	bindingHTTP = "http"
	bindingWS   = "ws"
	bindingSSE  = "sse"

	resultBuffered  = "buffered"
	resultDuplicate = "duplicate"
	resultLiveOnly  = "live-only"
	resultRouted    = "routed"
	resultRejected  = "rejected"
	// resultRoutedHere: a command another relay routed to a socket here.
	resultRoutedHere = "routed-from-relay"

	// dropLowSeverity: a debug/info event shed toward a slow consumer
	// (AEP-0003 §8.4 allows it). dropDisconnect: a notice-or-above event that
	// could not be queued, so the consumer was disconnected with its
	// positions instead.
	dropLowSeverity = "low-severity"
	dropDisconnect  = "disconnect"
)

// metrics is the relay's Prometheus surface on a private registry, so two
// servers in one process (tests) never collide.
type metrics struct {
	reg         *prometheus.Registry
	ingest      *prometheus.CounterVec
	deliveries  *prometheus.CounterVec
	drops       *prometheus.CounterVec
	connections *prometheus.GaugeVec
	refused     *prometheus.CounterVec
	subs        prometheus.Gauge
	commands    *prometheus.CounterVec
	latency     prometheus.Histogram

	dropLow, dropDisc prometheus.Counter
	deliverSSE        prometheus.Counter
	deliverWS         prometheus.Counter
}

func newMetrics(b Backend) *metrics {
	m := &metrics{reg: prometheus.NewRegistry()}
	m.ingest = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "aepkimi_relay_ingest_events_total",
		Help: "Events received, by binding and result (buffered, duplicate, live-only, routed, rejected).",
	}, []string{"binding", "result"})
	m.deliveries = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "aepkimi_relay_deliveries_total",
		Help: "Events written to consumers, replay included, by binding.",
	}, []string{"binding"})
	m.drops = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "aepkimi_relay_drops_total",
		Help: "Deliveries not made to slow consumers, by reason (low-severity: debug/info shed; disconnect: consumer cut off rather than lose notice+).",
	}, []string{"reason"})
	m.connections = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "aepkimi_relay_connections",
		Help: "Open consumer and emitter connections, by binding (ws, sse).",
	}, []string{"binding"})
	m.refused = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "aepkimi_relay_connections_refused_total",
		Help: "Streams and sockets refused because the relay already served its limit of them (AEP_MAX_CONNECTIONS), by binding (ws, sse).",
	}, []string{"binding"})
	m.subs = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "aepkimi_relay_subscriptions",
		Help: "Live subscriptions (one per SSE stream, any number per socket).",
	})
	m.commands = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "aepkimi_relay_commands_total",
		Help: "Control commands, by outcome (routed, unauthorized, unsupported, ambiguous, no-route; routed-from-relay: another relay's, delivered here).",
	}, []string{"outcome"})
	m.latency = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "aepkimi_relay_deliver_latency_seconds",
		Help:    "Ingest to write latency of live deliveries (one sample per write batch).",
		Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, 1},
	})
	m.reg.MustRegister(m.ingest, m.deliveries, m.drops, m.connections, m.refused, m.subs, m.commands, m.latency,
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "aepkimi_relay_buffered_events",
			Help: "Events held in replay buffers.",
		}, func() float64 { return float64(b.Stats().Events) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "aepkimi_relay_buffered_bytes",
			Help: "Wire bytes of the events held in replay buffers.",
		}, func() float64 { return float64(b.Stats().Bytes) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "aepkimi_relay_sessions",
			Help: "Sessions held.",
		}, func() float64 { return float64(b.Stats().Sessions) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "aepkimi_relay_session_evictions_total",
			Help: "Sessions evicted by the session cap, least recently written first.",
		}, func() float64 { return float64(b.Stats().Evictions) }),
	)
	if sc, ok := b.(storeCollector); ok {
		m.reg.MustRegister(sc.storeCollectors()...)
	}
	m.dropLow = m.drops.WithLabelValues(dropLowSeverity)
	m.dropDisc = m.drops.WithLabelValues(dropDisconnect)
	m.deliverSSE = m.deliveries.WithLabelValues(bindingSSE)
	m.deliverWS = m.deliveries.WithLabelValues(bindingWS)
	m.refused.WithLabelValues(bindingSSE)
	m.refused.WithLabelValues(bindingWS)
	for _, binding := range []string{bindingHTTP, bindingWS} {
		for _, r := range []string{resultBuffered, resultDuplicate, resultLiveOnly, resultRejected} {
			m.ingest.WithLabelValues(binding, r)
		}
	}
	m.ingest.WithLabelValues(bindingWS, resultRouted)
	for _, c := range []string{bindingWS, bindingSSE} {
		m.connections.WithLabelValues(c)
	}
	for _, o := range []string{resultRouted, resultRoutedHere, wire.CodeUnauthorized, wire.CodeUnsupported, wire.CodeAmbiguous, wire.CodeNoRoute} {
		m.commands.WithLabelValues(o)
	}
	return m
}

func (m *metrics) countIngest(binding string, r IngestResult) {
	if r.Buffered > 0 {
		m.ingest.WithLabelValues(binding, resultBuffered).Add(float64(r.Buffered))
	}
	if r.Duplicates > 0 {
		m.ingest.WithLabelValues(binding, resultDuplicate).Add(float64(r.Duplicates))
	}
	if r.LiveOnly > 0 {
		m.ingest.WithLabelValues(binding, resultLiveOnly).Add(float64(r.LiveOnly))
	}
}

func (m *metrics) handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
}

// Registry is the relay's metrics registry, the one /metrics serves.
func (s *Server) Registry() *prometheus.Registry { return s.metrics.reg }

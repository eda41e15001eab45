package bridgeweb

import (
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/aep-kimi/aep-kimi/aep"
)

// Kap connection states (health and metrics).
const (
	KapDiscovering  = "discovering"  // no kap-server registered yet
	KapConnecting   = "connecting"   // dialing one
	KapConnected    = "connected"    // handshake done, frames flowing
	KapUnauthorized = "unauthorized" // the server refused the token
	KapDown         = "down"         // the last attempt failed; retrying
)

// kapStates are the connection states, each a series of the state gauge.
func kapStates() [5]string {
	return [...]string{KapDiscovering, KapConnecting, KapConnected, KapUnauthorized, KapDown}
}

// Frame kinds counted on the kap stream: a bounded label set whatever the
// server sends.
const (
	frameEvent    = "event"
	frameVolatile = "volatile"
	frameGlobal   = "global"
	frameAck      = "ack"
	framePing     = "ping"
	frameHello    = "server_hello"
	frameResync   = "resync_required"
	frameError    = "error"
	frameOther    = "other"
)

// metrics lives in a private registry: no global state, one set per Bridge.
type metrics struct {
	reg         *prometheus.Registry
	frames      *prometheus.CounterVec
	badFrames   *prometheus.CounterVec
	events      *prometheus.CounterVec
	duplicates  prometheus.Counter
	gaps        *prometheus.CounterVec
	staleRuns   prometheus.Counter
	connects    prometheus.Counter
	connErrors  *prometheus.CounterVec
	kapErrors   prometheus.Counter
	state       *prometheus.GaugeVec
	followed    prometheus.Gauge
	dormant     prometheus.Gauge
	skipped     *prometheus.CounterVec
	commands    *prometheus.CounterVec
	logRecover  prometheus.Counter
	logErrors   prometheus.Counter
	globalDrops prometheus.Counter
	// instances counts the kap-servers followed now; instanceEnds the
	// ones seen stop; sessionsEnded the sessions ended with them.
	instances     prometheus.Gauge
	instanceEnds  prometheus.Counter
	sessionsEnded *prometheus.CounterVec
}

func newMetrics(b *Bridge) *metrics {
	m := &metrics{
		reg: prometheus.NewRegistry(),
		frames: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "aepkimi_bridgeweb_frames_total", Help: "kap WebSocket frames received, by kind.",
		}, []string{"kind"}),
		badFrames: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "aepkimi_bridgeweb_bad_frames_total", Help: "kap frames refused (not JSON, no type, too large), by reason.",
		}, []string{"reason"}),
		events: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "aepkimi_bridgeweb_events_total", Help: "AEP events emitted, by type (extension types as their family).",
		}, []string{"type"}),
		duplicates: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "aepkimi_bridgeweb_duplicate_frames_total", Help: "Durable frames skipped because their (epoch, seq) was already taken.",
		}),
		gaps: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "aepkimi_bridgeweb_gaps_total", Help: "Frame ranges reported lost, by reason.",
		}, []string{"reason"}),
		staleRuns: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "aepkimi_bridgeweb_runs_without_end_total", Help: "Runs dropped without a terminal because their turn's end was never seen.",
		}),
		connects: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "aepkimi_bridgeweb_kap_connects_total", Help: "kap WebSocket connections established.",
		}),
		connErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "aepkimi_bridgeweb_kap_connect_errors_total", Help: "Failed or lost kap connections, by reason.",
		}, []string{"reason"}),
		kapErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "aepkimi_bridgeweb_kap_error_frames_total", Help: "error frames the kap-server sent.",
		}),
		state: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "aepkimi_bridgeweb_kap_state", Help: "kap connection state: 1 for the current state.",
		}, []string{"state"}),
		followed: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "aepkimi_bridgeweb_sessions_followed", Help: "kap sessions subscribed on the current connection.",
		}),
		dormant: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "aepkimi_bridgeweb_sessions_dormant", Help: "Known kap sessions the server has not loaded (re-subscribed periodically).",
		}),
		skipped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "aepkimi_bridgeweb_instances_skipped_total", Help: "Instance registry records passed over, by reason.",
		}, []string{"reason"}),
		commands: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "aepkimi_bridgeweb_commands_total", Help: "Control commands by type and outcome.",
		}, []string{"type", "outcome"}),
		logRecover: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "aepkimi_bridgeweb_log_recovery_incomplete_total", Help: "Session logs whose recovery passed over unparsable lines or could not be read to the end.",
		}),
		logErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "aepkimi_bridgeweb_log_errors_total", Help: "Failed JSONL log appends.",
		}),
		globalDrops: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "aepkimi_bridgeweb_global_frames_ignored_total", Help: "Server-wide frames (workspaces, config) that belong to no session.",
		}),
		instances: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "aepkimi_bridgeweb_kap_instances", Help: "kap-servers (kimi web) followed now.",
		}),
		instanceEnds: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "aepkimi_bridgeweb_kap_instances_ended_total", Help: "kap-servers seen stop (record removed, process dead, heartbeat stopped).",
		}),
		sessionsEnded: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "aepkimi_bridgeweb_sessions_ended_total", Help: "Sessions ended because their kap-server stopped, by reason (normal, killed).",
		}, []string{"reason"}),
	}
	m.reg.MustRegister(m.frames, m.badFrames, m.events, m.duplicates, m.gaps, m.staleRuns, m.connects, m.connErrors,
		m.kapErrors, m.state, m.followed, m.dormant, m.skipped, m.commands, m.logErrors, m.logRecover, m.globalDrops,
		m.instances, m.instanceEnds, m.sessionsEnded,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "aepkimi_bridgeweb_open_logs", Help: "Session log files open (bounded by the handle cap).",
	}, func() float64 { return float64(b.handles.Open()) }))
	for _, c := range b.cfg.Collectors {
		m.reg.MustRegister(c)
	}
	return m
}

// eventLabel keeps the type label bounded: extension types collapse to
// their family, since a hostile server can name any frame type, and only
// registered core types keep their own name.
func eventLabel(t string) string {
	if strings.HasPrefix(t, "x.") {
		if strings.HasPrefix(t, "x.kimi-code.web.") {
			return "x.kimi-code.web.*"
		}
		return "x.*"
	}
	if _, ok := aep.LookupType(t); ok {
		return t
	}
	return "other"
}

func cmdLabel(t string) string {
	switch t {
	case CmdRespond, CmdCancel:
		return t
	}
	return "other"
}

// Emitted and AppendFailed count for the session streams
// (journal.Counters).
func (m *metrics) Emitted(typ string) { m.events.WithLabelValues(eventLabel(typ)).Inc() }

func (m *metrics) AppendFailed() { m.logErrors.Inc() }

func (m *metrics) RecoveryIncomplete() { m.logRecover.Inc() }

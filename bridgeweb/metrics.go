package bridgeweb

import (
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/aep-kimi/aep-kimi/aep"
	"github.com/aep-kimi/aep-kimi/emitter"
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

// metrics are the bridge's own, on its core's registry (the core counts
// events, log errors and commands).
type metrics struct {
	frames      *prometheus.CounterVec
	badFrames   *prometheus.CounterVec
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
	globalDrops prometheus.Counter
	// instances counts the kap-servers followed now; instanceEnds the
	// ones seen stop; sessionsEnded the sessions ended with them.
	instances     prometheus.Gauge
	instanceEnds  prometheus.Counter
	sessionsEnded *prometheus.CounterVec
}

func newMetrics(r emitter.Metrics) *metrics {
	return &metrics{
		frames:      r.CounterVec("frames_total", "kap WebSocket frames received, by kind.", "kind"),
		badFrames:   r.CounterVec("bad_frames_total", "kap frames refused (not JSON, no type, too large), by reason.", "reason"),
		duplicates:  r.Counter("duplicate_frames_total", "Durable frames skipped because their (epoch, seq) was already taken."),
		gaps:        r.CounterVec("gaps_total", "Frame ranges reported lost, by reason.", "reason"),
		staleRuns:   r.Counter("runs_without_end_total", "Runs dropped without a terminal because their turn's end was never seen."),
		connects:    r.Counter("kap_connects_total", "kap WebSocket connections established."),
		connErrors:  r.CounterVec("kap_connect_errors_total", "Failed or lost kap connections, by reason.", "reason"),
		kapErrors:   r.Counter("kap_error_frames_total", "error frames the kap-server sent."),
		state:       r.GaugeVec("kap_state", "kap connection state: 1 for the current state.", "state"),
		followed:    r.Gauge("sessions_followed", "kap sessions subscribed on the current connection."),
		dormant:     r.Gauge("sessions_dormant", "Known kap sessions the server has not loaded (re-subscribed periodically)."),
		skipped:     r.CounterVec("instances_skipped_total", "Instance registry records passed over, by reason.", "reason"),
		globalDrops: r.Counter("global_frames_ignored_total", "Server-wide frames (workspaces, config) that belong to no session."),
		instances:   r.Gauge("kap_instances", "kap-servers (kimi web) followed now."),
		instanceEnds: r.Counter("kap_instances_ended_total",
			"kap-servers seen stop (record removed, process dead, heartbeat stopped)."),
		sessionsEnded: r.CounterVec("sessions_ended_total",
			"Sessions ended because their kap-server stopped, by reason (normal, killed).", "reason"),
	}
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

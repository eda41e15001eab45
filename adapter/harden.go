package adapter

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/aep-kimi/aep-kimi/emitter"
	"github.com/aep-kimi/aep-kimi/internal/spool"
)

// QuarantinePruneEvery paces the age check of quarantined spool records
// while nothing new is quarantined.
const QuarantinePruneEvery = time.Minute

// hardening is the adapter's account of damaged and quarantined files.
type hardening struct {
	quarantineBytes  prometheus.Gauge
	quarantineFiles  prometheus.Gauge
	quarantinePruned *prometheus.CounterVec
	// lastPrune is guarded by the Server's spoolMu.
	lastPrune time.Time
}

func newHardening(r emitter.Metrics) hardening {
	h := hardening{
		quarantineBytes:  r.Gauge("spool_quarantine_bytes", "Bytes of raw (unredacted) payloads kept in the spool quarantine."),
		quarantineFiles:  r.Gauge("spool_quarantine_records", "Records kept in the spool quarantine."),
		quarantinePruned: r.CounterVec("spool_quarantine_pruned_total", "Quarantined spool records removed, by bound (age, bytes).", "bound"),
	}
	for _, b := range []string{"age", "bytes"} {
		h.quarantinePruned.WithLabelValues(b)
	}
	return h
}

// pruneQuarantine bounds the spool quarantine (spool.QuarantineMaxBytes,
// spool.QuarantineMaxAge) after something was quarantined, and otherwise
// every QuarantinePruneEvery. The caller holds spoolMu.
func (s *Server) pruneQuarantine(force bool) {
	now := s.cfg.Now()
	if !force && now.Sub(s.hard.lastPrune) < QuarantinePruneEvery {
		return
	}
	s.hard.lastPrune = now
	dir := spool.Dir(s.cfg.Home)
	p, err := spool.PruneQuarantine(dir, now, spool.QuarantineMaxBytes, spool.QuarantineMaxAge)
	if err != nil {
		s.log.Error("spool quarantine not pruned", "dir", spool.QuarantinePath(dir), "err", err)
	}
	s.hard.quarantineBytes.Set(float64(p.KeptBytes))
	s.hard.quarantineFiles.Set(float64(p.Kept))
	if p.Aged+p.OverBytes > 0 {
		s.hard.quarantinePruned.WithLabelValues("age").Add(float64(p.Aged))
		s.hard.quarantinePruned.WithLabelValues("bytes").Add(float64(p.OverBytes))
		s.log.Info("spool quarantine pruned", "dir", spool.QuarantinePath(dir), "aged_out", p.Aged, "over_bytes", p.OverBytes,
			"kept", p.Kept, "kept_bytes", p.KeptBytes)
	}
}

package adapter

import (
	"fmt"
	"path/filepath"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/aep-kimi/aep-kimi/internal/journal"
	"github.com/aep-kimi/aep-kimi/internal/safefile"
	"github.com/aep-kimi/aep-kimi/internal/spool"
)

// QuarantinePruneEvery paces the age check of quarantined spool records
// while nothing new is quarantined.
const QuarantinePruneEvery = time.Minute

// privateDirs creates the directories the adapter keeps under home, and
// tightens existing ones, to 0700. The home itself is the operator's and is
// left as it is.
func privateDirs(home string) error {
	dirs := []string{kimiDir(home), spool.Dir(home), spool.QuarantinePath(spool.Dir(home)), filepath.Dir(logDir(home)), logDir(home)}
	for _, d := range dirs {
		if err := safefile.PrivateDir(d); err != nil {
			return fmt.Errorf("adapter home: %w", err)
		}
	}
	return nil
}

// hardening is the adapter's account of damaged and quarantined files.
type hardening struct {
	tornTails        *prometheus.CounterVec
	quarantineBytes  prometheus.Gauge
	quarantineFiles  prometheus.Gauge
	quarantinePruned *prometheus.CounterVec
	// lastPrune is guarded by the Server's spoolMu.
	lastPrune time.Time
}

func newHardening(reg *prometheus.Registry) hardening {
	h := hardening{
		tornTails: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "aepkimi_adapter_log_torn_tails_total",
			Help: "Session logs found ending in a partial line when opened, by what was done (cut: moved to a .torn- file; completed).",
		}, []string{"action"}),
		quarantineBytes: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "aepkimi_adapter_spool_quarantine_bytes", Help: "Bytes of raw (unredacted) payloads kept in the spool quarantine.",
		}),
		quarantineFiles: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "aepkimi_adapter_spool_quarantine_records", Help: "Records kept in the spool quarantine.",
		}),
		quarantinePruned: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "aepkimi_adapter_spool_quarantine_pruned_total", Help: "Quarantined spool records removed, by bound (age, bytes).",
		}, []string{"bound"}),
	}
	for _, a := range []string{journal.RepairCut, journal.RepairCompleted} {
		h.tornTails.WithLabelValues(a)
	}
	for _, b := range []string{"age", "bytes"} {
		h.quarantinePruned.WithLabelValues(b)
	}
	reg.MustRegister(h.tornTails, h.quarantineBytes, h.quarantineFiles, h.quarantinePruned)
	return h
}

// tornTail counts and reports, once, a session log repaired as it opened.
func (s *Server) tornTail(r journal.Repair) {
	s.hard.tornTails.WithLabelValues(r.Action).Inc()
	r.Report(s.log)
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

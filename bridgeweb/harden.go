package bridgeweb

import (
	"fmt"
	"path/filepath"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/aep-kimi/aep-kimi/internal/journal"
	"github.com/aep-kimi/aep-kimi/internal/safefile"
)

// privateDirs creates the directories the bridge keeps under home, and
// tightens existing ones, to 0700. The home itself is the operator's.
func privateDirs(home string) error {
	for _, d := range []string{kimiDir(home), filepath.Dir(LogDir(home)), LogDir(home)} {
		if err := safefile.PrivateDir(d); err != nil {
			return fmt.Errorf("bridge home: %w", err)
		}
	}
	return nil
}

func newTornTails(reg *prometheus.Registry) *prometheus.CounterVec {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "aepkimi_bridgeweb_log_torn_tails_total",
		Help: "Session logs found ending in a partial line when opened, by what was done (cut: moved to a .torn- file; completed).",
	}, []string{"action"})
	for _, a := range []string{journal.RepairCut, journal.RepairCompleted} {
		c.WithLabelValues(a)
	}
	reg.MustRegister(c)
	return c
}

// tornTail counts and reports, once, a session log repaired as it opened.
func (b *Bridge) tornTail(r journal.Repair) {
	b.tornTails.WithLabelValues(r.Action).Inc()
	r.Report(b.log)
}

package emitter

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/aep-kimi/aep-kimi/aep"
	"github.com/aep-kimi/aep-kimi/internal/journal"
)

// What a starting source republishes of the run before it.
const (
	// RepublishPerLog bounds the latest events republished from one log.
	RepublishPerLog = 256
	// RepublishTotal bounds them over every log, well inside the relay
	// client's outbox so nothing new is crowded out.
	RepublishTotal = 4096
	// republishTail bounds how much of one log is read for them.
	republishTail = 1 << 20
)

// lastRunStart is when the run before this one started: its epoch record
// was written then. Zero when there was none.
func lastRunStart(epochFile string) time.Time {
	fi, err := os.Lstat(epochFile)
	if err != nil || !fi.Mode().IsRegular() {
		return time.Time{}
	}
	return fi.ModTime()
}

// republish hands the publisher again the latest events of every log the
// run before this one wrote to. An event is logged before it is published,
// and the publisher's outbox lives in memory: a run that was killed, or lost
// its power, may have logged events the relay never got, and nothing else
// would send them. The relay admits an event once per (source, id), so
// what it already holds is dropped there. It runs before the source's
// intake, so these events go out before anything new of their session.
func (c *Core[S]) republish() {
	if c.cfg.Publisher == nil || c.lastRun.IsZero() {
		return
	}
	type logFile struct {
		path string
		mod  time.Time
	}
	entries, err := os.ReadDir(c.spec.LogDir)
	if err != nil {
		c.log.Warn("cannot list the session logs to republish the last run's latest events", "err", err)
		return
	}
	var logs []logFile
	for _, e := range entries {
		if !e.Type().IsRegular() || !strings.HasSuffix(e.Name(), journal.LogExt) {
			continue // a link is never followed; a torn tail's copy is history
		}
		fi, err := e.Info()
		if err != nil || fi.ModTime().Before(c.lastRun) {
			continue
		}
		logs = append(logs, logFile{filepath.Join(c.spec.LogDir, e.Name()), fi.ModTime()})
	}
	// The most recently written first: the likeliest to hold what the
	// relay missed when the total bound is reached.
	slices.SortFunc(logs, func(a, b logFile) int { return b.mod.Compare(a.mod) })
	total := 0
	for _, l := range logs {
		if total >= RepublishTotal {
			break
		}
		ring := make([]*aep.Event, 0, RepublishPerLog)
		_, err := journal.Replay(l.path, republishTail, func(ev *aep.Event) {
			if ev.Seq == nil || ev.EpochOrZero() >= c.epoch {
				return // only the source's own positioned events of earlier runs
			}
			if len(ring) == RepublishPerLog {
				ring = append(ring[:0], ring[1:]...)
			}
			ring = append(ring, ev)
		})
		if err != nil {
			c.log.Warn("cannot read a session log to republish its latest events", "err", err)
			continue
		}
		ring = ring[max(0, len(ring)-(RepublishTotal-total)):]
		for _, ev := range ring {
			c.cfg.Publisher.Publish(ev)
		}
		total += len(ring)
	}
	if total > 0 {
		c.log.Info("republished the last run's latest events; the relay keeps those it lacks", "events", total, "logs", len(logs))
	}
}

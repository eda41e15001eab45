package adapter

import (
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/aep-kimi/aep-kimi/internal/journal"
	"github.com/aep-kimi/aep-kimi/internal/spool"
)

// Kinds of quarantined file.
const (
	QuarantineSpool = "spool"     // a hook payload the adapter could not ingest (raw)
	QuarantineTorn  = "torn-tail" // a partial last line cut from a session log
)

// Quarantined is one file set aside under the AEP home instead of dropped.
type Quarantined struct {
	Kind     string    `json:"kind"`
	Path     string    `json:"path"`
	Size     int64     `json:"size"`
	Modified time.Time `json:"modified"`
	AgeS     int64     `json:"age_s"`
	Reason   string    `json:"reason"`
}

// ListQuarantined lists both kinds under home, oldest first, aged at now:
// spool records the adapter could not ingest and the torn tails cut from
// any source's session logs.
func ListQuarantined(home string, now time.Time) ([]Quarantined, error) {
	qs, err := spool.ListQuarantine(spool.Dir(home))
	if err != nil {
		return nil, err
	}
	var out []Quarantined
	for _, q := range qs {
		out = append(out, Quarantined{Kind: QuarantineSpool, Path: q.Path, Size: q.Size, Modified: q.ModTime, Reason: q.Reason})
	}
	torn, err := filepath.Glob(filepath.Join(home, "logs", "*", "*"+journal.TornSuffix+"*"))
	if err != nil {
		return nil, err
	}
	for _, p := range torn {
		st, err := os.Lstat(p)
		if err != nil || !st.Mode().IsRegular() {
			continue
		}
		log := filepath.Base(p[:strings.LastIndex(p, journal.TornSuffix)])
		out = append(out, Quarantined{Kind: QuarantineTorn, Path: p, Size: st.Size(), Modified: st.ModTime(),
			Reason: "partial last line cut from " + log})
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Modified.Before(out[j].Modified) })
	for i := range out {
		out[i].AgeS = int64(max(now.Sub(out[i].Modified), 0) / time.Second)
	}
	return out, nil
}

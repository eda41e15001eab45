package spool

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/aep-kimi/aep-kimi/internal/safefile"
)

// Quarantine bounds. A quarantined record is a raw hook payload (prompts,
// tool input and output, unredacted), so it is kept for a person to look at
// for a while, not for ever.
const (
	// QuarantineMaxBytes bounds the records kept; the oldest go first.
	QuarantineMaxBytes = 64 << 20
	// QuarantineMaxAge is how long a record is kept.
	QuarantineMaxAge = 7 * 24 * time.Hour
)

// ReasonExt is the suffix of the side file saying why a record was
// quarantined.
const ReasonExt = ".reason"

// maxReason bounds a reason note.
const maxReason = 512

// Quarantined is one record in quarantine.
type Quarantined struct {
	Path    string
	Size    int64
	ModTime time.Time
	// Reason is why it was quarantined ("" when the note is missing).
	Reason string
}

// QuarantinePath is the quarantine directory of a spool directory.
func QuarantinePath(dir string) string { return filepath.Join(dir, QuarantineDir) }

// ListQuarantine returns the quarantined records under a spool directory,
// oldest first.
func ListQuarantine(dir string) ([]Quarantined, error) {
	qdir := QuarantinePath(dir)
	entries, err := os.ReadDir(qdir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("spool quarantine: %w", err)
	}
	var out []Quarantined
	for _, e := range entries {
		n := e.Name()
		if !e.Type().IsRegular() || !strings.HasSuffix(n, Ext) || strings.HasPrefix(n, ".") {
			continue
		}
		info, err := e.Info()
		if err != nil {
			continue // removed meanwhile
		}
		q := Quarantined{Path: filepath.Join(qdir, n), Size: info.Size(), ModTime: info.ModTime()}
		if b, err := safefile.ReadFile(q.Path + ReasonExt); err == nil {
			q.Reason = strings.TrimSpace(string(b))
		}
		out = append(out, q)
	}
	sort.Slice(out, func(i, j int) bool {
		if !out[i].ModTime.Equal(out[j].ModTime) {
			return out[i].ModTime.Before(out[j].ModTime)
		}
		return out[i].Path < out[j].Path
	})
	return out, nil
}

// Pruned says what PruneQuarantine removed and what it kept.
type Pruned struct {
	// Aged and OverBytes count records removed for age and for the byte
	// budget.
	Aged, OverBytes int
	// Kept and KeptBytes describe what is left.
	Kept      int
	KeptBytes int64
}

// PruneQuarantine removes quarantined records older than maxAge, then the
// oldest until the rest fit in maxBytes.
func PruneQuarantine(dir string, now time.Time, maxBytes int64, maxAge time.Duration) (Pruned, error) {
	qs, err := ListQuarantine(dir)
	if err != nil {
		return Pruned{}, err
	}
	var total int64
	for _, q := range qs {
		total += q.Size
	}
	var p Pruned
	var first error
	for _, q := range qs {
		aged := now.Sub(q.ModTime) > maxAge
		if !aged && total <= maxBytes {
			p.Kept++
			p.KeptBytes += q.Size
			continue
		}
		if err := removeQuarantined(q.Path); err != nil {
			if first == nil {
				first = err
			}
			p.Kept++
			p.KeptBytes += q.Size
			continue
		}
		total -= q.Size
		if aged {
			p.Aged++
		} else {
			p.OverBytes++
		}
	}
	return p, first
}

func removeQuarantined(path string) error {
	if err := Remove(path); err != nil {
		return err
	}
	return Remove(path + ReasonExt)
}

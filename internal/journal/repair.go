package journal

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/aep-kimi/aep-kimi/aep"
	"github.com/aep-kimi/aep-kimi/internal/safefile"
)

// What opening a log did about a torn tail.
const (
	// RepairCut: the partial last line was moved to a quarantine file and
	// the log cut back to its last newline.
	RepairCut = "cut"
	// RepairCompleted: the last line was a whole event missing only its
	// newline (the crash hit between the two); it got its newline.
	RepairCompleted = "completed"
)

// TornSuffix starts the name of the quarantine file a cut tail goes to,
// next to its log: <session>.jsonl.torn-<UTC time>.
const TornSuffix = ".torn-"

// maxCompletable bounds the tail read into memory to see whether it is a
// whole event; a longer tail is cut without looking.
const maxCompletable = 16 << 20

// scanChunk is how much of the file is read at a time looking back for the
// last newline.
const scanChunk = 64 << 10

// Repair reports a torn tail found when a log opened.
type Repair struct {
	// Path is the log.
	Path string
	// Action is RepairCut or RepairCompleted.
	Action string
	// Bytes is the size of the torn tail.
	Bytes int64
	// Quarantine holds the cut bytes (RepairCut only).
	Quarantine string
}

// Report writes the repair's one log line.
func (r Repair) Report(log *slog.Logger) {
	log.Warn("session log ended in a partial line (a crash or a full disk); repaired before appending",
		"log", r.Path, "action", r.Action, "bytes", r.Bytes, "quarantine", r.Quarantine)
}

// repairTail makes the log open in f end in a newline, so the next append
// starts a line of its own instead of gluing an event onto a partial one
// (after a power loss or a full disk). A zero Repair means nothing was torn.
// The cut bytes are written and synced to the quarantine file before the
// log is shortened: nothing is lost if this is interrupted too.
func repairTail(f *os.File, path string, now time.Time) (Repair, error) {
	st, err := f.Stat()
	if err != nil || st.Size() == 0 {
		return Repair{}, err
	}
	size := st.Size()
	last := make([]byte, 1)
	if _, err := f.ReadAt(last, size-1); err != nil {
		return Repair{}, fmt.Errorf("read tail: %w", err)
	}
	if last[0] == '\n' {
		return Repair{}, nil
	}
	cut, err := lastLineEnd(f, size)
	if err != nil {
		return Repair{}, err
	}
	rep := Repair{Path: path, Bytes: size - cut}
	if rep.Bytes <= maxCompletable {
		tail := make([]byte, rep.Bytes)
		if _, err := f.ReadAt(tail, cut); err != nil {
			return Repair{}, fmt.Errorf("read tail: %w", err)
		}
		if _, perr := aep.ParseEvent(tail); perr == nil {
			if _, err := f.Write([]byte{'\n'}); err != nil {
				return Repair{}, fmt.Errorf("complete tail: %w", err)
			}
			rep.Action = RepairCompleted
			return rep, nil
		}
	}
	rep.Action, rep.Quarantine = RepairCut, path+TornSuffix+now.UTC().Format("20060102T150405.000000000Z")
	q, err := safefile.OpenFile(rep.Quarantine, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return Repair{}, fmt.Errorf("quarantine torn tail: %w", err)
	}
	_, err = io.Copy(q, io.NewSectionReader(f, cut, rep.Bytes))
	if err == nil {
		err = q.Sync()
	}
	if cerr := q.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(rep.Quarantine)
		return Repair{}, fmt.Errorf("quarantine torn tail: %w", err)
	}
	if err := f.Truncate(cut); err != nil {
		return Repair{}, fmt.Errorf("cut torn tail: %w", err)
	}
	if err := f.Sync(); err != nil {
		return Repair{}, fmt.Errorf("cut torn tail: %w", err)
	}
	return rep, nil
}

// lastLineEnd returns the offset just past the last newline before size
// (0 when there is none).
func lastLineEnd(f *os.File, size int64) (int64, error) {
	buf := make([]byte, scanChunk)
	for end := size; end > 0; {
		start := max(end-scanChunk, 0)
		chunk := buf[:end-start]
		if _, err := f.ReadAt(chunk, start); err != nil {
			return 0, fmt.Errorf("read tail: %w", err)
		}
		if i := bytes.LastIndexByte(chunk, '\n'); i >= 0 {
			return start + int64(i) + 1, nil
		}
		end = start
	}
	return 0, nil
}

// Package journal is the side of an emitter that owns session order: each
// session's stream (seq, epoch, log, publisher and counters, sequenced in one
// place), per-session JSONL logs with safe file names, and the epoch counter
// that never repeats across restarts. The hook adapter and the kimi web
// bridge both keep one.
package journal

import (
	"bufio"
	"bytes"
	"container/list"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aep-kimi/aep-kimi/aep"
	"github.com/aep-kimi/aep-kimi/internal/safefile"
	"github.com/aep-kimi/aep-kimi/internal/syncmode"
)

// LogExt ends every session log's name (a torn tail's name goes on past it).
const LogExt = ".jsonl"

// maxNameBytes keeps log file names well under the usual 255-byte limit.
const maxNameBytes = 200

// FileName returns the JSONL file name for a session: the session string
// with every byte outside [A-Za-z0-9_-] and any leading dot percent-encoded,
// so it is reversible, safe for any input (path separators, "..", control
// bytes, unicode) and still says which session it is. Names too long for a
// file system keep a readable prefix plus a hash of the whole string.
func FileName(session string) string {
	var b strings.Builder
	for i := 0; i < len(session); i++ {
		c := session[i]
		safe := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' ||
			(c == '.' && i > 0)
		if safe {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	name := b.String()
	if name == "" {
		name = "%00"
	}
	if len(name) > maxNameBytes {
		sum := sha256.Sum256([]byte(session))
		cut := maxNameBytes - 18
		for cut > 0 && name[cut-1] == '%' || cut > 1 && name[cut-2] == '%' {
			cut-- // never split an escape
		}
		name = name[:cut] + "~" + hex.EncodeToString(sum[:8])
	}
	return name + LogExt
}

// Log appends one event per line with a single write(2) each, so a
// concurrent reader (tail -f) never sees a torn line. The file (0600, in a
// 0700 directory) opens on the first append, never through a link, and a
// torn tail left by a crash is repaired as it opens (see Repair). A write
// that fails part-way (a full disk) is cut back to the last whole line
// before the append returns its error, or, when even that fails, the file is
// closed so the next append's open repairs it: the log always ends in a
// whole line before the next one is written. A log made
// by Handles.NewLog may be closed by its Handles to make room and reopens on
// its next append. Its owner serializes appends (one writer per session);
// Close may come from anywhere.
type Log struct {
	path     string
	onRepair func(Repair)
	handles  *Handles

	mu sync.Mutex
	f  *os.File
	// end is where the log's last whole line ends in f: a write that fails
	// part-way is cut back to it.
	end int64
	// faults stands in for f's writes in tests (a disk that fills mid-line).
	faults fileFaults
	// gen counts the writes the log took (see Mark).
	gen uint64
	// elem is the log's place in its Handles' list; guarded by handles.mu.
	elem *list.Element

	// group is the log's group commit (sync.go); mu is never held across
	// a sync. smu guards timerSet.
	group    syncmode.Group
	smu      sync.Mutex
	timerSet bool
}

// NewLog returns the log of session under dir, its file kept open until
// Close.
func NewLog(dir, session string) *Log {
	return &Log{path: filepath.Join(dir, FileName(session))}
}

// OnRepair sets what is told when opening the log repaired a torn tail
// (nil: nobody); it returns l.
func (l *Log) OnRepair(fn func(Repair)) *Log {
	l.onRepair = fn
	return l
}

// Path is the log's file.
func (l *Log) Path() string { return l.path }

// Append writes one line.
func (l *Log) Append(line []byte) error {
	buf := make([]byte, 0, len(line)+1)
	buf = append(buf, line...)
	buf = append(buf, '\n')
	return l.write(buf)
}

// AppendLines writes lines in one write(2): all of them reach the file, or
// the error says none was taken.
func (l *Log) AppendLines(lines [][]byte) error {
	n := 0
	for _, line := range lines {
		n += len(line) + 1
	}
	buf := make([]byte, 0, n)
	for _, line := range lines {
		buf = append(buf, line...)
		buf = append(buf, '\n')
	}
	return l.write(buf)
}

func (l *Log) write(buf []byte) error {
	l.mu.Lock()
	var victims []*Log
	if l.f == nil {
		f, err := l.open()
		for i := 0; err != nil && tooManyFiles(err) && i < emfileRetries; i++ {
			// Out of descriptors: give back the oldest log handle and try
			// again (l itself is not on the list while closed).
			v := l.handles.oldest()
			if v == nil {
				break
			}
			v.Close() //nolint:errcheck // see closeAll
			f, err = l.open()
		}
		if err != nil {
			l.mu.Unlock()
			l.handles.durable(l, err)
			return err
		}
		l.f = f
		victims = l.handles.opened(l)
	} else {
		l.handles.touch(l)
	}
	var stale *os.File
	_, err := l.writeFile(buf)
	if err == nil {
		l.gen++
		l.end += int64(len(buf))
	} else if terr := l.cutBack(); terr != nil {
		// Closed, the log reopens on its next append, and that open
		// repairs the torn tail (repairTail) before anything is written.
		err = fmt.Errorf("%w (cutting the partial line back failed too, so the next append repairs it first: %w)", err, terr)
		l.handles.forget(l)
		stale, l.f = l.f, nil
	}
	l.mu.Unlock()
	closeAll(victims)
	if stale != nil {
		stale.Close() //nolint:errcheck // the append failed already; the reopen repairs
	}
	if err != nil {
		l.handles.durable(l, err)
		return fmt.Errorf("log: %w", err)
	}
	if l.mode() == syncmode.None {
		l.handles.durable(l, nil)
	}
	l.wrote()
	return nil
}

// fileFaults is what a test puts between a log and its file.
type fileFaults interface {
	Write(f *os.File, b []byte) (int, error)
	Truncate(f *os.File, size int64) error
}

func (l *Log) writeFile(b []byte) (int, error) {
	if l.faults != nil {
		return l.faults.Write(l.f, b)
	}
	return l.f.Write(b)
}

// cutBack takes whatever a failed write left past the last whole line off
// the file. Callers hold l.mu.
func (l *Log) cutBack() error {
	if l.faults != nil {
		return l.faults.Truncate(l.f, l.end)
	}
	return l.f.Truncate(l.end)
}

// open opens the log for appending: its directory private, never through a
// link, a torn tail repaired. Callers hold l.mu.
func (l *Log) open() (*os.File, error) {
	if err := safefile.PrivateDir(filepath.Dir(l.path)); err != nil {
		return nil, fmt.Errorf("log: %w", err)
	}
	f, err := safefile.OpenFile(l.path, os.O_CREATE|os.O_RDWR|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("log: %w", err)
	}
	rep, err := repairTail(f, l.path, time.Now())
	var st os.FileInfo
	if err == nil {
		st, err = f.Stat()
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("log: %w", err)
	}
	l.end = st.Size()
	if l.end == 0 && l.mode() != syncmode.None {
		// A new log: its name must reach the disk as its first line will,
		// or a power cut loses the file with every line synced into it.
		if err := l.handles.dirSync(filepath.Dir(l.path)); err != nil {
			f.Close()
			return nil, fmt.Errorf("log: directory sync: %w", err)
		}
	}
	if rep.Action != "" && l.onRepair != nil {
		l.onRepair(rep)
	}
	return f, nil
}

// IsOpen reports whether the file is open (idle logs are closed to bound
// file descriptors).
func (l *Log) IsOpen() bool {
	if l == nil {
		return false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.f != nil
}

// Close closes the file; a later Append reopens it.
func (l *Log) Close() error {
	if l == nil {
		return nil
	}
	// Closed, a log that failed is no longer waiting to reach the disk:
	// what it could not take was cut back.
	defer l.handles.durable(l, nil)
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f == nil {
		return nil
	}
	l.handles.forget(l)
	err := l.f.Close()
	l.f = nil
	if err != nil && !errors.Is(err, os.ErrClosed) {
		return fmt.Errorf("log: %w", err)
	}
	return nil
}

// MaxEpoch is the largest epoch handed out: 2^53-1, the largest integer every
// JSON consumer (JavaScript dashboards included) reads exactly.
const MaxEpoch = 1<<53 - 1

// NextEpoch returns a new epoch for an emitter and records it in path: the
// larger of the last recorded epoch plus one and now in Unix seconds, so it
// grows even if the record is lost (a wiped home) or the clock steps back
// (AEP-0001 §7.2: an epoch never repeats for a session). The record is
// updated under a file lock, so two emitters starting at once differ.
func NextEpoch(path string, now time.Time) (int64, error) {
	if err := safefile.PrivateDir(filepath.Dir(path)); err != nil {
		return 0, fmt.Errorf("epoch: %w", err)
	}
	f, err := safefile.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return 0, fmt.Errorf("epoch: %w", err)
	}
	defer f.Close()
	if err := safefile.Lock(f); err != nil {
		return 0, fmt.Errorf("epoch: lock: %w", err)
	}
	defer safefile.Unlock(f) //nolint:errcheck // released on close
	buf := make([]byte, 32)
	n, _ := f.ReadAt(buf, 0)
	// An unreadable record counts as 0 (the clock takes over); one out of
	// range parses as MaxInt64 and is refused below, never wrapped.
	last, _ := strconv.ParseInt(strings.TrimSpace(string(buf[:n])), 10, 64)
	if last >= MaxEpoch {
		return 0, fmt.Errorf("epoch: %s records %d, which cannot grow further; an epoch must stay a safe JSON integer (<= %d)", path, last, int64(MaxEpoch))
	}
	epoch := max(last+1, now.Unix())
	if err := f.Truncate(0); err != nil {
		return 0, fmt.Errorf("epoch: %w", err)
	}
	if _, err := f.WriteAt([]byte(strconv.FormatInt(epoch, 10)+"\n"), 0); err != nil {
		return 0, fmt.Errorf("epoch: %w", err)
	}
	if err := f.Sync(); err != nil {
		return 0, fmt.Errorf("epoch: %w", err)
	}
	return epoch, nil
}

// Replay calls fn, in file order, with each event in the last maxBytes of a
// log (a partial first line skipped): how a restarted emitter folds its
// recent state back in. It returns how many lines it passed over because they
// do not parse, and an error naming the file when the log exists but cannot
// be read to its end (or is a link, which is never followed), so the caller
// can log and count what recovery missed. A missing log replays nothing and
// is no error.
func Replay(path string, maxBytes int64, fn func(*aep.Event)) (skipped int, err error) {
	f, err := safefile.OpenFile(path, os.O_RDONLY, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("replay: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return 0, fmt.Errorf("replay %s: %w", path, err)
	}
	if st.Size() == 0 {
		return 0, nil
	}
	off := max(st.Size()-maxBytes, 0)
	if _, err := f.Seek(off, io.SeekStart); err != nil {
		return 0, fmt.Errorf("replay %s: %w", path, err)
	}
	r := bufio.NewReaderSize(f, 64<<10)
	if off > 0 {
		if _, err := r.ReadBytes('\n'); err != nil && !errors.Is(err, io.EOF) { // a partial first line
			return 0, fmt.Errorf("replay %s: %w", path, err)
		}
	}
	for {
		line, rerr := r.ReadBytes('\n')
		if len(bytes.TrimSpace(line)) > 0 {
			if ev, perr := aep.ParseEvent(line); perr == nil {
				fn(ev)
			} else {
				skipped++
			}
		}
		if errors.Is(rerr, io.EOF) {
			return skipped, nil
		}
		if rerr != nil {
			return skipped, fmt.Errorf("replay %s: %w", path, rerr)
		}
	}
}

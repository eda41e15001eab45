// Package spool is the on-disk hand-off between kimi-hook and the adapter:
// when the adapter cannot take a hook payload, kimi-hook appends it here, and
// the adapter ingests it later, in spool order, exactly once.
//
// Layout under the spool directory (0700):
//
//	.lock                 flock(2) held while a record is numbered and written;
//	                      it holds the last spool sequence number handed out
//	00000000000000000042.hook   one record: a header line, then the raw payload
//	quarantine/           records the adapter could not parse, kept for a person
//
// A record is written to a temporary name and renamed into place, so a reader
// never sees half a record. Records survive the death of any process (they
// are in the page cache once written); Append does not sync them, since
// kimi-hook writes one ahead of every fire-and-forget delivery and most are
// removed a millisecond later, once the adapter has the hook. A record that
// stays (the adapter did not take the hook) is synced by Keep, unless the
// sync mode is none. It imports nothing heavy: kimi-hook links it and must
// start fast.
package spool

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/aep-kimi/aep-kimi/internal/atomicfile"
	"github.com/aep-kimi/aep-kimi/internal/safefile"
	"github.com/aep-kimi/aep-kimi/internal/syncmode"
)

// Ext is the file suffix of a spool record.
const Ext = ".hook"

// QuarantineDir is the subdirectory for records that cannot be ingested.
const QuarantineDir = "quarantine"

// Header is the first line of a record.
type Header struct {
	V        int    `json:"v"`
	Seq      uint64 `json:"seq"`
	Delivery string `json:"delivery"`
	// At is when kimi-hook read the payload (RFC 3339, nanoseconds).
	At string `json:"at"`
	// Reason says why the payload was spooled: unreachable, timeout,
	// unauthorized, rejected or oversize.
	Reason string `json:"reason"`
	// Pid and PidStart name the Kimi process the hook served (its start
	// time as an opaque token), when kimi-hook could tell.
	Pid      int    `json:"pid,omitempty"`
	PidStart string `json:"pid_start,omitempty"`
}

// Record is one spooled payload.
type Record struct {
	Header
	Payload []byte
	// Path is the record's file.
	Path string
}

// Dir returns the spool directory for an aep home.
func Dir(home string) string { return filepath.Join(home, "kimi", "spool") }

// Append numbers and writes one record under the spool lock and returns its
// sequence number and path. The payload is stored byte-for-byte.
func Append(dir string, h Header, payload []byte) (uint64, string, error) {
	if err := safefile.PrivateDir(dir); err != nil {
		return 0, "", fmt.Errorf("spool: %w", err)
	}
	// The lock file also holds the counter, so numbering is one open.
	lock, err := safefile.OpenFile(filepath.Join(dir, ".lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return 0, "", fmt.Errorf("spool: %w", err)
	}
	defer lock.Close()
	if err := safefile.Lock(lock); err != nil {
		return 0, "", fmt.Errorf("spool: lock: %w", err)
	}
	defer safefile.Unlock(lock) //nolint:errcheck // released on close anyway

	seq := readSeq(lock) + 1
	// Never reuse a number still on disk (a link included), even if .seq
	// was lost.
	for {
		if _, err := os.Lstat(recordPath(dir, seq)); errors.Is(err, os.ErrNotExist) {
			break
		}
		seq++
	}
	h.V, h.Seq = 1, seq
	head, err := json.Marshal(h)
	if err != nil {
		return 0, "", fmt.Errorf("spool: %w", err)
	}
	var buf bytes.Buffer
	buf.Grow(len(head) + 1 + len(payload))
	buf.Write(head)
	buf.WriteByte('\n')
	buf.Write(payload)
	path := recordPath(dir, seq)
	// Not synced here: most records are removed at once (see Keep).
	if err := atomicfile.Write(path, buf.Bytes(), atomicfile.Options{NoSync: true}); err != nil {
		return 0, "", fmt.Errorf("spool: %w", err)
	}
	if err := writeSeq(lock, seq); err != nil {
		return 0, "", err
	}
	return seq, path, nil
}

// Keep makes a record that stays in the spool durable: its bytes, then its
// name in the directory, so it survives an OS crash or a power loss, not
// only the death of kimi-hook.
func Keep(path string) error {
	f, err := safefile.OpenFile(path, os.O_RDWR, 0) // Windows flushes no read-only handle
	if err != nil {
		return fmt.Errorf("spool: %w", err)
	}
	err = syncmode.FileSync(f)
	f.Close()
	if err == nil {
		err = atomicfile.SyncDir(filepath.Dir(path))
	}
	if err != nil {
		return fmt.Errorf("spool: keep %s: %w", filepath.Base(path), err)
	}
	return nil
}

func recordPath(dir string, seq uint64) string {
	return filepath.Join(dir, fmt.Sprintf("%020d%s", seq, Ext))
}

// readSeq reads the last number handed out from the (locked) counter file.
func readSeq(f *os.File) uint64 {
	buf := make([]byte, 24)
	n, _ := f.ReadAt(buf, 0)
	v, _ := strconv.ParseUint(strings.TrimSpace(string(buf[:n])), 10, 64)
	return v
}

// writeSeq records the last number handed out; fixed width, so a shorter
// number never leaves digits of a longer one behind.
func writeSeq(f *os.File, seq uint64) error {
	if _, err := f.WriteAt([]byte(fmt.Sprintf("%020d\n", seq)), 0); err != nil {
		return fmt.Errorf("spool: %w", err)
	}
	return nil
}

// List returns the record files in spool order.
func List(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("spool: %w", err)
	}
	var out []string
	for _, e := range entries {
		n := e.Name()
		if e.Type().IsRegular() && strings.HasSuffix(n, Ext) && !strings.HasPrefix(n, ".") {
			out = append(out, filepath.Join(dir, n))
		}
	}
	sort.Strings(out) // zero-padded sequence numbers sort numerically
	return out, nil
}

// ErrCorrupt marks a record whose header cannot be read.
var ErrCorrupt = errors.New("corrupt spool record")

// Read loads one record; a link in its place is refused (safefile.ErrLink).
func Read(path string) (Record, error) {
	b, err := safefile.ReadFile(path)
	if err != nil {
		return Record{}, fmt.Errorf("spool: %w", err)
	}
	i := bytes.IndexByte(b, '\n')
	if i < 0 {
		return Record{Path: path, Payload: b}, fmt.Errorf("%w: %s has no header line", ErrCorrupt, filepath.Base(path))
	}
	r := Record{Path: path, Payload: b[i+1:]}
	if err := json.Unmarshal(b[:i], &r.Header); err != nil || r.V != 1 {
		return r, fmt.Errorf("%w: %s: bad header", ErrCorrupt, filepath.Base(path))
	}
	return r, nil
}

// Time returns the record's read time, or fallback when it is unreadable.
func (r Record) Time(fallback time.Time) time.Time {
	t, err := time.Parse(time.RFC3339Nano, r.At)
	if err != nil {
		return fallback
	}
	return t
}

// Remove deletes an ingested record.
func Remove(path string) error {
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("spool: %w", err)
	}
	return nil
}

// Quarantine moves a record that cannot be ingested out of the way, keeping
// it for a person to inspect, with why in a side file (<record>.reason), and
// returns its new path. The payload is raw and unredacted: PruneQuarantine
// bounds what is kept.
func Quarantine(path, reason string) (string, error) {
	qdir := filepath.Join(filepath.Dir(path), QuarantineDir)
	if err := safefile.PrivateDir(qdir); err != nil {
		return "", fmt.Errorf("spool: %w", err)
	}
	dst := filepath.Join(qdir, filepath.Base(path))
	if err := os.Rename(path, dst); err != nil {
		return "", fmt.Errorf("spool: %w", err)
	}
	if len(reason) > maxReason {
		reason = reason[:maxReason]
	}
	// The reason is a note for a person: the record is kept without it.
	atomicfile.Write(dst+ReasonExt, []byte(strings.ToValidUTF8(reason, "?")+"\n"), atomicfile.Options{NoSync: true}) //nolint:errcheck // best effort
	return dst, nil
}

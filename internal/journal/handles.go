package journal

import (
	"container/list"
	"errors"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/aep-kimi/aep-kimi/internal/atomicfile"
	"github.com/aep-kimi/aep-kimi/internal/syncmode"
)

// DefaultMaxOpenLogs bounds the log files an emitter keeps open at once. A
// busy machine runs a handful of live sessions; thousands of idle ones must
// not cost a file descriptor each.
const DefaultMaxOpenLogs = 256

// emfileRetries bounds how many handles an open that hit the process's file
// limit gives back before it reports the error.
const emfileRetries = 8

// Handles is a least-recently-used bound on the open files of the logs it
// made (Handles.NewLog): opening one more than max closes the one written
// longest ago, and that log reopens (append mode) on its next Append. An open
// that fails on the process's file limit gives back the oldest handles and
// tries again. A nil *Handles bounds nothing.
//
// Lock order: a Log's own lock, then the Handles lock; a log evicted to make
// room is closed after both are released, so two logs never wait on each
// other.
type Handles struct {
	max   int
	mu    sync.Mutex
	order list.List // of *Log, most recently written first

	// sync is the mode of the logs made here (SetSync); empty is syncmode.None.
	sync      syncmode.Mode
	syncer    syncmode.Syncer
	onSyncErr func(path string, err error)
	// syncDirFn syncs a directory (nil: atomicfile.SyncDir; tests inject).
	syncDirFn func(dir string) error

	// The logs whose last write or sync failed (OnDurable), counted in
	// nFailing so a success with none failing takes no lock.
	nFailing  atomic.Int64
	dmu       sync.Mutex
	failing   map[*Log]bool
	onDurable func(err error)
}

// OnDurable sets who hears, once per change, that the logs made here
// stopped reaching the disk as their mode promises (err says why: a write
// or a sync failed, a full disk) and that they do again (nil). A log that
// failed counts until it takes a write that reaches the disk as promised
// (a sync, unless the mode is syncmode.None) or is closed: a success on
// another log says nothing of it (a full disk still takes the bytes that
// fit in a log's last page), so the state does not flap with every hook.
// It returns h.
func (h *Handles) OnDurable(fn func(err error)) *Handles {
	h.onDurable = fn
	return h
}

// durable hears whether a write (under syncmode.None) or a sync of l
// reached the disk; it tells OnDurable's function of a change.
func (h *Handles) durable(l *Log, err error) {
	if h == nil || h.onDurable == nil || err == nil && h.nFailing.Load() == 0 {
		return
	}
	h.dmu.Lock()
	defer h.dmu.Unlock()
	before := len(h.failing)
	switch {
	case err != nil:
		if h.failing == nil {
			h.failing = map[*Log]bool{}
		}
		h.failing[l] = true
	case h.failing[l]:
		delete(h.failing, l)
	default:
		return
	}
	h.nFailing.Store(int64(len(h.failing)))
	switch {
	case before == 0 && len(h.failing) > 0:
		h.onDurable(err)
	case before > 0 && len(h.failing) == 0:
		h.onDurable(nil)
	}
}

// SetSync sets when the logs made from now on reach the disk, the syncer
// they use (nil: FileSync) and who hears of a sync that failed with nobody
// waiting on it (syncmode.Interval's; nil: nobody). It returns h.
func (h *Handles) SetSync(mode syncmode.Mode, syncer syncmode.Syncer, onErr func(path string, err error)) *Handles {
	h.sync, h.syncer, h.onSyncErr = mode, syncer, onErr
	return h
}

// NewHandles returns a bound of max open logs (DefaultMaxOpenLogs when max
// is not positive).
func NewHandles(max int) *Handles {
	if max <= 0 {
		max = DefaultMaxOpenLogs
	}
	return &Handles{max: max}
}

// NewLog returns the log of session under dir, its file handle counted
// against h.
func (h *Handles) NewLog(dir, session string) *Log {
	l := NewLog(dir, session)
	l.handles = h
	return l
}

// Open is the number of files open under h.
func (h *Handles) Open() int {
	if h == nil {
		return 0
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.order.Len()
}

// opened records l's new file and returns the logs to close to stay within
// the bound. Callers hold l.mu.
func (h *Handles) opened(l *Log) []*Log {
	if h == nil {
		return nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if l.elem != nil {
		h.order.MoveToFront(l.elem)
	} else {
		l.elem = h.order.PushFront(l)
	}
	var victims []*Log
	for h.order.Len() > h.max {
		victims = append(victims, h.removeLocked(h.order.Back()))
	}
	return victims
}

// touch marks l as just written. A log already taken off the list for
// closing stays off: it reopens, and counts again, on its next Append.
func (h *Handles) touch(l *Log) {
	if h == nil {
		return
	}
	h.mu.Lock()
	if l.elem != nil {
		h.order.MoveToFront(l.elem)
	}
	h.mu.Unlock()
}

// forget drops l from the list (it is closing).
func (h *Handles) forget(l *Log) {
	if h == nil {
		return
	}
	h.mu.Lock()
	if l.elem != nil {
		h.removeLocked(l.elem)
	}
	h.mu.Unlock()
}

// oldest takes the least recently written log off the list, or nil.
func (h *Handles) oldest() *Log {
	if h == nil {
		return nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if e := h.order.Back(); e != nil {
		return h.removeLocked(e)
	}
	return nil
}

func (h *Handles) removeLocked(e *list.Element) *Log {
	l := h.order.Remove(e).(*Log)
	l.elem = nil
	return l
}

// closeAll closes logs taken off the list. A close error of an append-only
// file cannot lose a line already written (write(2) returned), so it is not
// the error of the append that evicted it.
func closeAll(logs []*Log) {
	for _, v := range logs {
		v.Close() //nolint:errcheck // see above
	}
}

// tooManyFiles reports whether err is the process or system file limit.
func tooManyFiles(err error) bool {
	return errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE)
}

// dirSync makes the entries of dir durable. A file system that cannot sync
// a directory at all (EINVAL, ENOTSUP) keeps its names as it does anyway.
func (h *Handles) dirSync(dir string) error {
	sync := atomicfile.SyncDir
	if h != nil && h.syncDirFn != nil {
		sync = h.syncDirFn
	}
	err := sync(dir)
	if errors.Is(err, syscall.EINVAL) || errors.Is(err, syscall.ENOTSUP) {
		return nil
	}
	return err
}

package journal

import (
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/aep-kimi/aep-kimi/internal/safefile"
	"github.com/aep-kimi/aep-kimi/internal/syncmode"
)

// Mark is a point in a log's writes: Wait returns once everything the log
// took up to it is on the disk, as the log's mode promises before an
// acknowledgement (syncmode.Always), or at once (the other modes). A forced
// mark syncs whatever the mode. The zero Mark waits for nothing.
type Mark struct {
	l     *Log
	gen   uint64
	force bool
}

// Forced is m synced before acknowledging whatever the log's mode: for
// answers and decisions, which are never acknowledged before they are on
// the disk.
func (m Mark) Forced() Mark {
	m.force = true
	return m
}

// Wait blocks until the writes up to m are durable (see Mark).
func (m Mark) Wait() error {
	if m.l == nil || m.gen == 0 {
		return nil
	}
	if !m.force && m.l.mode() != syncmode.Always {
		return nil
	}
	return m.l.syncTo(m.gen)
}

// Mark is the point of the log's last write.
func (l *Log) Mark() Mark {
	if l == nil {
		return Mark{}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return Mark{l: l, gen: l.gen}
}

func (l *Log) mode() syncmode.Mode {
	if l.handles == nil || l.handles.sync == "" {
		return syncmode.None
	}
	return l.handles.sync
}

func (l *Log) syncer() syncmode.Syncer {
	if l.handles != nil && l.handles.syncer != nil {
		return l.handles.syncer
	}
	return syncmode.FileSync
}

// syncTo is the log's group commit (syncmode.Group): it returns once a
// sync that began after write gen completed.
func (l *Log) syncTo(gen uint64) error {
	err := l.group.Wait(gen, func() uint64 {
		l.mu.Lock()
		defer l.mu.Unlock()
		return l.gen
	}, func() error {
		l.mu.Lock()
		f := l.f
		l.mu.Unlock()
		err := l.syncFile(f)
		if err != nil && l.handles != nil && l.handles.onSyncErr != nil {
			l.handles.onSyncErr(l.path, err)
		}
		l.handles.durable(l, err)
		return err
	})
	if err != nil {
		return fmt.Errorf("log sync: %w", err)
	}
	return nil
}

// syncFile syncs the log's file through f, or through a fresh descriptor
// when f was closed meanwhile (the Handles bound closes idle logs): a sync
// makes the file's data durable whichever descriptor wrote it.
func (l *Log) syncFile(f *os.File) error {
	if f != nil {
		err := l.syncer()(f)
		if !errors.Is(err, os.ErrClosed) {
			return err
		}
	}
	g, err := safefile.OpenFile(l.path, os.O_RDWR, 0) // Windows flushes no read-only handle
	if err != nil {
		return err
	}
	defer g.Close()
	return l.syncer()(g)
}

// wrote is told of each write (the log's lock released): unless the mode
// is syncmode.None it schedules a sync within syncmode.Every when none is pending, so
// under syncmode.Always too what no acknowledgement waited for (an event the
// source synthesized) reaches the disk within that bound.
func (l *Log) wrote() {
	if l.mode() == syncmode.None {
		return
	}
	l.smu.Lock()
	defer l.smu.Unlock()
	if l.timerSet {
		return
	}
	l.timerSet = true
	time.AfterFunc(syncmode.Every, func() {
		l.smu.Lock()
		l.timerSet = false
		l.smu.Unlock()
		l.mu.Lock()
		gen := l.gen
		l.mu.Unlock()
		l.syncTo(gen) //nolint:errcheck // nobody waits here: the Handles' onSyncErr hears of a failure
	})
}

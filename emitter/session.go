package emitter

import (
	"sort"
	"sync"
	"time"

	"github.com/aep-kimi/aep-kimi/aep"
	"github.com/aep-kimi/aep-kimi/internal/journal"
	"github.com/aep-kimi/aep-kimi/mapping"
)

// Session is the core's part of one session: its lock, its stream and its
// place in the table. A source's session type embeds it, so the source's
// own state is guarded by the same lock.
type Session struct {
	mu sync.Mutex
	// key is the session's key in the table; id names its stream.
	key string
	id  Identity
	// stream is set on first touch, before the session is handed out.
	stream *journal.Stream
	// evicted is set when the session left the table; whoever still holds
	// it looks it up again.
	evicted bool
	// active is the source's last sign of life for the session (Touch).
	active time.Time
}

// Identity names a session's stream: its AEP session and the source URI of
// its first chapter.
type Identity struct {
	Session, Source string
}

// Member is a source's session type: a pointer to a struct embedding
// Session.
type Member interface {
	Core() *Session
}

// Core is the embedded Session itself.
func (s *Session) Core() *Session { return s }

// Lock, TryLock and Unlock guard the session: its stream and every field
// of the source's state. A source holds the lock whenever it emits.
func (s *Session) Lock()         { s.mu.Lock() }
func (s *Session) TryLock() bool { return s.mu.TryLock() }
func (s *Session) Unlock()       { s.mu.Unlock() }

// Key is the session's key in the table.
func (s *Session) Key() string { return s.key }

// Name is the AEP session the session's events carry.
func (s *Session) Name() string { return s.id.Session }

// Stream sequences, logs and publishes the session's events. Callers hold
// the lock.
func (s *Session) Stream() *journal.Stream { return s.stream }

// Touch records a sign of life at t; idle eviction, idle closing and the
// eviction order count from the latest. Callers hold the lock.
func (s *Session) Touch(t time.Time) { s.active = t }

// LastActive is the latest Touch. Callers hold the lock.
func (s *Session) LastActive() time.Time { return s.active }

// NextChapter switches the stream to the source of the session's next
// chapter, its positions continuing (journal.NextChapter): a session that
// ended and came back. Callers hold the lock.
func (s *Session) NextChapter() {
	s.stream.SetSource(journal.NextChapter(s.id.Source, s.stream.Source()))
}

// Lock returns key's session, locked, building it on first touch: the
// source's New, then its state folded back from the tail of its log
// (Source.Fold), the stream going on in the log's latest chapter. The
// caller unlocks it.
func (c *Core[S]) Lock(key string) S {
	for {
		c.mu.Lock()
		s, ok := c.sessions[key]
		if !ok {
			// Locked before anyone can see it (so uncontended), and
			// nobody is handed a session whose state is not recovered.
			s = c.create(key)
			c.mu.Unlock()
			c.recover(s)
			return s
		}
		c.mu.Unlock()
		b := s.Core()
		b.mu.Lock()
		if !b.evicted {
			return s
		}
		b.mu.Unlock() // evicted between the lookup and the lock: take the fresh one
	}
}

// create builds key's session, locked, and enters it in the table. Callers
// hold c.mu.
func (c *Core[S]) create(key string) S {
	s, id := c.src.New(key)
	b := s.Core()
	b.mu.Lock() // nobody else has it yet
	b.key, b.id = key, id
	if b.active.IsZero() {
		b.active = c.cfg.Now()
	}
	b.stream = journal.NewStream(journal.StreamConfig{
		Source: id.Source, Agent: mapping.Agent, Session: id.Session, Epoch: c.epoch,
		Log:       c.handles.NewLog(c.spec.LogDir, id.Session).OnRepair(c.tornTail),
		Publisher: c.cfg.Publisher, Counters: c.metrics, Logger: c.log, NewID: c.spec.NewID,
	})
	c.sessions[key] = s
	c.evictOverCap(s)
	return s
}

// recover folds the tail of a new session's log back into its state.
// Callers hold its lock.
func (c *Core[S]) recover(s S) {
	b := s.Core()
	last := ""
	b.stream.Recover(RecoveryTail, func(ev *aep.Event) {
		last = ev.Source
		c.src.Fold(s, ev)
	})
	if journal.IsChapter(b.id.Source, last) {
		b.stream.SetSource(last) // a later chapter goes on
	}
}

// Has reports whether key's session is in memory.
func (c *Core[S]) Has(key string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.sessions[key]
	return ok
}

// Keys lists the sessions in memory, sorted.
func (c *Core[S]) Keys() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	keys := make([]string, 0, len(c.sessions))
	for k := range c.sessions {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// Each calls fn with every session in memory, each locked in turn (a
// snapshot of the table, then one lock at a time); a session evicted
// meanwhile is passed over. fn must not lock another session.
func (c *Core[S]) Each(fn func(S)) {
	c.mu.Lock()
	all := make([]S, 0, len(c.sessions))
	for _, s := range c.sessions {
		all = append(all, s)
	}
	c.mu.Unlock()
	for _, s := range all {
		b := s.Core()
		b.mu.Lock()
		if !b.evicted {
			fn(s)
		}
		b.mu.Unlock()
	}
}

// CloseAll closes every session's log; a session written again reopens it.
func (c *Core[S]) CloseAll() {
	c.Each(func(s S) { c.closeLog(s.Core()) })
}

// CloseIdle closes the log of every session not touched since before (it
// reopens, appending, on the next event), so a source that has seen many
// sessions does not hold a descriptor for each. A session busy right now
// (its lock held) is not idle.
func (c *Core[S]) CloseIdle(before time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, s := range c.sessions {
		b := s.Core()
		if !b.mu.TryLock() {
			continue
		}
		if b.active.Before(before) {
			c.closeLog(b)
		}
		b.mu.Unlock()
	}
}

// Sweep applies the idle bounds of the Spec: sessions idle past IdleEvict
// leave memory (when the source lets them, Evictor), and those idle past
// IdleClose have their logs closed.
func (c *Core[S]) Sweep() {
	now := c.cfg.Now()
	if c.spec.IdleEvict > 0 {
		c.mu.Lock()
		for _, s := range c.sessions {
			b := s.Core()
			if !b.mu.TryLock() {
				continue // busy right now: not idle
			}
			if now.Sub(b.active) > c.spec.IdleEvict && c.evictable(s) {
				c.evictLocked(s)
			}
			b.mu.Unlock()
		}
		c.mu.Unlock()
	}
	if c.spec.IdleClose > 0 {
		c.CloseIdle(now.Add(-c.spec.IdleClose))
	}
}

// Evict drops key's session from memory whatever it holds, as a restart
// would; its log stays.
func (c *Core[S]) Evict(key string) {
	c.mu.Lock()
	s, ok := c.sessions[key]
	c.mu.Unlock()
	if !ok {
		return
	}
	b := s.Core()
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.evicted {
		c.mu.Lock()
		c.evictLocked(s)
		c.mu.Unlock()
	}
}

// Evictor is implemented by a source whose sessions may hold something a
// reply waits on, which keeps them in memory.
type Evictor[S Member] interface {
	// Evictable reports whether s may leave memory now. Callers hold its
	// lock.
	Evictable(s S) bool
	// Evicted is told that s left memory. Callers hold its lock and the
	// table's.
	Evicted(s S)
}

func (c *Core[S]) evictable(s S) bool {
	if e, ok := c.src.(Evictor[S]); ok {
		return e.Evictable(s)
	}
	return true
}

// evictOverCap brings the sessions in memory back under MaxSessions,
// longest-idle first, with an eighth of headroom so a flood of new sessions
// scans once per many, not on each. A session busy right now (its lock
// held), or one the source keeps, stays. Callers hold c.mu.
func (c *Core[S]) evictOverCap(keep S) {
	max := c.spec.MaxSessions
	if max <= 0 || len(c.sessions) <= max {
		return
	}
	target := max - max/8
	type idle struct {
		s    S
		last time.Time
	}
	var cands []idle
	for _, s := range c.sessions {
		b := s.Core()
		if b == keep.Core() || !b.mu.TryLock() {
			continue
		}
		if c.evictable(s) {
			cands = append(cands, idle{s, b.active})
		}
		b.mu.Unlock()
	}
	sort.Slice(cands, func(i, j int) bool { return cands[i].last.Before(cands[j].last) })
	for _, cand := range cands {
		if len(c.sessions) <= target {
			break
		}
		b := cand.s.Core()
		if !b.mu.TryLock() {
			continue
		}
		if c.evictable(cand.s) {
			c.evictLocked(cand.s)
		}
		b.mu.Unlock()
	}
}

// evictLocked drops a session from memory; its log stays, and its state
// comes back from the log's tail on its next touch. Callers hold c.mu and
// the session's lock.
func (c *Core[S]) evictLocked(s S) {
	b := s.Core()
	c.closeLog(b)
	b.evicted = true
	delete(c.sessions, b.key)
	if e, ok := c.src.(Evictor[S]); ok {
		e.Evicted(s)
	}
	c.metrics.evicted.Inc()
}

// closeLog closes a session's log file. Callers hold its lock.
func (c *Core[S]) closeLog(b *Session) {
	if err := b.stream.Log().Close(); err != nil {
		c.log.Error("closing a session log", "session", b.id.Session, "err", err)
	}
}

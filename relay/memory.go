package relay

import (
	"context"
	"hash/maphash"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/aep-kimi/aep-kimi/aep"
	"github.com/aep-kimi/aep-kimi/relay/wire"
)

// Memory layout. A session's history is a list of entry chunks in position
// order plus byte arenas holding the events' wire bytes. Both only ever grow
// at the tail while shared: a replay snapshot keeps slices of the chunks it
// covers and reads them without the lock, because nothing below a chunk's
// length at snapshot time is written again. Trimming moves a head index; an
// out-of-order insert copies the chunks from the insertion point on
// (copy-on-write), which is rare because emitters send in order.
const (
	firstChunkLen = 8
	maxChunkLen   = 256
	minArena      = 1 << 10
	maxArena      = 64 << 10
	// maxInterned bounds a session's table of distinct types and sources;
	// past it an entry's type or source is read back from its bytes.
	maxInterned = 1<<16 - 1
	noIntern    = maxInterned
)

// entry is one held event: its bytes and what replay needs without parsing.
type entry struct {
	raw []byte
	pos wire.Position
	// gseq is the store's order: the durable store's sequence when it
	// keeps one (Message.StoreSeq), else the admission count. The byte
	// budget trims the lowest first; a durable store may drop what lies
	// below a session's lowest.
	gseq    uint64
	hash    uint64 // of (source, id), the admission dedupe key
	typ     uint16 // index into history.strs
	src     uint16
	sev     aep.Severity
	capt    aep.Capture
	foreign bool
}

type chunk struct{ ents []entry }

// history is what the memory store holds of one session: its bounded
// replay history, the dedupe keys of what it holds, and its place in the
// eviction order.
type history struct {
	name       string
	prev, next *history // LRU list; next is more recently written
	chunks     []*chunk
	head       int // first live entry in chunks[0]
	n          int
	bytes      int64
	arena      []byte
	ids        map[uint64]struct{}
	strs       []string // interned types and sources, append-only
	strIndex   map[string]uint16
	lastWrite  time.Time
	latest     wire.Position // highest positioned entry held
	hasLatest  bool
	trimmedMax wire.Position // highest positioned entry trimmed
	// unreported counts trims since the store last heard of this session's
	// floor (see MemoryBackend.trimmed).
	unreported int
	maxGseq    uint64 // highest gseq ever admitted to the session
}

// MemoryBackend is the in-memory Backend: per-session bounded buffers and a
// single lock over history and fan-out, which keeps every subscriber's view
// in one global ingest order.
//
// Three caps bound it: events per session (the oldest are trimmed), sessions
// (the least recently written is evicted), and the wire bytes held across
// all sessions (the buffer's oldest events, by admission order, are trimmed,
// exactly as the per-session cap trims: a consumer resuming from a trimmed
// position is told replay-exhausted).
type MemoryBackend struct {
	depth, maxSessions int
	maxBytes           int64
	seed               maphash.Seed
	now                func() time.Time

	mu       sync.Mutex
	sessions map[string]*history
	oldest   *history // LRU head
	newest   *history
	// groups holds the live subscribers, those sharing a filter (by
	// SubscribeRequest.filterKey) in one group, whose filter is matched
	// once per ingested message for all of them.
	groups    []*subGroup
	nSubs     int
	matchBuf  []*Message
	events    int
	bytes     int64
	evictions uint64
	gseq      uint64
	trims     uint64 // entries trimmed by the byte budget

	// evicted, when set, hears of each session the session cap evicts and
	// the store sequence of the message that caused it: a durable store
	// drops what it holds of the session below that sequence. It is called
	// with mu held and must not block.
	evicted func(session string, before uint64)
	// trimmed, when set, hears now and then (every floorEvery trims of a
	// session, and when a trim empties it) of the lowest gseq a session
	// still holds (see history.floor): a durable
	// store may drop what it keeps of the session below it, and still
	// hold every event the index holds, whatever order they arrived in.
	// It is called with mu held and must not block.
	trimmed func(session string, floor uint64)
}

// floorEvery is how many depth trims of one session pass between reports
// of its floor to MemoryBackend.trimmed: a scan of the session's entries
// each time, amortized over this many events.
const floorEvery = 256

type memSub struct {
	sub   Subscriber
	batch batchSubscriber // sub, when it takes batches
}

// subGroup is the subscribers that share one filter.
type subGroup struct {
	key     string // "" for a group of one that no other joins
	filter  *aep.Filter
	members []*memSub
}

// NewMemoryBackend returns an in-memory backend holding up to depth events
// per session and maxSessions sessions (zero takes the Default constants),
// within DefaultBufferBytes.
func NewMemoryBackend(depth, maxSessions int) *MemoryBackend {
	return NewMemoryBackendWithBudget(depth, maxSessions, 0)
}

// NewMemoryBackendWithBudget is NewMemoryBackend holding at most maxBytes
// wire bytes across all sessions (zero takes DefaultBufferBytes).
func NewMemoryBackendWithBudget(depth, maxSessions int, maxBytes int64) *MemoryBackend {
	if maxBytes <= 0 {
		maxBytes = DefaultBufferBytes
	}
	if depth <= 0 {
		depth = DefaultBuffer
	}
	if maxSessions <= 0 {
		maxSessions = DefaultMaxSessions
	}
	return &MemoryBackend{
		depth:       depth,
		maxSessions: maxSessions,
		maxBytes:    maxBytes,
		seed:        maphash.MakeSeed(),
		now:         time.Now,
		sessions:    make(map[string]*history),
	}
}

func (b *MemoryBackend) keyHash(source, id string) uint64 {
	var h maphash.Hash
	h.SetSeed(b.seed)
	h.WriteString(source)
	h.WriteByte(0)
	h.WriteString(id)
	return h.Sum64()
}

// The index contract. A durable store keeps a MemoryBackend as the index
// in front of its stream (JetStreamBackend) and uses it through the
// Backend methods and these alone (and its snapshot, memsnap.go); it
// writes none of the index's fields:
//
//   - onDrop, before first use: whom to tell of what the caps drop;
//   - limits: the bounds the stream is set up with;
//   - heldAlready: which of a batch the index holds, to write only the rest;
//   - ingest: Ingest, with those marks and the caller's wakeList.

// onDrop sets whom b tells of what it drops (see MemoryBackend.evicted and
// MemoryBackend.trimmed); call it before b is used.
func (b *MemoryBackend) onDrop(evicted func(session string, before uint64), trimmed func(session string, floor uint64)) {
	b.evicted, b.trimmed = evicted, trimmed
}

// limits are the events per session, the sessions and the wire bytes b
// holds at most.
func (b *MemoryBackend) limits() (depth, maxSessions int, maxBytes int64) {
	return b.depth, b.maxSessions, b.maxBytes
}

// Ingest implements Backend.
func (b *MemoryBackend) Ingest(msgs []*Message) IngestResult {
	return b.ingest(msgs, nil, nil)
}

// ingestWaking implements wakeDeferrer.
func (b *MemoryBackend) ingestWaking(msgs []*Message, wake *wakeList) IngestResult {
	return b.ingest(msgs, nil, wake)
}

// ingest is Ingest with the messages dup marks taken as duplicates without
// a look (fanned out, never admitted), and the writers it feeds woken
// through wake.
func (b *MemoryBackend) ingest(msgs []*Message, dup []bool, wake *wakeList) IngestResult {
	var res IngestResult
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.now()
	for i, m := range msgs {
		switch {
		case m.Kind == KindAgent || m.Session == "":
			res.LiveOnly++
		case dup != nil && dup[i]:
			res.Duplicates++
		case b.admit(m, now):
			res.Buffered++
		default:
			res.Duplicates++
		}
	}
	// Fanned out after the whole batch is admitted (under the same lock,
	// so a subscription still sees exactly what its replay did not): each
	// filter is matched once per message for its whole group, and a
	// subscriber that takes batches gets its matches in one piece.
	for _, g := range b.groups {
		matched := msgs
		if !g.filter.Empty() {
			matched = b.matchBuf[:0]
			for _, m := range msgs {
				if g.filter.Match(m.Event) {
					matched = append(matched, m)
				}
			}
			b.matchBuf = matched
		}
		if len(matched) == 0 {
			continue
		}
		var run *msgRun
		for _, s := range g.members {
			switch {
			case s.batch == nil:
				for _, m := range matched {
					s.sub.Offer(m)
				}
			case len(g.members) == 1:
				// Nothing to share: queued message by message, which
				// allocates nothing.
				s.batch.offerMsgs(matched, wake)
			default:
				if run == nil {
					run = newMsgRun(slices.Clone(matched))
				}
				s.batch.offerRun(run, wake)
			}
		}
	}
	clear(b.matchBuf[:cap(b.matchBuf)]) // keeps no message alive
	return res
}

// admit holds m in its session unless the session already holds its
// (source, id). The caller holds b.mu.
func (b *MemoryBackend) admit(m *Message, now time.Time) bool {
	s := b.sessions[m.Session]
	if s == nil {
		s = b.newSession(m.Session, m.StoreSeq)
	}
	h := b.keyHash(m.Source, m.ID)
	if _, seen := s.ids[h]; seen && s.holds(h, m.Source, m.ID) {
		return false
	}
	e := entry{
		pos:     m.Pos,
		hash:    h,
		typ:     s.intern(m.Type),
		src:     s.intern(m.Source),
		sev:     m.Severity,
		capt:    m.Capture,
		foreign: m.Kind == KindForeign,
	}
	if e.foreign {
		// Held right after the latest positioned event: commands carry no
		// seq (AEP-0004 §2.2), so arrival decides their place.
		e.pos = s.latest
	}
	e.raw = s.store(m.Raw)
	if e.gseq = m.StoreSeq; e.gseq == 0 {
		b.gseq++
		e.gseq = b.gseq
	}
	s.maxGseq = max(s.maxGseq, e.gseq)
	b.hold(s, e)
	for s.n > b.depth {
		b.trimOne(s)
		s.unreported++
	}
	if b.trimmed != nil && s.unreported >= floorEvery {
		s.unreported = 0
		b.trimmed(s.name, s.floor())
	}
	for b.bytes > b.maxBytes {
		if !b.trimOldest() {
			break
		}
	}
	s.lastWrite = now
	b.touch(s)
	return true
}

// hold places e in s and counts it. The caller holds b.mu.
func (b *MemoryBackend) hold(s *history, e entry) {
	s.ids[e.hash] = struct{}{}
	s.insert(e)
	s.n++
	s.bytes += int64(len(e.raw))
	b.events++
	b.bytes += int64(len(e.raw))
	if !e.foreign && (!s.hasLatest || s.latest.Less(e.pos)) {
		s.latest, s.hasLatest = e.pos, true
	}
}

// heldAlready reports, for each of msgs, whether its session already holds
// its (source, id): a store in front of the index need not write it again.
func (b *MemoryBackend) heldAlready(msgs []*Message) []bool {
	out := make([]bool, len(msgs))
	b.mu.Lock()
	defer b.mu.Unlock()
	for i, m := range msgs {
		s := b.sessions[m.Session]
		if s == nil || m.Kind == KindAgent {
			continue
		}
		h := b.keyHash(m.Source, m.ID)
		_, seen := s.ids[h]
		out[i] = seen && s.holds(h, m.Source, m.ID)
	}
	return out
}

// trimOldest trims the buffer's oldest held entry, by admission order, for
// the byte budget. It scans the sessions' first entries: a session's entries
// are in admission order except after a rare out-of-order insert, so this is
// the oldest or close to it. The caller holds b.mu.
func (b *MemoryBackend) trimOldest() bool {
	var victim *history
	for s := b.oldest; s != nil; s = s.next {
		if s.n > 0 && (victim == nil || s.at(0).gseq < victim.at(0).gseq) {
			victim = s
		}
	}
	if victim == nil {
		return false
	}
	b.trimOne(victim)
	b.trims++
	victim.unreported++
	if victim.n == 0 {
		victim.arena = nil // nothing held refers to it any more
	}
	if b.trimmed != nil && (victim.unreported >= floorEvery || victim.n == 0) {
		victim.unreported = 0
		b.trimmed(victim.name, victim.floor())
	}
	return true
}

// newSession makes room for and links a new session; storeSeq is the store
// sequence of the message creating it (see MemoryBackend.evicted).
func (b *MemoryBackend) newSession(name string, storeSeq uint64) *history {
	for len(b.sessions) >= b.maxSessions && b.oldest != nil {
		if b.evicted != nil {
			b.evicted(b.oldest.name, storeSeq)
		}
		b.evict(b.oldest)
	}
	s := &history{
		name:     name,
		ids:      make(map[uint64]struct{}),
		strIndex: make(map[string]uint16),
	}
	b.sessions[name] = s
	b.linkNewest(s)
	return s
}

func (b *MemoryBackend) evict(s *history) {
	b.unlink(s)
	delete(b.sessions, s.name)
	b.events -= s.n
	b.bytes -= s.bytes
	b.evictions++
}

func (b *MemoryBackend) linkNewest(s *history) {
	s.prev, s.next = b.newest, nil
	if b.newest != nil {
		b.newest.next = s
	} else {
		b.oldest = s
	}
	b.newest = s
}

func (b *MemoryBackend) unlink(s *history) {
	if s.prev != nil {
		s.prev.next = s.next
	} else {
		b.oldest = s.next
	}
	if s.next != nil {
		s.next.prev = s.prev
	} else {
		b.newest = s.prev
	}
	s.prev, s.next = nil, nil
}

func (b *MemoryBackend) touch(s *history) {
	if b.newest == s {
		return
	}
	b.unlink(s)
	b.linkNewest(s)
}

// trimOne drops the oldest held entry of s, and any foreign entries left
// positioned at or before what was trimmed (they were placed relative to it).
func (b *MemoryBackend) trimOne(s *history) {
	e := s.popFront()
	s.n--
	s.bytes -= int64(len(e.raw))
	b.events--
	b.bytes -= int64(len(e.raw))
	delete(s.ids, e.hash)
	if !e.foreign && s.trimmedMax.Less(e.pos) {
		s.trimmedMax = e.pos
	}
	for s.n > 0 {
		f := s.at(0)
		if !f.foreign || s.trimmedMax.Less(f.pos) {
			break
		}
		s.popFront()
		s.n--
		s.bytes -= int64(len(f.raw))
		b.events--
		b.bytes -= int64(len(f.raw))
		delete(s.ids, f.hash)
	}
}

// intern returns the index of v in the session's string table.
func (s *history) intern(v string) uint16 {
	if i, ok := s.strIndex[v]; ok {
		return i
	}
	if len(s.strs) >= maxInterned {
		return noIntern
	}
	i := uint16(len(s.strs))
	s.strs = append(s.strs, v)
	s.strIndex[v] = i
	return i
}

// store copies raw into the session's arena. Arena bytes are never
// rewritten, so the returned slice can be shared.
func (s *history) store(raw []byte) []byte {
	if cap(s.arena)-len(s.arena) < len(raw) {
		size := max(min(2*cap(s.arena), maxArena), minArena)
		if size < len(raw) {
			size = len(raw)
		}
		s.arena = make([]byte, 0, size)
	}
	off := len(s.arena)
	s.arena = append(s.arena, raw...)
	return s.arena[off:len(s.arena):len(s.arena)]
}

// floor is the lowest gseq the session holds; when it holds nothing, one
// past the highest it ever held.
func (s *history) floor() uint64 {
	if s.n == 0 {
		return s.maxGseq + 1
	}
	var low uint64
	for ci, c := range s.chunks {
		lo := 0
		if ci == 0 {
			lo = s.head
		}
		for i := lo; i < len(c.ents); i++ {
			if g := c.ents[i].gseq; low == 0 || g < low {
				low = g
			}
		}
	}
	return low
}

// at returns the i-th live entry.
func (s *history) at(i int) *entry {
	i += s.head
	for _, c := range s.chunks {
		if i < len(c.ents) {
			return &c.ents[i]
		}
		i -= len(c.ents)
	}
	return &entry{} // unreachable: callers pass i < s.n
}

func (s *history) popFront() entry {
	c := s.chunks[0]
	e := c.ents[s.head]
	s.head++
	if s.head == len(c.ents) {
		s.chunks[0] = nil
		s.chunks = s.chunks[1:]
		s.head = 0
	}
	return e
}

// holds reports whether a held entry with hash h is (source, id). The hash
// set answers almost every lookup; this confirms a hit by reading the
// candidates back, newest first (redeliveries are usually recent).
func (s *history) holds(h uint64, source, id string) bool {
	for ci := len(s.chunks) - 1; ci >= 0; ci-- {
		c := s.chunks[ci]
		lo := 0
		if ci == 0 {
			lo = s.head
		}
		for i := len(c.ents) - 1; i >= lo; i-- {
			e := &c.ents[i]
			if e.hash != h {
				continue
			}
			if ev, err := aep.ParseEvent(e.raw); err == nil && ev.Source == source && ev.ID == id {
				return true
			}
		}
	}
	return false
}

// insert places e after every held entry positioned at or before it.
func (s *history) insert(e entry) {
	if s.n == 0 || !e.pos.Less(s.lastPos()) {
		s.appendTail(e)
		return
	}
	// Out of order: find the first entry positioned after e, then rebuild
	// the chunks from that one's chunk on.
	idx := sort.Search(s.n, func(i int) bool { return e.pos.Less(s.at(i).pos) })
	ci, off := s.locate(idx)
	var tail []entry
	start := 0
	if ci == 0 {
		start = s.head
	}
	for j := ci; j < len(s.chunks); j++ {
		from := 0
		if j == 0 {
			from = s.head
		}
		if j == ci {
			tail = append(tail, s.chunks[j].ents[start:off]...)
			tail = append(tail, e)
			tail = append(tail, s.chunks[j].ents[off:]...)
			continue
		}
		tail = append(tail, s.chunks[j].ents[from:]...)
	}
	s.chunks = s.chunks[:ci:ci]
	if ci == 0 {
		s.head = 0
	}
	for len(tail) > 0 {
		n := min(len(tail), maxChunkLen)
		c := &chunk{ents: make([]entry, n, maxChunkLen)}
		copy(c.ents, tail[:n])
		s.chunks = append(s.chunks, c)
		tail = tail[n:]
	}
}

// locate maps a live index to (chunk, offset within chunk.ents).
func (s *history) locate(i int) (int, int) {
	i += s.head
	for ci, c := range s.chunks {
		if i < len(c.ents) {
			return ci, i
		}
		i -= len(c.ents)
	}
	last := len(s.chunks) - 1
	return last, len(s.chunks[last].ents)
}

func (s *history) lastPos() wire.Position {
	c := s.chunks[len(s.chunks)-1]
	return c.ents[len(c.ents)-1].pos
}

func (s *history) appendTail(e entry) {
	if len(s.chunks) == 0 || len(s.chunks[len(s.chunks)-1].ents) == cap(s.chunks[len(s.chunks)-1].ents) {
		size := firstChunkLen
		if len(s.chunks) > 0 {
			size = min(2*cap(s.chunks[len(s.chunks)-1].ents), maxChunkLen)
		}
		s.chunks = append(s.chunks, &chunk{ents: make([]entry, 0, size)})
	}
	c := s.chunks[len(s.chunks)-1]
	c.ents = append(c.ents, e)
}

// earliest returns the first positioned entry's position.
func (s *history) earliest() (wire.Position, bool) {
	for ci, c := range s.chunks {
		lo := 0
		if ci == 0 {
			lo = s.head
		}
		for i := lo; i < len(c.ents); i++ {
			if !c.ents[i].foreign {
				return c.ents[i].pos, true
			}
		}
	}
	return wire.Position{}, false
}

// firstAfter returns the live index of the first entry a consumer that has
// processed p has not seen: positioned after p, or foreign and held at p.
func (s *history) firstAfter(p wire.Position) int {
	return sort.Search(s.n, func(i int) bool {
		e := s.at(i)
		return p.Less(e.pos) || e.foreign && e.pos == p
	})
}

// snapshot returns slices covering live entries from index i on; they stay
// valid without the lock.
func (s *history) snapshot(i int) [][]entry {
	var out [][]entry
	ci, off := s.locate(i)
	for j := ci; j < len(s.chunks); j++ {
		ents := s.chunks[j].ents
		if j == ci {
			ents = ents[off:]
		}
		if len(ents) > 0 {
			out = append(out, ents[:len(ents):len(ents)])
		}
	}
	return out
}

// Subscribe implements Backend.
func (b *MemoryBackend) Subscribe(req SubscribeRequest, sub Subscriber) (func(), error) {
	r := &memReplay{filter: req.Filter}
	b.mu.Lock()
	switch {
	case req.From.All:
		for s := b.oldest; s != nil; s = s.next {
			if s.n > 0 {
				r.parts = append(r.parts, replayPart{session: s.name, strs: s.strs, ranges: s.snapshot(0)})
			}
		}
	default:
		for _, p := range req.From.Positions {
			s := b.sessions[p.Session]
			if s == nil {
				continue
			}
			if s.n == 0 {
				// The byte budget trimmed the whole session: what followed
				// p is gone if anything after p was trimmed.
				if p.Position.Less(s.trimmedMax) {
					next := wire.Position{Epoch: s.trimmedMax.Epoch, Seq: s.trimmedMax.Seq + 1}
					r.exhausted = append(r.exhausted, Exhausted{Session: s.name, Requested: p.Position, Earliest: next})
				}
				continue
			}
			if first, ok := s.earliest(); ok && p.Position.Less(first) && first != (wire.Position{Epoch: p.Epoch, Seq: p.Seq + 1}) {
				// What followed p may be gone: the buffer starts later than
				// the next position (AEP-0003 §5).
				r.exhausted = append(r.exhausted, Exhausted{Session: s.name, Requested: p.Position, Earliest: first})
			}
			if i := s.firstAfter(p.Position); i < s.n {
				r.parts = append(r.parts, replayPart{session: s.name, strs: s.strs, ranges: s.snapshot(i)})
			}
		}
	}
	sub.Start(r)
	ms := &memSub{sub: sub}
	ms.batch, _ = sub.(batchSubscriber)
	g := b.join(req, ms)
	b.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			b.mu.Lock()
			defer b.mu.Unlock()
			b.leave(g, ms)
		})
	}, nil
}

// join adds ms to the group of its filter, or to a new one. The caller
// holds b.mu.
func (b *MemoryBackend) join(req SubscribeRequest, ms *memSub) *subGroup {
	b.nSubs++
	key := req.filterKey
	if ms.batch == nil {
		key = "" // grouped only with subscribers that take batches
	}
	if key != "" {
		for _, g := range b.groups {
			if g.key == key {
				g.members = append(g.members, ms)
				return g
			}
		}
	}
	g := &subGroup{key: key, filter: req.Filter, members: []*memSub{ms}}
	b.groups = append(b.groups, g)
	return g
}

// leave removes ms from g, and g once empty. The caller holds b.mu.
func (b *MemoryBackend) leave(g *subGroup, ms *memSub) {
	b.nSubs--
	g.members = removeOne(g.members, ms)
	if len(g.members) == 0 {
		b.groups = removeOne(b.groups, g)
	}
}

// removeOne removes x from s, not keeping order.
func removeOne[T comparable](s []T, x T) []T {
	for i, y := range s {
		if y == x {
			last := len(s) - 1
			s[i] = s[last]
			var zero T
			s[last] = zero
			return s[:last]
		}
	}
	return s
}

// Sessions implements Backend.
func (b *MemoryBackend) Sessions() []SessionInfo {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make([]SessionInfo, 0, len(b.sessions))
	for s := b.oldest; s != nil; s = s.next {
		info := SessionInfo{Session: s.name, Events: s.n, Bytes: s.bytes, LastWrite: s.lastWrite, Latest: s.latest}
		info.Earliest, _ = s.earliest()
		out = append(out, info)
	}
	return out
}

// Stats implements Backend.
func (b *MemoryBackend) Stats() BackendStats {
	b.mu.Lock()
	defer b.mu.Unlock()
	return BackendStats{
		Sessions:    len(b.sessions),
		Events:      b.events,
		Bytes:       b.bytes,
		Subscribers: b.nSubs,
		Evictions:   b.evictions,
		MaxBytes:    b.maxBytes,
		BudgetTrims: b.trims,
	}
}

type replayPart struct {
	session string
	strs    []string
	ranges  [][]entry
}

type memReplay struct {
	filter    *aep.Filter
	exhausted []Exhausted
	parts     []replayPart
}

func (r *memReplay) Exhausted() []Exhausted { return r.exhausted }

func (r *memReplay) Each(ctx context.Context, fn func(*Message) error) error {
	var m Message
	n := 0
	for _, p := range r.parts {
		for _, ents := range p.ranges {
			for i := range ents {
				if n++; n&255 == 0 {
					if err := ctx.Err(); err != nil {
						return err
					}
				}
				e := &ents[i]
				m = Message{
					Raw:      e.raw,
					Session:  p.session,
					Pos:      e.pos,
					Kind:     KindSession,
					Severity: e.sev,
					Capture:  e.capt,
				}
				if e.foreign {
					m.Kind = KindForeign
				}
				if e.typ != noIntern {
					m.Type = p.strs[e.typ]
				}
				if e.src != noIntern {
					m.Source = p.strs[e.src]
				}
				if !r.filter.Empty() || e.typ == noIntern || e.src == noIntern {
					ev, err := m.Envelope()
					if err != nil {
						continue // held bytes always parsed once; unreachable
					}
					m.Type, m.Source, m.ID = ev.Type, ev.Source, ev.ID
					if !r.filter.Match(ev) {
						continue
					}
				}
				if err := fn(&m); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

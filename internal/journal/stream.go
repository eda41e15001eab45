package journal

import (
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/aep-kimi/aep-kimi/aep"
	"github.com/aep-kimi/aep-kimi/mapping"
)

// Publisher takes sequenced events toward a relay. Publish must not block:
// it is called inside a stream's critical section.
type Publisher interface {
	Publish(ev *aep.Event)
}

// PublisherStatus is the optional health a Publisher can report.
type PublisherStatus interface {
	State() string
	OutboxDepth() int
	Drops() uint64
}

// Counters count what streams emit; an emitter's metrics implement it.
type Counters interface {
	// Emitted counts one sequenced event of type typ.
	Emitted(typ string)
	// AppendFailed counts one event the log could not take.
	AppendFailed()
	// RecoveryIncomplete counts one log whose recovery passed over lines
	// or could not read it to its end.
	RecoveryIncomplete()
}

// StreamConfig is everything one session's stream is built from.
type StreamConfig struct {
	// Source, Agent and Session are the envelope's stream identity.
	Source, Agent, Session string
	// Epoch is the emitter run's epoch (NextEpoch).
	Epoch int64
	// Log is the session's log; it takes every sequenced event.
	Log *Log
	// Publisher sends events toward a relay; nil publishes nothing.
	Publisher Publisher
	// Counters counts emits and failed appends; nil counts nothing.
	Counters Counters
	// Logger reports events that could not be built or logged.
	Logger *slog.Logger
	// NewID assigns event ids; nil means aep.NewID.
	NewID func() string
}

// Stream is one session's event stream: it owns the session's seq, epoch,
// log and publisher, and Emit is the one place an event is sequenced. Seq
// assignment, the log append and the publish happen in one call, so log
// order, seq order and publish order are one order. Not safe for concurrent
// use: its owner serializes calls (one writer per session).
type Stream struct {
	cfg StreamConfig
	seq int64

	// An open batch (Begin) holds sealed lines and their events until
	// Commit writes them in one append.
	batching   bool
	batchStart int64
	durable    bool // an entry of the open batch is Durable
	lines      [][]byte
	events     []*aep.Event
}

// NewStream starts a session's stream at seq 0.
func NewStream(cfg StreamConfig) *Stream {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.NewID == nil {
		cfg.NewID = aep.NewID
	}
	return &Stream{cfg: cfg}
}

// Ext is one extension attribute (AEP-0001 §5.4) an entry carries.
type Ext struct {
	Name  string
	Value any // string, integer or boolean
}

// Entry is one event to sequence: what it says (the mapped event) and the
// identity only its emitter knows. Source, session, seq and epoch come from
// the stream.
type Entry struct {
	Event mapping.Event
	// ID is the event id; empty assigns a new one.
	ID string
	// At is the moment the event describes.
	At time.Time
	// Run, Cause and Subject are set when non-empty; Subject overrides the
	// mapped event's own.
	Run, Cause, Subject string
	Ext                 []Ext
	// Durable puts the event (and all the log holds before it) on the disk
	// before it is published, whatever the log's Sync mode: an answer or a
	// decision is never acknowledged before it would survive a power loss.
	Durable bool
}

// Emit builds, seals, sequences, logs, publishes and counts one event. It
// returns the event, or nil when it could not be built (logged; no seq is
// spent). A Durable entry is synced before it is published; when it cannot
// be appended or synced it is not published either and Emit returns nil
// (an answer is never acknowledged before it is on the disk; a position
// the log did not take is handed out again). For other entries a failed
// append or sync is counted and the event still publishes: the log is a
// record, the relay a separate path. Neither is logged here, event by
// event: the log line is the emitter's, one per change (Handles.OnDurable).
func (s *Stream) Emit(e Entry) *aep.Event {
	ev := &aep.Event{
		Session: s.cfg.Session,
		Run:     e.Run,
		Seq:     aep.Int64(s.seq),
		Epoch:   aep.Int64(s.cfg.Epoch),
		Cause:   e.Cause,
	}
	line := s.build(ev, e)
	if line == nil {
		return nil
	}
	s.seq++
	if s.batching {
		s.lines = append(s.lines, line)
		s.events = append(s.events, ev)
		s.durable = s.durable || e.Durable
		return ev
	}
	err := s.cfg.Log.Append(line)
	appended := err == nil
	if appended && e.Durable {
		err = s.cfg.Log.Mark().Forced().Wait()
	}
	if err != nil {
		if s.cfg.Counters != nil {
			s.cfg.Counters.AppendFailed()
		}
		if e.Durable {
			if !appended {
				s.seq--
			}
			return nil
		}
	}
	s.publish(ev)
	return ev
}

// Mark is the point of the stream's last logged event: its Wait returns
// once every event logged so far is on the disk as the log's Sync mode
// promises before an acknowledgement. Acknowledge a hook after it, never
// under the session's lock, so the hooks arriving meanwhile share a sync.
func (s *Stream) Mark() Mark { return s.cfg.Log.Mark() }

// build completes ev from the entry and the stream's identity and seals it;
// it returns the sealed line, or nil (logged) when the event cannot be built.
func (s *Stream) build(ev *aep.Event, e Entry) []byte {
	m := e.Event
	ev.ID, ev.Time, ev.Source, ev.Agent = e.ID, aep.FormatTime(e.At), s.cfg.Source, s.cfg.Agent
	if ev.ID == "" {
		ev.ID = s.cfg.NewID()
	}
	if err := m.Envelope(ev); err != nil {
		s.cfg.Logger.Error("mapping produced an unencodable event", "type", m.Type, "err", err)
		return nil
	}
	if e.Subject != "" {
		ev.Subject = e.Subject
	}
	for _, x := range e.Ext {
		if err := ev.SetExt(x.Name, x.Value); err != nil {
			s.cfg.Logger.Error("extension attribute refused", "type", m.Type, "err", err)
			return nil
		}
	}
	line, err := ev.Seal()
	if err != nil {
		s.cfg.Logger.Error("event did not serialize", "type", m.Type, "err", err)
		return nil
	}
	return line
}

func (s *Stream) publish(ev *aep.Event) {
	if p := s.cfg.Publisher; p != nil {
		p.Publish(ev)
	}
	if s.cfg.Counters != nil {
		s.cfg.Counters.Emitted(ev.Type)
	}
}

// EmitAgent builds, seals, publishes and counts one agent-scoped event
// (agent.*: presence, health). AEP orders those by time alone, so they carry
// no session, run or seq and spend no position; they are live status, not
// session history, so they are not logged. It returns nil when the event
// could not be built (logged).
func (s *Stream) EmitAgent(e Entry) *aep.Event {
	if aep.ScopeOf(e.Event.Type) != aep.ScopeAgent {
		s.cfg.Logger.Error("not an agent-scoped event", "type", e.Event.Type)
		return nil
	}
	ev := &aep.Event{}
	if s.build(ev, e) == nil {
		return nil
	}
	s.publish(ev)
	return ev
}

// Begin opens a batch: the events emitted until Commit are sequenced and
// returned at once, but reach the log in one append at Commit, and are
// published and counted only once they are there. What one hook delivery
// produces is one batch, so it is durable whole or not at all.
func (s *Stream) Begin() {
	s.batching, s.batchStart = true, s.seq
}

// Commit ends the batch: it appends its events to the log in one write
// (synced first when one of them is Durable), then publishes and counts
// them. When the append fails, none of them happened: nothing is
// published, the seqs they took are handed out again, the log still ends
// at its last whole line (what a full disk let through is cut back, see
// Log), so the next batch starts a line of its own, and the error (the
// caller answers not-durable) is returned.
func (s *Stream) Commit() error {
	if !s.batching {
		return nil
	}
	lines, events, durable := s.lines, s.events, s.durable
	defer s.endBatch()
	if len(lines) == 0 {
		return nil
	}
	err := s.cfg.Log.AppendLines(lines)
	if err == nil && durable {
		// Written, but not durable: told apart from an append refused, yet
		// nothing of it is published either. Its seqs stay spent: the
		// lines are in the file.
		if err = s.cfg.Log.Mark().Forced().Wait(); err != nil {
			return fmt.Errorf("session %q: %d event(s) written but not synced: %w", s.cfg.Session, len(lines), err)
		}
	}
	if err != nil {
		s.seq = s.batchStart
		if s.cfg.Counters != nil {
			for range lines {
				s.cfg.Counters.AppendFailed()
			}
		}
		return fmt.Errorf("session %q: %d event(s) not durable: %w", s.cfg.Session, len(lines), err)
	}
	for _, ev := range events {
		s.publish(ev)
	}
	return nil
}

// Abort ends the batch without writing it: its events never happened and
// the seqs they took are handed out again.
func (s *Stream) Abort() {
	if !s.batching {
		return
	}
	s.seq = s.batchStart
	s.endBatch()
}

// endBatch leaves batch mode, keeping the buffers' capacity for the next.
func (s *Stream) endBatch() {
	s.batching, s.durable = false, false
	clear(s.lines)
	clear(s.events)
	s.lines, s.events = s.lines[:0], s.events[:0]
}

// Source is the stream's source URI.
func (s *Stream) Source() string { return s.cfg.Source }

// SetSource changes the source URI of the events emitted from now on, the
// positions continuing: a session that ended and started again is a new
// chapter, which AEP counts as a distinct session sharing the name.
func (s *Stream) SetSource(source string) { s.cfg.Source = source }

// ChapterSegment joins a session's first source and a chapter number: a
// session that ended and started again is a new chapter, its own stream
// identity (AEP allows one session.ended per source and session), its
// positions continuing.
const ChapterSegment = "/chapter/"

// NextChapter is the source of the chapter after the one current is, for a
// session whose first chapter's source is base: base/chapter/2, then 3, ...
func NextChapter(base, current string) string {
	n := 1
	if rest, ok := strings.CutPrefix(current, base+ChapterSegment); ok {
		n, _ = strconv.Atoi(rest)
	}
	return base + ChapterSegment + strconv.Itoa(max(n, 1)+1)
}

// IsChapter reports whether source is a later chapter of the session whose
// first source is base.
func IsChapter(base, source string) bool { return strings.HasPrefix(source, base+ChapterSegment) }

// Log is the stream's log, to close when idle or read back.
func (s *Stream) Log() *Log {
	if s == nil {
		return nil
	}
	return s.cfg.Log
}

// Recover folds the last maxBytes of the stream's log into fn, in file
// order: how a restarted emitter gets a session's state back. What it could
// not read (lines that do not parse, a log that is unreadable or a link) is
// logged and counted, so recovery never misses state silently.
func (s *Stream) Recover(maxBytes int64, fn func(*aep.Event)) {
	skipped, err := Replay(s.cfg.Log.Path(), maxBytes, func(ev *aep.Event) {
		// A stream reopened on a log that already holds this epoch's events
		// (its session was evicted from memory and came back) continues
		// after them: (epoch, seq) never repeats.
		if ev.Epoch != nil && ev.Seq != nil && *ev.Epoch == s.cfg.Epoch {
			s.seq = max(s.seq, *ev.Seq+1)
		}
		fn(ev)
	})
	if skipped == 0 && err == nil {
		return
	}
	s.cfg.Logger.Warn("session log recovery incomplete", "session", s.cfg.Session, "skipped_lines", skipped, "err", err)
	if s.cfg.Counters != nil {
		s.cfg.Counters.RecoveryIncomplete()
	}
}

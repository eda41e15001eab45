package bridgeweb

import (
	"encoding/json"
	"sync"
	"time"

	"github.com/aep-kimi/aep-kimi/aep"
	"github.com/aep-kimi/aep-kimi/internal/journal"
	"github.com/aep-kimi/aep-kimi/mapping"
)

// session is one kap session as the bridge publishes it. Every field is
// guarded by mu, and emit is the one critical section: seq assignment, the
// log append and the publish happen together, so log order, seq order and
// publish order are one order.
type session struct {
	b      *Bridge
	kap    string // kap session id
	id     string // AEP session
	source string

	mu     sync.Mutex
	log    *journal.Log
	seq    int64
	m      *machine
	cur    cursor
	lastAt time.Time
	// archived is set once the kap-server archived (or deleted) the
	// session: it is not re-subscribed on a new connection.
	archived bool
}

func (s *session) isArchived() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.archived
}

func newSession(b *Bridge, kap string) *session {
	s := &session{
		b:      b,
		kap:    kap,
		id:     SessionName(b.cfg.Mode, kap),
		source: SourceURI(b.cfg.Host, kap),
		m:      newMachine(b.cfg.Mode, b.cfg.Posture, b.controlOn(), b.newID),
	}
	s.log = journal.NewLog(LogDir(b.cfg.Home), s.id)
	return s
}

// recoveryTail bounds how much of a session's log is read after a restart.
const recoveryTail = 1 << 20

// recover folds the tail of the session's log back into state: the kap
// position the bridge had reached (so the subscribe resumes there) and the
// runs, tools and asks that were open.
func (s *session) recover() { journal.Replay(s.log.Path(), recoveryTail, s.fold) }

func (s *session) fold(ev *aep.Event) {
	epoch, okE := ev.ExtString(ExtKimiEpoch)
	if raw, okS := ev.Ext[ExtKimiSeq]; okE && okS {
		var seq int64
		if json.Unmarshal(raw, &seq) == nil {
			s.cur.set(epoch, seq)
		}
	}
	s.m.fold(ev)
}

// take runs one durable frame through the cursor and maps what is ready.
// Callers hold s.mu.
func (s *session) take(f mapping.Frame) {
	s.archived = false
	steps, dup := s.cur.offer(f)
	if dup {
		s.b.metrics.duplicates.Inc()
		return
	}
	s.run(steps)
}

// run maps cursor steps in order. Callers hold s.mu.
func (s *session) run(steps []step) {
	for _, st := range steps {
		if st.gap != nil {
			s.emitGap(*st.gap)
			continue
		}
		s.mapFrame(*st.frame)
	}
}

func (s *session) mapFrame(f mapping.Frame) {
	at := s.frameTime(f)
	before := s.m.stale
	for _, d := range s.m.apply(f, at) {
		s.emit(d, at, f.Seq, f.Epoch)
	}
	if n := s.m.stale - before; n > 0 {
		s.b.metrics.staleRuns.Add(float64(n))
		s.b.log.Warn("kap turn started while the previous one never ended (a gap); its run is left without a terminal",
			"session", s.id)
	}
}

// frameTime is the vendor's moment for a frame, or now when it has none
// usable (absent, unparseable, or implausibly in the future).
func (s *session) frameTime(f mapping.Frame) time.Time {
	now := s.b.cfg.Now()
	if t, err := time.Parse(time.RFC3339Nano, f.Timestamp); err == nil && t.Before(now.Add(time.Minute)) && t.Year() > 2000 {
		return t
	}
	return now
}

// emitGap reports frames the bridge will never see.
func (s *session) emitGap(g gap) {
	p := s.b.cfg.Posture
	data := map[string]any{"reason": g.reason, "from_seq": g.from}
	if g.to >= g.from {
		data["to_seq"] = g.to
		data["missed"] = g.to - g.from + 1
	}
	if g.epoch != "" {
		data["kap_epoch"] = g.epoch
	}
	if g.nextEpoch != "" && g.nextEpoch != g.epoch {
		data["next_kap_epoch"] = g.nextEpoch
	}
	ev := mapping.Event{Type: GapType, Severity: aep.SeverityWarning, Capture: p.Level(GapType), Data: data}
	s.b.metrics.gaps.WithLabelValues(gapLabel(g.reason)).Inc()
	s.b.log.Warn("kap frames lost: reporting a gap", "session", s.id, "reason", g.reason, "from_seq", g.from, "to_seq", g.to)
	s.emit(draft{id: s.b.newID(), ev: ev}, s.b.cfg.Now(), g.at, g.nextEpoch)
}

func gapLabel(r string) string {
	switch r {
	case GapBufferOverflow, GapSessionRecreated, GapEpochChanged, GapSeqJump:
		return r
	}
	return "other"
}

// emit sequences, logs and publishes one event. kapSeq and kapEpoch name the
// kap position it came from (kapSeq < 0: none). Callers hold s.mu.
func (s *session) emit(d draft, at time.Time, kapSeq int64, kapEpoch string) *aep.Event {
	if !aep.ValidType(d.ev.Type) {
		// A vendor frame name the mapping could not force into the type
		// grammar: the moment stays visible, under a name that is legal.
		s.b.metrics.badFrames.WithLabelValues("bad_type").Inc()
		s.b.log.Warn("kap frame type is not expressible as an AEP type; emitted as "+UnrecognizedType, "type", clip(d.ev.Type))
		p := s.b.cfg.Posture
		d.ev = mapping.Event{Type: UnrecognizedType, Capture: p.Level(UnrecognizedType), Data: map[string]any{}}
	}
	ev := &aep.Event{
		ID:      d.id,
		Time:    aep.FormatTime(at),
		Source:  s.source,
		Agent:   mapping.Agent,
		Session: s.id,
		Run:     d.run,
		Seq:     aep.Int64(s.seq),
		Epoch:   aep.Int64(s.b.epoch),
		Cause:   d.cause,
	}
	if ev.ID == "" {
		ev.ID = s.b.newID()
	}
	if err := d.ev.Envelope(ev); err != nil {
		s.b.log.Error("mapping produced an unencodable event", "type", d.ev.Type, "err", err)
		return nil
	}
	if d.subject != "" {
		ev.Subject = d.subject
	}
	if s.b.cfg.Mode == mapping.Companion {
		ev.SetExt(ExtKimiSession, s.kap) //nolint:errcheck // constant legal name
	}
	if kapSeq >= 0 && kapEpoch != "" {
		ev.SetExt(ExtKimiSeq, kapSeq)     //nolint:errcheck // constant legal name
		ev.SetExt(ExtKimiEpoch, kapEpoch) //nolint:errcheck // constant legal name
	}
	if d.turn != "" {
		ev.SetExt(ExtKimiTurn, d.turn) //nolint:errcheck // constant legal name
	}
	line, err := ev.Seal()
	if err != nil {
		s.b.log.Error("event did not serialize", "type", d.ev.Type, "err", err)
		return nil
	}
	s.seq++
	s.lastAt = s.b.cfg.Now()
	if err := s.log.Append(line); err != nil {
		s.b.log.Error("log append failed", "session", s.id, "err", err)
		s.b.metrics.logErrors.Inc()
	}
	if p := s.b.cfg.Publisher; p != nil {
		p.Publish(ev)
	}
	s.b.metrics.events.WithLabelValues(eventLabel(ev.Type)).Inc()
	return ev
}

package bridgeweb

import (
	"encoding/json"
	"time"

	"github.com/aep-kimi/aep-kimi/aep"
	"github.com/aep-kimi/aep-kimi/emitter"
	"github.com/aep-kimi/aep-kimi/internal/journal"
	"github.com/aep-kimi/aep-kimi/mapping"
)

// webSession is one kimi web (kap) session as the bridge publishes it,
// keyed by its kap session id. Every field is guarded by the embedded
// emitter.Session's lock, which the core hands it out with; its last sign
// of life (Touch) is its last event.
type webSession struct {
	emitter.Session
	b   *Bridge
	m   *machine
	cur cursor
	// archived is set once the kap-server archived (or deleted) the
	// session: it is not re-subscribed on a new connection.
	archived bool
	// owner is the server the session was last live on: when that server
	// stops, the session ends (endObserved).
	owner *follower
	// ended: the session's server stopped and nothing of it was seen since.
	ended bool
}

// archived reports whether the kap-server archived kap's session.
func (b *Bridge) archived(kap string) bool {
	s := b.lock(kap)
	defer s.Unlock()
	return s.archived
}

// kap is the kap session id.
func (s *webSession) kap() string { return s.Key() }

// fold takes one event of the session's log back into its state (the core
// folds the log's tail on first touch): the kap position the bridge had
// reached (so the subscribe resumes there) and the runs, tools and asks
// that were open.
func (s *webSession) fold(ev *aep.Event) {
	switch ev.Type {
	case "session.ended":
		s.ended = true
	case mapping.WebEndedType:
		s.ended = true
	case "session.started":
		s.ended = false
	}
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
// Callers hold the session's lock.
func (s *webSession) take(f mapping.Frame) {
	s.archived = false
	steps, dup := s.cur.offer(f)
	if dup {
		s.b.metrics.duplicates.Inc()
		return
	}
	s.run(steps)
}

// run maps cursor steps in order. Callers hold the session's lock.
func (s *webSession) run(steps []step) {
	if len(steps) > 0 {
		s.reopen(s.b.cfg.Now())
	}
	for _, st := range steps {
		if st.gap != nil {
			s.emitGap(*st.gap)
			continue
		}
		s.mapFrame(*st.frame)
	}
}

func (s *webSession) mapFrame(f mapping.Frame) {
	at := s.frameTime(f)
	before := s.m.stale
	for _, d := range s.m.apply(f, at) {
		s.emit(d, at, f.Seq, f.Epoch)
	}
	if n := s.m.stale - before; n > 0 {
		s.b.metrics.staleRuns.Add(float64(n))
		s.b.log.Warn("kap turn started while the previous one never ended (a gap); its run is left without a terminal",
			"session", s.Name())
	}
}

// frameTime is the vendor's moment for a frame, or now when it has none
// usable (absent, unparseable, or implausibly in the future).
func (s *webSession) frameTime(f mapping.Frame) time.Time {
	now := s.b.cfg.Now()
	if t, err := time.Parse(time.RFC3339Nano, f.Timestamp); err == nil && t.Before(now.Add(time.Minute)) && t.Year() > 2000 {
		return t
	}
	return now
}

// emitGap reports frames the bridge will never see.
func (s *webSession) emitGap(g gap) {
	ev := mapping.WebGap(g.reason, g.from, g.to, g.epoch, g.nextEpoch, s.b.cfg.Posture)
	s.b.metrics.gaps.WithLabelValues(gapLabel(g.reason)).Inc()
	s.b.log.Warn("kap frames lost: reporting a gap", "session", s.Name(), "reason", g.reason, "from_seq", g.from, "to_seq", g.to)
	s.emit(draft{id: s.b.newID(), ev: ev}, s.b.cfg.Now(), g.at, g.nextEpoch)
}

func gapLabel(r string) string {
	switch r {
	case GapBufferOverflow, GapSessionRecreated, GapEpochChanged, GapSeqJump:
		return r
	}
	return "other"
}

// emit puts one event on the session's stream with the bridge's
// extensions. kapSeq and kapEpoch name the kap position it came from
// (kapSeq < 0: none). Callers hold the session's lock.
func (s *webSession) emit(d draft, at time.Time, kapSeq int64, kapEpoch string) *aep.Event {
	if !aep.ValidType(d.ev.Type) {
		// A vendor frame name the mapping could not force into the type
		// grammar: the moment stays visible, under a name that is legal.
		s.b.metrics.badFrames.WithLabelValues("bad_type").Inc()
		s.b.log.Warn("kap frame type is not expressible as an AEP type; emitted as "+UnrecognizedType, "type", emitter.Clip(d.ev.Type))
		d.ev = mapping.WebUnrecognized(s.b.cfg.Posture)
	}
	e := journal.Entry{Event: d.ev, ID: d.id, At: at, Run: d.run, Cause: d.cause, Subject: d.subject, Durable: d.durable}
	if s.b.cfg.Mode == mapping.Companion {
		e.Ext = append(e.Ext, journal.Ext{Name: ExtKimiSession, Value: s.kap()})
	}
	if kapSeq >= 0 && kapEpoch != "" {
		e.Ext = append(e.Ext, journal.Ext{Name: ExtKimiSeq, Value: kapSeq}, journal.Ext{Name: ExtKimiEpoch, Value: kapEpoch})
	}
	if d.turn != "" {
		e.Ext = append(e.Ext, journal.Ext{Name: ExtKimiTurn, Value: d.turn})
	}
	if d.observed {
		e.Ext = append(e.Ext, journal.Ext{Name: mapping.ExtObserved, Value: mapping.ObservedProcess})
	}
	ev := s.Stream().Emit(e)
	if ev != nil {
		s.Touch(s.b.cfg.Now())
	}
	return ev
}

// endObserved ends the session because its server stopped: attention still
// open is dismissed and open runs are drained (cancelled, no claim of who),
// then session.ended says normal (no run was open) or killed (one was cut
// off). Every one of these events carries ExtObserved = process: the end was
// seen from the server's process, Kimi reported none. In companion mode the
// hook adapter owns the core lifecycle, so the bridge's own stream ({sid}.web)
// ends with the extension terminal WebEnded instead. It reports whether it
// ended anything (false when the session had already ended). Callers hold
// the session's lock.
func (s *webSession) endObserved(at time.Time) bool {
	if s.ended {
		return false
	}
	drafts, runOpen := s.m.drain(at)
	for _, d := range drafts {
		d.observed = true
		s.emit(d, at, -1, "")
	}
	reason := mapping.EndNormal
	if runOpen {
		reason = mapping.EndKilled
	}
	ev := mapping.WebEnded(reason, s.b.cfg.Posture)
	if s.b.cfg.Mode == mapping.Primary {
		ev = mapping.SessionEnded(reason, s.b.cfg.Posture)
	}
	s.emit(draft{id: s.b.newID(), ev: ev, observed: true}, at, -1, "")
	s.ended = true
	s.b.metrics.sessionsEnded.WithLabelValues(reason).Inc()
	s.closeLog()
	return true
}

// closeLog closes the log of a session that will be quiet (ended,
// archived); it reopens on its next event. Callers hold the session's lock.
func (s *webSession) closeLog() {
	if err := s.Stream().Log().Close(); err != nil {
		s.b.log.Error("closing a session log", "session", s.Name(), "err", err)
	}
}

// reopen starts a new chapter of a session seen again after its end (a
// restarted kimi web loaded it). In primary mode that is the hook adapter's
// convention: the next chapter's source (journal.NextChapter), its positions
// continuing, opened by session.started with trigger resume, so no consumer
// sees events after session.ended without a new start. Callers hold the
// session's lock.
func (s *webSession) reopen(at time.Time) {
	if !s.ended {
		return
	}
	s.ended = false
	if s.b.cfg.Mode == mapping.Primary {
		s.NextChapter()
		s.emit(draft{id: s.b.newID(), ev: mapping.SessionResumed(s.b.cfg.Posture)}, at, -1, "")
	}
}

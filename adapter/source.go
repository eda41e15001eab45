package adapter

import (
	"path/filepath"

	"github.com/aep-kimi/aep-kimi/aep"
	"github.com/aep-kimi/aep-kimi/emitter"
	"github.com/aep-kimi/aep-kimi/internal/journal"
	"github.com/aep-kimi/aep-kimi/internal/spool"
	"github.com/aep-kimi/aep-kimi/mapping"
)

// spec is what the adapter tells the emitter core about itself.
func (s *Server) spec() emitter.Spec {
	home := s.cfg.Home
	types := eventTypeSet()
	return emitter.Spec{
		Name: "adapter", LogDir: logDir(home), EpochFile: filepath.Join(kimiDir(home), "epoch"),
		Dirs:     []string{kimiDir(home), spool.Dir(home), spool.QuarantinePath(spool.Dir(home))},
		Commands: []string{CmdRespond, CmdInstruct, mapping.TypeRate}, Accepts: AcceptsFor(s.cfg.Control),
		Authenticated: s.cfg.Control.Authenticated, AckWindow: s.cfg.Control.AckWindow,
		// An invented hook name maps to its own extension type, which must
		// not become a series of its own.
		EventLabel: func(typ string) string {
			if types[typ] {
				return typ
			}
			return "other"
		},
		MaxSessions: s.cfg.MaxSessions, IdleEvict: s.cfg.IdleEvict,
	}
}

// source is the adapter as the emitter core sees it (emitter.Source and
// emitter.Evictor): a session per Kimi session id, its state folded back
// from its log, and the gate's and the instruct queue's decisions.
type source struct{ s *Server }

func (src source) New(id string) (*hookSession, emitter.Identity) {
	srv := src.s
	sess := &hookSession{
		srv:      srv,
		turnRuns: map[string]string{},
		tools:    map[string]*toolRec{},
		perms:    map[string]*permRec{},
		seen:     newRecent(recentDeliveries),
	}
	if last, ok := srv.life.back(id); ok {
		sess.Touch(last) // silence counts from its last hook, not its return
	}
	return sess, emitter.Identity{Session: id, Source: aep.SourceURI(srv.cfg.Host, mapping.Agent, id)}
}

func (source) Fold(sess *hookSession, ev *aep.Event) { sess.fold(ev) }

// Key: every session is the adapter's to answer for.
func (source) Key(session string) (string, bool) { return session, true }

func (source) Ack(sess *hookSession, e journal.Entry) *aep.Event { return sess.Stream().Emit(e) }

// Evictable: a session holding a hook that waits for a reply (parked for
// the reorder window, held at the gate) or queued instructions stays.
func (source) Evictable(sess *hookSession) bool {
	return len(sess.parked) == 0 && !sess.control.busy()
}

// Evicted keeps a session that left memory before it ended tracked for its
// end (lifecycle.evicted).
func (src source) Evicted(sess *hookSession) {
	src.s.life.evicted(sess.Key(), sess.ended, sess.LastActive())
}

package bridgeweb

import (
	"strings"

	"github.com/aep-kimi/aep-kimi/aep"
	"github.com/aep-kimi/aep-kimi/emitter"
	"github.com/aep-kimi/aep-kimi/internal/journal"
	"github.com/aep-kimi/aep-kimi/mapping"
)

// spec is what the bridge tells the emitter core about itself: its own
// epoch counter and log directory, so it never shares order or files with
// the hook adapter.
func (b *Bridge) spec() emitter.Spec {
	return emitter.Spec{
		Name: "bridgeweb", LogDir: LogDir(b.cfg.Home), EpochFile: epochPath(b.cfg.Home),
		Commands: []string{CmdRespond, CmdCancel, mapping.TypeRate}, Accepts: AcceptsFor(b.cfg.Mode, b.cfg.Control),
		Unsupported: b.unsupported, Authenticated: b.cfg.Control.Authenticated, AckWindow: b.cfg.Control.AckWindow,
		EventLabel: eventLabel, NewID: b.newID, IdleClose: DefaultIdleClose,
	}
}

// source is the bridge as the emitter core sees it (emitter.Source): a
// session per kap session, its state folded back from its log, and the
// decisions carried out on the kap-server.
type source struct{ b *Bridge }

func (src source) New(kap string) (*webSession, emitter.Identity) {
	b := src.b
	s := &webSession{b: b, m: newMachine(b.cfg.Mode, b.cfg.Posture, b.controlOn(), b.newID)}
	return s, emitter.Identity{Session: SessionName(b.cfg.Mode, kap), Source: SourceURI(b.cfg.Host, kap)}
}

func (source) Fold(s *webSession, ev *aep.Event) { s.fold(ev) }

// Key is the kap session an AEP session names: none for a name this
// bridge's mode does not publish, or for the server-wide stream.
func (src source) Key(name string) (string, bool) {
	kap := name
	if src.b.cfg.Mode == mapping.Companion {
		var ok bool
		if kap, ok = strings.CutSuffix(name, CompanionSuffix); !ok {
			return "", false
		}
	}
	return kap, kap != "" && kap != mapping.GlobalSession
}

func (src source) Ack(s *webSession, e journal.Entry) *aep.Event {
	return s.emit(draft{id: src.b.newID(), ev: e.Event, run: e.Run, cause: e.Cause, subject: e.Subject, durable: e.Durable}, e.At, -1, "")
}

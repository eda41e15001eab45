package notify

import (
	"github.com/aep-kimi/aep-kimi/aep"
	"github.com/aep-kimi/aep-kimi/mapping"
)

// The command an answer link sends and the acks that settle it (AEP-0004).
const (
	typeRespond  = "control.attention.respond"
	typeAccepted = "control.accepted"
	typeRejected = "control.rejected"
)

// settling is an answer link's command on its way to the session's
// emitter: known by what the link answers until the relay's stream shows
// the command itself, then by the command's id until the emitter acks it.
// An answer is "answered" only once the emitter accepted it: routed is not
// taken (a question answered in Kimi's own UI meanwhile, a request that
// ended).
type settling struct {
	c   Claims
	cmd string // the command's id, once the stream showed it
	// early are the acks of the session seen before the command: the relay
	// hands the command to its emitter before it holds it in the history,
	// so a quick emitter's ack can reach the stream first.
	early []*aep.Event
	// done receives the ack, once: accepted, or rejected with the
	// rejection event.
	done chan *aep.Event
}

// await registers c's answer before it is sent, so neither its command
// nor the ack can pass unseen. Callers hold n.mu.
func (f *feed) await(c Claims) *settling {
	w := &settling{c: c, done: make(chan *aep.Event, 1)}
	f.settling = append(f.settling, w)
	return w
}

// unawait forgets w. Callers hold n.mu.
func (f *feed) unawait(w *settling) {
	for i, x := range f.settling {
		if x == w {
			f.settling = append(f.settling[:i], f.settling[i+1:]...)
			return
		}
	}
}

// settle matches one stream event against the answers on their way: the
// link's command (its session, request, surface and person: the relay
// stamped the person, the link chose the rest), and its ack, in either
// order.
func (f *feed) settle(ev *aep.Event) {
	ack := ev.Type == typeAccepted || ev.Type == typeRejected
	for _, w := range f.settling {
		switch {
		case w.cmd == "" && ev.Type == typeRespond && ev.Session == w.c.Session && ev.Subject == w.c.Request &&
			ev.Agent == w.c.Surface && stampedBy(ev) == w.c.By:
			w.cmd = ev.ID
			for _, a := range w.early {
				if a.Cause == w.cmd {
					w.resolve(a)
				}
			}
			w.early = nil
			return
		case w.cmd == "" && ack && ev.Session == w.c.Session && len(w.early) < maxEarlyAcks:
			w.early = append(w.early, ev)
		case w.cmd != "" && ack && ev.Cause == w.cmd:
			w.resolve(ev)
			return
		}
	}
}

// maxEarlyAcks bounds the acks one answer keeps while its command has not
// shown: a session's acks in the moment between routing and holding.
const maxEarlyAcks = 64

// resolve hands over the answer's ack, once.
func (w *settling) resolve(ack *aep.Event) {
	select {
	case w.done <- ack:
	default:
	}
}

// stampedBy is the person the relay stamped on a command.
func stampedBy(ev *aep.Event) string {
	by, _ := ev.ExtString(mapping.ExtBy)
	return by
}

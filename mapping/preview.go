package mapping

import (
	"time"

	"github.com/aep-kimi/aep-kimi/aep"
)

// Preview maps one hook payload (or, when web, one kap frame in mode) and
// seals each resulting event with a placeholder identity, for `aep-kimi
// map`: an id from newID, now as its time, host in its source, seq from 0.
// Each result is one event's JSON.
func Preview(in []byte, web bool, mode Mode, p Posture, host string, now time.Time, newID func() string) ([][]byte, error) {
	var events []Event
	session := ""
	if web {
		r, err := Web(in, mode, p)
		if err != nil {
			return nil, err
		}
		events, session = r.Events, r.Facts.SessionID
	} else {
		r, err := Hook(in, p)
		if err != nil {
			return nil, err
		}
		events, session = r.Events, r.Facts.Session
	}
	if session == "" {
		session = "unknown"
	}
	out := make([][]byte, 0, len(events))
	for i, m := range events {
		e := &aep.Event{
			ID:      newID(),
			Time:    aep.FormatTime(now),
			Source:  aep.SourceURI(host, Agent, session),
			Agent:   Agent,
			Session: session,
			Seq:     aep.Int64(int64(i)),
		}
		if err := m.Envelope(e); err != nil {
			return nil, err
		}
		b, err := e.MarshalJSON()
		if err != nil {
			return nil, err
		}
		out = append(out, b)
	}
	return out, nil
}

package stacktest

import (
	"testing"

	"github.com/aep-kimi/aep-kimi/aep"
)

// RelayEventsOf is the session's stream on the relay, parsed.
func (st *Stack) RelayEventsOf(t testing.TB, session string) []*aep.Event {
	t.Helper()
	var out []*aep.Event
	for _, b := range st.RelayEvents(t, session) {
		e, err := aep.ParseEvent(b)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, e)
	}
	return out
}

func AsString(v any) string {
	s, _ := v.(string)
	return s
}

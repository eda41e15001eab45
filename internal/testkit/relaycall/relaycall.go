// Package relaycall is a test's side of a relay's HTTP API: post events,
// read a session's history. It links no relay, so a test of a relay in
// another process (the end-to-end packages) does not link one either.
package relaycall

import (
	"bytes"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/aep-kimi/aep-kimi/aep"
	"github.com/aep-kimi/aep-kimi/internal/testkit/httpcall"
	"github.com/aep-kimi/aep-kimi/internal/testkit/poll"
	"github.com/aep-kimi/aep-kimi/relay/client"
)

// Post sends evs to the relay at base (with token, when set) as one NDJSON
// batch and fails the test unless the relay accepts them (202).
func Post(t testing.TB, base, token string, evs ...*aep.Event) {
	t.Helper()
	lines := make([][]byte, len(evs))
	for i, e := range evs {
		b, err := e.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		lines[i] = b
	}
	PostLines(t, base, token, lines...)
}

// PostLines is Post for events already encoded, one a line.
func PostLines(t testing.TB, base, token string, lines ...[]byte) {
	t.Helper()
	var body bytes.Buffer
	for _, l := range lines {
		body.Write(l)
		body.WriteByte('\n')
	}
	httpcall.Do(t, httpcall.Request{Method: http.MethodPost, URL: base + "/events", Token: token, Body: body.Bytes(),
		Header: map[string]string{"Content-Type": "application/x-ndjson", "AEP-Version": aep.Version}}).Want(t, http.StatusAccepted)
}

// History reads what the relay at base holds of session's events of type
// typ (from its start, with token), waiting up to within for at least one.
func History(t testing.TB, base, token, session, typ string, within time.Duration) []*aep.Event {
	t.Helper()
	var out []*aep.Event
	poll.Until(within, func() bool {
		out = nil
		q := url.Values{"from": {"all"}, "live": {"0"}, "filter": {`{"session":"` + session + `","type":"` + typ + `"}`}}
		req, err := http.NewRequest(http.MethodGet, base+"/stream?"+q.Encode(), nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		r := client.NewSSEReader(resp.Body, 0)
		for {
			it, err := r.Next()
			if err != nil {
				break
			}
			if ev, err := aep.ParseEvent([]byte(it.Data)); err == nil && !it.IsComment {
				out = append(out, ev)
			}
		}
		return len(out) > 0
	})
	return out
}

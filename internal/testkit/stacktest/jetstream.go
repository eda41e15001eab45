package stacktest

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/aep-kimi/aep-kimi/aep"
	"github.com/aep-kimi/aep-kimi/relay/client"
)

// JsEvent is one positioned test event as NDJSON.
func JsEvent(t testing.TB, session string, seq int64) []byte {
	t.Helper()
	ev := &aep.Event{AEP: aep.Version, ID: fmt.Sprintf("%s-%d", session, seq), Type: "progress.status",
		Time: aep.FormatTime(time.Now()), Source: "aep://test/agent/js/session/" + url.PathEscape(session), Agent: "js",
		Session: session, Seq: aep.Int64(seq), Epoch: aep.Int64(0)}
	b, err := json.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// ReplayIDs reads the relay's whole replay (from=all, live=0) and returns
// the event ids per session in the order served.
func ReplayIDs(t testing.TB, base, token string) map[string][]string {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, base+"/stream?from=all&live=0", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out := map[string][]string{}
	r := client.NewSSEReader(bufio.NewReader(resp.Body), 1<<20)
	for {
		it, err := r.Next()
		if err != nil {
			return out
		}
		if it.IsComment || it.Data == "" {
			continue
		}
		ev, err := aep.ParseEvent([]byte(it.Data))
		if err != nil {
			t.Fatalf("replayed %q: %v", it.Data, err)
		}
		out[ev.Session] = append(out[ev.Session], ev.ID)
	}
}

package relaytest_test

import (
	"bufio"
	"bytes"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"

	"github.com/aep-kimi/aep-kimi/aep"
	"github.com/aep-kimi/aep-kimi/internal/testkit/aeptest"
	"github.com/aep-kimi/aep-kimi/internal/testkit/relaycall"
	"github.com/aep-kimi/aep-kimi/internal/testkit/relaytest"
	"github.com/aep-kimi/aep-kimi/relay"
)

// The forwarder is the relay benchmarks' floor only if its consumers read
// what the relay's read: the same event reaches a live stream of each as
// the same bytes.
func TestForwarderFramesAsTheRelay(t *testing.T) {
	srv := relaytest.RunServer(t, relay.Config{})
	fwd := httptest.NewServer(relaytest.Forwarder())
	defer fwd.Close()

	ev := aeptest.Event("load-1764626400123456789", 41, "tool.completed", "notice", `{"tool":{"name":"Bash"},"status":"success"}`)
	ev.Epoch = aep.Int64(1764626400)
	line, err := ev.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	frameOf := func(base string) []byte {
		t.Helper()
		q := url.Values{"filter": {`{"session":"` + ev.Session + `"}`}}
		resp, err := http.Get(base + "/stream?" + q.Encode())
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		// The stream is open (its headers came): the event is live.
		relaycall.PostLines(t, base, "", line)
		r := bufio.NewReader(resp.Body)
		var frame []byte
		for {
			l, err := r.ReadBytes('\n')
			if err != nil {
				t.Fatalf("%s: the stream ended before a frame: %v", base, err)
			}
			switch {
			case len(frame) == 0 && (bytes.HasPrefix(l, []byte(":")) || bytes.HasPrefix(l, []byte("retry:")) || len(bytes.TrimSpace(l)) == 0):
				continue // the relay's preamble and comments
			case len(bytes.TrimSpace(l)) == 0:
				return append(frame, l...)
			}
			frame = append(frame, l...)
		}
	}
	fromRelay, fromForwarder := frameOf(srv.URL), frameOf(fwd.URL)
	if !bytes.Equal(fromRelay, fromForwarder) {
		t.Fatalf("the forwarder frames\n%q\nwhere the relay frames\n%q", fromForwarder, fromRelay)
	}
	if !bytes.HasPrefix(fromRelay, []byte("id: "+ev.Session+":1764626400:41\n")) {
		t.Fatalf("unexpected frame %q", fromRelay)
	}
}

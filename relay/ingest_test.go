package relay_test

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/aep-kimi/aep-kimi/internal/testkit/relaytest"
	"github.com/aep-kimi/aep-kimi/relay"
)

func TestIngestRefusals(t *testing.T) {
	t.Parallel()
	srv := relaytest.RunServer(t, relay.Config{Token: testToken, MaxBody: 4096, MaxBatch: 3})
	good := line(t, mkEvent("s-ingest", 0))
	noID := mkEvent("s-ingest", 1)
	noID.ID = ""
	bad := line(t, noID)
	cmd := line(t, command("control.cancel", "s-ingest", `{"scope":"run"}`))
	hdr := func(kv ...string) map[string]string {
		m := map[string]string{"Content-Type": "application/json", "AEP-Version": "0.1"}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	cases := []struct {
		name   string
		body   []byte
		hdr    map[string]string
		status int
		code   string
		line   int
		detail string
	}{
		{"no version header", good, hdr("AEP-Version", ""), 426, "version-unsupported", 0, "required"},
		{"unsupported version", good, hdr("AEP-Version", "9.9"), 426, "version-unsupported", 0, "9.9"},
		{"wrong content type", good, hdr("Content-Type", "text/plain"), 415, "unsupported-media-type", 0, ""},
		{"missing token", good, hdr("Authorization", ""), 401, "unauthorized", 0, ""},
		{"wrong token", good, hdr("Authorization", "Bearer nope"), 403, "forbidden", 0, ""},
		{"invalid single event", bad, hdr(), 400, "invalid-event", 0, "id"},
		{"not JSON", []byte("{nope"), hdr(), 400, "invalid-event", 0, ""},
		{"empty body", nil, hdr(), 400, "invalid-event", 0, "empty"},
		{"invalid batch line", bytes.Join([][]byte{good, []byte(""), bad}, []byte("\n")), hdr("Content-Type", "application/x-ndjson"), 400, "invalid-event", 3, "line 3"},
		{"batch over MaxBatch", bytes.Repeat(append(good, '\n'), 4), hdr("Content-Type", "application/x-ndjson"), 413, "too-many-events", 0, "nothing was ingested"},
		// The count comes before any line is read, and counts events, not blank lines.
		{"batch over MaxBatch with a bad line", append(bytes.Repeat(append(good, "\n\n"...), 4), bad...), hdr("Content-Type", "application/x-ndjson"), 413, "too-many-events", 0, "batch of 5 events"},
		{"blank batch", []byte("\n \n\t\r\n\n\n"), hdr("Content-Type", "application/x-ndjson"), 400, "invalid-event", 0, "empty batch"},
		{"body over MaxBody", bytes.Repeat([]byte(" "), 5000), hdr(), 413, "payload-too-large", 0, ""},
		{"command over HTTP", cmd, hdr(), 403, "control-requires-socket", 0, "WebSocket"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := srv.Backend().Stats().Events
			r := do(t, srv, http.MethodPost, "/events", tc.body, tc.hdr)
			if r.status != tc.status {
				t.Fatalf("status %d, want %d: %s", r.status, tc.status, r.body)
			}
			m := r.json(t)
			if m["error"] != tc.code {
				t.Errorf("error %v, want %s", m["error"], tc.code)
			}
			if d, _ := m["detail"].(string); !strings.Contains(d, tc.detail) {
				t.Errorf("detail %q does not mention %q", d, tc.detail)
			}
			if tc.line != 0 && m["line"] != float64(tc.line) {
				t.Errorf("line %v, want %d", m["line"], tc.line)
			}
			if tc.status == 426 {
				if v, _ := m["versions"].([]any); len(v) != 1 || v[0] != "0.1" {
					t.Errorf("426 versions %v, want [0.1]", m["versions"])
				}
			}
			if after := srv.Backend().Stats().Events; after != before {
				t.Errorf("a refused request changed the buffer: %d -> %d events", before, after)
			}
		})
	}
}

// A body declared larger than the limit is refused before the upload is
// read; an undeclared (chunked) one is cut off at the limit. Both answer 413.
func TestIngestPayloadTooLarge(t *testing.T) {
	t.Parallel()
	srv := relaytest.RunServer(t, relay.Config{MaxBody: 1024})
	t.Run("declared length", func(t *testing.T) {
		conn, err := net.Dial("tcp", srv.Addr)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		// Headers only: the relay must answer without waiting for the body.
		_, _ = io.WriteString(conn, "POST /events HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nAEP-Version: 0.1\r\nContent-Length: 100000000\r\n\r\n")
		resp, err := http.ReadResponse(bufioReader(conn), nil)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 413 || !bytes.Contains(b, []byte("payload-too-large")) {
			t.Fatalf("got %d %s", resp.StatusCode, b)
		}
	})
	t.Run("chunked", func(t *testing.T) {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/events", io.MultiReader(strings.NewReader(strings.Repeat(" ", 4096))))
		req.ContentLength = -1
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("AEP-Version", "0.1")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 413 || !bytes.Contains(b, []byte("payload-too-large")) {
			t.Fatalf("got %d %s", resp.StatusCode, b)
		}
	})
}

// A batch keeps its order, is answered 202, and a pretty-printed single
// event is stored on one line.
func TestIngestBatchOrderAndOneLine(t *testing.T) {
	t.Parallel()
	srv := relaytest.RunServer(t, relay.Config{})
	evs := seqEvents("s-order", 0, 20)
	// Out of order on the wire: the buffer sorts by position, the live
	// stream keeps arrival order.
	evs[5], evs[6] = evs[6], evs[5]
	live := openSSE(t, srv, url.Values{"filter": {`{"session":"s-order"}`}}, nil)
	r := post(t, srv, evs...)
	if r.status != 202 {
		t.Fatalf("HTTP %d %s", r.status, r.body)
	}
	if m := r.json(t); m["accepted"] != float64(20) || m["buffered"] != float64(20) {
		t.Fatalf("202 body %s", r.body)
	}
	for i, ev := range live.events(t, 20) {
		if ev.ID != evs[i].ID {
			t.Fatalf("live delivery %d is seq %d, want arrival order (seq %d)", i, *ev.Seq, *evs[i].Seq)
		}
	}
	replay := openSSE(t, srv, url.Values{"from": {`[{"session":"s-order","seq":2}]`}, "live": {"0"}}, nil)
	for i, ev := range replay.events(t, 17) {
		if *ev.Seq != int64(i+3) {
			t.Fatalf("replay %d is seq %d, want %d: the buffer is ordered by (epoch, seq)", i, *ev.Seq, i+3)
		}
	}

	for _, nl := range []string{"\n", "\r", "\r\n"} {
		session := "s-pretty-" + strings.ReplaceAll(strings.ReplaceAll(nl, "\r", "cr"), "\n", "lf")
		pretty := "{" + nl + "  " + strings.Replace(strings.TrimPrefix(string(line(t, mkEvent(session, 0))), "{"), ",", ","+nl+"  ", 3)
		r = do(t, srv, http.MethodPost, "/events", []byte(pretty), map[string]string{"Content-Type": "application/json", "AEP-Version": "0.1"})
		if r.status != 202 {
			t.Fatalf("%q: HTTP %d %s", pretty, r.status, r.body)
		}
		got := openSSE(t, srv, url.Values{"from": {"all"}, "live": {"0"}, "filter": {`{"session":"` + session + `"}`}}, nil).next(t, false)
		if strings.ContainsAny(got.Data, "\r\n") || !strings.HasPrefix(got.Data, `{"aep"`) {
			t.Fatalf("pretty event not stored on one line: %q", got.Data)
		}
	}
}

// MaxBatch counts events: blank lines between them do not count.
func TestIngestBatchLimitCountsEvents(t *testing.T) {
	t.Parallel()
	srv := relaytest.RunServer(t, relay.Config{MaxBatch: 3})
	var body []byte
	for _, ev := range seqEvents("s-blank", 0, 3) {
		body = append(append(body, line(t, ev)...), "\n \n\n\r\n"...)
	}
	r := do(t, srv, http.MethodPost, "/events", body, map[string]string{"Content-Type": "application/x-ndjson", "AEP-Version": "0.1"})
	if r.status != 202 {
		t.Fatalf("HTTP %d %s", r.status, r.body)
	}
	if m := r.json(t); m["accepted"] != float64(3) {
		t.Fatalf("202 body %s", r.body)
	}
}

// Admission dedupes on (source, id); live fan-out forwards every copy.
func TestIngestDedupeAdmissionNotFanout(t *testing.T) {
	t.Parallel()
	srv := relaytest.RunServer(t, relay.Config{})
	live := openSSE(t, srv, url.Values{"filter": {`{"session":"s-dup"}`}}, nil)
	ev := mkEvent("s-dup", 0)
	mustPost(t, srv, ev)
	r := post(t, srv, ev)
	if m := r.json(t); m["duplicates"] != float64(1) || m["buffered"] != float64(0) {
		t.Fatalf("second copy: %s", r.body)
	}
	other := mkEvent("s-dup", 1)
	other.ID = ev.ID
	other.Source = "aep://test/other-emitter"
	if m := post(t, srv, other).json(t); m["buffered"] != float64(1) {
		t.Fatalf("same id from another source must be admitted (dedupe key is (source, id)): %v", m)
	}
	got := live.events(t, 3)
	if got[0].ID != ev.ID || got[1].ID != ev.ID {
		t.Fatalf("live fan-out must forward the redelivered copy too: %v %v", got[0].ID, got[1].ID)
	}
	replay := openSSE(t, srv, url.Values{"from": {"all"}, "live": {"0"}, "filter": {`{"session":"s-dup"}`}}, nil)
	if n := len(replay.events(t, 2)); n != 2 {
		t.Fatalf("replay holds %d events, want 2", n)
	}
	replay.quiet(t, 100*time.Millisecond)
}

func TestIngestAccessTokenQuery(t *testing.T) {
	t.Parallel()
	srv := relaytest.RunServer(t, relay.Config{Token: testToken})
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/events?access_token="+testToken, bytes.NewReader(line(t, mkEvent("s-q", 0))))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("AEP-Version", "0.1")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 202 {
		t.Fatalf("access_token query: HTTP %d", resp.StatusCode)
	}
}

func bufioReader(c net.Conn) *bufio.Reader { return bufio.NewReader(c) }

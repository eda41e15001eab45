package relay_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/aep-kimi/aep-kimi/aep"
	"github.com/aep-kimi/aep-kimi/relay"
)

// FuzzIngestNDJSON drives arbitrary bodies through POST /events. Whatever
// arrives, the answer is 202 or a JSON refusal, a refused batch ingests
// nothing, and an accepted one ingests every non-blank line.
func FuzzIngestNDJSON(f *testing.F) {
	good := `{"aep":"0.1","id":"01JX9YB0AAAA0000000000GOLD","type":"progress.status","time":"2026-07-03T10:14:00.000Z","source":"aep://h/agent/a","agent":"a","session":"s","seq":0}`
	good2 := strings.Replace(strings.Replace(good, `"seq":0`, `"seq":1`, 1), "GOLD", "GOLE", 1)
	for _, s := range []string{
		good + "\n" + good2 + "\n",
		good + "\r\n\r\n" + good2,
		good + "\n{",
		"\n\n\n",
		`{"aep":"0.1"}`,
		`{"aep":"0.1","id":"x","type":"control.cancel","time":"2026-07-03T10:14:00Z","source":"aep://h","agent":"a","session":"s","data":{"scope":"run"}}`,
		`{"aep":"0.1","id":"x","type":"agent.heartbeat","time":"2026-07-03T10:14:00Z","source":"aep://h","agent":"a"}`,
		`[` + good + `]`,
		good + good2,
		`{"aep":"0.1","id":"x","type":"progress.status","time":"2026-07-03T10:14:00Z","source":"aep://h","agent":"a","session":"s","seq":0,"data":null}`,
	} {
		f.Add([]byte(s))
	}
	srv, err := relay.NewServer(relay.Config{MaxBatch: 50, MaxBody: 1 << 16, MaxSessions: 16, AllowedHosts: []string{"example.com"}})
	if err != nil {
		f.Fatal(err)
	}
	h := srv.Handler()
	f.Fuzz(func(t *testing.T, body []byte) {
		before := srv.Backend().Stats().Events
		req := httptest.NewRequest(http.MethodPost, "/events", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/x-ndjson")
		req.Header.Set("AEP-Version", "0.1")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		var reply map[string]any
		if err := json.Unmarshal(rec.Body.Bytes(), &reply); err != nil {
			t.Fatalf("HTTP %d with a non-JSON body %q", rec.Code, rec.Body.Bytes())
		}
		switch rec.Code {
		case http.StatusAccepted:
			lines := 0
			for _, l := range bytes.Split(body, []byte("\n")) {
				if len(bytes.TrimSpace(l)) > 0 {
					lines++
					if _, err := aep.ParseEvent(l); err != nil {
						t.Fatalf("accepted an unparseable line %q", l)
					}
				}
			}
			if reply["accepted"] != float64(lines) {
				t.Fatalf("accepted %v of %d lines", reply["accepted"], lines)
			}
		case http.StatusBadRequest, http.StatusForbidden, http.StatusRequestEntityTooLarge:
			if _, ok := reply["error"].(string); !ok {
				t.Fatalf("refusal without an error code: %s", rec.Body.Bytes())
			}
			if after := srv.Backend().Stats().Events; after != before {
				t.Fatalf("a refused batch changed the buffer (%d -> %d)", before, after)
			}
		default:
			t.Fatalf("unexpected HTTP %d: %s", rec.Code, rec.Body.Bytes())
		}
	})
}

// FuzzStreamQuery drives arbitrary filter, from and capture parameters
// through GET /stream: a JSON refusal before any header, or a stream.
func FuzzStreamQuery(f *testing.F) {
	f.Add(`{"type":"attention.*"}`, `all`, `metadata`)
	f.Add(`{"severity":{"gte":"notice"}}`, `[{"session":"s","seq":1}]`, ``)
	f.Add(`{"seq":1}`, `[{}]`, `full`)
	f.Add(`{"type":["x.acme.*","a.b"],"acmeregion":true}`, `"all"`, `none`)
	srv, err := relay.NewServer(relay.Config{MaxFrom: 4, AllowedHosts: []string{"example.com"}})
	if err != nil {
		f.Fatal(err)
	}
	h := srv.Handler()
	f.Fuzz(func(t *testing.T, filter, from, capture string) {
		q := url.Values{"live": {"0"}}
		if filter != "" {
			q.Set("filter", filter)
		}
		if from != "" {
			q.Set("from", from)
		}
		if capture != "" {
			q.Set("capture", capture)
		}
		req := httptest.NewRequest(http.MethodGet, "/stream?"+q.Encode(), nil)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		body, _ := io.ReadAll(rec.Body)
		switch rec.Code {
		case http.StatusOK:
			if ct := rec.Header().Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
				t.Fatalf("200 with %q", ct)
			}
			if _, err := aep.ParseFilter([]byte(filter)); err != nil {
				t.Fatalf("stream opened with a filter aep rejects: %v", err)
			}
		case http.StatusBadRequest:
			var e map[string]any
			if json.Unmarshal(body, &e) != nil || e["error"] == nil {
				t.Fatalf("400 without a JSON error: %q", body)
			}
		default:
			t.Fatalf("unexpected HTTP %d %q", rec.Code, body)
		}
	})
}

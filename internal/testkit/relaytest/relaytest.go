// Package relaytest runs a real relay on a loopback port for tests, in the
// style of nats-server's test.RunServer.
package relaytest

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/aep-kimi/aep-kimi/aep"
	"github.com/aep-kimi/aep-kimi/internal/testkit/poll"
	"github.com/aep-kimi/aep-kimi/relay"
	"github.com/aep-kimi/aep-kimi/relay/client"
)

// Server is a relay serving on a loopback port for the duration of a test.
type Server struct {
	*relay.Server
	// URL is the base URL, http://127.0.0.1:port.
	URL string
	// Addr is the listening address.
	Addr string
	// Token is the configured bearer token ("" when watch-only).
	Token string

	cancel context.CancelFunc
	done   chan error
}

// RunServer starts a relay with cfg on 127.0.0.1:0 and stops it (draining)
// when the test ends; a failed drain fails the test.
func RunServer(t testing.TB, cfg relay.Config) *Server {
	t.Helper()
	srv, err := relay.NewServer(cfg)
	if err != nil {
		t.Fatalf("relaytest: NewServer: %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("relaytest: listen: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Server{
		Server: srv,
		URL:    "http://" + ln.Addr().String(),
		Addr:   ln.Addr().String(),
		Token:  cfg.Token,
		cancel: cancel,
		done:   make(chan error, 1),
	}
	go func() { s.done <- srv.Serve(ctx, ln) }()
	t.Cleanup(func() {
		if err := s.Shutdown(); err != nil {
			t.Errorf("relaytest: shutdown: %v", err)
		}
	})
	return s
}

// Shutdown drains the relay and returns what Serve returned. It is safe to
// call more than once; later calls return nil.
func (s *Server) Shutdown() error {
	s.cancel()
	err, ok := <-s.done
	if !ok {
		return nil
	}
	close(s.done)
	return err
}

// Post sends evs to the relay as one NDJSON batch and fails the test unless
// the relay accepts them (202).
func (s *Server) Post(t testing.TB, evs ...*aep.Event) {
	t.Helper()
	Post(t, s.URL, s.Token, evs...)
}

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
	req, err := http.NewRequest(http.MethodPost, base+"/events", &body)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-ndjson")
	req.Header.Set("AEP-Version", aep.Version)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		t.Fatalf("POST /events: HTTP %d %s", resp.StatusCode, b)
	}
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

// Package relaytest runs a real relay on a loopback port for tests, in the
// style of nats-server's test.RunServer.
package relaytest

import (
	"context"
	"net"
	"testing"

	"github.com/aep-kimi/aep-kimi/aep"
	"github.com/aep-kimi/aep-kimi/internal/testkit/relaycall"
	"github.com/aep-kimi/aep-kimi/relay"
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
	relaycall.Post(t, s.URL, s.Token, evs...)
}

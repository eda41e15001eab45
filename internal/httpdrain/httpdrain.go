// Package httpdrain serves a daemon's HTTP endpoint and shuts it down
// without waiting on connections that never started a request.
//
// net/http's Shutdown counts a connection that has been accepted but has not
// sent its first request as busy for up to 5 s, and HTTP clients routinely
// keep such a spare open in their pool. A daemon with a 5 s drain budget
// would then miss it for nothing. Track closes those spares during shutdown.
package httpdrain

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// IdleTimeout closes a keep-alive connection with no request in flight for
// this long on every daemon endpoint. It is above Go's client default (90 s),
// so the client side closes first and never sends on a connection being
// closed.
const IdleTimeout = 2 * time.Minute

// NewServer returns an http.Server for h with the shared timeouts. It sets
// no whole-request read or write timeout: streams and held replies are long
// by design, and request bodies are bounded where they are read.
func NewServer(h http.Handler) *http.Server {
	return &http.Server{Handler: h, ReadHeaderTimeout: ReadHeaderTimeout, IdleTimeout: IdleTimeout}
}

// Grace spares a connection accepted this recently: its first request may
// be on the wire.
const Grace = 200 * time.Millisecond

// ReadHeaderTimeout bounds the wait for a request's headers on every daemon
// endpoint, so a client that connects and sends nothing cannot hold a
// connection.
const ReadHeaderTimeout = 10 * time.Second

// Tracker records which connections have not started a request. Install it
// with Track, shut down with Shutdown. The zero value is ready to use.
type Tracker struct {
	// Grace is how long a fresh connection is spared; zero means Grace.
	Grace time.Duration

	mu    sync.Mutex
	fresh map[net.Conn]time.Time
}

func (t *Tracker) grace() time.Duration {
	if t.Grace > 0 {
		return t.Grace
	}
	return Grace
}

// Track installs t as hs.ConnState (keeping any hook already there) and
// returns t.
func Track(hs *http.Server) *Tracker {
	t := &Tracker{}
	prev := hs.ConnState
	hs.ConnState = func(c net.Conn, st http.ConnState) {
		t.observe(c, st)
		if prev != nil {
			prev(c, st)
		}
	}
	return t
}

func (t *Tracker) observe(c net.Conn, st http.ConnState) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if st == http.StateNew {
		if t.fresh == nil {
			t.fresh = map[net.Conn]time.Time{}
		}
		t.fresh[c] = time.Now()
		return
	}
	delete(t.fresh, c)
}

// Shutdown runs hs.Shutdown(ctx) while closing, every quarter of the grace,
// connections that have sat unused since accept for the grace.
func (t *Tracker) Shutdown(ctx context.Context, hs *http.Server) error {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(t.grace() / 4)
		defer tick.Stop()
		for {
			t.sweep()
			select {
			case <-done:
				return
			case <-tick.C:
			}
		}
	}()
	err := hs.Shutdown(ctx)
	close(done)
	wg.Wait()
	return err
}

func (t *Tracker) sweep() {
	grace := t.grace()
	t.mu.Lock()
	defer t.mu.Unlock()
	for c, since := range t.fresh {
		if time.Since(since) >= grace {
			_ = c.Close()
			delete(t.fresh, c)
		}
	}
}

// Endpoint is a daemon's HTTP server: bound on first use (so a caller can
// learn the port before Run), served in the background, drained on shutdown.
// The adapter and the bridge share it.
type Endpoint struct {
	name string // error prefix: "adapter", "bridge-web"
	addr string
	hs   *http.Server
	tr   *Tracker

	mu sync.Mutex
	ln net.Listener
}

// NewEndpoint prepares an endpoint for h on addr; nothing is bound yet.
func NewEndpoint(name, addr string, h http.Handler) *Endpoint {
	hs := NewServer(h)
	return &Endpoint{name: name, addr: addr, hs: hs, tr: Track(hs)}
}

// Listen binds the address once and returns it.
func (e *Endpoint) Listen() (net.Addr, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.ln != nil {
		return e.ln.Addr(), nil
	}
	ln, err := net.Listen("tcp", e.addr)
	if err != nil {
		return nil, fmt.Errorf("%s: listen %s: %w", e.name, e.addr, err)
	}
	e.ln = ln
	return ln.Addr(), nil
}

// Serve binds if needed and serves in the background. The channel yields
// the error that stopped serving, if any, and closes once serving stops.
func (e *Endpoint) Serve() (<-chan error, error) {
	if _, err := e.Listen(); err != nil {
		return nil, err
	}
	errc := make(chan error, 1)
	go func() {
		if err := e.hs.Serve(e.ln); !errors.Is(err, http.ErrServerClosed) {
			errc <- err
		}
		close(errc)
	}()
	return errc, nil
}

// Shutdown stops serving and waits, within ctx, for requests in flight.
func (e *Endpoint) Shutdown(ctx context.Context) error {
	return e.tr.Shutdown(ctx, e.hs)
}

// Close releases the endpoint at once: the bound listener (served or not)
// and every connection. It is for an endpoint that will not be served after
// all; a served one drains with Shutdown.
func (e *Endpoint) Close() error {
	err := e.hs.Close()
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.ln != nil {
		if cerr := e.ln.Close(); cerr != nil && !errors.Is(cerr, net.ErrClosed) && err == nil {
			err = cerr
		}
	}
	return err
}

// LocalURL is the http:// URL that reaches a listener bound at a from this
// machine: an unspecified address (0.0.0.0, ::) is reached on 127.0.0.1.
func LocalURL(a net.Addr) string {
	tcp, ok := a.(*net.TCPAddr)
	if !ok || !tcp.IP.IsUnspecified() {
		return "http://" + a.String()
	}
	return "http://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(tcp.Port))
}

// Package station runs the relay and the components that feed it (the hook
// adapter, the kimi web bridge, an exporter) in one process sharing one
// token, as `aep-kimi up` does: it binds the relay's port before anything
// is built on it, releases what it bound if start-up stops short,
// supervises the components (one failing stops all, the relay last), and
// writes the start-up banner.
package station

import (
	"context"
	"errors"
	"fmt"
	"net"

	"golang.org/x/sync/errgroup"

	"github.com/aep-kimi/aep-kimi/internal/httpdrain"
	"github.com/aep-kimi/aep-kimi/relay"
)

// Component is one part of the station, run until its context is done.
type Component struct {
	Name string
	Run  func(context.Context) error
}

// Station is a relay bound to its address and the components added around
// it. The zero value is not usable: start with Listen.
type Station struct {
	relay   *relay.Server
	ln      net.Listener
	intake  []Component
	release []func()
}

// Listen binds the relay's address, so its URL is known to the components
// built next.
func Listen(srv *relay.Server, addr string) (*Station, error) {
	if srv == nil {
		return nil, errors.New("station: no relay")
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("relay: %w", err)
	}
	s := &Station{relay: srv, ln: ln}
	s.release = append(s.release, func() { ln.Close() })
	return s, nil
}

// Addr is where the relay listens.
func (s *Station) Addr() net.Addr { return s.ln.Addr() }

// RelayURL is the URL that reaches the relay from this machine.
func (s *Station) RelayURL() string { return httpdrain.LocalURL(s.ln.Addr()) }

// Add adds a component that runs beside the relay and feeds it. release,
// when set, frees what the component bound before it runs (its listener):
// Close calls it if the station never runs.
func (s *Station) Add(c Component, release func()) {
	s.intake = append(s.intake, c)
	if release != nil {
		s.release = append(s.release, release)
	}
}

// Close releases what is bound when the station will not run after all. It
// does nothing once Run has started: each component then releases its own.
func (s *Station) Close() {
	for _, r := range s.release {
		r()
	}
	s.release = nil
}

// Run serves the relay and runs the components until ctx is done or any
// of them fails or stops on its own; then it stops them all and returns
// the first failure.
func (s *Station) Run(ctx context.Context) error {
	s.release = nil // from here each component releases its own
	ln := s.ln
	return Supervise(ctx, Component{"relay", func(ctx context.Context) error { return s.relay.Serve(ctx, ln) }}, s.intake...)
}

// Supervise runs the collector and the intake components until ctx is done
// or any of them fails or stops on its own; then it stops them all and
// returns the first failure. Shutdown order: intake stops and flushes to
// the collector first; then the collector drains its consumers.
func Supervise(ctx context.Context, collector Component, intake ...Component) error {
	g, gctx := errgroup.WithContext(ctx)
	// The collector outlives the intake: its context ends only once they
	// stop.
	collectorCtx, stopCollector := context.WithCancel(context.WithoutCancel(ctx))
	g.Go(func() error { return collector.untilDone(collectorCtx) })
	g.Go(func() error {
		defer stopCollector()
		ig, ictx := errgroup.WithContext(gctx)
		for _, c := range intake {
			ig.Go(func() error { return c.untilDone(ictx) })
		}
		return ig.Wait()
	})
	return g.Wait()
}

// untilDone runs the component; one that returns before its context is
// done has failed, even without an error.
func (c Component) untilDone(ctx context.Context) error {
	err := c.Run(ctx)
	if err == nil && ctx.Err() == nil {
		err = fmt.Errorf("%s stopped on its own", c.Name)
	}
	return err
}

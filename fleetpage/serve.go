package fleetpage

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/aep-kimi/aep-kimi/internal/httpdrain"
	"github.com/aep-kimi/aep-kimi/internal/httpguard"
	"github.com/aep-kimi/aep-kimi/internal/tokenfile"
)

// DefaultDashListen is where a dash serves: loopback only.
const DefaultDashListen = "127.0.0.1:8790"

// dashDrain bounds a dash's shutdown: its open streams are proxies that end
// with it.
const dashDrain = 2 * time.Second

// dashTokenBytes is the entropy of a dash's own login token.
const dashTokenBytes = 24

// DashServer is the page fed from several relays (aep-kimi dash), bound to
// a loopback port, logging in with a fresh token of its own: the relays'
// tokens stay in this process.
type DashServer struct {
	ep    *httpdrain.Endpoint
	url   string
	token string
}

// NewDashServer prepares a dash for relays on listen, which must be
// loopback; nothing is bound yet.
func NewDashServer(listen string, relays []Upstream, log *slog.Logger) (*DashServer, error) {
	if !httpguard.LoopbackListen(listen) {
		return nil, fmt.Errorf("--listen %s is not loopback: the dash holds the relays' tokens and serves only this machine", listen)
	}
	token, err := tokenfile.Random(dashTokenBytes)
	if err != nil {
		return nil, err
	}
	h, err := NewDash(Config{Token: token, Logger: log}, relays)
	if err != nil {
		return nil, err
	}
	return &DashServer{ep: httpdrain.NewEndpoint("dash", listen, httpguard.Hosts(nil)(h)), token: token}, nil
}

// Listen binds the dash's address.
func (d *DashServer) Listen() error {
	addr, err := d.ep.Listen()
	if err != nil {
		return err
	}
	d.url = httpdrain.LocalURL(addr)
	return nil
}

// URL is the dash's base URL, once bound.
func (d *DashServer) URL() string { return d.url }

// LoginURL is the URL that logs a browser in: it carries the token.
func (d *DashServer) LoginURL() string { return LoginURL(d.url, d.token) }

// Serve binds if needed and serves until ctx is done, then drains for a moment and closes what
// is still open (the proxied streams end with the dash).
func (d *DashServer) Serve(ctx context.Context) error {
	if err := d.Listen(); err != nil {
		return err
	}
	errc, err := d.ep.Serve()
	if err != nil {
		return err
	}
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), dashDrain)
	defer cancel()
	if err := d.ep.Shutdown(sctx); err != nil {
		_ = d.ep.Close() // the proxied streams end with the process
	}
	return nil
}

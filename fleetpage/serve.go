package fleetpage

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
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

// ParseUpstreams reads dash's --relay values: URL, or URL,TOKEN_FILE. A
// URL without a file gets the local token (AEP_TOKEN, else $AEP_HOME/token)
// only when it is on loopback; another host gets none, with a note on warn.
func ParseUpstreams(values []string, getenv func(string) string, warn io.Writer) ([]Upstream, error) {
	out := make([]Upstream, 0, len(values))
	for _, v := range values {
		u, file, _ := strings.Cut(v, ",")
		u, file = strings.TrimSpace(u), strings.TrimSpace(file)
		if u == "" {
			return nil, errors.New("--relay: empty URL")
		}
		shown := httpguard.DisplayURL(u)
		if file == "" && !httpguard.LoopbackURL(u) {
			fmt.Fprintf(warn, "aep-kimi dash: %s is not on this machine: the local token is not sent there (read without one); name its token file to log in: --relay %s,TOKEN_FILE\n", shown, shown)
			out = append(out, Upstream{URL: u})
			continue
		}
		tok, err := tokenfile.Client(getenv, file)
		if err != nil {
			return nil, fmt.Errorf("--relay %s: %w", shown, err)
		}
		out = append(out, Upstream{URL: u, Token: tok})
	}
	return out, nil
}

// WriteStart says what the dash reads and where its page is. The login URL
// carries the dash's token: only a terminal sees it, a redirect or a log
// gets the path of a private file under home holding it.
func (d *DashServer) WriteStart(w io.Writer, relays []Upstream, terminal bool, home string) error {
	fmt.Fprintf(w, "aep-kimi dash: reading %d relay(s) (Ctrl-C to stop)\n", len(relays))
	for _, u := range relays {
		fmt.Fprintf(w, "  relay  %s\n", httpguard.DisplayURL(u.URL))
	}
	if terminal {
		fmt.Fprintf(w, "  page   %s\n", d.LoginURL())
		return nil
	}
	path, err := WriteLoginFile(home, DashOpenFileName, d.LoginURL())
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "  page   %s   (log in: open %s, mode 0600)\n", d.URL(), path)
	return nil
}

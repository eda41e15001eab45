package fleetpage

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/coder/websocket"

	"github.com/aep-kimi/aep-kimi/internal/credreg"
	"github.com/aep-kimi/aep-kimi/internal/httpguard"
	"github.com/aep-kimi/aep-kimi/relay/wire"
)

// Upstream is one relay a dash reads: a label, its base URL and its token.
type Upstream struct {
	Name, URL, Token string
	// HTTP reaches the relay (an https relay's CA: --ca); nil means the
	// default client.
	HTTP *http.Client
}

// dashPrefix is the path each upstream's /stream and /socket are proxied
// under: /r/{index}/stream, /r/{index}/socket.
const dashPrefix = "/r/"

// Bounds of the dash's socket proxy.
const (
	// dashHelloTimeout bounds the wait for the page's hello.
	dashHelloTimeout = 10 * time.Second
	// dashPageMessage bounds one message from the page: commands and
	// subscriptions, never events.
	dashPageMessage = 1 << 20
	// dashRelayMessage bounds one message from a relay: its largest event.
	dashRelayMessage = 64 << 20
	// dashWriteTimeout bounds one write to either side.
	dashWriteTimeout = 10 * time.Second
)

// NewDash serves the page fed from several relays (aep-kimi dash). The page
// logs in with cfg.Token, the dash's own; each relay's token stays in this
// process: a logged-in browser reaches relay i's /stream and /socket under
// /r/{i}/ on the dash's origin, and the dash adds the bearer token there.
// Streams are proxied as they are; sockets message by message, so the
// page's hello proves its login here, and the dash's login ending (logout,
// expiry) closes them with a closing frame.
func NewDash(cfg Config, relays []Upstream) (http.Handler, error) {
	if len(relays) == 0 {
		return nil, errors.New("dash: no relays")
	}
	if httpguard.TrimToken(cfg.Token) == "" {
		return nil, errors.New("dash: the page needs its own login token")
	}
	d := &dash{ups: make([]dashUpstream, len(relays))}
	cfg.Relays = make([]RelayRef, len(relays))
	names := map[string]bool{}
	for i, up := range relays {
		u, err := url.Parse(strings.TrimRight(up.URL, "/"))
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("dash: relay %q: want an http(s) base URL", up.URL)
		}
		name := up.Name
		if name == "" {
			name = u.Host
		}
		if names[name] {
			return nil, fmt.Errorf("dash: two relays named %q", name)
		}
		names[name] = true
		cfg.Relays[i] = RelayRef{Name: name, Base: dashPrefix + strconv.Itoa(i)}
		tok := httpguard.TrimToken(up.Token)
		ws := *u
		ws.Scheme = strings.Replace(u.Scheme, "http", "ws", 1)
		ws.Path += "/socket"
		d.ups[i] = dashUpstream{stream: upstreamProxy(u, tok, up.HTTP), socket: ws.String(), token: tok, http: up.HTTP}
	}
	page, err := New(cfg)
	if err != nil {
		return nil, err
	}
	d.page = page
	return d, nil
}

type dash struct {
	page *Page
	ups  []dashUpstream
}

type dashUpstream struct {
	stream http.Handler // the relay's /stream, proxied
	socket string       // the relay's /socket URL
	token  string
	http   *http.Client // nil: the default
}

func (d *dash) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rest, ok := strings.CutPrefix(r.URL.Path, dashPrefix)
	if !ok {
		d.page.ServeHTTP(w, r)
		return
	}
	idx, path, _ := strings.Cut(rest, "/")
	i, err := strconv.Atoi(idx)
	if err != nil || i < 0 || i >= len(d.ups) || (path != "stream" && path != "socket") {
		httpguard.WriteError(w, http.StatusNotFound, "not-found", "no such relay endpoint: /r/{index}/stream or /r/{index}/socket")
		return
	}
	socket := path == "socket"
	var bind func(string) bool
	lease, ok := d.page.reg.Admit(func(tx *credreg.Tx) (credreg.Credential, bool) {
		cred, _, b, ok := d.page.Admit(tx, r, socket)
		bind = b
		return cred, ok
	})
	if !ok {
		httpguard.WriteError(w, http.StatusUnauthorized, "unauthorized", "log in to the dash page first (its URL carries the login after #)")
		return
	}
	defer lease.Release()
	if socket {
		d.ups[i].proxySocket(w, r, lease, bind)
		return
	}
	// The stream ends with the login: cancelling the proxied request
	// aborts the response.
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	defer lease.AfterEnd(cancel)()
	r2 := r.Clone(ctx)
	r2.URL.Path = "/stream"
	r2.URL.RawPath = ""
	d.ups[i].stream.ServeHTTP(w, r2)
}

// upstreamProxy forwards a logged-in browser's stream to one relay as a
// plain client with that relay's token: the browser's cookie, origin and
// login secret stay here.
func upstreamProxy(target *url.URL, token string, hc *http.Client) http.Handler {
	var transport http.RoundTripper
	if hc != nil {
		transport = hc.Transport
	}
	return &httputil.ReverseProxy{
		Transport: transport,
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
			stripBrowser(pr.Out.Header)
			if token != "" {
				pr.Out.Header.Set("Authorization", "Bearer "+token)
			}
		},
		FlushInterval: -1, // SSE: every event as it comes
		ErrorHandler: func(w http.ResponseWriter, _ *http.Request, err error) {
			httpguard.WriteError(w, http.StatusBadGateway, "relay-unreachable", "the relay did not answer: "+err.Error())
		},
	}
}

// stripBrowser removes what a browser's request carries that is the
// dash's, not the relay's.
func stripBrowser(h http.Header) {
	for _, k := range []string{"Cookie", "Origin", "Referer", "Authorization", BindHeader, "Sec-Fetch-Site", "Sec-Fetch-Mode", "Sec-Fetch-Dest"} {
		h.Del(k)
	}
}

// proxySocket carries a logged-in browser's socket to the relay message by
// message. The page's hello must prove its login when the upgrade could
// not (bind); it goes on to the relay without its credentials, behind the
// relay's token. The login ending closes the page's side with a closing
// frame naming why.
func (u dashUpstream) proxySocket(w http.ResponseWriter, r *http.Request, lease *credreg.Lease, bind func(string) bool) {
	page, err := websocket.Accept(w, r, nil) // the page's own origin only
	if err != nil {
		return
	}
	defer page.CloseNow() //nolint:errcheck // closed below when it matters
	page.SetReadLimit(dashPageMessage)
	// Until the hello is through, the login ending just cuts the socket
	// (reading under a cancelled context closes it); from then on the
	// page is told why.
	ctx, cancel := context.WithCancel(context.WithoutCancel(r.Context()))
	defer cancel()
	hctx, hcancel := context.WithTimeout(ctx, dashHelloTimeout)
	defer hcancel()
	stop := lease.AfterEnd(hcancel)
	defer stop()
	refuse := func(code, detail string) {
		wctx, done := context.WithTimeout(ctx, dashWriteTimeout)
		defer done()
		_ = page.Write(wctx, websocket.MessageText, wire.Encode(&wire.Error{Code: code, Detail: detail}))
		_ = page.Close(websocket.StatusPolicyViolation, code)
	}
	typ, hello, err := page.Read(hctx)
	if err != nil {
		return
	}
	f, _ := wire.Parse(hello)
	h, _ := f.(*wire.Hello)
	switch {
	case typ != websocket.MessageText || h == nil:
		refuse(wire.CodeHelloRequired, "the first frame on a socket must be hello")
		return
	case bind != nil && (h.Auth == nil || !bind(h.Auth.Login)):
		refuse(wire.CodeUnauthorized, "the hello does not carry this browser's login (reload the page, or open the dash's URL again)")
		return
	}
	hdr := http.Header{}
	if u.token != "" {
		hdr.Set("Authorization", "Bearer "+u.token)
	}
	relay, _, err := websocket.Dial(hctx, u.socket, &websocket.DialOptions{HTTPHeader: hdr, HTTPClient: u.http})
	if err != nil {
		if !lease.Ended() {
			refuse(wire.CodeNoRoute, "the relay did not answer")
		}
		return
	}
	defer relay.CloseNow() //nolint:errcheck // closed below when it matters
	relay.SetReadLimit(dashRelayMessage)
	if relay.Write(hctx, websocket.MessageText, withoutAuth(hello)) != nil {
		return
	}
	stop()
	done := make(chan struct{}, 2)
	go func() { pump(ctx, relay, page, lease); done <- struct{}{} }()
	go func() { pump(ctx, page, relay, lease); done <- struct{}{} }()
	select {
	case <-done:
		_ = page.Close(websocket.StatusGoingAway, "relay connection ended")
	case <-lease.Done():
		closeRevoked(ctx, page, lease)
	}
	_ = relay.Close(websocket.StatusNormalClosure, "")
	cancel()
	<-done
	<-done
}

// pump copies messages from one side to the other until either fails or
// the login ends; a message read once it has ended is dropped.
func pump(ctx context.Context, dst, src *websocket.Conn, lease *credreg.Lease) {
	for {
		typ, b, err := src.Read(ctx)
		if err != nil || lease.Ended() {
			return
		}
		wctx, cancel := context.WithTimeout(ctx, dashWriteTimeout)
		err = dst.Write(wctx, typ, b)
		cancel()
		if err != nil {
			return
		}
	}
}

// closeRevoked ends a socket whose login ended with a closing frame naming
// why (AEP-0003 §3.5.4; the dash holds no positions: the page keeps its own).
func closeRevoked(ctx context.Context, c *websocket.Conn, lease *credreg.Lease) {
	ctx, cancel := context.WithTimeout(ctx, dashWriteTimeout)
	defer cancel()
	_ = c.Write(ctx, websocket.MessageText, wire.Encode(&wire.Closing{Reason: lease.Reason(), Delivered: []wire.Delivered{}}))
	_ = c.Close(websocket.StatusPolicyViolation, lease.Reason())
}

// withoutAuth is a hello without its auth member: the page's login is the
// dash's, never the relay's.
func withoutAuth(hello []byte) []byte {
	var m map[string]json.RawMessage
	if json.Unmarshal(hello, &m) != nil {
		return hello
	}
	if _, ok := m["auth"]; !ok {
		return hello
	}
	delete(m, "auth")
	b, err := json.Marshal(m)
	if err != nil {
		return hello
	}
	return b
}

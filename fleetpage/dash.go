package fleetpage

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"

	"github.com/aep-kimi/aep-kimi/internal/httpguard"
)

// Upstream is one relay a dash reads: a label, its base URL and its token.
type Upstream struct {
	Name, URL, Token string
}

// dashPrefix is the path each upstream's /stream and /socket are proxied
// under: /r/{index}/stream, /r/{index}/socket.
const dashPrefix = "/r/"

// NewDash serves the page fed from several relays (aep-kimi dash). The page
// logs in with cfg.Token, the dash's own; each relay's token stays in this
// process: a logged-in browser reaches relay i's /stream and /socket under
// /r/{i}/ on the dash's origin, and the proxy adds the bearer token there.
func NewDash(cfg Config, relays []Upstream) (http.Handler, error) {
	if len(relays) == 0 {
		return nil, errors.New("dash: no relays")
	}
	if httpguard.TrimToken(cfg.Token) == "" {
		return nil, errors.New("dash: the page needs its own login token")
	}
	proxies := make([]http.Handler, len(relays))
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
		proxies[i] = upstreamProxy(u, httpguard.TrimToken(up.Token))
	}
	page, err := New(cfg)
	if err != nil {
		return nil, err
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rest, ok := strings.CutPrefix(r.URL.Path, dashPrefix)
		if !ok {
			page.ServeHTTP(w, r)
			return
		}
		idx, path, _ := strings.Cut(rest, "/")
		i, err := strconv.Atoi(idx)
		if err != nil || i < 0 || i >= len(proxies) || (path != "stream" && path != "socket") {
			httpguard.WriteError(w, http.StatusNotFound, "not-found", "no such relay endpoint: /r/{index}/stream or /r/{index}/socket")
			return
		}
		if !page.Admits(r) {
			httpguard.WriteError(w, http.StatusUnauthorized, "unauthorized", "log in to the dash page first (its URL carries the login after #)")
			return
		}
		r2 := r.Clone(r.Context())
		r2.URL.Path = "/" + path
		r2.URL.RawPath = ""
		proxies[i].ServeHTTP(w, r2)
	}), nil
}

// upstreamProxy forwards a logged-in browser's stream or socket to one relay
// as a plain client with that relay's token: the browser's cookie and origin
// stay here.
func upstreamProxy(target *url.URL, token string) http.Handler {
	return &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
			h := pr.Out.Header
			for _, k := range []string{"Cookie", "Origin", "Referer", "Authorization", "Sec-Fetch-Site", "Sec-Fetch-Mode", "Sec-Fetch-Dest"} {
				h.Del(k)
			}
			if token != "" {
				h.Set("Authorization", "Bearer "+token)
			}
		},
		FlushInterval: -1, // SSE: every event as it comes
		ErrorHandler: func(w http.ResponseWriter, _ *http.Request, err error) {
			httpguard.WriteError(w, http.StatusBadGateway, "relay-unreachable", "the relay did not answer: "+err.Error())
		},
	}
}

package httpguard

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
)

// HSTS is the Strict-Transport-Security a daemon sends on every response
// it serves over TLS: browsers then reach it only over https for a year.
// It names no subdomains: the relay does not speak for the rest of its
// domain.
const HSTS = "max-age=31536000"

// CheckTransport refuses a daemon reachable off this host (public, or a
// non-loopback listen address) that would serve plain HTTP: its token and
// the page's login cookie would cross the network in clear. It serves TLS
// itself (tls), or a TLS-terminating proxy fronts it (behindProxy). The
// error is one line for the operator.
func CheckTransport(listen string, public, tls, behindProxy bool) error {
	if tls || behindProxy || (!public && LoopbackListen(listen)) {
		return nil
	}
	where := "on " + listen
	if public {
		where = "on all interfaces (public mode)"
	}
	return fmt.Errorf("listening %s needs TLS: give --tls-cert and --tls-key, or --acme-domain, or --behind-proxy when a TLS-terminating proxy fronts this port; without it the token crosses the network in clear", where)
}

type secureKey struct{}

// Forwarded is the one place the X-Forwarded-Proto and X-Forwarded-For
// headers are read, and only when trusted: a TLS-terminating proxy in
// front of the daemon (--behind-proxy) sets them. Trusted, a request the
// proxy says arrived over https counts as secure (Secure), and its
// RemoteAddr becomes the client address the proxy appended last to
// X-Forwarded-For, so per-client limits see clients, not the proxy.
// Untrusted, both headers are ignored whatever they say. A secure request
// is answered with HSTS.
func Forwarded(trusted bool) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if trusted {
				r = fromProxy(r)
			}
			if Secure(r) {
				w.Header().Set("Strict-Transport-Security", HSTS)
			}
			next.ServeHTTP(w, r)
		})
	}
}

// fromProxy is r as a trusted proxy describes it.
func fromProxy(r *http.Request) *http.Request {
	secure := strings.EqualFold(lastListed(r.Header.Values("X-Forwarded-Proto")), "https")
	client := lastListed(r.Header.Values("X-Forwarded-For"))
	if !secure && client == "" {
		return r
	}
	r2 := r
	if secure {
		r2 = r.WithContext(context.WithValue(r.Context(), secureKey{}, true))
	}
	if ip, err := netip.ParseAddr(strings.Trim(client, "[]")); err == nil {
		if r2 == r {
			r2 = r.Clone(r.Context())
		}
		r2.RemoteAddr = net.JoinHostPort(ip.String(), "0")
	}
	return r2
}

// lastListed is the last entry of a comma-separated header (its values
// joined): the one the nearest proxy wrote.
func lastListed(values []string) string {
	if len(values) == 0 {
		return ""
	}
	v := values[len(values)-1]
	if i := strings.LastIndexByte(v, ','); i >= 0 {
		v = v[i+1:]
	}
	return strings.TrimSpace(v)
}

// Secure reports whether the request reached the daemon over TLS: its own,
// or a trusted proxy's (Forwarded). A forged X-Forwarded-Proto never
// counts.
func Secure(r *http.Request) bool {
	if r.TLS != nil {
		return true
	}
	v, _ := r.Context().Value(secureKey{}).(bool)
	return v
}

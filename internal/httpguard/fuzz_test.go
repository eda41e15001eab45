package httpguard

import (
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// FuzzHosts: any allow-list text and any Host either parse and decide, or
// are refused; a name outside loopback passes only when listed.
func FuzzHosts(f *testing.F) {
	f.Add("relay.example.com,*.corp.example", "evil.example:8787")
	f.Add("*", "x")
	f.Add("", "127.0.0.1.nip.io")
	f.Add("", "[::1]:80")
	f.Add("a", "A.:1")
	f.Add("", "[::1%25lo]:80")
	f.Fuzz(func(t *testing.T, list, host string) {
		allowed, err := ParseAllowedHosts(list)
		if err != nil {
			return
		}
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.Host = host
		ok := hostAllowed(r, allowed)
		if ok && host != "" && !loopbackOracle(host) && len(allowed) == 0 {
			t.Fatalf("Host %q allowed with an empty list", host)
		}
	})
}

// loopbackOracle decides loopback with net.ParseIP, independently of the
// netip-based code under test.
func loopbackOracle(h string) bool {
	if hh, _, err := net.SplitHostPort(h); err == nil {
		h = hh
	}
	h = strings.TrimSuffix(strings.ToLower(strings.Trim(h, "[]")), ".")
	if h == "localhost" || strings.HasSuffix(h, ".localhost") {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

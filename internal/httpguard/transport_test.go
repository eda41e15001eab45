package httpguard_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/aep-kimi/aep-kimi/internal/httpguard"
)

func TestCheckTransport(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		listen              string
		public, tls, behind bool
		ok                  bool
	}{
		{"127.0.0.1:8787", false, false, false, true}, // the default, unchanged
		{"[::1]:8787", false, false, false, true},
		{"localhost:8787", false, false, false, true},
		{"127.0.0.1:8787", true, false, false, false}, // public
		{"0.0.0.0:8787", false, false, false, false},
		{"192.168.1.5:8787", false, false, false, false},
		{":8787", false, false, false, false},
		{"0.0.0.0:8787", false, true, false, true},
		{"0.0.0.0:8787", false, false, true, true},
		{"0.0.0.0:8787", true, true, false, true},
	} {
		err := httpguard.CheckTransport(tc.listen, tc.public, tc.tls, tc.behind)
		if (err == nil) != tc.ok {
			t.Errorf("%+v: %v", tc, err)
		}
		if err != nil && (strings.Contains(err.Error(), "\n") || !strings.Contains(err.Error(), "--behind-proxy")) {
			t.Errorf("%+v: %q is not one line naming the ways out", tc, err)
		}
	}
}

// seen is what a handler behind Forwarded sees of a request.
type seen struct {
	secure bool
	remote string
	hsts   string
}

func forwarded(t *testing.T, trusted bool, header map[string]string) seen {
	t.Helper()
	var s seen
	h := httpguard.Forwarded(trusted)(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		s.secure, s.remote = httpguard.Secure(r), r.RemoteAddr
	}))
	srv := httptest.NewServer(h)
	defer srv.Close()
	req, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
	for k, v := range header {
		req.Header.Add(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	s.hsts = resp.Header.Get("Strict-Transport-Security")
	return s
}

// Without a proxy in front, X-Forwarded-Proto and X-Forwarded-For are
// anyone's to send and change nothing; behind one, the last entry (the
// proxy's own) is believed.
func TestForwarded(t *testing.T) {
	t.Parallel()
	forged := map[string]string{"X-Forwarded-Proto": "https", "X-Forwarded-For": "203.0.113.9"}
	if s := forwarded(t, false, forged); s.secure || s.hsts != "" || !strings.HasPrefix(s.remote, "127.0.0.1:") {
		t.Errorf("untrusted, forged headers: %+v, want plain and the real peer", s)
	}
	if s := forwarded(t, true, forged); !s.secure || s.hsts != httpguard.HSTS || s.remote != "203.0.113.9:0" {
		t.Errorf("behind a proxy: %+v, want secure, HSTS and the client the proxy named", s)
	}
	// A client's own entries come first; the proxy appends the truth.
	spoof := map[string]string{"X-Forwarded-Proto": "https, http", "X-Forwarded-For": "198.51.100.1, 203.0.113.9"}
	if s := forwarded(t, true, spoof); s.secure || s.remote != "203.0.113.9:0" {
		t.Errorf("behind a proxy, client-prepended entries: %+v, want the proxy's (http, 203.0.113.9)", s)
	}
	if s := forwarded(t, true, map[string]string{"X-Forwarded-For": "not an address"}); !strings.HasPrefix(s.remote, "127.0.0.1:") {
		t.Errorf("behind a proxy, garbage X-Forwarded-For: %+v, want the peer kept", s)
	}
	if s := forwarded(t, true, nil); s.secure || s.hsts != "" {
		t.Errorf("behind a proxy, no headers: %+v", s)
	}
}

// Over TLS the page's origin is the https one: a plain-http page of the
// same host is another origin.
func TestSameOriginScheme(t *testing.T) {
	t.Parallel()
	var got []bool
	h := httpguard.Forwarded(true)(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		got = append(got, httpguard.SameOrigin(r))
	}))
	srv := httptest.NewServer(h)
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	for _, tc := range []struct {
		proto, origin string
		want          bool
	}{
		{"", "http://" + host, true},
		{"", "https://" + host, true},
		{"https", "https://" + host, true},
		{"https", "http://" + host, false},
		{"https", "https://evil.example", false},
	} {
		got = nil
		req, _ := http.NewRequest(http.MethodPost, srv.URL, nil)
		req.Header.Set("Origin", tc.origin)
		if tc.proto != "" {
			req.Header.Set("X-Forwarded-Proto", tc.proto)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if len(got) != 1 || got[0] != tc.want {
			t.Errorf("proto %q origin %q: same origin %v, want %v", tc.proto, tc.origin, got, tc.want)
		}
	}
}

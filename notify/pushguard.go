package notify

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"syscall"
	"time"
)

// Anyone with a token registers a push endpoint and learns whether it
// answered, so the relay must not become a way to reach what only it can
// reach: pushes go only to public https push services. The address is
// checked when the socket connects, so a name that resolves somewhere
// private (at once or later: DNS rebinding) is refused too.

// errNonPublic marks a push refused because its service's address is not
// public (loopback, private, link-local, CGNAT, unspecified, multicast).
var errNonPublic = errors.New("the push service is not at a public address")

// pushDialTimeout bounds connecting to a push service.
const pushDialTimeout = 5 * time.Second

// nonPublic are the ranges netip's predicates leave out that no public
// push service is in: "this network", CGNAT (RFC 6598), IETF protocol
// assignments, benchmarking, reserved and broadcast, and NAT64 (which
// reaches any IPv4 address, private ones included).
var nonPublic = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),
	netip.MustParsePrefix("100.64.0.0/10"),
	netip.MustParsePrefix("192.0.0.0/24"),
	netip.MustParsePrefix("198.18.0.0/15"),
	netip.MustParsePrefix("240.0.0.0/4"),
	netip.MustParsePrefix("64:ff9b::/96"),
	netip.MustParsePrefix("64:ff9b:1::/48"),
}

// publicAddr reports whether a is an address a public push service may be
// at.
func publicAddr(a netip.Addr) bool {
	a = a.Unmap()
	if !a.IsValid() || a.IsLoopback() || a.IsPrivate() || a.IsUnspecified() || a.IsMulticast() ||
		a.IsLinkLocalUnicast() || a.IsLinkLocalMulticast() || a.IsInterfaceLocalMulticast() {
		return false
	}
	for _, p := range nonPublic {
		if p.Contains(a) {
			return false
		}
	}
	return true
}

// inAllow reports whether a is in allow (Config.PushServiceAllow).
func inAllow(a netip.Addr, allow []netip.Prefix) bool {
	a = a.WithZone("").Unmap()
	for _, p := range allow {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// pushAllowed reports whether a push service may be at a: a public
// address, or one in allow.
func pushAllowed(a netip.Addr, allow []netip.Prefix) bool {
	return inAllow(a, allow) || publicAddr(a)
}

// ParsePushAllow reads AEP_NOTIFY_PUSH_ALLOW: comma-separated addresses or
// prefixes (127.0.0.1/32) where a push service may be besides public
// addresses, over plain http too. A test and lab knob.
func ParsePushAllow(s string) ([]netip.Prefix, error) {
	var allow []netip.Prefix
	for f := range strings.SplitSeq(s, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		p, err := netip.ParsePrefix(f)
		if err != nil {
			a, aerr := netip.ParseAddr(f)
			if aerr != nil {
				return nil, fmt.Errorf("notify: AEP_NOTIFY_PUSH_ALLOW %q: want addresses or prefixes such as 127.0.0.1/32", f)
			}
			p = netip.PrefixFrom(a, a.BitLen())
		}
		allow = append(allow, p.Masked())
	}
	return allow, nil
}

// newPushClient is the HTTP client of Web Push: it connects only to
// allowed addresses, through no proxy, and follows no redirect (a push
// service answers where it is asked).
func newPushClient(allow []netip.Prefix) *http.Client {
	d := &net.Dialer{Timeout: pushDialTimeout, Control: func(_, address string, _ syscall.RawConn) error {
		ap, err := netip.ParseAddrPort(address)
		if err != nil {
			return fmt.Errorf("push service address %q: %w", address, errNonPublic)
		}
		if !pushAllowed(ap.Addr(), allow) {
			return fmt.Errorf("%s: %w", ap.Addr(), errNonPublic)
		}
		return nil
	}}
	return &http.Client{
		Timeout: SendTimeout,
		Transport: &http.Transport{
			DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
				return d.DialContext(ctx, network, addr)
			},
			ForceAttemptHTTP2:   true,
			MaxIdleConns:        16,
			IdleConnTimeout:     90 * time.Second,
			TLSHandshakeTimeout: pushDialTimeout,
		},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// checkEndpoint accepts a push service's URL: https, naming a host name or
// a public address; an address in allow may be named over plain http too.
// Names are checked again when the push connects.
func checkEndpoint(raw string, allow []netip.Prefix) error {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" || u.User != nil {
		return errors.New("the subscription's endpoint is not an absolute URL")
	}
	if a, err := netip.ParseAddr(u.Hostname()); err == nil {
		if !pushAllowed(a, allow) {
			return fmt.Errorf("the subscription's endpoint names %s, not a public address: the relay pushes only to public push services", a)
		}
		if u.Scheme == "http" && inAllow(a, allow) {
			return nil // a push service allowed on this machine or lab network
		}
	}
	if u.Scheme != "https" {
		return errors.New("the subscription's endpoint must be an https URL")
	}
	return nil
}

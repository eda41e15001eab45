// Package netaddr finds addresses of this machine for tests that need a
// host off loopback.
package netaddr

import (
	"net"
	"testing"
)

// NonLoopbackIPv4 is an IPv4 address of this machine off loopback (and not
// link-local), where a listener on every interface answers: it stands in for
// a remote host. The test is skipped when the machine has none.
func NonLoopbackIPv4(t testing.TB) string {
	t.Helper()
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Skip(err)
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && !n.IP.IsLoopback() && !n.IP.IsLinkLocalUnicast() {
			return n.IP.String()
		}
	}
	t.Skip("no non-loopback IPv4 address on this machine")
	return ""
}

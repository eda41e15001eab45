// Package netaddr finds addresses for tests: a loopback port nothing
// listens on, and this machine's address off loopback.
package netaddr

import (
	"math/rand/v2"
	"net"
	"strconv"
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

// FreeAddr is a loopback address (127.0.0.1:port) nothing listened on when
// it was picked: for a daemon to bind, or for a peer that is not there.
// Another process may take it meanwhile; a test that starts a daemon there
// checks the daemon says it listens on it.
func FreeAddr(t testing.TB) string {
	t.Helper()
	addr, err := Free()
	if err != nil {
		t.Fatal(err)
	}
	return addr
}

// Ports Free picks from: below the ephemeral ranges (Linux 32768-60999,
// macOS and Windows 49152-65535). A port the kernel hands out for :0 is
// one its outgoing connections take too, and with end-to-end packages
// running side by side one of theirs took a port between its pick and a
// daemon's bind ("address already in use").
const (
	pickLow, pickHigh = 20000, 32000
	pickTries         = 64
)

// Free is FreeAddr for a program (the load tools) rather than a test.
func Free() (string, error) {
	for range pickTries {
		addr := "127.0.0.1:" + strconv.Itoa(pickLow+rand.IntN(pickHigh-pickLow))
		if ln, err := net.Listen("tcp", addr); err == nil {
			ln.Close()
			return addr, nil
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// FreePort is FreeAddr's port.
func FreePort(t testing.TB) int {
	t.Helper()
	_, port, _ := net.SplitHostPort(FreeAddr(t))
	n, err := strconv.Atoi(port)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

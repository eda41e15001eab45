// The documented ACME command against Pebble, a real test CA: the
// relay gets and serves its certificate.

package e2e

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aep-kimi/aep-kimi/internal/testkit/netaddr"
	"github.com/aep-kimi/aep-kimi/internal/testkit/pebbletest"
	"github.com/aep-kimi/aep-kimi/internal/testkit/poll"
	"github.com/aep-kimi/aep-kimi/internal/testkit/proctest"
	"github.com/aep-kimi/aep-kimi/internal/testkit/stacktest"
)

// docs/team.md's ACME command against Pebble, Let's Encrypt's test CA: the
// relay asks for a certificate at start, answers Pebble's TLS-ALPN-01
// challenge on its own port, then serves the certificate Pebble issued
// (with HSTS), kept under $AEP_HOME/acme (0700, files 0600); restarted
// with Pebble gone, it serves it from there.
func TestE2EACMEPebble(t *testing.T) {
	t.Parallel()
	bin := stacktest.Binaries(t)
	port := netaddr.FreePort(t)
	pebble := pebbletest.Start(t, port)
	roots, _ := pebble.Roots(t)
	home := t.TempDir()
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	const token = "0123456789abcdef-acme-e2e"
	start := func() *proctest.Proc {
		cmd := exec.Command(filepath.Join(bin, "aep-kimi"), "relay", "--listen", addr,
			"--acme-domain", stacktest.AcmeName, "--acme-email", "ops@example.com", "--acme-ca", pebble.Directory)
		// Pebble's directory is served with a certificate of the test's
		// CA: the relay's ACME client trusts it through Go's standard
		// variable.
		cmd.Env = append(stacktest.CleanEnv(home, "AEP_TOKEN="+token), "SSL_CERT_FILE="+pebble.CAFile)
		return proctest.Start(t, "aep-kimi relay (acme)", cmd)
	}
	relay := start()

	// A client of the relay: the name in SNI, dialling the relay's port,
	// trusting only Pebble's root.
	dial := func(ctx context.Context, network, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, network, addr)
	}
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DialContext: dial,
		TLSClientConfig: &tls.Config{RootCAs: roots, ServerName: stacktest.AcmeName}}}
	var resp *http.Response
	var err error
	if !poll.Until(60*time.Second, func() bool {
		resp, err = hc.Get("https://" + stacktest.AcmeName + "/healthz")
		return err == nil
	}) {
		t.Fatalf("no verified handshake with a Pebble certificate: %v\nrelay:\n%s\npebble:\n%s", err, relay.Logs, pebble.Proc.Logs)
	}
	resp.Body.Close()
	leaf := resp.TLS.PeerCertificates[0]
	if resp.StatusCode != http.StatusOK || leaf.VerifyHostname(stacktest.AcmeName) != nil || !strings.Contains(leaf.Issuer.CommonName, "Pebble") {
		t.Fatalf("HTTP %d, certificate for %v issued by %q", resp.StatusCode, leaf.DNSNames, leaf.Issuer.CommonName)
	}
	if resp.Header.Get("Strict-Transport-Security") == "" {
		t.Error("no HSTS over ACME TLS")
	}
	// Validated for real, on the relay's port: autocert without an HTTP
	// handler offers only tls-alpn-01.
	if logs := pebble.Proc.Logs.String(); !strings.Contains(logs, "set VALID by completed challenge") || strings.Contains(logs, "Skipping real validation") {
		t.Errorf("Pebble did not validate the relay's challenge:\n%s", logs)
	}

	dir := filepath.Join(home, "acme")
	fi, err := os.Stat(dir)
	if err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("%s: %v %v, want a 0700 directory", dir, fi.Mode(), err)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) < 2 { // the account key and the certificate
		t.Fatalf("%s holds %d files, want the account key and the certificate", dir, len(entries))
	}
	for _, e := range entries {
		if info, err := e.Info(); err != nil || info.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %v, want 0600", e.Name(), info.Mode().Perm())
		}
	}

	// Restarted without Pebble, the cached certificate serves.
	relay.Stop(t)
	pebble.Proc.Stop(t)
	relay = start()
	hc.CloseIdleConnections()
	var again *http.Response
	if !poll.Until(20*time.Second, func() bool {
		again, err = hc.Get("https://" + stacktest.AcmeName + "/healthz")
		return err == nil
	}) {
		t.Fatalf("the cached certificate did not serve after a restart: %v\n%s", err, relay.Logs)
	}
	again.Body.Close()
	if !again.TLS.PeerCertificates[0].Equal(leaf) {
		t.Error("the restarted relay served another certificate than the cached one")
	}
}

// Package pebbletest runs a real Pebble, Let's Encrypt's test ACME server
// (the version pinned in the tools/pebble module), on loopback ports for
// end-to-end tests of ACME, and a DNS server of the test's own that Pebble
// resolves every name with, to 127.0.0.1.
//
// Pebble validates for real: its TLS-ALPN-01 challenges go to TLSPort on
// 127.0.0.1 (the port the server under test listens on), so the test
// exercises the server answering the challenge, not a shortcut
// (PEBBLE_VA_ALWAYS_VALID is not used).
package pebbletest

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/aep-kimi/aep-kimi/internal/testkit/netaddr"
	"github.com/aep-kimi/aep-kimi/internal/testkit/proctest"
	"github.com/aep-kimi/aep-kimi/internal/testkit/tlstest"
)

// Version is the Pebble release the tools module pins.
const Version = "v2.10.3"

// EnvCache overrides where the built binary is kept.
const EnvCache = "AEP_KIMI_PEBBLE_CACHE"

// tool is Pebble built from the tools module (a small one: about 45
// CPU-seconds from a cold cache).
func tool() proctest.Tool {
	return proctest.Tool{Name: "pebble", Version: Version, EnvCache: EnvCache,
		Module: "tools/pebble", Pkg: "github.com/letsencrypt/pebble/v2/cmd/pebble", Timeout: 10 * time.Minute}
}

// CacheDir is where Bin keeps the binary: $AEP_KIMI_PEBBLE_CACHE, else a
// directory per pinned version under the user cache.
func CacheDir() string { return tool().CacheDir() }

// Bin returns the Pebble binary, building it from the tools module into
// CacheDir on first use.
func Bin(ctx context.Context) (string, error) { return tool().Bin(ctx) }

// Pebble is a running Pebble.
type Pebble struct {
	// Directory is the ACME directory URL.
	Directory string
	// CAFile is the PEM of the CA that signed Pebble's own HTTPS
	// certificate: an ACME client must trust it to reach Directory.
	CAFile string
	// Proc is the running Pebble, its output kept.
	Proc *proctest.Proc

	mgmt string
	ca   *tlstest.CA
}

// Start runs Pebble on free loopback ports until the test ends, building
// it first when it is not cached. Its TLS-ALPN-01 validations connect to
// 127.0.0.1:tlsPort. Outside CI a Pebble that cannot be built skips the
// test; under CI it fails it.
func Start(t testing.TB, tlsPort int) *Pebble {
	t.Helper()
	bin, err := Bin(context.Background())
	if err != nil {
		if os.Getenv("CI") == "" {
			t.Skipf("skipping: %v", err)
		}
		t.Fatal(err)
	}
	dir := t.TempDir()
	ca := tlstest.NewCA(t, "pebble's HTTPS CA")
	files := ca.WriteFiles(t, dir)
	listen, mgmt := netaddr.FreeAddr(t), netaddr.FreeAddr(t)
	cfg := map[string]any{"pebble": map[string]any{
		"listenAddress":                  listen,
		"managementListenAddress":        mgmt,
		"certificate":                    files.Cert,
		"privateKey":                     files.Key,
		"httpPort":                       netaddr.FreePort(t), // HTTP-01 is not offered by the relay
		"tlsPort":                        tlsPort,
		"ocspResponderURL":               "",
		"externalAccountBindingRequired": false,
		"keyAlgorithm":                   "ecdsa",
	}}
	b, _ := json.Marshal(cfg)
	path := filepath.Join(dir, "pebble.json")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	dns := serveDNS(t)
	cmd := exec.Command(bin, "-config", path, "-dnsserver", dns)
	// No random sleep before validating, and no nonce refused on purpose:
	// the test is about the relay, not about retrying Pebble's chaos.
	cmd.Env = append(os.Environ(), "PEBBLE_VA_NOSLEEP=1", "PEBBLE_WFE_NONCEREJECT=0")
	p := &Pebble{Directory: "https://" + listen + "/dir", CAFile: files.CA, mgmt: mgmt, ca: ca}
	p.Proc = proctest.Start(t, "pebble", cmd)
	hc := p.client()
	p.Proc.Await(t, 30*time.Second, "its directory", func() bool {
		resp, err := hc.Get(p.Directory)
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	return p
}

func (p *Pebble) client() *http.Client {
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: p.ca.Pool()}}}
}

// Roots is the pool of the root Pebble issues certificates under, read from
// its management API: what a client of a server with a Pebble certificate
// trusts.
func (p *Pebble) Roots(t testing.TB) (*x509.CertPool, []byte) {
	t.Helper()
	resp, err := p.client().Get("https://" + p.mgmt + "/roots/0")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("pebble's root: HTTP %d %v", resp.StatusCode, err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		t.Fatalf("pebble's root is not PEM: %q", b)
	}
	return pool, b
}

// serveDNS answers every A query with 127.0.0.1 and every other query with
// no records (no AAAA, no CAA: issuance is allowed), on one loopback port
// over UDP and TCP (Pebble asks over TCP), until the test ends.
func serveDNS(t testing.TB) string {
	t.Helper()
	for range 20 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		pc, err := net.ListenPacket("udp", ln.Addr().String())
		if err != nil { // the UDP port is taken: another one
			ln.Close()
			continue
		}
		t.Cleanup(func() { ln.Close(); pc.Close() })
		go serveDNSPackets(pc)
		go serveDNSStreams(ln)
		return ln.Addr().String()
	}
	t.Fatal("no loopback port free for both UDP and TCP")
	return ""
}

func serveDNSPackets(pc net.PacketConn) {
	buf := make([]byte, 1500)
	for {
		n, from, err := pc.ReadFrom(buf)
		if err != nil {
			return
		}
		if resp, err := dnsAnswer(buf[:n]); err == nil {
			_, _ = pc.WriteTo(resp, from)
		}
	}
}

// serveDNSStreams answers DNS over TCP: each message after its two-byte
// length (RFC 1035 §4.2.2).
func serveDNSStreams(ln net.Listener) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		go func() {
			defer c.Close()
			_ = c.SetDeadline(time.Now().Add(10 * time.Second))
			for {
				var l [2]byte
				if _, err := io.ReadFull(c, l[:]); err != nil {
					return
				}
				q := make([]byte, binary.BigEndian.Uint16(l[:]))
				if _, err := io.ReadFull(c, q); err != nil {
					return
				}
				resp, err := dnsAnswer(q)
				if err != nil {
					return
				}
				if _, err := c.Write(binary.BigEndian.AppendUint16(nil, uint16(len(resp)))); err != nil {
					return
				}
				if _, err := c.Write(resp); err != nil {
					return
				}
			}
		}()
	}
}

// DNS message constants (RFC 1035 §4.1).
const (
	dnsHeaderLen = 12
	dnsTypeA     = 1
	dnsClassIN   = 1
)

// dnsAnswer is the answer to one query: its header and question echoed,
// and 127.0.0.1 for an A question.
func dnsAnswer(q []byte) ([]byte, error) {
	if len(q) < dnsHeaderLen || binary.BigEndian.Uint16(q[4:6]) != 1 {
		return nil, errors.New("not a one-question query")
	}
	i := dnsHeaderLen
	for {
		if i >= len(q) {
			return nil, errors.New("truncated name")
		}
		l := int(q[i])
		if l == 0 {
			i++
			break
		}
		if l&0xc0 != 0 {
			return nil, errors.New("compressed name in a question")
		}
		i += 1 + l
	}
	if i+4 > len(q) {
		return nil, errors.New("truncated question")
	}
	qtype := binary.BigEndian.Uint16(q[i : i+2])
	end := i + 4
	resp := make([]byte, end, end+16)
	copy(resp, q[:end])
	resp[2] = 0x84 | (q[2] & 0x01)             // QR, AA, RD as asked
	resp[3] = 0x00                             // no RA, rcode 0
	binary.BigEndian.PutUint16(resp[8:10], 0)  // NSCOUNT
	binary.BigEndian.PutUint16(resp[10:12], 0) // ARCOUNT
	if qtype != dnsTypeA {
		binary.BigEndian.PutUint16(resp[6:8], 0)
		return resp, nil
	}
	binary.BigEndian.PutUint16(resp[6:8], 1)
	resp = append(resp, 0xc0, dnsHeaderLen) // the question's name
	resp = binary.BigEndian.AppendUint16(resp, dnsTypeA)
	resp = binary.BigEndian.AppendUint16(resp, dnsClassIN)
	resp = binary.BigEndian.AppendUint32(resp, 60)
	resp = binary.BigEndian.AppendUint16(resp, 4)
	return append(resp, 127, 0, 0, 1), nil
}

package tlsconf_test

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"io"
	"log"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aep-kimi/aep-kimi/internal/testkit/syncbuf"
	"github.com/aep-kimi/aep-kimi/internal/testkit/tlstest"
	"github.com/aep-kimi/aep-kimi/internal/tlsconf"
)

// serve runs a TLS server on a loopback port with cfg, answering 200.
func serve(t *testing.T, cfg *tls.Config) string {
	t.Helper()
	ln, err := tls.Listen("tcp", "127.0.0.1:0", cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{
		Handler:  http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}),
		ErrorLog: log.New(io.Discard, "", 0), // the refused handshakes are the point
	}
	go srv.Serve(ln) //nolint:errcheck // ends with Close
	t.Cleanup(func() { srv.Close() })
	return "https://" + ln.Addr().String()
}

// leafOf is the certificate a handshake with addr presents.
func leafOf(t *testing.T, addr string) *x509.Certificate {
	t.Helper()
	c, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // reads what is served
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	return c.ConnectionState().PeerCertificates[0]
}

func parse(t *testing.T, certPEM []byte) *x509.Certificate {
	t.Helper()
	b, _ := pem.Decode(certPEM)
	c, err := x509.ParseCertificate(b.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// A replaced pair is served from the next handshake on; a torn one (the
// new certificate with the old key) keeps the pair in force, logged once,
// until the key arrives too.
func TestPairReload(t *testing.T) {
	ca := tlstest.NewCA(t, "reload CA")
	dir := t.TempDir()
	f := ca.WriteFiles(t, dir)
	logs := &syncbuf.Buffer{}
	pair, err := tlsconf.LoadPair(f.Cert, f.Key, slog.New(slog.NewTextHandler(logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	addr := strings.TrimPrefix(serve(t, &tls.Config{GetCertificate: pair.GetCertificate}), "https://")
	first := leafOf(t, addr)

	certB, keyB := ca.Leaf(t, "b.example")
	tlstest.Write(t, f.Cert, certB)
	tlstest.Write(t, f.Key, keyB)
	if got := leafOf(t, addr); !got.Equal(parse(t, certB)) {
		t.Fatalf("after replacing the files the handshake got %v, want the new certificate", got.DNSNames)
	}

	certC, keyC := ca.Leaf(t, "c.example")
	tlstest.Write(t, f.Cert, certC) // the key is not there yet
	for range 3 {
		if got := leafOf(t, addr); !got.Equal(parse(t, certB)) {
			t.Fatalf("a torn pair: the handshake got %v, want the pair in force (b.example)", got.DNSNames)
		}
	}
	if n := strings.Count(logs.String(), "do not load"); n != 1 {
		t.Errorf("the torn pair was logged %d times, want once:\n%s", n, logs)
	}
	tlstest.Write(t, f.Key, keyC)
	if got := leafOf(t, addr); !got.Equal(parse(t, certC)) {
		t.Fatalf("once the key arrived the handshake got %v, want c.example", got.DNSNames)
	}
	if first.Equal(parse(t, certC)) {
		t.Fatal("the first certificate was the last one")
	}
}

func TestLoadPairRefuses(t *testing.T) {
	ca := tlstest.NewCA(t, "refuse CA")
	dir := t.TempDir()
	f := ca.WriteFiles(t, dir)
	other := ca.WriteFiles(t, t.TempDir())
	for _, tc := range []struct {
		name, cert, key, want string
		prep                  func()
	}{
		{"no key", f.Cert, "", "go together", nil},
		{"missing cert", filepath.Join(dir, "nope.crt"), f.Key, "no such file", nil},
		{"mismatched", f.Cert, other.Key, "does not match", nil},
		{"not PEM", f.CA + ".txt", f.Key, "--tls-cert", func() { os.WriteFile(f.CA+".txt", []byte("hello"), 0o600) }},
		{"key readable by others", f.Cert, f.Key, "readable by others", func() { os.Chmod(f.Key, 0o644) }},
	} {
		name := tc.name
		if tc.prep != nil {
			tc.prep()
		}
		_, err := tlsconf.LoadPair(tc.cert, tc.key, nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error saying %q", name, err, tc.want)
		}
	}
}

// A client trusts the system's roots plus --ca; without it a relay's own
// CA is an unknown authority, said in one line naming --ca.
func TestClientCA(t *testing.T) {
	ca := tlstest.NewCA(t, "client CA")
	f := ca.WriteFiles(t, t.TempDir())
	cert, err := tls.LoadX509KeyPair(f.Cert, f.Key)
	if err != nil {
		t.Fatal(err)
	}
	url := serve(t, &tls.Config{Certificates: []tls.Certificate{cert}})

	hc, err := tlsconf.HTTPClient(f.CA)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := hc.Get(url)
	if err != nil {
		t.Fatalf("with --ca: %v", err)
	}
	resp.Body.Close()
	if resp.ProtoMajor != 1 {
		t.Errorf("the relay client spoke %s, want HTTP/1.1 (a socket is an HTTP/1.1 upgrade)", resp.Proto)
	}

	if none, err := tlsconf.HTTPClient(""); none != nil || err != nil {
		t.Fatalf("without --ca: %v %v, want nil (the default client)", none, err)
	}
	_, err = http.Get(url)
	cerr := tlsconf.CertError(err)
	if cerr == nil || !strings.Contains(cerr.Error(), "unknown authority") || !strings.Contains(cerr.Error(), "--ca") || strings.Contains(cerr.Error(), "\n") {
		t.Errorf("without --ca: %v, want one line: unknown authority, pass --ca", cerr)
	}
	if tlsconf.CertError(errors.New("connection refused")) != nil {
		t.Error("a refused connection taken for a certificate failure")
	}

	for name, content := range map[string][]byte{"empty": nil, "not PEM": []byte("not a certificate")} {
		p := filepath.Join(t.TempDir(), "bundle.pem")
		os.WriteFile(p, content, 0o600)
		if _, err := tlsconf.HTTPClient(p); err == nil || !strings.Contains(err.Error(), "no PEM certificate") {
			t.Errorf("%s bundle: %v", name, err)
		}
	}
	if _, err := tlsconf.HTTPClient(filepath.Join(t.TempDir(), "missing.pem")); err == nil || !strings.Contains(err.Error(), "--ca") {
		t.Errorf("missing bundle: %v", err)
	}
}

// The client up's components use trusts the certificates its relay served
// and nothing else, whatever CA signed it.
func TestServedTrustsOnlyWhatWasServed(t *testing.T) {
	ca := tlstest.NewCA(t, "served CA")
	certPEM, keyPEM := ca.Leaf(t)
	ours, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	var served tlsconf.Served
	get := served.Record(func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return &ours, nil })
	url := serve(t, &tls.Config{GetCertificate: get})
	self := &http.Client{Transport: tlsconf.Transport(served.ClientConfig(""))}
	resp, err := self.Get(url)
	if err != nil {
		t.Fatalf("the relay's own certificate: %v", err)
	}
	resp.Body.Close()

	// Another server with a certificate from the same CA, never served by
	// ours.
	otherPEM, otherKey := ca.Leaf(t)
	other, err := tls.X509KeyPair(otherPEM, otherKey)
	if err != nil {
		t.Fatal(err)
	}
	imposter := serve(t, &tls.Config{Certificates: []tls.Certificate{other}})
	if _, err := self.Get(imposter); err == nil || !strings.Contains(err.Error(), "did not serve") {
		t.Errorf("an imposter's certificate: %v, want refused", err)
	}
}

// Package tlsconf builds the TLS settings aep-kimi uses on both sides: the
// client configuration every tool and emitter reaching a relay over https
// or wss shares (the system's roots plus an optional PEM bundle, --ca), and
// the server's certificate pair read from files and reloaded when they
// change.
package tlsconf

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
)

// EnvCA names the PEM bundle a client adds to the system's roots when
// --ca is not given.
const EnvCA = "AEP_RELAY_CA"

// maxBundle bounds a CA bundle read: a system bundle is about 200 KiB.
const maxBundle = 4 << 20

// CAFlag registers --ca, every relay client's: a PEM bundle trusted besides
// the system's roots.
func CAFlag(fs *flag.FlagSet, dst *string, getenv func(string) string) {
	fs.StringVar(dst, "ca", getenv(EnvCA),
		"PEM file of CA certificates to trust for an https/wss relay, besides the system's (env "+EnvCA+")")
}

// ClientConfig is the TLS configuration of a relay client: the system's
// roots plus the certificates in caFile. Without caFile it is nil: Go's
// default, the system's roots.
func ClientConfig(caFile string) (*tls.Config, error) {
	if caFile == "" {
		return nil, nil
	}
	pem, err := readBundle(caFile)
	if err != nil {
		return nil, err
	}
	pool, err := x509.SystemCertPool()
	if err != nil || pool == nil {
		pool = x509.NewCertPool() // a platform without one: only the bundle
	}
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("--ca %s: no PEM certificate in it", caFile)
	}
	return &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}, nil
}

func readBundle(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("--ca: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxBundle+1))
	if err != nil {
		return nil, fmt.Errorf("--ca %s: %w", path, err)
	}
	if len(b) > maxBundle {
		return nil, fmt.Errorf("--ca %s: larger than %d bytes: not a CA bundle", path, maxBundle)
	}
	return b, nil
}

// HTTPClient is an HTTP client for a relay that trusts caFile besides the
// system's roots; without caFile it is nil, which every client of a relay
// takes as its own default.
func HTTPClient(caFile string) (*http.Client, error) {
	cfg, err := ClientConfig(caFile)
	if cfg == nil || err != nil {
		return nil, err
	}
	return &http.Client{Transport: Transport(cfg)}, nil
}

// Transport is Go's default transport with cfg as its TLS configuration,
// held to HTTP/1.1: a relay's socket is an HTTP/1.1 upgrade.
func Transport(cfg *tls.Config) *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.TLSClientConfig = cfg
	t.ForceAttemptHTTP2 = false
	t.TLSNextProto = map[string]func(string, *tls.Conn) http.RoundTripper{}
	return t
}

// CertError is a failed certificate check in err said in one line that
// tells what to do about it, or nil when err is not one. A failed check is
// permanent: retrying reaches the same certificate.
func CertError(err error) error {
	var (
		unknown  x509.UnknownAuthorityError
		hostname x509.HostnameError
		invalid  x509.CertificateInvalidError
		verify   *tls.CertificateVerificationError
	)
	switch {
	case errors.As(err, &unknown):
		return fmt.Errorf("the relay's certificate is signed by an unknown authority: pass its CA certificate with --ca FILE (or %s)", EnvCA)
	case errors.As(err, &hostname):
		return fmt.Errorf("the relay's certificate is not valid for this address: %v", hostname.Error())
	case errors.As(err, &invalid):
		return fmt.Errorf("the relay's certificate is not valid: %v", invalid.Error())
	case errors.As(err, &verify):
		return fmt.Errorf("the relay's certificate did not verify: %v", verify.Err)
	}
	return nil
}

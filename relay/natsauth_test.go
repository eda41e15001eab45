package relay_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nkeys"

	"github.com/aep-kimi/aep-kimi/relay"
)

// A relay reaches an external NATS that demands TLS and a user of its own
// account through --nats-ca and --nats-creds; without either it is refused
// with an error that says so.
func TestExternalNATSWithTLSAndCreds(t *testing.T) {
	dir := t.TempDir()
	caFile, tlsConf := testTLS(t, dir)
	credsFile, operator, resolver, sysAccount := testOperator(t, dir)
	ns := runNATSWith(t, "secured", func(o *server.Options) {
		o.TLSConfig, o.TLSTimeout = tlsConf, 5
		o.TrustedOperators = []*jwt.OperatorClaims{operator}
		o.AccountResolver = resolver
		o.SystemAccount = sysAccount
	})
	url := strings.Replace(ns.ClientURL(), "nats://", "tls://", 1)
	open := func(creds, ca string) (*relay.JetStreamBackend, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		return relay.OpenJetStream(ctx, relay.JetStreamConfig{URL: url, CredsFile: creds, CAFile: ca})
	}
	if _, err := open(credsFile, ""); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("without the CA: %v", err)
	}
	if _, err := open("", caFile); err == nil || !strings.Contains(strings.ToLower(err.Error()), "authorization") {
		t.Fatalf("without credentials: %v", err)
	}
	b, err := open(credsFile, caFile)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if res := b.Ingest([]*relay.Message{msg(t, mkEvent("s-tls", 0)), msg(t, mkEvent("s-tls", 1))}); res.Err != nil || res.Buffered != 2 {
		t.Fatalf("ingest over TLS with credentials: %+v", res)
	}
}

// testTLS writes a CA certificate to dir and returns its path and a server
// TLS configuration for 127.0.0.1 signed by it.
func testTLS(t *testing.T, dir string) (string, *tls.Config) {
	t.Helper()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	ca := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, _ := x509.ParseCertificate(caDER)
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	leaf := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "nats"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		KeyUsage: x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, leaf, caCert, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	return path, &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}, MinVersion: tls.VersionTLS12}
}

// testOperator sets up decentralized auth: an operator, a system account,
// an account with JetStream, and a user of it whose credentials file it
// writes to dir.
func testOperator(t *testing.T, dir string) (creds string, op *jwt.OperatorClaims, res *server.MemAccResolver, sys string) {
	t.Helper()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	okp, err := nkeys.CreateOperator()
	must(err)
	opub, _ := okp.PublicKey()
	op = jwt.NewOperatorClaims(opub)
	res = &server.MemAccResolver{}
	account := func(js bool) (nkeys.KeyPair, string) {
		akp, err := nkeys.CreateAccount()
		must(err)
		apub, _ := akp.PublicKey()
		ac := jwt.NewAccountClaims(apub)
		if js {
			ac.Limits.JetStreamLimits = jwt.JetStreamLimits{MemoryStorage: -1, DiskStorage: -1, Streams: -1, Consumer: -1}
		}
		ajwt, err := ac.Encode(okp)
		must(err)
		must(res.Store(apub, ajwt))
		return akp, apub
	}
	_, sys = account(false)
	op.SystemAccount = sys
	akp, _ := account(true)
	ukp, err := nkeys.CreateUser()
	must(err)
	upub, _ := ukp.PublicKey()
	ujwt, err := jwt.NewUserClaims(upub).Encode(akp)
	must(err)
	seed, _ := ukp.Seed()
	cfg, err := jwt.FormatUserConfig(ujwt, seed)
	must(err)
	creds = filepath.Join(dir, "relay.creds")
	must(os.WriteFile(creds, cfg, 0o600))
	return creds, op, res, sys
}

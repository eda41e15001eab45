package tlsconf

import (
	"bytes"
	"crypto/tls"
	"errors"
	"sync"
)

// servedKept is how many distinct certificates Served remembers: the one
// in force, the one before a reload, and an ACME challenge's.
const servedKept = 8

// Served records the certificates a server hands out, so a client in the
// same process (up's adapter, bridge and exporter reaching their relay)
// trusts exactly those: no CA, no name to match, and a certificate another
// process presents is refused. Its zero value is ready to use.
type Served struct {
	mu     sync.Mutex
	leaves [][]byte // DER, newest last
}

// Record wraps a GetCertificate, remembering what it returns.
func (s *Served) Record(get func(*tls.ClientHelloInfo) (*tls.Certificate, error)) func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	return func(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
		c, err := get(hello)
		if err == nil && c != nil && len(c.Certificate) > 0 {
			s.remember(c.Certificate[0])
		}
		return c, err
	}
}

func (s *Served) remember(leaf []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, l := range s.leaves {
		if bytes.Equal(l, leaf) {
			return
		}
	}
	s.leaves = append(s.leaves, leaf)
	if len(s.leaves) > servedKept {
		s.leaves = s.leaves[1:]
	}
}

func (s *Served) served(leaf []byte) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, l := range s.leaves {
		if bytes.Equal(l, leaf) {
			return true
		}
	}
	return false
}

// errNotServed is a certificate this process did not serve.
var errNotServed = errors.New("the relay presented a certificate this process did not serve")

// ClientConfig trusts only the certificates Record saw, asking for
// serverName's (empty: none in particular). The usual chain and name check
// is replaced by that comparison; the handshake still proves the peer
// holds the certificate's key.
func (s *Served) ClientConfig(serverName string) *tls.Config {
	return &tls.Config{
		ServerName: serverName,
		MinVersion: tls.VersionTLS12,
		// Verified below, against the certificates served.
		InsecureSkipVerify: true, //nolint:gosec // VerifyConnection pins the peer to what this process served
		VerifyConnection: func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 || !s.served(cs.PeerCertificates[0].Raw) {
				return errNotServed
			}
			return nil
		},
	}
}

package tlsconf

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/aep-kimi/aep-kimi/internal/tokenfile"
)

// Pair serves a certificate and key read from two files, and reads them
// again when either file changes (its size, modification time or the file
// itself, as when it is replaced by a rename within one clock tick), checked
// on every handshake: a renewed certificate is served from the next
// handshake on, without a restart. A pair that does not load (a file
// written halfway, a key that does not match) keeps the one in force and
// is logged once, until the files change again.
type Pair struct {
	certFile, keyFile string
	log               *slog.Logger

	mu      sync.Mutex
	cert    *tls.Certificate
	stamp   [2]fileStamp // of the files cert was read from
	refused [2]fileStamp // of the files last refused, logged once
	statErr string       // the last failure to stat them, logged once
}

type fileStamp struct {
	size int64
	mod  time.Time
	fi   os.FileInfo // for os.SameFile; nil in a zero stamp
}

func (a fileStamp) same(b fileStamp) bool {
	return a.size == b.size && a.mod.Equal(b.mod) && a.fi != nil && b.fi != nil && os.SameFile(a.fi, b.fi)
}

func sameStamps(a, b [2]fileStamp) bool { return a[0].same(b[0]) && a[1].same(b[1]) }

// LoadPair reads the pair; a pair that does not load is an error (at start
// there is nothing to keep serving). log receives reloads and refusals.
func LoadPair(certFile, keyFile string, log *slog.Logger) (*Pair, error) {
	if certFile == "" || keyFile == "" {
		return nil, errors.New("--tls-cert and --tls-key go together: give both")
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	p := &Pair{certFile: certFile, keyFile: keyFile, log: log}
	st, err := p.stamps()
	if err != nil {
		return nil, err
	}
	cert, err := p.load()
	if err != nil {
		return nil, err
	}
	p.cert, p.stamp = cert, st
	return p, nil
}

// GetCertificate is tls.Config.GetCertificate: the pair in force, read
// again first when its files changed.
func (p *Pair) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	st, err := p.stamps()
	if err != nil {
		if msg := err.Error(); msg != p.statErr {
			p.statErr = msg
			p.log.Warn("TLS certificate files unreadable: serving the certificate in force", "err", err)
		}
		return p.cert, nil
	}
	p.statErr = ""
	if sameStamps(st, p.stamp) || sameStamps(st, p.refused) {
		return p.cert, nil
	}
	cert, err := p.load()
	if err != nil {
		p.refused = st
		p.log.Warn("TLS certificate files changed but do not load: serving the certificate in force until they change again", "err", err)
		return p.cert, nil
	}
	p.cert, p.stamp, p.refused = cert, st, [2]fileStamp{}
	p.log.Info("TLS certificate reloaded", "cert", p.certFile, "not_after", cert.Leaf.NotAfter.UTC().Format(time.RFC3339))
	return p.cert, nil
}

func (p *Pair) stamps() ([2]fileStamp, error) {
	var st [2]fileStamp
	for i, f := range []string{p.certFile, p.keyFile} {
		fi, err := os.Stat(f)
		if err != nil {
			return st, err
		}
		st[i] = fileStamp{fi.Size(), fi.ModTime(), fi}
	}
	return st, nil
}

// load reads the pair; the key must not be readable by others.
func (p *Pair) load() (*tls.Certificate, error) {
	certPEM, err := os.ReadFile(p.certFile)
	if err != nil {
		return nil, fmt.Errorf("--tls-cert: %w", err)
	}
	keyPEM, err := tokenfile.ReadSecret(p.keyFile, true, "--tls-key")
	if err != nil {
		return nil, err
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("--tls-cert %s with --tls-key %s: %w", p.certFile, p.keyFile, err)
	}
	return &cert, nil
}

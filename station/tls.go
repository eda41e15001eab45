package station

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/crypto/acme"
	"golang.org/x/crypto/acme/autocert"

	"github.com/aep-kimi/aep-kimi/internal/cli"
	"github.com/aep-kimi/aep-kimi/internal/safefile"
	"github.com/aep-kimi/aep-kimi/internal/tlsconf"
	"github.com/aep-kimi/aep-kimi/relay"
)

// DefaultACMECA is where --acme-domain gets its certificates unless
// --acme-ca (env AEP_ACME_CA) says otherwise: Let's Encrypt's production
// directory.
const DefaultACMECA = autocert.DefaultACMEDirectory

// ACMEDirName is the directory under the AEP home that keeps the ACME
// account key and the certificates issued (0700, files 0600).
const ACMEDirName = "acme"

// TLSOptions is how the relay serves TLS, shared by `relay` and `up`: a
// certificate pair from files (reloaded when they change), or certificates
// from an ACME CA, or neither behind a TLS-terminating proxy.
type TLSOptions struct {
	CertFile, KeyFile string
	ACMEDomains       []string
	ACMEEmail, ACMECA string
	BehindProxy       bool
}

// BindFlags registers the TLS flags, their defaults read through getenv.
func (o *TLSOptions) BindFlags(fs *flag.FlagSet, getenv func(string) string) {
	fs.StringVar(&o.CertFile, "tls-cert", getenv("AEP_TLS_CERT"), "serve TLS with this PEM certificate chain, reloaded when it changes (env AEP_TLS_CERT); needs --tls-key")
	fs.StringVar(&o.KeyFile, "tls-key", getenv("AEP_TLS_KEY"), "the PEM private key of --tls-cert, mode 0600 (env AEP_TLS_KEY)")
	o.ACMEDomains = splitList(getenv("AEP_ACME_DOMAIN"))
	given := false // the first --acme-domain replaces the environment's
	fs.Func("acme-domain", "serve TLS with certificates for this name from an ACME CA, kept under $AEP_HOME/"+ACMEDirName+
		" (repeat, or comma-separated; env AEP_ACME_DOMAIN); the CA checks the name on this port (tls-alpn-01), so it must reach it as port 443",
		func(s string) error {
			if !given {
				o.ACMEDomains, given = nil, true
			}
			o.ACMEDomains = append(o.ACMEDomains, splitList(s)...)
			return nil
		})
	fs.StringVar(&o.ACMEEmail, "acme-email", getenv("AEP_ACME_EMAIL"), "contact address given to the ACME CA (env AEP_ACME_EMAIL)")
	fs.StringVar(&o.ACMECA, "acme-ca", cli.EnvOr(getenv, "AEP_ACME_CA", DefaultACMECA), "ACME directory URL (env AEP_ACME_CA)")
	fs.BoolVar(&o.BehindProxy, "behind-proxy", cli.EnvBool(getenv, "AEP_BEHIND_PROXY", false),
		"a TLS-terminating proxy fronts this port: serve plain HTTP off loopback, and believe its X-Forwarded-Proto and X-Forwarded-For (env AEP_BEHIND_PROXY)")
}

func splitList(s string) []string {
	var out []string
	for _, v := range strings.Split(s, ",") {
		if v = strings.ToLower(strings.TrimSpace(v)); v != "" {
			out = append(out, v)
		}
	}
	return out
}

// Enabled reports whether the relay serves TLS itself.
func (o TLSOptions) Enabled() bool {
	return o.CertFile != "" || o.KeyFile != "" || len(o.ACMEDomains) > 0
}

// Validate refuses flags that contradict each other.
func (o TLSOptions) Validate() error {
	files := o.CertFile != "" || o.KeyFile != ""
	switch {
	case files && (o.CertFile == "" || o.KeyFile == ""):
		return errors.New("--tls-cert and --tls-key go together: give both")
	case files && len(o.ACMEDomains) > 0:
		return errors.New("--tls-cert and --acme-domain both give the certificate: choose one")
	case o.BehindProxy && o.Enabled():
		return errors.New("--behind-proxy says a proxy terminates TLS: it does not go with --tls-cert or --acme-domain")
	}
	for _, d := range o.ACMEDomains {
		if !strings.Contains(d, ".") || strings.ContainsAny(d, "/:@?#[]* \t") {
			return fmt.Errorf("--acme-domain %q: want a DNS name with a dot (no scheme, port or wildcard)", d)
		}
	}
	return nil
}

// serverTLS is what the relay serves TLS with, and how clients in the same
// process (up's adapter, bridge and exporter) reach it.
type serverTLS struct {
	config *tls.Config
	// self trusts exactly the certificates this server hands out, and
	// names the one to hand out (an ACME name).
	self *tls.Config
	// warm obtains the ACME certificates at start rather than at the first
	// handshake; nil for a certificate from files.
	warm func()
}

// apply gives cfg what o asks for: the TLS it serves (unless cfg already
// has it: up applies it first, to keep its self-trust) and whether a proxy
// fronts it. It returns how clients in this process reach the relay, and
// what obtains ACME certificates: nil without TLS.
func (o TLSOptions) apply(cfg *relay.Config, home string) (*serverTLS, error) {
	cfg.BehindProxy = o.BehindProxy
	if cfg.TLS != nil {
		return nil, nil
	}
	if err := o.Validate(); err != nil {
		return nil, Usage(err)
	}
	st, err := o.build(home, cfg.Logger)
	if err != nil || st == nil {
		return nil, usageOrNil(err)
	}
	cfg.TLS = st.config
	return st, nil
}

// build reads the certificate pair or sets up ACME under home; nil without
// TLS. A pair that does not load is an error.
func (o TLSOptions) build(home string, log *slog.Logger) (*serverTLS, error) {
	var get func(*tls.ClientHelloInfo) (*tls.Certificate, error)
	protos := []string{"http/1.1"} // a socket is an HTTP/1.1 upgrade
	st := &serverTLS{}
	switch {
	case o.CertFile != "":
		pair, err := tlsconf.LoadPair(o.CertFile, o.KeyFile, log)
		if err != nil {
			return nil, err
		}
		get = pair.GetCertificate
	case len(o.ACMEDomains) > 0:
		m, err := o.acmeManager(home, log)
		if err != nil {
			return nil, err
		}
		get = m.GetCertificate
		protos = append(protos, acme.ALPNProto)
		st.warm = func() { warmACME(m, o.ACMEDomains, log) }
	default:
		return nil, nil
	}
	served := &tlsconf.Served{}
	st.config = &tls.Config{GetCertificate: served.Record(get), NextProtos: protos, MinVersion: tls.VersionTLS12}
	st.self = served.ClientConfig(firstOr(o.ACMEDomains, ""))
	return st, nil
}

// warmer is the component that asks for the ACME certificates once the
// relay listens (the CA's challenge connects to it), so a CA that refuses
// is in the log at start rather than at a user's first handshake; ok false
// without ACME. autocert takes no context and bounds each request itself:
// the component returns when the station stops, the request ends with the
// process.
func (st *serverTLS) warmer() (Component, bool) {
	if st == nil || st.warm == nil {
		return Component{}, false
	}
	return Component{Name: "acme", Run: func(ctx context.Context) error {
		go st.warm()
		<-ctx.Done()
		return nil
	}}, true
}

func firstOr(s []string, def string) string {
	if len(s) > 0 {
		return s[0]
	}
	return def
}

// acmeManager is autocert's manager for the names, its account and
// certificates kept in a private directory under home.
func (o TLSOptions) acmeManager(home string, log *slog.Logger) (*autocert.Manager, error) {
	dir := filepath.Join(home, ACMEDirName)
	if err := safefile.PrivateDir(dir); err != nil {
		return nil, fmt.Errorf("ACME cache: %w", err)
	}
	log.Info("ACME certificates", "domains", strings.Join(o.ACMEDomains, ","), "ca", o.ACMECA, "cache", dir)
	return &autocert.Manager{
		Prompt:     autocert.AcceptTOS,
		Cache:      autocert.DirCache(dir),
		HostPolicy: autocert.HostWhitelist(o.ACMEDomains...),
		Email:      o.ACMEEmail,
		Client:     &acme.Client{DirectoryURL: o.ACMECA, HTTPClient: &http.Client{Timeout: time.Minute}},
	}, nil
}

// warmACME obtains (or loads from the cache) each name's certificate, so a
// CA that refuses is in the log at start, not at a user's first handshake.
// autocert bounds each request itself and takes no context: the process
// ending ends it.
func warmACME(m *autocert.Manager, domains []string, log *slog.Logger) {
	for _, d := range domains {
		// An ECDSA-capable hello, as every current client's: the
		// certificate handshakes will ask for.
		cert, err := m.GetCertificate(&tls.ClientHelloInfo{ServerName: d,
			CipherSuites: []uint16{tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256}})
		if err != nil {
			log.Error("ACME certificate not obtained: handshakes for this name fail until it is", "domain", d, "err", err)
			continue
		}
		if cert.Leaf != nil {
			log.Info("ACME certificate ready", "domain", d, "not_after", cert.Leaf.NotAfter.UTC().Format(time.RFC3339))
		}
	}
}

func usageOrNil(err error) error {
	if err == nil {
		return nil
	}
	return Usage(err)
}

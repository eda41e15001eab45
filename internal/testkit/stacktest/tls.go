package stacktest

import (
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/aep-kimi/aep-kimi/internal/testkit/proctest"
	"github.com/aep-kimi/aep-kimi/internal/testkit/tlstest"
)

// TlsClient trusts only the test's CA.
func TlsClient(ca *tlstest.CA) *http.Client {
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.Pool()}}}
}

// AnswersOver reports whether a GET of url through hc answers 200.
func AnswersOver(hc *http.Client, url string) bool {
	resp, err := hc.Get(url)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// StartTLSDaemon runs `aep-kimi ARGS...` serving TLS at base (https) and
// waits for its /healthz through hc and its listen line.
func StartTLSDaemon(t *testing.T, base string, hc *http.Client, env []string, args ...string) *proctest.Proc {
	t.Helper()
	cmd := exec.Command(filepath.Join(Binaries(t), "aep-kimi"), args...)
	cmd.Env = append(os.Environ(), env...)
	d := proctest.Start(t, "aep-kimi "+args[0], cmd)
	port := base[strings.LastIndexByte(base, ':')+1:]
	listening := regexp.MustCompile(` addr=\S*:` + regexp.QuoteMeta(port) + `\s`)
	d.Await(t, 20*time.Second, "its /healthz over TLS and its listen line", func() bool {
		return AnswersOver(hc, base+"/healthz") && listening.MatchString(d.Logs.String())
	})
	return d
}

// ServedLeaf is the certificate a handshake with addr gets.
func ServedLeaf(t *testing.T, addr string, roots *x509.CertPool) *x509.Certificate {
	t.Helper()
	c, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: roots})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	return c.ConnectionState().PeerCertificates[0]
}

// Login logs in to the page at base as a browser of origin would, with the
// extra headers, and returns the answer.
func Login(t *testing.T, hc *http.Client, base, origin, token string, header map[string]string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, base+"/app/login", strings.NewReader(`{"token":"`+token+`"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Origin", origin)
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("login at %s from %s: HTTP %d", base, origin, resp.StatusCode)
	}
	return resp
}

// SecureAnswer reports whether a login answer is one for TLS: HSTS, and
// every cookie Secure.
func SecureAnswer(t *testing.T, resp *http.Response) (hsts, secure bool) {
	t.Helper()
	cookies := resp.Cookies()
	if len(cookies) == 0 {
		t.Fatal("the login set no cookie")
	}
	secure = true
	for _, c := range cookies {
		secure = secure && c.Secure
	}
	return resp.Header.Get("Strict-Transport-Security") != "", secure
}

// Package httpguard holds the checks every aep-kimi daemon puts in front of
// its handlers: the Host allow-list that defeats DNS rebinding, bounded body
// reads, and the rule that a daemon reachable off this host has a real token.
package httpguard

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// MinPublicToken is the shortest token a daemon listening off loopback
// accepts, in bytes: 16 random hex characters are 64 bits, the least a
// network-facing bearer secret should carry.
const MinPublicToken = 16

// TrimToken is the one rule for reading a bearer token, on the server and on
// every client: surrounding ASCII whitespace (space, tab, CR, LF, VT, FF) is
// not part of it, so a file ending in a newline and a header value agree, and
// a blank value is no token at all.
func TrimToken(s string) string {
	return strings.Trim(s, " \t\r\n\v\f")
}

// LoopbackListen reports whether a listen address (host:port) binds only
// loopback: localhost, 127.0.0.0/8 or ::1. An empty host or 0.0.0.0 binds
// every interface; any other name is taken as reachable off this host.
func LoopbackListen(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = addr
	}
	return loopbackHost(host)
}

// LoopbackURL reports whether a URL names a host on this machine's
// loopback: where a client may send the local token without being told to.
func LoopbackURL(raw string) bool {
	u, err := url.Parse(strings.TrimSpace(raw))
	return err == nil && u.Host != "" && loopbackHost(u.Hostname())
}

// CheckExposure refuses a daemon that is reachable off this host (public, or
// listening on a non-loopback address) without a real token. token must
// already be trimmed with TrimToken. The error is one line for the operator.
func CheckExposure(listen string, public bool, token string) error {
	if !public && LoopbackListen(listen) {
		return nil
	}
	where := "on " + listen
	if public {
		where = "on all interfaces (public mode)"
	}
	switch {
	case token == "":
		return fmt.Errorf("listening %s needs a token: set AEP_TOKEN or AEP_TOKEN_FILE to a secret of at least %d bytes (e.g. openssl rand -hex 16); without one anyone who can reach the port reads the stream", where, MinPublicToken)
	case len(token) < MinPublicToken:
		return fmt.Errorf("listening %s needs a token of at least %d bytes; this one has %d (e.g. openssl rand -hex 16)", where, MinPublicToken, len(token))
	}
	return nil
}

// ParseAllowedHosts reads a comma-separated list of host names a daemon may
// be addressed by besides loopback: exact names ("relay.example.com"), a
// leading wildcard for subdomains ("*.example.com") or "*" for any host.
// Ports are not part of an entry; case does not matter.
func ParseAllowedHosts(s string) ([]string, error) {
	var out []string
	for _, h := range strings.Split(s, ",") {
		h = strings.ToLower(strings.TrimSpace(h))
		if h == "" {
			continue
		}
		name := strings.TrimPrefix(h, "*.")
		if h != "*" && (name == "" || strings.ContainsAny(name, "/:@?#[]* \t")) {
			return nil, fmt.Errorf("allowed host %q: want a host name (no scheme, port or path), *.domain, or *", h)
		}
		out = append(out, strings.TrimSuffix(h, "."))
	}
	return out, nil
}

// Hosts answers only requests addressed to this machine by a name a hostile
// web page cannot control. A page that rebinds its own name to 127.0.0.1
// still sends that name in Host, so the request is refused before any
// handler runs. Allowed, with any port:
//
//   - no Host at all (HTTP/1.0 tools; browsers always send one);
//   - localhost and *.localhost, 127.0.0.0/8 and ::1;
//   - a name matching an entry of allowed (see ParseAllowedHosts);
//   - an IP address literal, when the connection arrived on a non-loopback
//     address (the daemon listens off loopback): a rebinding page always
//     uses a name, and remote clients of a public daemon often use the IP.
//
// Everything else gets 421 Misdirected Request with a JSON error body.
func Hosts(allowed []string) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if hostAllowed(r, allowed) {
				next.ServeHTTP(w, r)
				return
			}
			host := r.Host
			if len(host) > 100 {
				host = host[:100] + "..."
			}
			w.Header().Set("Connection", "close")
			WriteError(w, http.StatusMisdirectedRequest, "host-not-allowed", fmt.Sprintf(
				"Host %q is not a loopback name or address; to reach this daemon by that name, list it in AEP_ALLOWED_HOSTS or --allowed-hosts", host))
		})
	}
}

func hostAllowed(r *http.Request, allowed []string) bool {
	if r.Host == "" {
		return true
	}
	host := r.Host
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.ToLower(strings.Trim(host, "[]")), ".")
	if loopbackHost(host) {
		return true
	}
	for _, a := range allowed {
		switch {
		case a == "*", a == host:
			return true
		case strings.HasPrefix(a, "*.") && strings.HasSuffix(host, a[1:]):
			return true
		}
	}
	if ip, err := netip.ParseAddr(host); err == nil && !ip.IsUnspecified() {
		local, _ := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
		return local != nil && !LoopbackListen(local.String())
	}
	return false
}

func loopbackHost(host string) bool {
	host = strings.TrimSuffix(strings.ToLower(strings.Trim(host, "[]")), ".")
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.Zone() == "" && ip.Unmap().IsLoopback()
}

// errorBody is the JSON error shape every daemon answers with.
type errorBody struct {
	Error  string `json:"error"`
	Detail string `json:"detail,omitempty"`
}

// WriteError answers status with {"error": code, "detail": detail}.
func WriteError(w http.ResponseWriter, status int, code, detail string) {
	WriteJSON(w, status, errorBody{Error: code, Detail: detail})
}

// WriteJSON answers status with v as JSON, never cached. A v that does not
// encode is answered 500 internal instead.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		b = []byte(`{"error":"internal","detail":"response encoding failed"}`)
	}
	b = append(b, '\n')
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	// Sized, so that a handler may flush the answer before it returns
	// without it turning into a chunked body.
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// ErrBodyTimeout reports a request body that did not arrive in time.
var ErrBodyTimeout = errors.New("request body not received in time")

// ReadBody reads r's body, at most limit bytes, within timeout. Memory grows
// with the bytes received, never with a declared Content-Length, so a client
// that announces a large body and trickles it holds little. Past the deadline
// it returns an error wrapping ErrBodyTimeout; past the limit, an
// *http.MaxBytesError. Either way the server closes the connection after the
// reply. A zero timeout means none.
func ReadBody(w http.ResponseWriter, r *http.Request, limit int64, timeout time.Duration) ([]byte, error) {
	var br BodyReader
	return br.Read(w, r, limit, timeout)
}

// Body chunk sizes: a body is read into chunks no larger than what has
// already arrived (the first one bodyChunkMin), so the chunks hold at most
// about twice the bytes received.
const (
	bodyChunkMin = 4 << 10
	bodyClasses  = 3 // 4, 16 and 64 KiB
)

// BodyReader is ReadBody for a handler that reads many bodies (the relay's
// ingest): the chunks a body is read into are reused from body to body, so a
// body costs one allocation of exactly its size and no copies as it grows.
// The zero value is ready; it is safe for concurrent use.
type BodyReader struct {
	chunks [bodyClasses]sync.Pool // of *[]byte, by size class
}

// Read is ReadBody with this reader's chunks.
func (br *BodyReader) Read(w http.ResponseWriter, r *http.Request, limit int64, timeout time.Duration) ([]byte, error) {
	rc := http.NewResponseController(w)
	if timeout > 0 {
		// Not every writer supports deadlines (test recorders); then the
		// read is bounded by the limit alone.
		if err := rc.SetReadDeadline(time.Now().Add(timeout)); err == nil {
			// Only the body is bounded: the rest of the request (a reply
			// the adapter's control gate holds) runs as before.
			defer rc.SetReadDeadline(time.Time{}) //nolint:errcheck // best effort
		}
	}
	body := http.MaxBytesReader(w, r.Body, limit)
	defer body.Close()
	var held [16]*[]byte
	chunks := held[:0]
	defer func() {
		for _, c := range chunks {
			br.put(c)
		}
	}()
	n, last := 0, 0 // bytes read in all, and in the last chunk
	var err error
	for {
		c := br.get(n)
		chunks = append(chunks, c)
		last, err = io.ReadFull(body, *c)
		n += last
		if err != nil {
			break
		}
	}
	if err == io.EOF || err == io.ErrUnexpectedEOF {
		err = nil
	}
	if errors.Is(err, os.ErrDeadlineExceeded) {
		// The rest of the body may still trickle in: never read it as the
		// next request.
		w.Header().Set("Connection", "close")
		return nil, fmt.Errorf("%w (%s, %d bytes received)", ErrBodyTimeout, timeout, n)
	}
	if n == 0 {
		return nil, err
	}
	out := make([]byte, 0, n)
	for _, c := range chunks[:len(chunks)-1] {
		out = append(out, *c...)
	}
	return append(out, (*chunks[len(chunks)-1])[:last]...), err
}

// get returns a chunk for a body of which received bytes have arrived: the
// largest size class not above that, or the smallest.
func (br *BodyReader) get(received int) *[]byte {
	class, size := 0, bodyChunkMin
	for class+1 < bodyClasses && size*4 <= received {
		class, size = class+1, size*4
	}
	if c, ok := br.chunks[class].Get().(*[]byte); ok {
		return c
	}
	c := make([]byte, size)
	return &c
}

func (br *BodyReader) put(c *[]byte) {
	class := 0
	for size := bodyChunkMin; size < len(*c); size *= 4 {
		class++
	}
	br.chunks[class].Put(c)
}

// SameOrigin reports whether a browser request comes from a page of the
// origin it is addressed to: an Origin header, when present, must name this
// Host (with the https scheme when the request came over TLS); a browser's
// Sec-Fetch-Site, when present, must say same-origin.
// Browsers send one or the other on every request a foreign page can make,
// so a forged cross-site request fails here even where SameSite did not stop
// it. A client that is not a browser sends neither and passes.
func SameOrigin(r *http.Request) bool {
	if site := r.Header.Get("Sec-Fetch-Site"); site != "" && site != "same-origin" {
		return false
	}
	o := r.Header.Get("Origin")
	if o == "" {
		return true
	}
	u, err := url.Parse(o)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return false
	}
	if Secure(r) && u.Scheme != "https" {
		return false // a plain-http page is another origin than this https one
	}
	return strings.EqualFold(u.Host, r.Host)
}

// secretSegment is the shortest path segment LogPath hides: the relay's
// own routes name nothing longer (rule and device ids are shorter), while
// a bearer token or a login pasted into a path is longer.
const secretSegment = 24

// LogPath is a request path as a log line may carry it: whatever follows
// one of the capability prefixes (an answer link's token after /answer/)
// is replaced by "[redacted]", whatever its length, and so is every other
// segment of secretSegment bytes or more, so a credential a path carries
// never reaches a log at any verbosity, whatever route it was sent to.
func LogPath(path string, capabilities ...string) string {
	for _, p := range capabilities {
		if i := strings.Index(path, p); i >= 0 && len(path) > i+len(p) {
			return LogPath(path[:i+len(p)]) + "[redacted]"
		}
	}
	if len(path) < secretSegment {
		return path
	}
	var b strings.Builder
	for i, seg := range strings.Split(path, "/") {
		if i > 0 {
			b.WriteByte('/')
		}
		if len(seg) >= secretSegment {
			seg = "[redacted]"
		}
		b.WriteString(seg)
	}
	return b.String()
}

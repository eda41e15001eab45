package httpguard

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"github.com/aep-kimi/aep-kimi/internal/testkit/netaddr"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestTrimToken(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"abc": "abc", "abc\n": "abc", " \t abc\r\n": "abc", " ": "", "\n\n": "", "a b": "a b",
		"\u00a0abc": "\u00a0abc", // not ASCII whitespace: part of the token
	} {
		if got := TrimToken(in); got != want {
			t.Errorf("TrimToken(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestCheckExposure(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("k", MinPublicToken)
	cases := []struct {
		listen string
		public bool
		token  string
		ok     bool
	}{
		{"127.0.0.1:8787", false, "", true},
		{"localhost:8787", false, "", true},
		{"[::1]:8787", false, "", true},
		{"127.0.0.1:8787", true, "", false},
		{"0.0.0.0:8787", false, "", false},
		{":8787", false, long, true},
		{":8787", false, "", false},
		{"192.168.1.5:8787", false, long[:MinPublicToken-1], false},
		{"relay.example.com:8787", false, long, true},
		{"0.0.0.0:8787", true, long, true},
	}
	for _, c := range cases {
		err := CheckExposure(c.listen, c.public, c.token)
		if (err == nil) != c.ok {
			t.Errorf("CheckExposure(%q, %v, %d bytes) = %v, want ok %v", c.listen, c.public, len(c.token), err, c.ok)
		}
		if err != nil && strings.Contains(err.Error(), "\n") {
			t.Errorf("error is not one line: %q", err)
		}
	}
}

func TestParseAllowedHosts(t *testing.T) {
	t.Parallel()
	got, err := ParseAllowedHosts(" Relay.Example.com. ,*.corp.example,, * ")
	if err != nil || strings.Join(got, "|") != "relay.example.com|*.corp.example|*" {
		t.Fatalf("got %q, %v", got, err)
	}
	for _, bad := range []string{"http://x", "x:80", "x/y", "*.", "a*b"} {
		if _, err := ParseAllowedHosts(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// rawGet sends a request with the given Host header over a real socket and
// returns the status code.
func rawGet(t *testing.T, addr, host string) int {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(5 * time.Second))
	req := "GET /x HTTP/1.1\r\n"
	if host != "" {
		req += "Host: " + host + "\r\n"
	}
	fmt.Fprintf(conn, "%sConnection: close\r\n\r\n", req)
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode == http.StatusMisdirectedRequest && !strings.Contains(string(b), `"error":"host-not-allowed"`) {
		t.Fatalf("421 without its JSON body: %s", b)
	}
	return resp.StatusCode
}

func serve(t *testing.T, listen string, h http.Handler) string {
	t.Helper()
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		t.Skipf("cannot listen on %s: %v", listen, err)
	}
	hs := &http.Server{Handler: h}
	go hs.Serve(ln)
	t.Cleanup(func() { hs.Close() })
	return ln.Addr().String()
}

// A rebinding page reaches the daemon over loopback but names its own host:
// refused before the handler runs. Loopback names and listed names pass.
func TestHostsOnLoopback(t *testing.T) {
	t.Parallel()
	var ran atomic.Int32
	h := Hosts([]string{"relay.example.com", "*.corp.example"})(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { ran.Add(1) }))
	addr := serve(t, "127.0.0.1:0", h)
	_, port, _ := net.SplitHostPort(addr)
	allowed := []string{"127.0.0.1:" + port, "localhost", "LOCALHOST:1", "localhost.:9", "app.localhost", "127.9.9.9", "[::1]:80",
		"relay.example.com:443", "Relay.Example.Com", "a.b.corp.example"}
	for _, h := range allowed {
		if code := rawGet(t, addr, h); code != 200 {
			t.Errorf("Host %q: %d, want 200", h, code)
		}
	}
	refused := []string{"evil.example:" + port, "evil.example", "localhost.evil.example", "127.0.0.1.nip.io",
		"corp.example", "0.0.0.0:" + port, "192.168.1.5", "[::]:80", "example.com"}
	before := ran.Load()
	for _, h := range refused {
		if code := rawGet(t, addr, h); code != http.StatusMisdirectedRequest {
			t.Errorf("Host %q: %d, want 421", h, code)
		}
	}
	if n := ran.Load() - before; n != 0 {
		t.Errorf("the handler ran for %d refused requests", n)
	}
	// HTTP/1.0 without Host cannot come from a browser.
	conn, _ := net.Dial("tcp", addr)
	defer conn.Close()
	fmt.Fprint(conn, "GET /x HTTP/1.0\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil || resp.StatusCode != 200 {
		t.Errorf("HTTP/1.0 without Host: %v %v", resp, err)
	}
}

// On a connection that arrived over a non-loopback interface (a public
// daemon), an IP literal is how remote clients address it; names still need
// listing.
func TestHostsOffLoopback(t *testing.T) {
	t.Parallel()
	ip := netaddr.NonLoopbackIPv4(t)
	h := Hosts(nil)(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	addr := serve(t, net.JoinHostPort(ip, "0"), h)
	if code := rawGet(t, addr, addr); code != 200 {
		t.Errorf("Host %q (the address itself): %d", addr, code)
	}
	if code := rawGet(t, addr, "10.1.2.3"); code != 200 {
		t.Errorf("IP literal: %d", code)
	}
	if code := rawGet(t, addr, "evil.example"); code != http.StatusMisdirectedRequest {
		t.Errorf("name on a public daemon: %d, want 421", code)
	}
	if code := rawGet(t, addr, "0.0.0.0"); code != http.StatusMisdirectedRequest {
		t.Errorf("unspecified address: %d, want 421", code)
	}
}

// A client that declares a large body and trickles it is cut off at the
// deadline with a 408 and a closed connection, holding only what it sent.
func TestReadBodySlowClient(t *testing.T) {
	t.Parallel()
	const timeout = 300 * time.Millisecond
	got := make(chan error, 1)
	addr := serve(t, "127.0.0.1:0", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, err := ReadBody(w, r, 16<<20, timeout)
		got <- err
		if errors.Is(err, ErrBodyTimeout) {
			WriteError(w, http.StatusRequestTimeout, "body-timeout", err.Error())
		}
	}))
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprint(conn, "POST / HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 16777216\r\n\r\n{")
	stop := make(chan struct{})
	defer close(stop)
	go func() { // one byte every 50 ms, until the server hangs up
		for {
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
				if _, err := conn.Write([]byte(" ")); err != nil {
					return
				}
			}
		}
	}()
	select {
	case err := <-got:
		if !errors.Is(err, ErrBodyTimeout) {
			t.Fatalf("ReadBody: %v, want ErrBodyTimeout", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("slow body never timed out")
	}
	conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil || resp.StatusCode != http.StatusRequestTimeout || !resp.Close {
		t.Fatalf("reply %v, %v; want 408 with Connection: close", resp, err)
	}
	io.Copy(io.Discard, resp.Body)
	if _, err := conn.Read(make([]byte, 1)); err == nil {
		t.Fatal("connection still open after the timeout reply")
	}
}

// A body within the deadline is read whole, and a handler that holds its
// reply past the deadline afterwards keeps its request context.
func TestReadBodyDeadlineCleared(t *testing.T) {
	t.Parallel()
	const timeout = 200 * time.Millisecond
	addr := serve(t, "127.0.0.1:0", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := ReadBody(w, r, 1<<20, timeout)
		if err != nil {
			WriteError(w, 400, "read", err.Error())
			return
		}
		select {
		case <-r.Context().Done():
			WriteError(w, 500, "cancelled", "request context ended while holding")
		case <-time.After(3 * timeout):
			fmt.Fprintf(w, "%d", len(b))
		}
	}))
	resp, err := http.Post("http://"+addr+"/", "application/json", strings.NewReader(strings.Repeat("x", 100000)))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || string(b) != "100000" {
		t.Fatalf("got %d %s", resp.StatusCode, b)
	}
}

func TestLoopbackURL(t *testing.T) {
	t.Parallel()
	for raw, want := range map[string]bool{
		"http://127.0.0.1:8787":        true,
		"http://localhost:8787/":       true,
		"https://[::1]:8787":           true,
		"http://127.8.9.1":             true,
		"http://10.0.0.5:8787":         false,
		"https://relay.example:8787":   false,
		"http://127.0.0.1.nip.io:8787": false,
		"http://[fe80::1%25eth0]:1":    false,
		"http://user@127.0.0.1:8787":   true,
		"127.0.0.1:8787":               false, // no scheme: not a URL
		"":                             false,
		"http://%zz":                   false,
	} {
		if got := LoopbackURL(raw); got != want {
			t.Errorf("LoopbackURL(%q) = %v, want %v", raw, got, want)
		}
	}
}

// A relay URL printed to a terminal or a log carries no credentials, query
// (an access_token may ride there) or fragment.
func TestDisplayURL(t *testing.T) {
	t.Parallel()
	if got := DisplayURL("http://user:pw@relay:8787/base?access_token=s#x"); got != "http://relay:8787/base" {
		t.Errorf("DisplayURL = %q", got)
	}
	if got := DisplayURL("http://%zz"); got != "(unparseable relay URL)" {
		t.Errorf("DisplayURL of garbage = %q", got)
	}
}

// A BodyReader reads each body whole, of any size around its chunks' sizes,
// into bytes of its own: the chunks it reuses for the next body never show
// through in one already returned. Bodies past the limit fail as ReadBody's.
func TestBodyReaderReuse(t *testing.T) {
	t.Parallel()
	const limit = 300 << 10
	var br BodyReader
	var mu sync.Mutex
	var got [][]byte
	addr := serve(t, "127.0.0.1:0", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := br.Read(w, r, limit, 5*time.Second)
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			WriteError(w, http.StatusRequestEntityTooLarge, "too-large", err.Error())
			return
		}
		if err != nil {
			WriteError(w, 400, "read", err.Error())
			return
		}
		mu.Lock()
		got = append(got, b)
		mu.Unlock()
		fmt.Fprintf(w, "%d", len(b))
	}))
	var sent [][]byte
	for i, n := range []int{0, 1, 4095, 4096, 4097, 16 << 10, 20000, 38000, 64 << 10, 100000, 200001, limit} {
		body := make([]byte, n)
		for j := range body {
			body[j] = byte('a' + (i+j)%26)
		}
		resp, err := http.Post("http://"+addr+"/", "application/x-ndjson", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		reply, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || string(reply) != strconv.Itoa(n) {
			t.Fatalf("%d bytes: %d %s", n, resp.StatusCode, reply)
		}
		sent = append(sent, body)
	}
	for i := range sent {
		if !bytes.Equal(got[i], sent[i]) {
			t.Errorf("body %d (%d bytes) read back as %d different bytes", i, len(sent[i]), len(got[i]))
		}
	}
	resp, err := http.Post("http://"+addr+"/", "application/x-ndjson", bytes.NewReader(make([]byte, limit+1)))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("a body past the limit: %d, want 413", resp.StatusCode)
	}
}

// A JSON answer is sized, so a handler can flush it before it returns and
// the client still reads one unchunked body.
func TestWriteJSONSized(t *testing.T) {
	t.Parallel()
	big := strings.Repeat("x", 8<<10)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		WriteJSON(w, http.StatusAccepted, map[string]string{"detail": big})
		_ = http.NewResponseController(w).Flush()
	})}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()
	resp, err := http.Get("http://" + ln.Addr().String() + "/")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"detail":"` + big + "\"}\n"
	if resp.StatusCode != http.StatusAccepted || string(body) != want {
		t.Fatalf("%d, %d bytes; want 202 and %d bytes", resp.StatusCode, len(body), len(want))
	}
	if resp.ContentLength != int64(len(want)) || len(resp.TransferEncoding) != 0 {
		t.Fatalf("Content-Length %d, Transfer-Encoding %v; want %d and none", resp.ContentLength, resp.TransferEncoding, len(want))
	}
}

// A path segment long enough to be a credential never reaches a log: an
// answer link's token, a bearer token pasted where a path goes. The
// relay's own routes pass as they are.
func TestLogPath(t *testing.T) {
	t.Parallel()
	tok := "eyJ2IjoxLCJuIjoiQUJDREVGR0hJSktMIn0.c2lnbmF0dXJlLWJ5dGVzLWhlcmU"
	for in, want := range map[string]string{
		"/answer/" + tok:                     "/answer/[redacted]",
		"//answer/" + tok + "/x":             "//answer/[redacted]",
		"/answer/short":                      "/answer/[redacted]",
		"/answer/":                           "/answer/",
		"/answr/" + tok:                      "/answr/[redacted]",
		"/events":                            "/events",
		"/rules/r-wnzpw5n4":                  "/rules/r-wnzpw5n4",
		"/notify/subscriptions/AbCdEfGhIjKl": "/notify/subscriptions/AbCdEfGhIjKl",
		"/app/login":                         "/app/login",
		"":                                   "",
	} {
		if got := LogPath(in, "/answer/"); got != want {
			t.Errorf("LogPath(%q) = %q, want %q", in, got, want)
		}
	}
}

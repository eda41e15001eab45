package stacktest

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/aep-kimi/aep-kimi/aep"
	"github.com/aep-kimi/aep-kimi/fleetpage"
	"github.com/aep-kimi/aep-kimi/internal/testkit/httpcall"
	"github.com/aep-kimi/aep-kimi/internal/testkit/netaddr"
	"github.com/aep-kimi/aep-kimi/internal/testkit/proctest"
)

// RevokeBound is how soon a stream or socket must end once its credential
// does.
const RevokeBound = 2 * time.Second

// PageLogin is a browser's login as the page's script holds it: the cookie
// the browser keeps and the secret the tab keeps.
type PageLogin struct {
	Base    string
	Cookie  *http.Cookie
	Secret  string
	Expires time.Time
}

// LoginPage logs in to the page at base with token, as the page does.
func LoginPage(t *testing.T, base, token string) *PageLogin {
	t.Helper()
	res := httpcall.Do(t, httpcall.Request{Method: http.MethodPost, URL: base + "/app/login", Body: map[string]string{"token": token},
		Header: map[string]string{"Origin": base, "Sec-Fetch-Site": "same-origin"}})
	if res.Status != http.StatusOK || len(res.Cookies()) != 1 {
		t.Fatalf("login at %s: %d %s (%d cookies)", base, res.Status, res.Body, len(res.Cookies()))
	}
	var body struct {
		Login string `json:"login"`
	}
	_ = json.Unmarshal(res.Body, &body)
	c := res.Cookies()[0]
	if !strings.HasPrefix(c.Name, "aep_fleet") {
		t.Fatalf("login cookie %q", c.Name)
	}
	return &PageLogin{Base: base, Cookie: c, Secret: body.Login, Expires: c.Expires}
}

// Header is what the page's own fetch carries: the cookie, the browser's
// same-origin marker and the tab's secret.
func (l *PageLogin) Header() http.Header {
	h := http.Header{}
	h.Set("Cookie", l.Cookie.Name+"="+l.Cookie.Value)
	h.Set("Sec-Fetch-Site", "same-origin")
	h.Set("AEP-Login", l.Secret)
	return h
}

// Logout posts the page's logout.
func (l *PageLogin) Logout(t *testing.T) {
	t.Helper()
	h := l.Header()
	h.Set("Origin", l.Base)
	if code := statusOf(t, http.MethodPost, l.Base+"/app/logout", h); code != http.StatusOK {
		t.Fatalf("logout: %d", code)
	}
}

// LiveStream is an open /stream, read until it ends.
type LiveStream struct {
	Ended chan time.Time
	Tail  chan string // the last comment line before the end
	Close context.CancelFunc
}

func OpenStream(t *testing.T, url string, h http.Header) *LiveStream {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	req.Header = h
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if res.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		t.Fatalf("GET %s: %d %s", url, res.StatusCode, b)
	}
	s := &LiveStream{Ended: make(chan time.Time, 1), Tail: make(chan string, 1), Close: cancel}
	go func() {
		defer res.Body.Close()
		sc := bufio.NewScanner(res.Body)
		last := ""
		for sc.Scan() {
			if l := sc.Text(); strings.HasPrefix(l, ":") {
				last = l
			}
		}
		s.Tail <- last
		s.Ended <- time.Now()
	}()
	return s
}

// EndsWithin waits for the stream to end no later than bound after since.
func (s *LiveStream) EndsWithin(t *testing.T, what string, since time.Time, bound time.Duration) {
	t.Helper()
	select {
	case at := <-s.Ended:
		if d := at.Sub(since); d > bound {
			t.Errorf("%s: the stream ended %v after, want within %v", what, d.Round(time.Millisecond), bound)
		}
		t.Logf("%s: stream ended after %v (%s)", what, at.Sub(since).Round(time.Millisecond), <-s.Tail)
	case <-time.After(time.Until(since.Add(bound + time.Second))):
		t.Errorf("%s: the stream is still open %v after", what, bound+time.Second)
	}
}

// LiveSocket is an open /socket after its hello, read until it closes.
type LiveSocket struct {
	C      *websocket.Conn
	Ctx    context.Context
	Frames chan map[string]any
	Closed chan time.Time
}

func OpenSocket(t *testing.T, base string, h http.Header, hello string) *LiveSocket {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	c, res, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(base, "http")+"/socket", &websocket.DialOptions{HTTPHeader: h})
	if err != nil {
		status := ""
		if res != nil {
			status = res.Status
		}
		t.Fatalf("socket at %s: %v %s", base, err, status)
	}
	t.Cleanup(func() { _ = c.CloseNow() })
	if err := c.Write(ctx, websocket.MessageText, []byte(hello)); err != nil {
		t.Fatal(err)
	}
	s := &LiveSocket{C: c, Ctx: ctx, Frames: make(chan map[string]any, 256), Closed: make(chan time.Time, 1)}
	go func() {
		for {
			_, b, err := c.Read(ctx)
			if err != nil {
				s.Closed <- time.Now()
				close(s.Frames)
				return
			}
			var f map[string]any
			if json.Unmarshal(b, &f) == nil {
				s.Frames <- f
			}
		}
	}()
	if f := s.Next(t, "hello"); f == nil {
		t.Fatal("the socket closed before its hello")
	}
	return s
}

// ConsumerHello is the page's hello, with its login when secret is set.
func ConsumerHello(secret string) string {
	auth := ""
	if secret != "" {
		auth = `,"auth":{"login":"` + secret + `"}`
	}
	return `{"type":"hello","versions":["0.1"],"role":"consumer","identity":{"agent":"aep-kimi-page","instance":"e2e"},"capabilities":{}` + auth + `}`
}

// Next waits for the next frame of type typ, skipping others; nil when the
// socket closed first.
func (s *LiveSocket) Next(t *testing.T, typ string) map[string]any {
	t.Helper()
	f, closed := s.Within(typ, 10*time.Second)
	if f == nil && !closed {
		t.Fatalf("no %s frame in 10 s", typ)
	}
	return f
}

// Within is the next frame of type typ within d, skipping others; nil when
// none came, closed when the socket closed first.
func (s *LiveSocket) Within(typ string, d time.Duration) (f map[string]any, closed bool) {
	timeout := time.After(d)
	for {
		select {
		case f, ok := <-s.Frames:
			if !ok {
				return nil, true
			}
			if f["type"] == typ {
				return f, false
			}
		case <-timeout:
			return nil, false
		}
	}
}

// ClosesWithin waits for a closing frame naming reason, then the close, no
// later than bound after since.
func (s *LiveSocket) ClosesWithin(t *testing.T, what, reason string, since time.Time, bound time.Duration) {
	t.Helper()
	deadline := time.After(time.Until(since.Add(bound + time.Second)))
	var closing map[string]any
	for {
		select {
		case f, ok := <-s.Frames:
			if ok && f["type"] == "closing" {
				closing = f
			}
			if ok {
				continue
			}
			at := <-s.Closed
			if d := at.Sub(since); d > bound {
				t.Errorf("%s: the socket closed %v after, want within %v", what, d.Round(time.Millisecond), bound)
			}
			if closing == nil || closing["reason"] != reason {
				t.Errorf("%s: closing frame %v, want reason %q", what, closing, reason)
			}
			t.Logf("%s: socket closed after %v with %v", what, at.Sub(since).Round(time.Millisecond), closing)
			return
		case <-deadline:
			t.Errorf("%s: the socket is still open %v after", what, bound+time.Second)
			return
		}
	}
}

// WriteToken replaces a token file the way an operator rotating it would:
// a new file renamed over the old.
func WriteToken(t *testing.T, path, token string) {
	t.Helper()
	tmp := path + ".new"
	if err := os.WriteFile(tmp, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// TokenRelay runs the relay binary with its token in a file under a fresh
// home.
func TokenRelay(t *testing.T, env ...string) (base, home, tokenFile, token string) {
	t.Helper()
	home = t.TempDir()
	token = "e2e-" + aep.NewID()
	tokenFile = filepath.Join(home, "relay.token")
	WriteToken(t, tokenFile, token)
	port := strconv.Itoa(netaddr.FreePort(t))
	base = "http://127.0.0.1:" + port
	StartDaemon(t, base, CleanEnv(home, append([]string{"AEP_TOKEN_FILE=" + tokenFile}, env...)...), "relay", "--listen", "127.0.0.1:"+port)
	return base, home, tokenFile, token
}

// StartDash runs `aep-kimi dash` reading the relay at relayURL and returns
// its base URL and its login token, read from what it prints.
func StartDash(t *testing.T, relayURL, relayToken string) (base, token string) {
	t.Helper()
	home := t.TempDir()
	tokFile := filepath.Join(home, "relay.token")
	if err := os.WriteFile(tokFile, []byte(relayToken), 0o600); err != nil {
		t.Fatal(err)
	}
	port := strconv.Itoa(netaddr.FreePort(t))
	cmd := exec.Command(filepath.Join(Binaries(t), "aep-kimi"), "dash", "--listen", "127.0.0.1:"+port, "--relay", relayURL+","+tokFile)
	cmd.Env = CleanEnv(home)
	d := proctest.Start(t, "aep-kimi dash", cmd)
	// Off a terminal the dash writes its login URL to a private file and
	// prints that file's path.
	page := regexp.MustCompile(`page\s+(http://127\.0\.0\.1:` + port + `)\s`)
	login := regexp.MustCompile(`#token=([A-Za-z0-9_%-]+)`)
	var m []string
	d.Await(t, 20*time.Second, "page URL printed", func() bool {
		m = page.FindStringSubmatch(d.Logs.String())
		return m != nil
	})
	b, err := os.ReadFile(filepath.Join(home, fleetpage.DashOpenFileName))
	if err != nil {
		t.Fatal(err)
	}
	tm := login.FindStringSubmatch(string(b))
	if tm == nil {
		t.Fatalf("%s holds no login URL: %s", fleetpage.DashOpenFileName, b)
	}
	tok, err := url.QueryUnescape(tm[1])
	if err != nil {
		t.Fatal(err)
	}
	return m[1], tok
}

func Bearer(token string) http.Header {
	h := http.Header{}
	h.Set("Authorization", "Bearer "+token)
	return h
}

// SocketHeader is what a browser's socket upgrade carries: the cookie and
// the page's Origin, no secret (the hello brings it).
func (l *PageLogin) SocketHeader() http.Header {
	h := http.Header{}
	h.Set("Cookie", l.Cookie.Name+"="+l.Cookie.Value)
	h.Set("Origin", l.Base)
	return h
}

// StatusOf is the status of a GET of url with the headers h.
func StatusOf(t *testing.T, url string, h http.Header) int {
	t.Helper()
	return statusOf(t, http.MethodGet, url, h)
}

func statusOf(t *testing.T, method, url string, h http.Header) int {
	t.Helper()
	hs := make(map[string]string, len(h))
	for k := range h {
		hs[k] = h.Get(k)
	}
	return httpcall.Do(t, httpcall.Request{Method: method, URL: url, Header: hs}).Status
}

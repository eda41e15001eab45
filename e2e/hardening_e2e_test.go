// The daemons' hardening, on the built binaries over real sockets:
// tokens off loopback, foreign hosts, bad UTF-8, slow bodies, budgets.

package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/aep-kimi/aep-kimi/adapter"
	"github.com/aep-kimi/aep-kimi/internal/testkit/netaddr"
	"github.com/aep-kimi/aep-kimi/internal/testkit/poll"
	"github.com/aep-kimi/aep-kimi/internal/testkit/proctest"
	"github.com/aep-kimi/aep-kimi/internal/testkit/stacktest"
	"github.com/aep-kimi/aep-kimi/rules"
)

// Off loopback, every daemon refuses to start without a real token: none,
// blank, too short, or an empty token file.
func TestE2EPublicNeedsRealToken(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("e2e: builds and runs the binaries")
	}
	home := t.TempDir()
	empty := filepath.Join(home, "empty.token")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	port := strconv.Itoa(netaddr.FreePort(t))
	anyIf := "0.0.0.0:" + port
	cases := []struct {
		name string
		Env  []string
		args []string
		want string
	}{
		{"relay non-loopback listen, no token", nil, []string{"relay", "--listen", anyIf}, "needs a token"},
		{"relay blank AEP_TOKEN", []string{"AEP_TOKEN= \n"}, []string{"relay", "--listen", anyIf}, "needs a token"},
		{"relay --public, short token", []string{"AEP_TOKEN=short-token"}, []string{"relay", "--public"}, "at least 16 bytes"},
		{"relay AEP_PUBLIC=1, empty token file", []string{"AEP_PUBLIC=1", "AEP_TOKEN_FILE=" + empty, "AEP_PORT=" + port}, []string{"relay"}, "is empty: write the secret into it"},
		{"up --public, empty token file", []string{"AEP_TOKEN_FILE=" + empty}, []string{"up", "--public", "--relay-listen", anyIf}, "is empty: write the secret into it"},
		{"up --public, blank AEP_TOKEN", []string{"AEP_TOKEN= "}, []string{"up", "--public", "--relay-listen", anyIf}, "token you chose"},
		{"up, relay off loopback, short token", []string{"AEP_TOKEN=0123456789"}, []string{"up", "--relay-listen", anyIf}, "at least 16 bytes"},
		{"adapter non-loopback listen, no token", nil, []string{"adapter", "--listen", anyIf, "--relay", "none"}, "needs a token"},
		{"bridge-web non-loopback listen, no token", nil, []string{"bridge-web", "--listen", anyIf, "--relay", "none"}, "needs a token"},
		{"bad allowed host", nil, []string{"relay", "--listen", "127.0.0.1:" + port, "--allowed-hosts", "http://x/"}, "--allowed-hosts"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			msg := stacktest.RunRefused(t, stacktest.CleanEnv(home, c.Env...), c.args...)
			if !strings.Contains(msg, c.want) {
				t.Fatalf("stderr %q does not say %q", msg, c.want)
			}
		})
	}
}

// A token is read the same way by the relay and its clients: surrounding
// whitespace (a file's newline) is not part of it, and a blank one is none.
func TestE2ETokenTrimmedAlike(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("e2e: builds and runs the binaries")
	}
	home := t.TempDir()
	const secret = "0123456789abcdef-e2e"
	port := strconv.Itoa(netaddr.FreePort(t))
	base := "http://127.0.0.1:" + port
	stacktest.StartDaemon(t, base, stacktest.CleanEnv(home, "AEP_TOKEN="+secret+"\n", "AEP_PORT="+port), "relay", "--public", "--behind-proxy")
	for _, c := range []struct {
		auth, query string
		want        int
	}{
		{"Bearer " + secret, "", 200},
		{"", "?access_token=" + secret + "%0A", 200},
		{"", "?access_token=%20", 401},
		{"Bearer wrong-token-0000000", "", 403},
	} {
		req, _ := http.NewRequest(http.MethodGet, base+"/events"+c.query, nil)
		if c.auth != "" {
			req.Header.Set("Authorization", c.auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != c.want {
			t.Errorf("auth %q query %q: %d, want %d", c.auth, c.query, resp.StatusCode, c.want)
		}
	}
	// The token file a client reads ends in a newline; the client trims it
	// as the relay does, so `tail --once` gets in.
	tokFile := filepath.Join(home, "client.token")
	os.WriteFile(tokFile, []byte(secret+"\r\n"), 0o600)
	cmd := exec.Command(filepath.Join(stacktest.Binaries(t), "aep-kimi"), "tail", "--relay", base, "--once", "--state", "none")
	cmd.Env = stacktest.CleanEnv(home, "AEP_TOKEN_FILE="+tokFile)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("tail with a newline-terminated token file: %v\n%s", err, out)
	}

	// A blank AEP_TOKEN on loopback is no token: watch-only, said so.
	port2 := strconv.Itoa(netaddr.FreePort(t))
	p := stacktest.StartDaemon(t, "http://127.0.0.1:"+port2, stacktest.CleanEnv(home, "AEP_TOKEN= "), "relay", "--listen", "127.0.0.1:"+port2)
	if !strings.Contains(p.Logs.String(), "watch-only") {
		t.Errorf("blank token not reported as watch-only:\n%s", p.Logs.String())
	}
}

// A page that rebinds its own name to 127.0.0.1 reaches the daemons with its
// name in Host: every endpoint of every daemon refuses it before answering.
func TestE2EForeignHostRefused(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("e2e: builds and runs the binaries")
	}
	home := t.TempDir()
	rport, aport, bport := netaddr.FreePort(t), netaddr.FreePort(t), netaddr.FreePort(t)
	raddr, aaddr, baddr := "127.0.0.1:"+strconv.Itoa(rport), "127.0.0.1:"+strconv.Itoa(aport), "127.0.0.1:"+strconv.Itoa(bport)
	// Watch-only relay: exactly what a rebinding page would read.
	stacktest.StartDaemon(t, "http://"+raddr, stacktest.CleanEnv(home, "AEP_ALLOWED_HOSTS=relay.test"), "relay", "--listen", raddr)
	stacktest.StartDaemon(t, "http://"+aaddr, stacktest.CleanEnv(home), "adapter", "--listen", aaddr, "--relay", "none")
	stacktest.StartDaemon(t, "http://"+baddr, stacktest.CleanEnv(home), "bridge-web", "--listen", baddr, "--relay", "none")
	hookToken, err := os.ReadFile(adapter.TokenPath(home))
	if err != nil {
		t.Fatal(err)
	}
	ev := `{"aep":"0.1","id":"e1","type":"progress.status","time":"2026-01-01T00:00:00Z","source":"aep://x/agent/a","agent":"a","session":"s","seq":1,"epoch":0,"data":{}}`
	wsHdr := "Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
	type probe struct{ Addr, method, path, extra, body string }
	probes := []probe{
		{raddr, "GET", "/healthz", "", ""},
		{raddr, "GET", "/metrics", "", ""},
		{raddr, "GET", "/events", "", ""},
		{raddr, "GET", "/.well-known/aep", "", ""},
		{raddr, "GET", "/stream?from=all", "", ""},
		{raddr, "GET", "/socket", wsHdr, ""},
		{raddr, "POST", "/events", "Content-Type: application/json\r\nAEP-Version: 0.1\r\n", ev},
		{raddr, "GET", "/nowhere", "", ""},
		{aaddr, "GET", "/healthz", "", ""},
		{aaddr, "GET", "/metrics", "", ""},
		{aaddr, "POST", "/hook", "Content-Type: application/json\r\nAuthorization: Bearer " + strings.TrimSpace(string(hookToken)) + "\r\n",
			`{"hook_event_name":"SessionStart","session_id":"rebound","cwd":"/"}`},
		{baddr, "GET", "/healthz", "", ""},
		{baddr, "GET", "/metrics", "", ""},
	}
	for _, p := range probes {
		_, port, _ := net.SplitHostPort(p.Addr)
		for _, host := range []string{"rebind.example:" + port, "rebind.example", "0.0.0.0:" + port} {
			extra := p.extra
			if p.path == "/socket" {
				extra += "Origin: http://" + host + "\r\n"
			}
			code, body := stacktest.RawStatus(t, p.Addr, p.method, p.path, host, extra, p.body)
			if code != http.StatusMisdirectedRequest || !strings.Contains(body, `"error":"host-not-allowed"`) {
				t.Errorf("%s %s%s with Host %s: %d %s", p.method, p.Addr, p.path, host, code, body)
			}
		}
	}
	// The refused hook was never taken.
	if _, err := os.Stat(filepath.Join(home, "logs", "kimi-code", "rebound.jsonl")); err == nil {
		t.Error("a hook with a foreign Host reached the session log")
	}
	// Loopback names and the operator's names still work.
	for _, host := range []string{raddr, "localhost:" + strconv.Itoa(rport), "[::1]:" + strconv.Itoa(rport), "relay.test", "RELAY.test:443"} {
		if code, body := stacktest.RawStatus(t, raddr, "GET", "/healthz", host, "", ""); code != 200 {
			t.Errorf("relay /healthz with Host %s: %d %s", host, code, body)
		}
	}
	if code, body := stacktest.RawStatus(t, aaddr, "GET", "/healthz", "localhost", "", ""); code != 200 {
		t.Errorf("adapter /healthz with Host localhost: %d %s", code, body)
	}
}

// Events that are not valid UTF-8 (or escape an unpaired surrogate in an
// envelope string) are refused on every intake, so two session ids never
// collapse into one U+FFFD name.
func TestE2EInvalidUTF8Refused(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("e2e: builds and runs the binaries")
	}
	home := t.TempDir()
	raddr, aaddr := "127.0.0.1:"+strconv.Itoa(netaddr.FreePort(t)), "127.0.0.1:"+strconv.Itoa(netaddr.FreePort(t))
	stacktest.StartDaemon(t, "http://"+raddr, stacktest.CleanEnv(home), "relay", "--listen", raddr)
	stacktest.StartDaemon(t, "http://"+aaddr, stacktest.CleanEnv(home), "adapter", "--listen", aaddr, "--relay", "none")
	event := func(session string) string {
		return `{"aep":"0.1","id":"e-` + strconv.Itoa(len(session)) + `","type":"progress.status","time":"2026-01-01T00:00:00Z","source":"aep://x/agent/a","agent":"a","session":"` + session + `","seq":1,"epoch":0,"data":{}}`
	}
	post := "Content-Type: application/json\r\nAEP-Version: 0.1\r\n"
	ndjson := "Content-Type: application/x-ndjson\r\nAEP-Version: 0.1\r\n"
	for _, c := range []struct{ name, extra, body string }{
		{"raw byte", post, event("s\xff")},
		{"other raw byte", post, event("s\xfe")},
		{"lone surrogate", post, event(`s\ud800`)},
		{"batch line 2", ndjson, event("ok") + "\n" + event("s\xc3") + "\n"},
	} {
		code, body := stacktest.RawStatus(t, raddr, "POST", "/events", raddr, c.extra, c.body)
		if code != 400 || !strings.Contains(body, "invalid-event") || !strings.Contains(body, "UTF-8") {
			t.Errorf("relay POST %s: %d %s", c.name, code, body)
		}
	}
	// Nothing was held: the one valid line of the refused batch included.
	if code, body := stacktest.RawStatus(t, raddr, "GET", "/healthz", raddr, "", ""); code != 200 || !strings.Contains(body, `"events":0`) {
		t.Errorf("relay holds events after refusals: %s", body)
	}

	// The WebSocket binding applies the same rule.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ws, _, err := websocket.Dial(ctx, "ws://"+raddr+"/socket", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.CloseNow()
	hello := `{"type":"hello","versions":["0.1"],"role":"emitter","identity":{"agent":"a","instance":"a/1"}}`
	if err := ws.Write(ctx, websocket.MessageText, []byte(hello)); err != nil {
		t.Fatal(err)
	}
	if _, b, err := ws.Read(ctx); err != nil || !bytes.Contains(b, []byte(`"hello"`)) {
		t.Fatalf("hello: %s %v", b, err)
	}
	if err := ws.Write(ctx, websocket.MessageText, []byte(event("w\xff"))); err != nil {
		t.Fatal(err)
	}
	if _, b, err := ws.Read(ctx); err != nil || !bytes.Contains(b, []byte(`"invalid-event"`)) || !bytes.Contains(b, []byte("UTF-8")) {
		t.Fatalf("socket event with invalid UTF-8 answered %s %v", b, err)
	}

	// The adapter refuses a hook payload that is not UTF-8.
	tok, err := os.ReadFile(adapter.TokenPath(home))
	if err != nil {
		t.Fatal(err)
	}
	hookHdr := "Content-Type: application/json\r\nAuthorization: Bearer " + strings.TrimSpace(string(tok)) + "\r\n"
	code, body := stacktest.RawStatus(t, aaddr, "POST", "/hook", aaddr, hookHdr, "{\"hook_event_name\":\"SessionStart\",\"session_id\":\"k\xff\",\"cwd\":\"/\"}")
	if code != 400 || !strings.Contains(body, "UTF-8") {
		t.Errorf("adapter /hook with invalid UTF-8: %d %s", code, body)
	}
}

// Clients that announce 16 MiB bodies and trickle them a byte at a time
// hold almost nothing on the relay or the adapter and are cut off once the
// body deadline passes.
func TestE2ESlowBodiesBounded(t *testing.T) {
	// Serial: it times how soon slow bodies are cut off and reads the relay's memory, which tests running beside it would stretch.
	if testing.Short() {
		t.Skip("e2e: builds and runs the binaries")
	}
	const conns = 30
	home := t.TempDir()
	raddr, aaddr := "127.0.0.1:"+strconv.Itoa(netaddr.FreePort(t)), "127.0.0.1:"+strconv.Itoa(netaddr.FreePort(t))
	relayP := stacktest.StartDaemon(t, "http://"+raddr, stacktest.CleanEnv(home), "relay", "--listen", raddr)
	adapterP := stacktest.StartDaemon(t, "http://"+aaddr, stacktest.CleanEnv(home), "adapter", "--listen", aaddr, "--relay", "none")
	tok, err := os.ReadFile(adapter.TokenPath(home))
	if err != nil {
		t.Fatal(err)
	}
	targets := []struct {
		name, Addr, head string
		p                *proctest.Proc
		limit            time.Duration
	}{
		{"relay", raddr, "POST /events HTTP/1.1\r\nHost: " + raddr + "\r\nContent-Type: application/json\r\nAEP-Version: 0.1\r\nContent-Length: 16777216\r\n\r\n{", relayP, 20 * time.Second},
		{"adapter", aaddr, "POST /hook HTTP/1.1\r\nHost: " + aaddr + "\r\nContent-Type: application/json\r\nAuthorization: Bearer " + strings.TrimSpace(string(tok)) + "\r\nContent-Length: 16777216\r\n\r\n{", adapterP, 10 * time.Second},
	}
	for _, tg := range targets {
		t.Run(tg.name, func(t *testing.T) {
			t.Parallel()
			before, haveRSS := stacktest.RssKB(t, tg.p.Cmd.Process.Pid)
			start := time.Now()
			var wg sync.WaitGroup
			closedAfter := make(chan time.Duration, conns)
			var fed atomic.Int64 // paced bytes the server took
			for range conns {
				conn, err := net.Dial("tcp", tg.Addr)
				if err != nil {
					t.Fatal(err)
				}
				defer conn.Close()
				if _, err := io.WriteString(conn, tg.head); err != nil {
					t.Fatal(err)
				}
				wg.Add(2)
				go func() { // one byte a second until the server hangs up
					defer wg.Done()
					for i := 0; i < 60; i++ {
						time.Sleep(time.Second) // not a synchronisation: the slow client's pace
						if _, err := conn.Write([]byte(" ")); err != nil {
							return
						}
						fed.Add(1)
					}
				}()
				go func() {
					defer wg.Done()
					conn.SetReadDeadline(time.Now().Add(tg.limit + 15*time.Second))
					io.Copy(io.Discard, conn) // the 408 reply, then EOF
					closedAfter <- time.Since(start)
					conn.Close()
				}()
			}
			// Memory is read while the server holds every slow body, once
			// each has taken a few of its client's bytes.
			poll.Must(t, 15*time.Second, "every slow body fed three bytes", func() bool { return fed.Load() >= 3*conns })
			if after, ok := stacktest.RssKB(t, tg.p.Cmd.Process.Pid); ok && haveRSS {
				t.Logf("%s RSS %d kB -> %d kB with %d slow bodies", tg.name, before, after, conns)
				if after-before > 100<<10 {
					t.Errorf("%s RSS grew %d kB for %d slow bodies", tg.name, after-before, conns)
				}
			}
			wg.Wait()
			close(closedAfter)
			var last time.Duration
			for d := range closedAfter {
				last = max(last, d)
			}
			t.Logf("%s: all %d slow connections closed after %v", tg.name, conns, last.Round(100*time.Millisecond))
			if last >= tg.limit+10*time.Second {
				t.Errorf("%s: slow connections still open %v after they started", tg.name, last)
			}
		})
	}
}

// The relay holds no more than its byte budget, trimming the oldest events,
// and a consumer resuming from a trimmed position is told replay-exhausted.
func TestE2ERelayByteBudget(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("e2e: builds and runs the binaries")
	}
	const budget, body = 4 << 20, 1 << 20
	home := t.TempDir()
	raddr := "127.0.0.1:" + strconv.Itoa(netaddr.FreePort(t))
	const token = "budget-token-0123456789"
	p := stacktest.StartDaemon(t, "http://"+raddr, stacktest.CleanEnv(home, "AEP_TOKEN="+token, "AEP_BUFFER_BYTES="+strconv.Itoa(budget), "AEP_MAX_BODY="+strconv.Itoa(body)),
		"relay", "--listen", raddr)
	if !strings.Contains(p.Logs.String(), "buffer_bytes="+strconv.Itoa(budget)) {
		t.Errorf("start-up log does not show the byte budget:\n%s", p.Logs.String())
	}
	pad := strings.Repeat("x", 900<<10)
	client := &http.Client{Timeout: 30 * time.Second}
	for i := range 12 { // ~10.8 MB into a 4 MiB budget
		ev := fmt.Sprintf(`{"aep":"0.1","id":"big-%d","type":"progress.status","time":"2026-01-01T00:00:00Z","source":"aep://x/agent/a","agent":"a","session":"big","seq":%d,"epoch":0,"data":{"pad":"%s"}}`, i, i, pad)
		req, _ := http.NewRequest(http.MethodPost, "http://"+raddr+"/events", strings.NewReader(ev))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("AEP-Version", "0.1")
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 202 {
			t.Fatalf("event %d: %d", i, resp.StatusCode)
		}
	}
	req, _ := http.NewRequest(http.MethodGet, "http://"+raddr+"/healthz", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var h struct {
		Events      int   `json:"events"`
		Bytes       int64 `json:"bytes"`
		BufferBytes int64 `json:"buffer_bytes"`
	}
	json.NewDecoder(resp.Body).Decode(&h)
	resp.Body.Close()
	if h.BufferBytes != budget || h.Bytes > budget || h.Events == 0 || h.Events >= 12 {
		t.Fatalf("healthz %+v: want at most %d bytes held and some events trimmed", h, budget)
	}
	// Resume from seq 0: what followed it was trimmed.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	sreq, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+raddr+"/stream?from="+url.QueryEscape(`[{"session":"big","epoch":0,"seq":0}]`), nil)
	sreq.Header.Set("Authorization", "Bearer "+token)
	sresp, err := http.DefaultClient.Do(sreq)
	if err != nil {
		t.Fatal(err)
	}
	defer sresp.Body.Close()
	want := fmt.Sprintf(": replay-exhausted big 0:%d", 12-h.Events)
	sr := bufio.NewReader(sresp.Body)
	for {
		l, err := sr.ReadString('\n')
		if err != nil || strings.HasPrefix(l, "id:") {
			t.Fatalf("no %q before the first event (%q, %v)", want, l, err)
		}
		if strings.TrimSpace(l) == want {
			break
		}
	}
	if runtime.GOOS == "linux" {
		if kb, ok := stacktest.RssKB(t, p.Cmd.Process.Pid); ok {
			t.Logf("relay RSS after 12 x 900 KiB into a 4 MiB budget: %d kB", kb)
		}
	}
}

// A bad --notify target is the one line the relay prints, even with rules
// on disk to load (whose log line used to come first).
func TestE2EBadNotifyOneLine(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("e2e: builds and runs the binaries")
	}
	home := t.TempDir()
	if err := os.WriteFile(filepath.Join(home, rules.FileName), []byte(`{"version":1,"rules":[]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	env := stacktest.CleanEnv(home, "AEP_TOKEN=0123456789abcdef-e2e")
	for _, up := range []bool{false, true} {
		args := []string{"relay", "--listen", "127.0.0.1:" + strconv.Itoa(netaddr.FreePort(t)), "--notify", "ftp://example.org/x"}
		if up {
			args = []string{"up", "--relay-listen", args[2], "--notify", args[4], "--web=false"}
		}
		if msg := stacktest.RunRefused(t, env, args...); !strings.Contains(msg, "ftp") {
			t.Fatalf("%s: stderr %q does not name the bad target", args[0], msg)
		}
	}
}

// A secret file that is there but empty, or torn as a power cut leaves a
// file written without a sync (its size, but zeros), stops the daemon with
// one line naming the file and the fix: `up` never falls back to a relay
// without a token, and the relay never starts without the one it was given.
func TestE2EEmptyOrTornSecretRefused(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("e2e: builds and runs the binaries")
	}
	loopback := func() string { return "127.0.0.1:" + strconv.Itoa(netaddr.FreePort(t)) }
	torn := make([]byte, 44) // a token's size, never written
	cases := []struct {
		name    string
		file    string // under the home
		content []byte
		Env     []string
		args    []string
		want    string
	}{
		{"up, empty home token", "token", nil, nil,
			[]string{"up", "--relay-listen", loopback(), "--adapter-listen", loopback(), "--web=false"},
			"token is empty: remove it to make a new one, or restore it"},
		{"up, torn home token", "token", torn, nil,
			[]string{"up", "--relay-listen", loopback(), "--adapter-listen", loopback(), "--web=false"},
			"token is torn"},
		{"up, empty hook token", "kimi/hook.token", []byte("\n"), nil,
			[]string{"up", "--relay-listen", loopback(), "--adapter-listen", loopback(), "--web=false"},
			"hook.token is empty: remove it to make a new one, or restore it"},
		{"relay, empty token file", "relay.token", nil, []string{"AEP_TOKEN_FILE=@"},
			[]string{"relay", "--listen", loopback()},
			"relay.token is empty: write the secret into it, or restore it"},
		{"relay, empty answer-link key", "notify-key", nil, []string{"AEP_TOKEN=relay-token-0123456789abcdef"},
			[]string{"relay", "--listen", loopback()},
			"notify-key is empty: remove it to make a new one, or restore it"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			home := filepath.Join(t.TempDir(), "aep")
			path := filepath.Join(home, c.file)
			if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, c.content, 0o600); err != nil {
				t.Fatal(err)
			}
			env := stacktest.CleanEnv(home)
			for _, kv := range c.Env {
				env = append(env, strings.ReplaceAll(kv, "@", path))
			}
			code, stderr := stacktest.RunStopped(t, env, c.args...)
			lines := strings.Split(strings.TrimSpace(stderr), "\n")
			if last := lines[len(lines)-1]; code == 0 || !strings.Contains(last, path) || !strings.Contains(last, c.want) {
				t.Fatalf("exit %d, its last line does not name %s and say %q:\n%s", code, path, c.want, stderr)
			}
		})
	}
}

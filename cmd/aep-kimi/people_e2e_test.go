package main

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/aep-kimi/aep-kimi/access"
	"github.com/aep-kimi/aep-kimi/aep"
	"github.com/aep-kimi/aep-kimi/internal/testkit/kimiharness"
	"github.com/aep-kimi/aep-kimi/internal/testkit/proctest"
	"github.com/aep-kimi/aep-kimi/relay/consumer"
)

// cliAs runs an aep-kimi subcommand against the stack with token.
func (st *stack) cliAs(t testing.TB, token string, args ...string) (int, string) {
	t.Helper()
	cmd := exec.Command(filepath.Join(binaries(t), "aep-kimi"), args...)
	cmd.Env = append(os.Environ(), "AEP_TOKEN="+token, "AEP_RELAY="+st.relayURL, "AEP_HOME="+st.home)
	return proctest.Run(t, cmd)
}

// personStream is an SSE stream and a socket subscription read with one
// token: every event's data, and how each ended.
type personStream struct {
	sse, sock       chan string // event data (SSE) and frames (socket), in order
	sseEnd, sockEnd chan string // the last comment / the closing frame's reason
}

func openAs(t *testing.T, relayURL, token string) *personStream {
	t.Helper()
	ps := &personStream{sse: make(chan string, 1024), sock: make(chan string, 1024), sseEnd: make(chan string, 1), sockEnd: make(chan string, 1)}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, relayURL+"/stream?from=all", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	res, err := http.DefaultClient.Do(req)
	if err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("the stream: %v %v", res, err)
	}
	go func() {
		defer res.Body.Close()
		last := ""
		sc := bufio.NewScanner(res.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<24)
		for sc.Scan() {
			switch l := sc.Text(); {
			case strings.HasPrefix(l, "data: "):
				ps.sse <- strings.TrimPrefix(l, "data: ")
			case strings.HasPrefix(l, ": ") && l != ": ping":
				last = strings.TrimPrefix(l, ": ")
			}
		}
		ps.sseEnd <- last
	}()
	h := http.Header{}
	h.Set("Authorization", "Bearer "+token)
	c, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(relayURL, "http")+"/socket", &websocket.DialOptions{HTTPHeader: h})
	if err != nil {
		t.Fatal(err)
	}
	c.SetReadLimit(1 << 24)
	t.Cleanup(func() { _ = c.CloseNow() })
	for _, f := range []string{
		`{"type":"hello","versions":["0.1"],"role":"consumer","identity":{"agent":"e2e","instance":"e2e/1"},"capabilities":{}}`,
		`{"type":"subscribe","id":"all","from":"all","capture":"full"}`,
	} {
		if err := c.Write(ctx, websocket.MessageText, []byte(f)); err != nil {
			t.Fatal(err)
		}
	}
	go func() {
		reason := ""
		for {
			_, b, err := c.Read(ctx)
			if err != nil {
				ps.sockEnd <- reason
				return
			}
			var f struct{ Type, Reason string }
			_ = json.Unmarshal(b, &f)
			if f.Type == "closing" {
				reason = f.Reason
			}
			if strings.Contains(f.Type, ".") {
				ps.sock <- string(b)
			}
		}
	}()
	return ps
}

// sendForged answers request as the page would, with token, but naming
// the owner as its sender twice over.
func sendForged(t *testing.T, relayURL, token, session, request string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	h := http.Header{}
	h.Set("Authorization", "Bearer "+token)
	c, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(relayURL, "http")+"/socket", &websocket.DialOptions{HTTPHeader: h})
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseNow() //nolint:errcheck // the test is done with it
	id := aep.NewID()
	cmd := `{"aep":"0.1","id":"` + id + `","type":"control.attention.respond","time":"` + aep.FormatTime(time.Now()) +
		`","source":"aep://e2e/agent/aep-kimi-page","agent":"aep-kimi-page","session":"` + session + `","subject":"` + request +
		`","cause":"` + request + `","aepkimiby":"owner","data":{"answer":{"option":"allow"},"by":"owner"}}`
	for _, f := range []string{
		`{"type":"hello","versions":["0.1"],"role":"consumer","identity":{"agent":"aep-kimi-page","instance":"e2e"},"capabilities":{}}`,
		`{"type":"subscribe","id":"acks","filter":{"session":"` + session + `","type":"control.*"}}`,
	} {
		if err := c.Write(ctx, websocket.MessageText, []byte(f)); err != nil {
			t.Fatal(err)
		}
	}
	for {
		_, b, err := c.Read(ctx)
		if err != nil {
			t.Fatalf("no ack for the forged command: %v", err)
		}
		var f struct{ Type, Cause, Code string }
		_ = json.Unmarshal(b, &f)
		switch {
		case f.Type == "error":
			t.Fatalf("the forged command was refused: %s", b)
		case f.Type == "control.accepted" && f.Cause == id:
			return
		case f.Type == "subscribed": // the ack cannot pass unseen now
			if err := c.Write(ctx, websocket.MessageText, []byte(cmd)); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// drain is what the stream has delivered so far.
func drain(ch chan string) []string {
	var out []string
	for {
		select {
		case s := <-ch:
			out = append(out, s)
		default:
			return out
		}
	}
}

// A team on a real relay, adapter and Kimi session: the owner adds a
// watcher and an answerer with `aep-kimi token add`. The watcher's stream
// and socket carry the session's shape but no text above metadata, and its
// respond is refused; the answerer's deny reaches the hook (Kimi is told
// who denied it) and the stream names her; a command she makes herself
// naming the owner (aepkimiby, and by in its data) is recorded as hers;
// `token rm` ends the watcher's stream and socket within 2 s.
func TestE2ETeamRoles(t *testing.T) {
	kimi := kimiharness.Require(t)
	st := startStack(t, "AEP_KIMI_CONTROL=1", "AEP_CAPTURE=redacted")
	add := func(name, role string) string {
		code, out := st.cliAs(t, st.token, "token", "add", name, "--role", role, "--json")
		var got struct{ Token string }
		if code != 0 || json.Unmarshal([]byte(out), &got) != nil || got.Token == "" {
			t.Fatalf("token add %s: exit %d: %s", name, code, out)
		}
		return got.Token
	}
	walt, ann := add("walt", "watch"), add("ann", "answer")
	b, err := os.ReadFile(filepath.Join(st.home, access.FileName))
	if st2, _ := os.Stat(filepath.Join(st.home, access.FileName)); err != nil || st2.Mode().Perm() != 0o600 ||
		strings.Contains(string(b), walt) || strings.Contains(string(b), ann) {
		t.Fatalf("tokens file (%v): %s", err, b)
	}
	time.Sleep(time.Second) // the relay re-reads the file every 0.5 s
	watcher := openAs(t, st.relayURL, walt)

	const secret = "echo team-secret-7f3a"
	done := make(chan kimiharness.PrintRun, 1)
	go func() { done <- scenario(t, kimi, bashSteps(t, secret, "echo forged"), st.hookCmd(t)) }()
	out := st.waitCLI(t, func(s string) bool { return strings.Contains(s, "team-secret-7f3a") }, "pending")
	m := regexp.MustCompile(`aep-kimi respond --option deny (\S+) (\S+)`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no answering command in pending:\n%s", out)
	}
	if code, msg := st.cliAs(t, walt, "respond", "--option", "allow", m[1], m[2]); code != exitRejected || !strings.Contains(msg, "needs the answer role") {
		t.Fatalf("the watcher's respond: exit %d: %s", code, msg)
	}
	if code, msg := st.cliAs(t, ann, "respond", "--option", "deny", m[1], m[2]); code != 0 {
		t.Fatalf("the answerer's respond: exit %d: %s", code, msg)
	}

	// The second call: ann answers with a command of her own making that
	// names someone else (aepkimiby, and a by in its data): the relay
	// writes her name over it.
	out = st.waitCLI(t, func(s string) bool { return strings.Contains(s, "echo forged") }, "pending")
	m2 := regexp.MustCompile(`aep-kimi respond --option deny (\S+) (\S+)`).FindStringSubmatch(out)
	if m2 == nil {
		t.Fatalf("no answering command in pending:\n%s", out)
	}
	// pending names the session by its short id; a command goes to the whole.
	_, _, held := st.oneSession(t)
	if len(held) == 0 || !strings.HasPrefix(consumer.BareID(held[0].Session), m2[1]) {
		t.Fatalf("the session log does not hold session %s", m2[1])
	}
	sendForged(t, st.relayURL, ann, held[0].Session, m2[2])
	run := <-done
	st.waitQuiet(t)

	// The hook got the deny, with who gave it, and Kimi told its model.
	if reqs := strings.Join(run.Mock.Requests(t), "\n"); !strings.Contains(reqs, "Denied by ann (cli) through aep-kimi") {
		t.Errorf("Kimi's model was not told ann denied the call:\n%s", reqs)
	}
	_, _, evs := st.oneSession(t)
	answers := map[string]map[string]any{} // request -> the answer's data
	for _, e := range evs {
		if e.Type == "attention.answered" {
			answers[e.Subject] = dataOf(e)
		}
	}
	if a := answers[m[2]]; a["by"] != "ann" || a["x-kimi-code-surface"] != "cli" {
		t.Fatalf("the answer on the record: %v", a)
	}
	if a := answers[m2[2]]; a["by"] != "ann" || a["x-kimi-code-surface"] != "page" {
		t.Fatalf("the forged answer on the record: %v", a)
	}
	if code, tail := st.cli(t, "tail", "--from", "all", "--no-color", "--once"); code != 0 || !strings.Contains(tail, "denied by ann (cli)") {
		t.Errorf("tail (exit %d) does not name ann:\n%s", code, tail)
	}

	// The watcher saw the session's shape, and no text above metadata.
	time.Sleep(500 * time.Millisecond)
	seen := append(drain(watcher.sse), drain(watcher.sock)...)
	types := map[string]bool{}
	for _, raw := range seen {
		var e struct {
			Type, Capture string
			Data          map[string]any
		}
		if err := json.Unmarshal([]byte(raw), &e); err != nil {
			t.Fatalf("%v: %s", err, raw)
		}
		types[e.Type] = true
		if strings.Contains(raw, "team-secret") || (e.Capture != "" && e.Capture != "metadata" && e.Capture != "none") {
			t.Fatalf("the watcher was served %s", raw)
		}
	}
	for _, want := range []string{"session.started", "tool.requested", "attention.requested", "control.attention.respond", "attention.answered", "tool.denied"} {
		if !types[want] {
			t.Errorf("the watcher never saw a %s (saw %v)", want, types)
		}
	}

	// Revoking the watcher ends its stream and its socket within 2 s.
	start := time.Now()
	if code, out := st.cliAs(t, st.token, "token", "rm", "walt"); code != 0 {
		t.Fatalf("token rm: exit %d: %s", code, out)
	}
	for name, ch := range map[string]chan string{"stream": watcher.sseEnd, "socket": watcher.sockEnd} {
		select {
		case reason := <-ch:
			if reason != "token-revoked" || time.Since(start) > 2*time.Second {
				t.Errorf("the watcher's %s ended after %v with %q", name, time.Since(start), reason)
			}
		case <-time.After(2*time.Second - time.Since(start)):
			t.Errorf("the watcher's %s is open 2 s after token rm", name)
		}
	}
	if code, _ := st.cliAs(t, walt, "pending"); code == 0 {
		t.Error("a revoked token still reads pending")
	}
}

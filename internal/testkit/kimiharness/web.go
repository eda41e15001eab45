package kimiharness

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aep-kimi/aep-kimi/internal/testkit/netaddr"
	"github.com/aep-kimi/aep-kimi/internal/testkit/proctest"
)

// Web is a running `kimi web` (kap-server).
type Web struct {
	Home, Workdir string
	Port          int
	Base          string
	Token         string
	PID           int

	proc *proctest.Proc
}

// StartWeb runs `kimi web --no-open --host 127.0.0.1 --port P` on home (which
// must hold a config, see WriteConfig) in workdir, and waits until it has
// registered itself and answers. The port it really serves on comes from its
// instance record (it moves up from P when P is taken). It is stopped with
// the test. env is added to its environment (ShiftClock).
func StartWeb(t testing.TB, kimi, home, workdir string, env ...string) *Web {
	t.Helper()
	asked := netaddr.FreePort(t)
	w := &Web{Home: home, Workdir: workdir}
	cmd := exec.Command(kimi, "web", "--no-open", "--host", "127.0.0.1", "--port", fmt.Sprint(asked))
	cmd.Dir = workdir
	cmd.Env = append(Env(home), env...)
	started := time.Now()
	w.proc = proctest.Start(t, "kimi web", cmd)
	w.PID = cmd.Process.Pid
	t.Cleanup(func() { // before the SIGTERM proctest would send
		w.Stop(t)
		LogLaunch("web", home, started, cmd.ProcessState)
	})
	w.proc.Await(t, Patience, "its registration and /api/v1/healthz", func() bool {
		if w.Port == 0 {
			w.Port = w.registeredPort(asked)
			w.Base = fmt.Sprintf("http://127.0.0.1:%d", w.Port)
		}
		tok, err := os.ReadFile(filepath.Join(home, "server.token"))
		if w.Port == 0 || err != nil || len(bytes.TrimSpace(tok)) == 0 {
			return false
		}
		w.Token = strings.TrimSpace(string(tok))
		return proctest.Answers(w.Base + "/api/v1/healthz")
	})
	return w
}

// shiftClock is a Node preload that moves the process's wall clock (Date)
// by a fixed number of milliseconds; its timers run on the monotonic clock
// and keep their pace.
const shiftClock = `const shift = %d;
const RealDate = Date;
const now = () => RealDate.now() + shift;
function ShiftedDate(...args) {
  if (!new.target) return new RealDate(now()).toString();
  return Reflect.construct(RealDate, args.length ? args : [now()], new.target);
}
Object.setPrototypeOf(ShiftedDate, RealDate);
ShiftedDate.prototype = RealDate.prototype;
ShiftedDate.now = now;
globalThis.Date = ShiftedDate;
`

// ShiftClock is the environment entry that runs Kimi (StartWeb's env) with
// its wall clock moved by d: what it stamps and compares with Date, such as
// an approval's created_at and expires_at, is d away from this machine's
// time, at once and with no wait. The instance record's heartbeat is d off
// too, so a bridge reaches such a server with --kap, not discovery.
func ShiftClock(t testing.TB, d time.Duration) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "shift-clock.cjs")
	if err := os.WriteFile(path, fmt.Appendf(nil, shiftClock, d.Milliseconds()), 0o600); err != nil {
		t.Fatal(err)
	}
	return "NODE_OPTIONS=" + strings.TrimSpace(os.Getenv("NODE_OPTIONS")+` --require "`+path+`"`)
}

// registeredPort finds this server's record in the instance registry
// (KIMI_CODE_HOME/server/instances/*.json, one per running server, removed
// on exit) by its pid, or by the port asked for when kimi runs under a
// wrapper that forks, and returns its port; 0 while there is none.
func (w *Web) registeredPort(asked int) int {
	files, _ := filepath.Glob(filepath.Join(w.Home, "server", "instances", "*.json"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		var rec struct {
			PID  int `json:"pid"`
			Port int `json:"port"`
		}
		if json.Unmarshal(b, &rec) == nil && rec.Port > 0 && (rec.PID == w.PID || rec.Port == asked) {
			return rec.Port
		}
	}
	return 0
}

// Exited is closed when the server process has exited.
func (w *Web) Exited() <-chan struct{} { return w.proc.Exited() }

// Output is what the server printed.
func (w *Web) Output() string { return w.proc.Logs.String() }

// Shutdown asks the server to stop (POST /api/v1/shutdown) and returns at
// once: it closes its listener but only exits once WebSocket clients leave.
func (w *Web) Shutdown(t testing.TB) {
	t.Helper()
	w.Call(t, http.MethodPost, "/api/v1/shutdown", nil, nil)
}

// Stop shuts the server down and waits for it to exit, killing it after
// 20 s.
func (w *Web) Stop(t testing.TB) {
	select {
	case <-w.proc.Exited():
		return
	default:
	}
	req, _ := http.NewRequest(http.MethodPost, w.Base+"/api/v1/shutdown", nil)
	req.Header.Set("Authorization", "Bearer "+w.Token)
	if resp, err := http.DefaultClient.Do(req); err == nil {
		resp.Body.Close()
	}
	select {
	case <-w.proc.Exited():
	case <-time.After(20 * time.Second):
		w.proc.Kill()
	}
}

// Call does one authenticated REST call and decodes the envelope's data into
// out; a non-zero code fails the test.
func (w *Web) Call(t testing.TB, method, path string, body, out any) {
	t.Helper()
	code, msg := w.TryCall(t, method, path, body, out)
	if code != 0 {
		t.Fatalf("%s %s: kap code %d: %s", method, path, code, msg)
	}
}

// TryCall is Call that returns the envelope's code and message.
func (w *Web) TryCall(t testing.TB, method, path string, body, out any) (int64, string) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, w.Base+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+w.Token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	var env struct {
		Code int64           `json:"code"`
		Msg  string          `json:"msg"`
		Data json.RawMessage `json:"data"`
	}
	raw, _ := io.ReadAll(resp.Body)
	if err := json.Unmarshal(raw, &env); err != nil {
		t.Fatalf("%s %s: HTTP %d %s", method, path, resp.StatusCode, raw)
	}
	if env.Code == 0 && out != nil {
		if err := json.Unmarshal(env.Data, out); err != nil {
			t.Fatalf("%s %s: data: %v", method, path, err)
		}
	}
	return env.Code, env.Msg
}

// CreateSession creates a session working in w.Workdir and returns its id.
func (w *Web) CreateSession(t testing.TB) string {
	t.Helper()
	var out struct {
		ID string `json:"id"`
	}
	w.Call(t, http.MethodPost, "/api/v1/sessions", map[string]any{"metadata": map[string]any{"cwd": w.Workdir}}, &out)
	return out.ID
}

// Prompt submits a prompt in manual permission mode with the mock model, as
// the web UI does, and returns the prompt id.
func (w *Web) Prompt(t testing.TB, session, text string) string {
	t.Helper()
	var out struct {
		PromptID string `json:"prompt_id"`
	}
	w.Call(t, http.MethodPost, "/api/v1/sessions/"+session+"/prompts", map[string]any{
		"content": []map[string]any{{"type": "text", "text": text}}, "model": "mock", "permission_mode": "manual",
	}, &out)
	return out.PromptID
}

// PendingApprovals lists a session's pending approval ids (it also loads
// the session on the server, as opening it in the web UI does).
func (w *Web) PendingApprovals(t testing.TB, session string) []string {
	t.Helper()
	var out struct {
		Items []struct {
			ApprovalID string `json:"approval_id"`
		} `json:"items"`
	}
	w.Call(t, http.MethodGet, "/api/v1/sessions/"+session+"/approvals?status=pending", nil, &out)
	ids := make([]string, len(out.Items))
	for i, it := range out.Items {
		ids[i] = it.ApprovalID
	}
	return ids
}

// Decide answers an approval as the web UI does.
func (w *Web) Decide(t testing.TB, session, approval string, body map[string]any) {
	t.Helper()
	w.Call(t, http.MethodPost, "/api/v1/sessions/"+session+"/approvals/"+approval, body, nil)
}

// Busy reports whether a session has a prompt running.
func (w *Web) Busy(t testing.TB, session string) bool {
	t.Helper()
	var out struct {
		Active *struct{} `json:"active"`
	}
	w.Call(t, http.MethodGet, "/api/v1/sessions/"+session+"/prompts", nil, &out)
	return out.Active != nil
}

// JournalFrame is one durable frame of the kap-server's own event journal.
type JournalFrame struct {
	Seq   int64
	Type  string
	Epoch string
}

// Journal reads the server's own journal of a session
// (KIMI_CODE_HOME/server/events/{session}.jsonl): every durable frame it
// streamed, with the journal epoch. It is the ground truth a bridge's
// mapped frames are compared with.
func Journal(t testing.TB, home, session string) []JournalFrame {
	t.Helper()
	f, err := os.Open(filepath.Join(home, "server", "events", session+".jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []JournalFrame
	epoch := ""
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		var line struct {
			Kind     string `json:"kind"`
			Epoch    string `json:"epoch"`
			Seq      int64  `json:"seq"`
			Envelope struct {
				Type string `json:"type"`
			} `json:"envelope"`
		}
		if json.Unmarshal(sc.Bytes(), &line) != nil {
			continue
		}
		switch line.Kind {
		case "journal_header":
			if epoch == "" {
				epoch = line.Epoch
			}
		case "event":
			out = append(out, JournalFrame{Seq: line.Seq, Type: line.Envelope.Type, Epoch: epoch})
		}
	}
	return out
}

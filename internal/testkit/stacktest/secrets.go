package stacktest

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aep-kimi/aep-kimi/internal/testkit/proctest"
	"github.com/aep-kimi/aep-kimi/internal/testkit/syncbuf"
)

// Bannered is a running aep-kimi daemon whose standard output is a pipe or
// a pseudo-terminal.
type Bannered struct {
	*proctest.Proc
	Out, Err *syncbuf.Buffer
}

// StartBannered runs `aep-kimi ARGS` with env, stdout on a pipe or (terminal)
// a pseudo-terminal, and waits until stdout holds until and the rest of its
// line: callers name their banner's last line, so the banner is then whole.
// It is stopped (SIGTERM) at the end of the test.
func StartBannered(t *testing.T, env []string, terminal bool, until string, args ...string) *Bannered {
	t.Helper()
	b := &Bannered{Out: &syncbuf.Buffer{}, Err: &syncbuf.Buffer{}}
	cmd := exec.Command(filepath.Join(Binaries(t), "aep-kimi"), args...)
	cmd.Env, cmd.Stdout, cmd.Stderr = env, b.Out, b.Err
	var slave *os.File
	if terminal {
		master, s, err := OpenPTY()
		if err != nil {
			t.Skip(err)
		}
		slave = s
		cmd.Stdout = slave
		go io.Copy(b.Out, master) //nolint:errcheck // ends with EIO once the slave is gone
		t.Cleanup(func() { master.Close() })
	}
	b.Proc = proctest.Start(t, "aep-kimi "+args[0], cmd)
	if slave != nil {
		slave.Close()
	}
	if until != "" {
		b.Await(t, 20*time.Second, fmt.Sprintf("the line of %q on its standard output", until), func() bool {
			_, rest, ok := strings.Cut(b.Out.String(), until)
			return ok && strings.Contains(rest, "\n")
		})
	}
	return b
}

// HomeWithToken is a fresh AEP home holding token as $AEP_HOME/token
// (0600), the file `up` creates.
func HomeWithToken(t *testing.T, token string) string {
	t.Helper()
	home := filepath.Join(t.TempDir(), "aep")
	if err := os.MkdirAll(home, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, "token"), []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return home
}

var LoginFileLine = regexp.MustCompile(`open (\S+), mode 0600`)

// HeaderLog is a stand-in relay that records what each request carried.
type HeaderLog struct {
	Mu   sync.Mutex
	Seen []string // "METHOD URL | Authorization"
}

func (h *HeaderLog) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.Mu.Lock()
	h.Seen = append(h.Seen, r.Method+" "+r.URL.String()+" | "+r.Header.Get("Authorization")+" | "+r.URL.Query().Get("access_token"))
	h.Mu.Unlock()
	http.Error(w, "not a relay", http.StatusServiceUnavailable)
}

func (h *HeaderLog) Requests() []string {
	h.Mu.Lock()
	defer h.Mu.Unlock()
	return append([]string(nil), h.Seen...)
}

func ServeOn(t *testing.T, host string, h http.Handler) string {
	t.Helper()
	ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(ln) //nolint:errcheck // ends with Close
	t.Cleanup(func() { srv.Close() })
	return "http://" + ln.Addr().String()
}

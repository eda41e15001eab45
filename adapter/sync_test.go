package adapter

import (
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/aep-kimi/aep-kimi/internal/syncmode"
)

// syncRecorder is an injected syncmode.Syncer: it keeps, per completed sync,
// the log bytes it covered, and fails while failing is set.
type syncRecorder struct {
	mu      sync.Mutex
	covered []string
	failing bool
}

func (r *syncRecorder) sync(f *os.File) error {
	b, err := os.ReadFile(f.Name())
	if err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.failing {
		return errors.New("injected EIO")
	}
	r.covered = append(r.covered, string(b))
	return nil
}

// onDisk reports whether a completed sync covered a line with s.
func (r *syncRecorder) onDisk(s string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.covered) > 0 && strings.Contains(r.covered[len(r.covered)-1], s)
}

// Under AEP_LOG_SYNC=always a hook is answered 200 only once a sync covered
// its events, hooks arriving together share syncs, and a sync that fails
// answers 503 not-durable (kimi-hook keeps the payload in its spool).
func TestHookAcknowledgedAfterSync(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	rec := &syncRecorder{}
	s := newTestServer(t, home, func(c *Config) { c.Sync, c.Syncer = syncmode.Always, rec.sync })
	base := runServer(t, s)
	start := []byte(`{"hook_event_name":"SessionStart","session_id":"sy","source":"startup"}`)
	if code, body := postDelivery(t, base, s.token, "sy-0", start); code != 200 {
		t.Fatalf("SessionStart answered %d %s", code, body)
	}
	const hooks = 24
	var wg sync.WaitGroup
	errs := make(chan error, hooks)
	for i := range hooks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			call := fmt.Sprintf("call-%02d", i)
			p := fmt.Sprintf(`{"hook_event_name":"PostToolUse","session_id":"sy","tool_name":"Bash","tool_call_id":%q,"tool_input":{},"tool_output":"ok"}`, call)
			if code, body := postDelivery(t, base, s.token, "sy-"+call, []byte(p)); code != 200 {
				errs <- fmt.Errorf("%s answered %d %s", call, code, body)
				return
			}
			if !rec.onDisk(call) {
				errs <- fmt.Errorf("%s answered 200 before a sync covered its events", call)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	rec.mu.Lock()
	t.Logf("%d syncs for %d hooks", len(rec.covered), hooks+1)
	rec.failing = true
	rec.mu.Unlock()
	p := []byte(`{"hook_event_name":"PostToolUse","session_id":"sy","tool_name":"Bash","tool_call_id":"call-eio","tool_input":{},"tool_output":"ok"}`)
	if code, body := postDelivery(t, base, s.token, "sy-eio", p); code != http.StatusServiceUnavailable || !strings.Contains(body, "not-durable") {
		t.Fatalf("a hook whose sync failed answered %d %s", code, body)
	}
}

// Under none a hook is answered without a sync.
func TestHookNoSyncUnderNone(t *testing.T) {
	t.Parallel()
	rec := &syncRecorder{}
	s := newTestServer(t, t.TempDir(), func(c *Config) { c.Sync, c.Syncer = syncmode.None, rec.sync })
	base := runServer(t, s)
	p := []byte(`{"hook_event_name":"SessionStart","session_id":"ns","source":"startup"}`)
	if code, body := postDelivery(t, base, s.token, "ns-0", p); code != 200 {
		t.Fatalf("answered %d %s", code, body)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.covered) != 0 {
		t.Fatalf("none synced %d times", len(rec.covered))
	}
}

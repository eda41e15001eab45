package adapter

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aep-kimi/aep-kimi/internal/spool"
	"github.com/aep-kimi/aep-kimi/internal/testkit/emittertest"
	"github.com/aep-kimi/aep-kimi/internal/testkit/fulldisk"
	"github.com/aep-kimi/aep-kimi/internal/testkit/httpcall"
	"github.com/aep-kimi/aep-kimi/internal/testkit/syncbuf"
)

// postDelivery sends one hook with a delivery id and returns status and body.
func postDelivery(t *testing.T, base, token, delivery string, payload []byte) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, base+"/hook", bytes.NewReader(payload))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	if delivery != "" {
		req.Header.Set("X-Kimi-Hook-Delivery", delivery)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// blockLog makes a session's log impossible to open (a directory stands
// where the file goes), whoever runs the test, root included.
func blockLog(t *testing.T, home, session string) (unblock func()) {
	t.Helper()
	path := filepath.Join(logDir(home), LogFileName(session))
	if err := os.MkdirAll(path, 0o700); err != nil {
		t.Fatal(err)
	}
	return func() {
		if err := os.Remove(path); err != nil {
			t.Fatal(err)
		}
	}
}

// A hook whose events cannot reach the log is answered 503 not-durable,
// counted, and taken again (same delivery id) once the log can be written,
// with no trace of the failed attempt: one event, seq 0.
func TestNotDurableAnswered503(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	s := newTestServer(t, home, nil)
	base := runServer(t, s)
	unblock := blockLog(t, home, "nd")
	p := []byte(`{"hook_event_name":"SessionStart","session_id":"nd","source":"startup"}`)
	code, body := postDelivery(t, base, s.token, "nd-1", p)
	if code != http.StatusServiceUnavailable || !strings.Contains(body, `"error":"not-durable"`) {
		t.Fatalf("unwritable log answered %d %s", code, body)
	}
	if m := metricsText(t, base); !strings.Contains(m, "aepkimi_adapter_not_durable_total 1\n") {
		t.Fatalf("not-durable not counted:\n%s", grepLines(m, "not_durable"))
	}
	unblock()
	if code, body := postDelivery(t, base, s.token, "nd-1", p); code != 200 {
		t.Fatalf("retry answered %d %s", code, body)
	}
	ev := readLog(t, home, "nd")
	if len(ev) != 1 || ev[0].Type != "session.started" || *ev[0].Seq != 0 {
		t.Fatalf("log after retry: %s", dump(ev))
	}
}

// A spooled record whose events cannot be made durable stays in the spool
// (not removed, not quarantined) and is taken on a later pass.
func TestNotDurableSpoolRecordStays(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	s := newTestServer(t, home, nil)
	unblock := blockLog(t, home, "nds")
	p := []byte(`{"hook_event_name":"SessionStart","session_id":"nds","source":"startup"}`)
	if _, _, err := spool.Append(spool.Dir(home), spool.Header{Delivery: "nds-1", At: time.Now().UTC().Format(time.RFC3339Nano), Reason: "not-durable"}, p); err != nil {
		t.Fatal(err)
	}
	if n := s.ingestSpool(0); n != 0 {
		t.Fatalf("%d records ingested onto an unwritable log", n)
	}
	if files, _ := spool.List(spool.Dir(home)); len(files) != 1 {
		t.Fatalf("spool holds %d records, want the one kept", len(files))
	}
	if q, _ := os.ReadDir(filepath.Join(spool.Dir(home), spool.QuarantineDir)); len(q) != 0 {
		t.Fatal("a not-durable record was quarantined")
	}
	unblock()
	if n := s.ingestSpool(0); n != 1 {
		t.Fatalf("%d records ingested once the log is writable", n)
	}
	if ev := readLog(t, home, "nds"); len(ev) != 1 || *ev[0].Seq != 0 {
		t.Fatalf("log: %s", dump(ev))
	}
}

// Sessions beyond the cap are evicted longest-idle first, open log files
// stay under their bound, a session that comes back continues its seq, and
// a session with a hook held at the gate is never evicted.
func TestSessionCapAndLogHandles(t *testing.T) {
	t.Parallel()
	home, pub := t.TempDir(), &emittertest.Recorder{}
	s := newTestServer(t, home, func(cfg *Config) {
		cfg.Publisher, cfg.Control = pub, Control{Gate: true, Authenticated: true}
		cfg.MaxSessions, cfg.MaxOpenLogs = 8, 4
	})
	held, _ := holdTool(t, s, pub)
	start := func(id string) {
		t.Helper()
		p := []byte(fmt.Sprintf(`{"hook_event_name":"SessionStart","session_id":%q,"source":"startup"}`, id))
		if out, _, err := s.ingest(&delivery{payload: p, at: time.Now()}, false); err != nil || out.err != nil {
			t.Fatalf("%s: %v %v", id, err, out.err)
		}
	}
	for i := 0; i < 40; i++ {
		start(fmt.Sprintf("cap-%d", i))
		if n := len(s.SessionIDs()); n > 8 {
			t.Fatalf("%d sessions in memory, cap 8", n)
		}
		if n := s.core.OpenLogs(); n > 4 {
			t.Fatalf("%d log files open, bound 4", n)
		}
	}
	ids := strings.Join(s.SessionIDs(), ",")
	if !strings.Contains(ids, "gate-s") || strings.Contains(ids, "cap-0,") {
		t.Fatalf("sessions in memory: %s", ids)
	}
	// cap-0 was evicted; its next hook recovers it and continues its seq.
	stop := []byte(`{"hook_event_name":"SessionEnd","session_id":"cap-0","reason":"exit"}`)
	if _, _, err := s.ingest(&delivery{payload: stop, at: time.Now()}, false); err != nil {
		t.Fatal(err)
	}
	ev := readLog(t, home, "cap-0")
	if len(ev) != 2 || *ev[0].Seq != 0 || *ev[1].Seq != 1 || *ev[0].Epoch != *ev[1].Epoch {
		t.Fatalf("evicted session's log: %s", dump(ev))
	}
	assertValidStream(t, ev)
	select {
	case <-held:
		t.Fatal("the held hook was released by eviction")
	default:
	}
}

// Invented hook names do not grow /metrics: event types and hook names
// outside the closed set count as one "other" series each.
func TestInventedHooksBoundedMetrics(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	s := newTestServer(t, home, func(c *Config) { c.Syncer = skipDiskFlush })
	base := runServer(t, s)
	for i := 0; i < 10; i++ {
		postDelivery(t, base, s.token, "", []byte(fmt.Sprintf(`{"hook_event_name":"Warmup%d","session_id":"m"}`, i)))
	}
	before := len(metricsText(t, base))
	for i := 0; i < 1000; i++ {
		p := []byte(fmt.Sprintf(`{"hook_event_name":"Invented%dHook","session_id":"m"}`, i))
		if code, body := postDelivery(t, base, s.token, "", p); code != 200 {
			t.Fatalf("invented hook %d: %d %s", i, code, body)
		}
	}
	m := metricsText(t, base)
	if len(m) > before+512 {
		t.Fatalf("/metrics grew from %d to %d bytes over 1000 invented hooks", before, len(m))
	}
	if strings.Contains(m, "invented") || !strings.Contains(m, `aepkimi_adapter_events_total{type="other"} 1010`) ||
		!strings.Contains(m, `aepkimi_adapter_hooks_total{event="other"} 1010`) {
		t.Fatalf("labels:\n%s", grepLines(m, "events_total", "hooks_total"))
	}
	if n := len(readLog(t, home, "m")); n != 1010 {
		t.Fatalf("%d events logged, want every invented hook's (1010)", n)
	}
}

func grepLines(text string, subs ...string) string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		for _, s := range subs {
			if strings.Contains(l, s) {
				out = append(out, l)
				break
			}
		}
	}
	return strings.Join(out, "\n")
}

// healthz is the adapter's /healthz: its status and body.
func healthz(t *testing.T, base string) (int, Health) {
	t.Helper()
	var h Health
	return httpcall.Get(t, base+"/healthz", "").JSON(t, &h).Status, h
}

// A full disk is said where an operator looks, once: while hooks are
// answered not-durable /healthz answers 503 not ok with the reason, the
// logs_durable gauge reads 0 and one line is logged however many hooks
// fail; once space is freed the next hook is durable and all of it clears
// by itself, with one more line. Both faults: a real full tmpfs (root), and
// a log that cannot be opened (anywhere).
func TestFullDiskReportedAndRecovered(t *testing.T) {
	t.Parallel()
	for _, fault := range []string{"full-tmpfs", "blocked-log"} {
		t.Run(fault, func(t *testing.T) {
			var home string
			var fill, free func()
			if fault == "full-tmpfs" {
				d := fulldisk.Mount(t, 1<<20)
				home, fill, free = d.Dir, d.Fill, d.Free
			} else {
				home = t.TempDir()
				var unblock func()
				fill = func() { unblock = blockLog(t, home, "fd") }
				free = func() { unblock() }
			}
			var logs syncbuf.Buffer
			s := newTestServer(t, home, func(cfg *Config) {
				cfg.Logger = slog.New(slog.NewTextHandler(&logs, nil))
			})
			base := runServer(t, s)
			hook := func(i int) int {
				p := fmt.Appendf(nil, `{"hook_event_name":"UserPromptSubmit","session_id":"fd","prompt":[{"type":"text","text":"prompt %d %s"}],"is_steer":false}`, i, strings.Repeat("x", 900))
				code, _ := postDelivery(t, base, s.token, fmt.Sprintf("fd-%d", i), p)
				return code
			}
			if code, h := healthz(t, base); code != 200 || !h.OK || h.Reason != "" {
				t.Fatalf("healthz before the fault: %d %+v", code, h)
			}
			fill()
			failed := 0
			for i := range 20 {
				if hook(i) == http.StatusServiceUnavailable {
					failed++
				}
			}
			if failed < 2 {
				t.Fatalf("%d hooks answered not-durable on a full disk", failed)
			}
			code, h := healthz(t, base)
			if code != http.StatusServiceUnavailable || h.OK || !strings.Contains(h.Reason, "session logs are not reaching the disk") {
				t.Fatalf("healthz on a full disk: %d %+v", code, h)
			}
			if m := metricsText(t, base); !strings.Contains(m, "aepkimi_adapter_logs_durable 0\n") {
				t.Fatalf("full disk not in the gauge:\n%s", grepLines(m, "logs_durable"))
			}
			if n := strings.Count(logs.String(), "session logs are not reaching the disk"); n != 1 {
				t.Fatalf("%d lines for one full disk (%d hooks failed):\n%s", n, failed, logs.String())
			}
			free()
			if code := hook(100); code != 200 {
				t.Fatalf("hook after freeing space answered %d", code)
			}
			if code, h := healthz(t, base); code != 200 || !h.OK || h.Reason != "" {
				t.Fatalf("healthz after freeing space: %d %+v", code, h)
			}
			if m := metricsText(t, base); !strings.Contains(m, "aepkimi_adapter_logs_durable 1\n") {
				t.Fatalf("recovery not in the gauge:\n%s", grepLines(m, "logs_durable"))
			}
			if n := strings.Count(logs.String(), "session logs reach the disk again"); n != 1 {
				t.Fatalf("%d recovery lines:\n%s", n, logs.String())
			}
			assertValidStream(t, readLog(t, home, "fd"))
		})
	}
}

// skipDiskFlush is a Syncer for tests that post many hooks one after
// another to test something other than durability: each hook still waits
// for its log's sync (the same path), but not for the disk's flush, which
// took about 4 ms a hook here.
func skipDiskFlush(*os.File) error { return nil }

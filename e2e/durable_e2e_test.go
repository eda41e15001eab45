// Nothing lost under a hook flood against an adapter short of files:
// real processes and real file limits.

package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/aep-kimi/aep-kimi/adapter"
	"github.com/aep-kimi/aep-kimi/internal/spool"
	"github.com/aep-kimi/aep-kimi/internal/testkit/netaddr"
	"github.com/aep-kimi/aep-kimi/internal/testkit/poll"
	"github.com/aep-kimi/aep-kimi/internal/testkit/stacktest"
)

// Thousands of hook sessions against an adapter limited to 256 open files:
// every hook is answered 200 only with its event on disk, open descriptors
// stay bounded, sessions evicted from memory continue their seq when they
// come back, hooks through the real kimi-hook land (via the spool when
// needed) and share one process watch, and invented hook names leave
// /metrics the size it was. Scale it with AEP_FLOOD_SESSIONS,
// AEP_FLOOD_VIA_HOOK and AEP_FLOOD_INVENTED (21000, 200 and 20000 replay the
// reported attacks).
func TestE2EHookFloodNothingLost(t *testing.T) {
	// Serial: it counts the adapter's descriptors and memory under a flood, which tests running beside it would stretch.
	bin := stacktest.Binaries(t)
	home := t.TempDir()
	sessions := stacktest.EnvCount("AEP_FLOOD_SESSIONS", 3000)
	invented := stacktest.EnvCount("AEP_FLOOD_INVENTED", 2000)
	const maxSessions = 500
	port := netaddr.FreePort(t)
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	base := "http://" + addr
	// The shell lowers its own limit (soft and hard) and execs the adapter,
	// so the adapter runs with it from its first instruction.
	cmd := exec.Command("sh", "-c", fmt.Sprintf(`ulimit -n %d && exec "$0" "$@"`, stacktest.FloodFileLimit),
		filepath.Join(bin, "aep-kimi"), "adapter", "--listen", addr, "--relay", "none", "--home", home)
	cmd.Env = stacktest.CleanEnv(home, fmt.Sprintf("AEP_KIMI_MAX_SESSIONS=%d", maxSessions))
	d := stacktest.StartProc(t, base, cmd, "adapter")
	pid := d.Cmd.Process.Pid
	tok, err := os.ReadFile(adapter.TokenPath(home))
	if err != nil {
		t.Fatal(err)
	}
	token := strings.TrimSpace(string(tok))
	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 32}}
	var non200 atomic.Int64
	postHook := func(session, delivery, payload string) error {
		req, _ := http.NewRequest(http.MethodPost, base+"/hook", strings.NewReader(payload))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("X-Kimi-Hook-Delivery", delivery)
		resp, err := client.Do(req)
		if err != nil {
			return fmt.Errorf("%s: %w", session, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			non200.Add(1)
			return fmt.Errorf("%s: %d %s", session, resp.StatusCode, body)
		}
		return nil
	}
	// Sample the adapter's descriptors while the flood runs.
	var maxFD atomic.Int64
	stopSampling := make(chan struct{})
	var sampler sync.WaitGroup
	sampler.Add(1)
	go func() {
		defer sampler.Done()
		for {
			if n := int64(stacktest.FdCount(pid)); n > maxFD.Load() {
				maxFD.Store(n)
			}
			select {
			case <-stopSampling:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	flood := func(n int, payload func(i int) (session, delivery, body string)) {
		t.Helper()
		g, _ := errgroup.WithContext(context.Background())
		g.SetLimit(32)
		for i := 0; i < n; i++ {
			g.Go(func() error { return postHook(payload(i)) })
		}
		if err := g.Wait(); err != nil {
			t.Fatalf("flood: %v (%d answers were not 200); adapter log:\n%s", err, non200.Load(), stacktest.Tail(d.Logs.String()))
		}
	}
	start := time.Now()
	flood(sessions, func(i int) (string, string, string) {
		s := fmt.Sprintf("flood-%d", i)
		return s, fmt.Sprintf("fs-%d", i), fmt.Sprintf(`{"hook_event_name":"SessionStart","session_id":%q,"source":"startup"}`, s)
	})
	// Every seventh session comes back after it was evicted from memory.
	back := sessions / 7
	flood(back, func(i int) (string, string, string) {
		s := fmt.Sprintf("flood-%d", i*7)
		return s, fmt.Sprintf("fe-%d", i), fmt.Sprintf(`{"hook_event_name":"SessionEnd","session_id":%q,"reason":"exit"}`, s)
	})
	floodTime := time.Since(start)
	// Sessions through the real kimi-hook: an awaited SessionStart and a
	// fire-and-forget Notification each. kimi-hook names its parent (this
	// test) as each session's Kimi process: the adapter watches that one
	// process once for all of them, so twice the file limit in sessions
	// costs one descriptor.
	viaHook := stacktest.EnvCount("AEP_FLOOD_VIA_HOOK", 2*stacktest.FloodFileLimit)
	hookStart := time.Now()
	g, _ := errgroup.WithContext(context.Background())
	g.SetLimit(8)
	for i := 0; i < viaHook; i++ {
		g.Go(func() error {
			s := fmt.Sprintf("kh-%d", i)
			for _, p := range []string{
				fmt.Sprintf(`{"hook_event_name":"SessionStart","session_id":%q,"source":"startup"}`, s),
				fmt.Sprintf(`{"hook_event_name":"Notification","session_id":%q,"title":"t","message":"m"}`, s),
			} {
				c := exec.Command(filepath.Join(bin, "kimi-hook"), "--daemon", base, "--home", home, "--timeout", "10")
				c.Stdin = strings.NewReader(p)
				if out, err := c.CombinedOutput(); err != nil || len(out) != 0 {
					return fmt.Errorf("kimi-hook %s: %v %q", s, err, out)
				}
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
	hookTime := time.Since(hookStart)
	if !poll.Until(30*time.Second, func() bool { files, _ := spool.List(spool.Dir(home)); return len(files) == 0 }) {
		files, _ := spool.List(spool.Dir(home))
		t.Fatalf("%d spool records never ingested", len(files))
	}
	close(stopSampling)
	sampler.Wait()

	// Every hook's event is in its session's log, once, in seq order.
	lost := 0
	for i := 0; i < sessions; i++ {
		want := []string{`"type":"session.started"`}
		if i%7 == 0 && i/7 < back {
			want = append(want, `"type":"session.ended"`)
		}
		lost += stacktest.Missing(t, home, fmt.Sprintf("flood-%d", i), want)
	}
	for i := 0; i < viaHook; i++ {
		lost += stacktest.Missing(t, home, fmt.Sprintf("kh-%d", i), []string{`"type":"session.started"`, `"type":"progress.status"`})
	}
	if lost > 0 {
		t.Fatalf("%d events missing from the logs", lost)
	}
	if q, _ := os.ReadDir(filepath.Join(spool.Dir(home), spool.QuarantineDir)); len(q) != 0 {
		t.Fatalf("%d spool records quarantined", len(q))
	}
	m := stacktest.Scrape(t, client, base)
	openLogs := stacktest.MetricValue(m, "aepkimi_adapter_open_logs")
	if openLogs > stacktest.FloodFileLimit/4 || maxFD.Load() >= stacktest.FloodFileLimit {
		t.Fatalf("open logs %v (bound %d), max descriptors %d (limit %d)", openLogs, stacktest.FloodFileLimit/4, maxFD.Load(), stacktest.FloodFileLimit)
	}
	if w := stacktest.MetricValue(m, "aepkimi_adapter_watched_processes"); w != 1 {
		t.Fatalf("%v Kimi processes watched, want 1 (every kimi-hook names this test)", w)
	}
	rss, _ := stacktest.RssKB(t, pid)

	// Invented hook names: /metrics keeps its size.
	before := len(m)
	flood(invented, func(i int) (string, string, string) {
		return "inv", fmt.Sprintf("inv-%d", i), fmt.Sprintf(`{"hook_event_name":"Invented%dHook","session_id":"inv"}`, i)
	})
	after := len(stacktest.Scrape(t, client, base))
	if after > before+2048 {
		t.Fatalf("/metrics grew from %d to %d bytes over %d invented hook names", before, after, invented)
	}
	t.Logf("flood: %d sessions (+%d returning) in %v, %d via kimi-hook in %v, under a %d-file limit: max fds %d, open logs %v, sessions evicted %v, not-durable answers %v, RSS %d kB, events lost %d; /metrics %d -> %d bytes over %d invented hook names",
		sessions, back, floodTime.Round(time.Millisecond), viaHook, hookTime.Round(time.Millisecond), stacktest.FloodFileLimit, maxFD.Load(), openLogs,
		stacktest.MetricValue(m, "aepkimi_adapter_sessions_evicted_total"), stacktest.MetricValue(m, "aepkimi_adapter_not_durable_total"), rss, lost, before, after, invented)
}

package adapter

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aep-kimi/aep-kimi/internal/syncmode"
)

// BenchmarkIngest measures the adapter's intake — map, sequence, append to
// the session's JSONL log — per hook, with 1 and 50 sessions taking hooks
// concurrently, next to a baseline in the same run: appending an event-sized
// line to a file (the one syscall each event costs at least).
func BenchmarkIngest(b *testing.B) {
	// A realistic mix: a tool call pair (the bulk of a session's hooks).
	pre := `{"hook_event_name":"PreToolUse","session_id":"%s","cwd":"/w","client_type":"kimi_code_cli","tool_name":"Bash","tool_input":{"command":"echo probe"},"tool_call_id":"c%d"}`
	post := `{"hook_event_name":"PostToolUse","session_id":"%s","cwd":"/w","client_type":"kimi_code_cli","tool_name":"Bash","tool_input":{"command":"echo probe"},"tool_call_id":"c%d","tool_output":"probe\n"}`
	for _, sessions := range []int{1, 50} {
		b.Run(fmt.Sprintf("sessions=%d", sessions), func(b *testing.B) {
			s := newTestServer(b, b.TempDir(), nil)
			b.ReportAllocs()
			b.SetParallelism(max(sessions/2, 1)) // goroutines = GOMAXPROCS * this
			b.ResetTimer()
			var next atomic.Int64
			if sessions == 1 {
				for i := 0; i < b.N; i++ {
					payload := pre
					if i%2 == 1 {
						payload = post
					}
					d := &delivery{payload: []byte(fmt.Sprintf(payload, "bench-0", i/2)), at: time.Now()}
					if _, _, err := s.ingest(d, false); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
				return
			}
			b.RunParallel(func(pb *testing.PB) {
				// One goroutine per session: a session's hooks arrive in
				// order (PreToolUse, then the PostToolUse of that call).
				sid := fmt.Sprintf("bench-%d", next.Add(1)%int64(sessions))
				for i := 0; pb.Next(); i++ {
					payload := pre
					if i%2 == 1 {
						payload = post
					}
					d := &delivery{payload: []byte(fmt.Sprintf(payload, sid, i/2)), at: time.Now()}
					if _, _, err := s.ingest(d, false); err != nil {
						b.Fatal(err)
					}
				}
			})
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
		})
	}
	b.Run("baseline-append", func(b *testing.B) {
		f, err := os.OpenFile(filepath.Join(b.TempDir(), "x.jsonl"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
		if err != nil {
			b.Fatal(err)
		}
		defer f.Close()
		line := make([]byte, 420)
		line[len(line)-1] = '\n'
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			if _, err := f.Write(line); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
	})
}

// BenchmarkHookSync measures a hook to its durable acknowledgement (mapped,
// sequenced, logged, and synced as the mode promises before the reply) in
// each AEP_LOG_SYNC mode, in one run: none is the behaviour before the
// modes, the baseline. hooks-at-once=1 is one hook after another (the cost
// a lone hook pays); 8 posts eight at once into one session, as parallel
// tool calls do, where one sync serves the hooks that arrived while the
// last one ran (syncs/hook).
func BenchmarkHookSync(b *testing.B) {
	pre := `{"hook_event_name":"PreToolUse","session_id":"bench","cwd":"/w","client_type":"kimi_code_cli","tool_name":"Bash","tool_input":{"command":"echo probe"},"tool_call_id":"c%d-%d"}`
	post := `{"hook_event_name":"PostToolUse","session_id":"bench","cwd":"/w","client_type":"kimi_code_cli","tool_name":"Bash","tool_input":{"command":"echo probe"},"tool_call_id":"c%d-%d","tool_output":"probe\n"}`
	for _, mode := range []syncmode.Mode{syncmode.None, syncmode.Interval, syncmode.Always} {
		for _, at := range []int{1, 8} {
			b.Run(fmt.Sprintf("%s/hooks-at-once=%d", mode, at), func(b *testing.B) {
				var syncs atomic.Int64
				s := newTestServer(b, b.TempDir(), func(c *Config) {
					c.Sync = mode
					c.Syncer = func(f *os.File) error { syncs.Add(1); return syncmode.FileSync(f) }
				})
				hook := func(w, i int) {
					payload := pre
					if i%2 == 1 {
						payload = post
					}
					d := &delivery{id: fmt.Sprintf("d%d-%d", w, i), payload: []byte(fmt.Sprintf(payload, w, i/2)), at: time.Now()}
					out, _, err := s.ingest(d, false)
					if err == nil {
						if out.wait != nil {
							out = <-out.wait
						}
						err = out.durable().err
					}
					if err != nil {
						b.Error(err)
					}
				}
				hook(-1, 0) // the session and its log exist
				syncs.Store(0)
				b.ResetTimer()
				var wg sync.WaitGroup
				for w := range at {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for i := w; i < b.N; i += at {
							hook(w, i/at)
						}
					}()
				}
				wg.Wait()
				b.ReportMetric(float64(syncs.Load())/float64(b.N), "syncs/hook")
			})
		}
	}
	// The floor of one synced hook, in the same run: append an event-sized
	// line and fdatasync it.
	b.Run("baseline-append-fdatasync", func(b *testing.B) {
		f, err := os.OpenFile(filepath.Join(b.TempDir(), "x.jsonl"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
		if err != nil {
			b.Fatal(err)
		}
		defer f.Close()
		line := []byte(strings.Repeat("x", 419) + "\n")
		b.ResetTimer()
		for range b.N {
			if _, err := f.Write(line); err != nil {
				b.Fatal(err)
			}
			if err := syncmode.FileSync(f); err != nil {
				b.Fatal(err)
			}
		}
	})
}

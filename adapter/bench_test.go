package adapter

import (
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"
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

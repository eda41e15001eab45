package mapping

import (
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/aep-kimi/aep-kimi/aep"
)

// BenchmarkMapHook measures mapping one real payload and marshalling its
// envelope(s) — the adapter's per-hook work before I/O — for each hook, next
// to a baseline in the same run: json.Unmarshal of the same payload into a
// generic map (the cheapest thing that reads it at all).
func BenchmarkMapHook(b *testing.B) {
	files, _ := filepath.Glob(filepath.Join("testdata", "hooks", "*.txtar"))
	sort.Strings(files)
	seen := map[string]bool{}
	for _, f := range files {
		name := strings.SplitN(strings.TrimSuffix(filepath.Base(f), ".txtar"), ".", 2)[0]
		if seen[name] || strings.Contains(f, "secrets") || strings.Contains(f, "hostile") {
			continue
		}
		seen[name] = true
		raw, err := os.ReadFile(f)
		if err != nil {
			b.Fatal(err)
		}
		payload := []byte(strings.SplitN(strings.SplitN(string(raw), "-- payload.json --\n", 2)[1], "\n", 2)[0])
		p := DefaultPosture()
		b.Run(name+"/map+marshal", func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				r, err := Hook(payload, p)
				if err != nil {
					b.Fatal(err)
				}
				for _, m := range r.Events {
					e := &aep.Event{ID: "01JX9YB3P4T90000000000GOLD", Time: "2026-11-29T10:00:00.000Z",
						Source: "aep://h/agent/kimi-code/session/s", Agent: Agent, Session: "s", Seq: aep.Int64(int64(i))}
					if err := m.Envelope(e); err != nil {
						b.Fatal(err)
					}
					if _, err := e.MarshalJSON(); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
		b.Run(name+"/baseline-unmarshal", func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				var m map[string]any
				if err := json.Unmarshal(payload, &m); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

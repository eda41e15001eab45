package notify

import (
	"log/slog"
	"testing"
	"time"

	"github.com/aep-kimi/aep-kimi/aep"
	"github.com/aep-kimi/aep-kimi/mapping"
	"github.com/aep-kimi/aep-kimi/relay"
)

// BenchmarkUsageTake is what the usage watch costs the notifier per live
// event: one that carries no token figure (skipped unparsed) and a kimi
// web step that does, over 100 sessions.
func BenchmarkUsageTake(b *testing.B) {
	spec, _ := ParseUsage("context=80%,tokens=200k")
	msg := func(typ string, data map[string]any, i int) *relay.Message {
		ev := &aep.Event{AEP: aep.Version, ID: aep.NewID(), Type: typ, Time: aep.FormatTime(time.Now()),
			Source: "aep://b/agent/kimi-code/session/s", Agent: "kimi-code", Session: "s" + string(rune('a'+i%100)),
			Seq: aep.Int64(int64(i)), Capture: aep.CaptureMetadata.String()}
		if err := ev.SetData(data); err != nil {
			b.Fatal(err)
		}
		m, err := relay.NewMessage(ev, time.Now())
		if err != nil {
			b.Fatal(err)
		}
		return m
	}
	for _, c := range []struct {
		name string
		typ  string
		data map[string]any
	}{
		{"no-tokens", "tool.completed", map[string]any{"tool": map[string]any{"name": "Bash"}, "duration_ms": 12}},
		{"step", "x.kimi-code.web.turn.step.completed", map[string]any{mapping.DataInputTokens: 1200, mapping.DataOutputTokens: 80,
			mapping.DataContextTokens: 1280, mapping.DataContextLimit: 131072}},
	} {
		b.Run(c.name, func(b *testing.B) {
			w := newUsageWatch(spec, slog.New(slog.DiscardHandler))
			msgs := make([]*relay.Message, 256)
			for i := range msgs {
				msgs[i] = msg(c.typ, c.data, i)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; b.Loop(); i++ {
				w.take(msgs[i%len(msgs)], true, time.Now())
			}
		})
	}
}

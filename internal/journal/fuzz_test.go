package journal

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aep-kimi/aep-kimi/aep"
)

// FuzzReplay feeds arbitrary log tails to Replay: every event it hands back
// must be one that parses on its own, and it must never panic on torn or
// hostile lines.
func FuzzReplay(f *testing.F) {
	f.Add([]byte(`{"specversion":"0.1","id":"01J","source":"aep://h/agent/kimi-code/session/s","type":"run.started","time":"2026-11-29T00:00:00Z","session":"s","epoch":1,"seq":0,"data":{}}`+"\n"), int64(1<<20))
	f.Add([]byte("{\"seq\":1}\n{torn"), int64(5))
	f.Add([]byte("\n\n\n"), int64(0))
	f.Fuzz(func(t *testing.T, b []byte, maxBytes int64) {
		path := filepath.Join(t.TempDir(), "s.jsonl")
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
		Replay(path, maxBytes, func(ev *aep.Event) {
			out, err := ev.MarshalJSON()
			if err != nil {
				t.Fatalf("replayed an event that does not marshal: %v", err)
			}
			if _, err := aep.ParseEvent(out); err != nil {
				t.Fatalf("replayed event %s does not parse back: %v", out, err)
			}
		})
	})
}

// FuzzNextEpoch feeds arbitrary epoch records: the new epoch is always
// later than both the record and the clock, and is what the record now
// holds.
func FuzzNextEpoch(f *testing.F) {
	f.Add([]byte("1764460800\n"))
	f.Add([]byte("9223372036854775806"))
	f.Add([]byte("-7"))
	f.Add([]byte("junk"))
	now := time.Unix(1_800_000_000, 0)
	f.Fuzz(func(t *testing.T, b []byte) {
		path := filepath.Join(t.TempDir(), "epoch")
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
		head := b[:min(len(b), 32)]
		last, perr := strconv.ParseInt(strings.TrimSpace(string(head)), 10, 64)
		if errors.Is(perr, strconv.ErrRange) {
			perr = nil // out of range reads as the int64 bound, which is refused
		}
		got, err := NextEpoch(path, now)
		if err != nil {
			if perr == nil && last >= MaxEpoch {
				return // refused: the record cannot grow
			}
			t.Fatal(err)
		}
		if got > MaxEpoch {
			t.Fatalf("epoch %d is past MaxEpoch", got)
		}
		if got < now.Unix() {
			t.Fatalf("epoch %d is before the clock %d", got, now.Unix())
		}
		if perr == nil && got <= last {
			t.Fatalf("epoch %d does not pass the recorded %d", got, last)
		}
		rec, _ := os.ReadFile(path)
		if strings.TrimSpace(string(rec)) != strconv.FormatInt(got, 10) {
			t.Fatalf("record holds %q after returning %d", rec, got)
		}
	})
}

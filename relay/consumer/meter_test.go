package consumer

import (
	"encoding/json"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/aep-kimi/aep-kimi/mapping"
)

type used struct {
	at     time.Time
	tokens int64
}

func usageData(n int64) map[string]any {
	return map[string]any{mapping.DataInputTokens: json.Number(itoa(n)), mapping.DataOutputTokens: json.Number("0")}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// burnOracle is the burn by its definition: the tokens of every usage
// whose minute is within the hour up to the latest usage's minute.
func burnOracle(us []used) int64 {
	var end int64
	for i, u := range us {
		if m := minuteOf(u.at); i == 0 || m > end {
			end = m
		}
	}
	var sum int64
	for _, u := range us {
		if m := minuteOf(u.at); m > end-burnWindow {
			sum += u.tokens
		}
	}
	return sum
}

// The burn is the same whatever order the events come in, and is what
// its definition says; the clock's reading of it drops what aged out.
func TestMeterBurnOrderFree(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	base := time.Date(2026, 7, 3, 10, 0, 0, 0, time.UTC)
	for round := range 500 {
		var us []used
		for range 1 + rng.IntN(40) {
			us = append(us, used{base.Add(time.Duration(rng.Int64N(int64(3 * time.Hour)))), rng.Int64N(5000)})
		}
		want := burnOracle(us)
		for range 3 {
			rng.Shuffle(len(us), func(i, j int) { us[i], us[j] = us[j], us[i] })
			var m Meter
			for _, u := range us {
				m.Take("x", u.at.Format(time.RFC3339Nano), usageData(u.tokens))
			}
			if got := m.BurnPerHour(); got != want {
				t.Fatalf("round %d: burn %d, want %d (%v)", round, got, want, us)
			}
			if len(m.minutes) > burnWindow {
				t.Fatalf("round %d: %d minutes kept", round, len(m.minutes))
			}
			// Split between two views of one session, joined: the same.
			var a, b Meter
			for i, u := range us {
				dst := &a
				if i%2 == 1 {
					dst = &b
				}
				dst.Take("x", u.at.Format(time.RFC3339Nano), usageData(u.tokens))
			}
			if got := a.Join(b).BurnPerHour(); got != want {
				t.Fatalf("round %d: joined burn %d, want %d", round, got, want)
			}
		}
	}
}

func TestMeterBurnAt(t *testing.T) {
	var m Meter
	m.Take("x", "2026-07-03T10:00:30Z", usageData(100))
	m.Take("x", "2026-07-03T10:40:00Z", usageData(20))
	m.Take("x", "not a time", usageData(7)) // counted, not burnt
	if m.Usage.InputTokens != 127 || m.BurnPerHour() != 120 {
		t.Fatalf("usage %+v burn %d", m.Usage, m.BurnPerHour())
	}
	for _, c := range []struct {
		now  string
		want int64
	}{
		{"2026-07-03T10:40:00Z", 120},
		{"2026-07-03T10:59:59Z", 120},
		{"2026-07-03T11:00:00Z", 20}, // 10:00 is out of the hour up to 11:00
		{"2026-07-03T11:39:59Z", 20},
		{"2026-07-03T11:40:00Z", 0},
		{"2026-07-03T09:59:00Z", 0}, // a clock behind every event
	} {
		now, _ := time.Parse(time.RFC3339, c.now)
		if got := m.BurnAt(now); got != c.want {
			t.Errorf("BurnAt(%s) = %d, want %d", c.now, got, c.want)
		}
	}
}

// Token figures beyond what a JavaScript number holds exactly saturate,
// so the page's fold says the same.
func TestMeterBurnSaturates(t *testing.T) {
	var m Meter
	for range 3 {
		m.Take("x", "2026-07-03T10:00:00Z", usageData(maxTokenCount))
	}
	if m.BurnPerHour() != maxTokenCount {
		t.Fatalf("burn %d", m.BurnPerHour())
	}
}

package adapter

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aep-kimi/aep-kimi/aep"
	"github.com/aep-kimi/aep-kimi/emitter"
	"github.com/aep-kimi/aep-kimi/mapping"
)

// capture is one hook as a capture hook saw it in a real Kimi session, in
// capture (arrival) order. testdata/captures holds one file per scenario,
// recorded by internal/testkit/kimiharness's TestRecord.
type capture struct {
	Event string  `json:"event"`
	Time  float64 `json:"time"`
	Raw   string  `json:"raw"`
}

func loadCapture(t testing.TB, name string) []capture {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", "captures", name+".hooks.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []capture
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 4<<20)
	for sc.Scan() {
		var c capture
		if err := json.Unmarshal(sc.Bytes(), &c); err != nil {
			t.Fatal(err)
		}
		out = append(out, c)
	}
	return out
}

// testClock is a settable clock for deterministic times.
type testClock struct{ t time.Time }

func (c *testClock) now() time.Time { return c.t }

func newTestServer(t testing.TB, home string, mod func(*Config)) *Server {
	t.Helper()
	cfg := Config{
		Config: emitter.Config{Home: home, Host: "testhost", Posture: mapping.DefaultPosture(),
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil))},
		Listen:        "127.0.0.1:0",
		ReorderWindow: 50 * time.Millisecond,
	}
	if mod != nil {
		mod(&cfg)
	}
	s, err := NewServer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// feed ingests payloads in order, as fast as concurrent hooks would arrive,
// then waits for every parked hook to settle.
func feed(t testing.TB, s *Server, caps []capture) {
	t.Helper()
	var waits []<-chan outcome
	for i, c := range caps {
		at := time.Unix(0, int64(c.Time*1e9))
		d := &delivery{id: fmt.Sprintf("%s-%d", c.Event, at.UnixMicro()), payload: []byte(c.Raw), at: at}
		out, _, err := s.ingest(d, false)
		if err != nil {
			t.Fatalf("hook %d (%s): %v", i, c.Event, err)
		}
		if out.wait != nil {
			waits = append(waits, out.wait)
		}
	}
	for i, w := range waits {
		select {
		case <-w:
		case <-time.After(5 * time.Second):
			t.Fatalf("parked hook %d never answered", i)
		}
	}
}

// readLog returns the events in a session's log, in file order.
func readLog(t testing.TB, home, session string) []*aep.Event {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(logDir(home), LogFileName(session)))
	if err != nil {
		t.Fatal(err)
	}
	var out []*aep.Event
	for _, line := range bytes.Split(bytes.TrimSpace(b), []byte("\n")) {
		e, err := aep.ParseEvent(line)
		if err != nil {
			t.Fatalf("log line: %v\n%s", err, line)
		}
		out = append(out, e)
	}
	return out
}

// assertValidStream checks every event and the stream rules.
func assertValidStream(t testing.TB, events []*aep.Event) {
	t.Helper()
	var sv aep.StreamValidator
	for _, e := range events {
		if err := aep.Validate(e); err != nil {
			t.Errorf("invalid event %s %s: %v", e.Type, e.ID, err)
		}
		for _, v := range sv.Add(e) {
			t.Errorf("stream rule broken at %s %s: %v", e.Type, e.ID, v)
		}
	}
}

func types(events []*aep.Event) []string {
	out := make([]string, len(events))
	for i, e := range events {
		out[i] = e.Type
	}
	return out
}

func count(events []*aep.Event, typ string) int {
	n := 0
	for _, e := range events {
		if e.Type == typ {
			n++
		}
	}
	return n
}

func byType(events []*aep.Event, typ string) []*aep.Event {
	var out []*aep.Event
	for _, e := range events {
		if e.Type == typ {
			out = append(out, e)
		}
	}
	return out
}

func sessionOf(t testing.TB, caps []capture) string {
	t.Helper()
	for _, c := range caps {
		var p struct {
			S string `json:"session_id"`
		}
		json.Unmarshal([]byte(c.Raw), &p)
		if p.S != "" {
			return p.S
		}
	}
	t.Fatal("no session id in capture")
	return ""
}

func dump(events []*aep.Event) string {
	var b strings.Builder
	for _, e := range events {
		raw, _ := e.Bytes()
		b.Write(raw)
		b.WriteByte('\n')
	}
	return b.String()
}

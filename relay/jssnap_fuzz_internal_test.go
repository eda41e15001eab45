package relay

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// FuzzSnapshot reads arbitrary bytes as an index snapshot: an error and an
// empty index, or an index within its limits, never a panic.
func FuzzSnapshot(f *testing.F) {
	dir := f.TempDir()
	good := NewMemoryBackendWithBudget(4, 3, 1<<20)
	for i := range 6 {
		good.Ingest([]*Message{benchEvent(f, "s"+string(rune('a'+i%4)), int64(i))})
	}
	h := snapshotHeader{stream: "AEP", created: 1, msgs: 6, first: 1, last: 6, lastSeq: 6}
	path := filepath.Join(dir, "seed")
	if err := writeSnapshot(good, path, h); err != nil {
		f.Fatal(err)
	}
	seed, _ := os.ReadFile(path)
	f.Add(seed)
	f.Add(seed[:len(seed)/2])
	f.Add([]byte(snapshotMagic))
	f.Fuzz(func(t *testing.T, data []byte) {
		p := filepath.Join(t.TempDir(), snapshotName)
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
		m := NewMemoryBackendWithBudget(4, 3, 1<<20)
		_, err := readSnapshot(m, p, h)
		st := m.Stats()
		if err != nil && (st.Events != 0 || st.Sessions != 0) {
			t.Fatalf("a refused snapshot left %d events in %d sessions", st.Events, st.Sessions)
		}
		if st.Sessions > 3 || st.Events > 12 {
			t.Fatalf("a snapshot restored past the limits: %+v", st)
		}
	})
}

// FuzzTopLevelString checks the quick look at an event's id against
// encoding/json: when it answers, it answers what a full parse does.
func FuzzTopLevelString(f *testing.F) {
	f.Add([]byte(`{"aep":"0.1","data":{"id":"inner"},"id":"01J","type":"x"}`))
	f.Add([]byte(`{"id" : "a\"b"}`))
	f.Add([]byte(`{"a":[1,{"id":"x"}],"b":"}","id":"y"}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		got, ok := topLevelString(raw, "id")
		if !ok {
			return
		}
		var m map[string]json.RawMessage
		if json.Unmarshal(raw, &m) != nil || topLevelKeys(raw, "id") != 1 {
			return // not JSON, or the key twice: sealed events are neither
		}
		var want string
		if json.Unmarshal(m["id"], &want) != nil || want != got {
			t.Fatalf("quick look read id %q, the parse %q (%s)", got, want, m["id"])
		}
	})
}

// topLevelKeys counts key among raw's top-level keys.
func topLevelKeys(raw []byte, key string) int {
	d := json.NewDecoder(bytes.NewReader(raw))
	if _, err := d.Token(); err != nil {
		return 0
	}
	n := 0
	for d.More() {
		k, err := d.Token()
		if err != nil {
			return 0
		}
		if k == key {
			n++
		}
		var v json.RawMessage
		if d.Decode(&v) != nil {
			return 0
		}
	}
	return n
}

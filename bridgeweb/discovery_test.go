package bridgeweb

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func writeInstance(t *testing.T, home, name string, in map[string]any) {
	t.Helper()
	dir := InstancesDir(home)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(in)
	if err := os.WriteFile(filepath.Join(dir, name+".json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func instance(pid, port int, started, heartbeat time.Time) map[string]any {
	return map[string]any{"server_id": "srv", "pid": pid, "host": "127.0.0.1", "port": port,
		"started_at": started.UnixMilli(), "heartbeat_at": heartbeat.UnixMilli(), "host_version": "2.1.0"}
}

func TestDiscover(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	alive := func(live ...int) func(int) bool {
		return func(pid int) bool {
			for _, p := range live {
				if p == pid {
					return true
				}
			}
			return false
		}
	}
	cases := []struct {
		name     string
		records  map[string]map[string]any
		raw      map[string]string
		live     []int
		wantPort int
		wantPID  int // 0: any
		wantErr  error
		skipped  map[string]string // record -> reason
	}{
		{name: "no registry", wantErr: ErrNoInstance},
		{
			name:     "one live record",
			records:  map[string]map[string]any{"a": instance(100, 5001, now.Add(-time.Minute), now.Add(-5*time.Second))},
			live:     []int{100},
			wantPort: 5001,
		},
		{
			name:    "dead pid is skipped",
			records: map[string]map[string]any{"a": instance(100, 5001, now.Add(-time.Minute), now.Add(-5*time.Second))},
			wantErr: ErrNoInstance,
			skipped: map[string]string{"a": SkipDeadPID},
		},
		{
			name:    "stale heartbeat is skipped (a recycled pid)",
			records: map[string]map[string]any{"a": instance(100, 5001, now.Add(-time.Hour), now.Add(-10*time.Minute))},
			live:    []int{100},
			wantErr: ErrNoInstance,
			skipped: map[string]string{"a": SkipStale},
		},
		{
			name: "restart: the old record's pid is gone, the new one wins",
			records: map[string]map[string]any{
				"old": instance(100, 5001, now.Add(-time.Hour), now.Add(-20*time.Second)),
				"new": instance(200, 5002, now.Add(-3*time.Second), now.Add(-3*time.Second)),
			},
			live:     []int{200},
			wantPort: 5002,
			skipped:  map[string]string{"old": SkipDeadPID},
		},
		{
			name: "two live servers: the newest start wins",
			records: map[string]map[string]any{
				"old": instance(100, 5001, now.Add(-time.Hour), now.Add(-time.Second)),
				"new": instance(200, 5002, now.Add(-time.Minute), now.Add(-time.Second)),
			},
			live:     []int{100, 200},
			wantPort: 5002,
		},
		{
			name:     "garbage and incomplete records are skipped",
			records:  map[string]map[string]any{"good": instance(100, 5001, now, now)},
			raw:      map[string]string{"junk": "{not json", "noport": `{"pid":100}`},
			live:     []int{100},
			wantPort: 5001,
			skipped:  map[string]string{"junk": SkipUnreadable, "noport": SkipUnreadable},
		},
		{
			// Kimi Code Desktop's embedded server asks for port 0: its
			// record names no port until the server is bound.
			name: "a server still binding its port is passed over, not unreadable",
			records: map[string]map[string]any{
				"web":     instance(100, 5001, now.Add(-time.Hour), now),
				"desktop": instance(200, 0, now.Add(-time.Second), now),
			},
			live:     []int{100, 200},
			wantPort: 5001,
			skipped:  map[string]string{"desktop": SkipStarting},
		},
		{
			// A server registers the port it asked for before it binds,
			// and moves up when it is taken: until it rewrites its record,
			// the port is the older server's.
			name: "a newer record naming an older live server's port is that server starting",
			records: map[string]map[string]any{
				"web":     instance(100, 58627, now.Add(-time.Hour), now),
				"desktop": instance(200, 58627, now.Add(-time.Second), now),
			},
			live:     []int{100, 200},
			wantPort: 58627,
			wantPID:  100,
			skipped:  map[string]string{"desktop": SkipPortTaken},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			home := t.TempDir()
			for name, rec := range c.records {
				writeInstance(t, home, name, rec)
			}
			for name, raw := range c.raw {
				os.MkdirAll(InstancesDir(home), 0o755)
				os.WriteFile(filepath.Join(InstancesDir(home), name+".json"), []byte(raw), 0o644)
			}
			in, skipped, err := Discover(home, now, DefaultStaleInstance, alive(c.live...), false)
			if c.wantErr != nil {
				if !errors.Is(err, c.wantErr) {
					t.Fatalf("err %v, want %v", err, c.wantErr)
				}
			} else if err != nil {
				t.Fatal(err)
			} else if in.Port != c.wantPort || (c.wantPID != 0 && in.PID != c.wantPID) {
				t.Errorf("pid %d port %d, want %d %d", in.PID, in.Port, c.wantPID, c.wantPort)
			}
			got := map[string]string{}
			for _, s := range skipped {
				got[filepath.Base(s.Path[:len(s.Path)-len(".json")])] = s.Reason
			}
			if len(got) != len(c.skipped) {
				t.Errorf("skipped %v, want %v", got, c.skipped)
			}
			for k, v := range c.skipped {
				if got[k] != v {
					t.Errorf("record %s skipped as %q, want %q", k, got[k], v)
				}
			}
			// Discovery never touches the server's registry.
			for name := range c.records {
				if _, err := os.Stat(filepath.Join(InstancesDir(home), name+".json")); err != nil {
					t.Errorf("record %s was removed: %v", name, err)
				}
			}
		})
	}
}

func TestDiscoverRealPID(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	now := time.Now()
	writeInstance(t, home, "me", instance(os.Getpid(), 6001, now, now))
	// A pid that cannot exist on Linux (above pid_max's hard limit).
	writeInstance(t, home, "ghost", instance(1<<30, 6002, now.Add(time.Second), now))
	in, skipped, err := Discover(home, now, DefaultStaleInstance, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	if in.Port != 6001 || len(skipped) != 1 || skipped[0].Reason != SkipDeadPID {
		t.Errorf("got port %d, skipped %v", in.Port, skipped)
	}
}

func TestBaseURL(t *testing.T) {
	t.Parallel()
	cases := map[string]string{"127.0.0.1": "http://127.0.0.1:7", "0.0.0.0": "http://127.0.0.1:7", "": "http://127.0.0.1:7",
		"::1": "http://[::1]:7", "localhost": "http://localhost:7"}
	for host, want := range cases {
		if got := (Instance{Host: host, Port: 7}).BaseURL(); got != want {
			t.Errorf("host %q: %s, want %s", host, got, want)
		}
	}
}

func TestEndpoint(t *testing.T) {
	t.Parallel()
	ep, err := newEndpoint("http://127.0.0.1:58627/", "tok")
	if err != nil {
		t.Fatal(err)
	}
	if ep.base != "http://127.0.0.1:58627" || ep.ws != "ws://127.0.0.1:58627/api/v1/ws" {
		t.Errorf("%+v", ep)
	}
	if ep, _ := newEndpoint("https://kimi.example/prefix", "t"); ep.ws != "wss://kimi.example/prefix/api/v1/ws" {
		t.Errorf("https: %s", ep.ws)
	}
	for _, bad := range []string{"", "127.0.0.1:1", "ftp://h/", "http://"} {
		if _, err := newEndpoint(bad, "t"); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestReadToken(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(s string) string {
		p := filepath.Join(dir, "tok")
		os.WriteFile(p, []byte(s), 0o600)
		return p
	}
	if tok, err := readToken(write("abc_DEF-123\n")); err != nil || tok != "abc_DEF-123" {
		t.Errorf("%q %v", tok, err)
	}
	for _, bad := range []string{"", "  \n", "two tokens"} {
		if _, err := readToken(write(bad)); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	_, err := readToken(filepath.Join(dir, "missing"))
	if err == nil {
		t.Fatal("missing file accepted")
	}
}

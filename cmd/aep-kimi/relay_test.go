package main

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/aep-kimi/aep-kimi/internal/testkit/poll"
	"github.com/aep-kimi/aep-kimi/internal/testkit/syncbuf"
)

// The daemon serves until its context ends, drains, and exits 0.
func TestRunRelayDrainsAndExitsZero(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	var errb syncbuf.Buffer
	done := make(chan int, 1)
	go func() {
		done <- runContext(ctx, []string{"relay", "--listen", "127.0.0.1:0"}, stdio{in: strings.NewReader(""), out: &bytes.Buffer{}, err: &errb}, os.Getenv)
	}()
	// Stopped once it serves: a relay stopped while starting drains nothing.
	poll.Must(t, 10*time.Second, "the relay to listen", func() bool { return strings.Contains(errb.String(), "relay listening") })
	cancel()
	select {
	case code := <-done:
		if code != 0 || !strings.Contains(errb.String(), "relay drained") {
			t.Fatalf("exit %d, log:\n%s", code, errb.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("relay did not stop")
	}
	if code := runContext(context.Background(), []string{"relay", "--bogus"}, stdio{in: strings.NewReader(""), out: &bytes.Buffer{}, err: &bytes.Buffer{}}, os.Getenv); code != 2 {
		t.Fatalf("bad flag: exit %d, want 2", code)
	}
}

// Store flags that cannot work are refused before anything starts, with
// one line naming the flag; a body limit the store cannot carry stops the
// store from opening.
func TestRunRelayStoreRefusals(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		Env  map[string]string
		code int
		want string
	}{
		{"unknown store", []string{"--store", "disk"}, nil, 2, "--store"},
		{"nats on memory", []string{"--nats", "nats://127.0.0.1:4222"}, nil, 2, "--nats needs --store jetstream"},
		{"nats-listen off loopback", []string{"--store", "jetstream", "--nats-listen", "0.0.0.0:4222"}, nil, 2, "loopback only"},
		{"unknown sync", []string{"--store", "jetstream", "--store-sync", "sometimes"}, nil, 2, "--store-sync"},
		{"sync always on external nats", []string{"--store", "jetstream", "--nats", "nats://127.0.0.1:4222", "--store-sync", "always"}, nil, 2, "embedded store"},
		{"zero replicas", []string{"--store", "jetstream", "--nats-replicas", "0"}, nil, 2, "--nats-replicas"},
		{"sync from env", []string{"--store", "jetstream"}, map[string]string{"AEP_STORE_SYNC": "never"}, 2, "--store-sync"},
		{"body above the store's", []string{"--store", "jetstream", "--home", t.TempDir(), "--listen", "127.0.0.1:0"},
			map[string]string{"AEP_MAX_BODY": "67108864", "AEP_BUFFER_BYTES": "134217728"}, 1, "AEP_MAX_BODY"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for k, v := range tc.Env {
				t.Setenv(k, v)
			}
			var errb bytes.Buffer
			code := runContext(context.Background(), append([]string{"relay"}, tc.args...), stdio{in: strings.NewReader(""), out: &bytes.Buffer{}, err: &errb}, os.Getenv)
			lines := strings.Split(strings.TrimSpace(errb.String()), "\n")
			last := lines[len(lines)-1]
			if code != tc.code || !strings.Contains(last, tc.want) || !strings.HasPrefix(last, "aep-kimi relay: ") {
				t.Fatalf("exit %d, want %d with %q; stderr:\n%s", code, tc.code, tc.want, errb.String())
			}
		})
	}
}

package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"
)

func TestRelayConfigFromEnv(t *testing.T) {
	env := func(kv map[string]string) func(string) string { return func(k string) string { return kv[k] } }
	cfg, err := relayConfigFromEnv(env(map[string]string{
		"AEP_PORT": "9999", "AEP_TOKEN": "t", "AEP_BUFFER": "8", "AEP_MAX_SESSIONS": "3",
		"AEP_MAX_BODY": "1024", "AEP_MAX_BATCH": "5", "AEP_MAX_FROM": "2",
	}))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Listen != "127.0.0.1:9999" || cfg.Token != "t" || cfg.Buffer != 8 || cfg.MaxSessions != 3 ||
		cfg.MaxBody != 1024 || cfg.MaxBatch != 5 || cfg.MaxFrom != 2 {
		t.Fatalf("config %+v", cfg)
	}
	for k, v := range map[string]string{"AEP_PORT": "http", "AEP_BUFFER": "-1", "AEP_MAX_BODY": "big", "AEP_MAX_FROM": "0"} {
		if _, err := relayConfigFromEnv(env(map[string]string{k: v})); err == nil || !strings.Contains(err.Error(), k) {
			t.Errorf("%s=%s: %v", k, v, err)
		}
	}
}

// The daemon serves until its context ends, drains, and exits 0.
func TestRunRelayDrainsAndExitsZero(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	var errb bytes.Buffer
	done := make(chan int, 1)
	go func() {
		done <- runRelay(ctx, []string{"--listen", "127.0.0.1:0"}, stdio{in: strings.NewReader(""), out: &bytes.Buffer{}, err: &errb})
	}()
	time.Sleep(100 * time.Millisecond)
	cancel()
	select {
	case code := <-done:
		if code != 0 || !strings.Contains(errb.String(), "relay drained") {
			t.Fatalf("exit %d, log:\n%s", code, errb.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("relay did not stop")
	}
	if code := runRelay(context.Background(), []string{"--bogus"}, stdio{in: strings.NewReader(""), out: &bytes.Buffer{}, err: &bytes.Buffer{}}); code != 2 {
		t.Fatalf("bad flag: exit %d, want 2", code)
	}
}

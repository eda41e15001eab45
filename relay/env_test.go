package relay

import (
	"strings"
	"testing"
)

func envOf(kv map[string]string) func(string) string { return func(k string) string { return kv[k] } }

func TestConfigFromEnv(t *testing.T) {
	t.Parallel()
	cfg, err := ConfigFromEnv(envOf(map[string]string{
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
		if _, err := ConfigFromEnv(envOf(map[string]string{k: v})); err == nil || !strings.Contains(err.Error(), k) {
			t.Errorf("%s=%s: %v", k, v, err)
		}
	}
}

func TestConfigFromEnvBudgetAndToken(t *testing.T) {
	t.Parallel()
	cfg, err := ConfigFromEnv(envOf(map[string]string{"AEP_BUFFER_BYTES": "33554432", "AEP_TOKEN": " tok\r\n"}))
	if err != nil || cfg.BufferBytes != 32<<20 || cfg.Token != "tok" {
		t.Fatalf("cfg %+v, %v", cfg, err)
	}
	if _, err := ConfigFromEnv(envOf(map[string]string{"AEP_BUFFER_BYTES": "lots"})); err == nil {
		t.Fatal("AEP_BUFFER_BYTES=lots accepted")
	}
}

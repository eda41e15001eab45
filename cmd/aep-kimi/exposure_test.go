package main

import (
	"os"
	"path/filepath"
	"testing"
)

func TestRelayEnvBudgetAndToken(t *testing.T) {
	env := func(kv map[string]string) func(string) string { return func(k string) string { return kv[k] } }
	cfg, err := relayConfigFromEnv(env(map[string]string{"AEP_BUFFER_BYTES": "33554432", "AEP_TOKEN": " tok\r\n"}))
	if err != nil || cfg.BufferBytes != 32<<20 || cfg.Token != "tok" {
		t.Fatalf("cfg %+v, %v", cfg, err)
	}
	if _, err := relayConfigFromEnv(env(map[string]string{"AEP_BUFFER_BYTES": "lots"})); err == nil {
		t.Fatal("AEP_BUFFER_BYTES=lots accepted")
	}
}

// The relay's token and every client's token come out of the same trim.
func TestServerAndClientTokensAgree(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "token")
	os.WriteFile(file, []byte("\tsecret-secret-secret \n"), 0o600)
	none := func(string) string { return "" }
	srv, err1 := serverToken(none, file)
	cli, err2 := relayToken(none, file)
	if err1 != nil || err2 != nil || srv != "secret-secret-secret" || srv != cli {
		t.Fatalf("server %q (%v), client %q (%v)", srv, err1, cli, err2)
	}
	blank := func(k string) string {
		if k == "AEP_TOKEN" {
			return " \n"
		}
		return ""
	}
	if tok, _ := serverToken(blank, ""); tok != "" {
		t.Fatalf("blank AEP_TOKEN read as %q", tok)
	}
}

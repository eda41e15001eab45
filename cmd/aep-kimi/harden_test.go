package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aep-kimi/aep-kimi/adapter"
	"github.com/aep-kimi/aep-kimi/internal/journal"
	"github.com/aep-kimi/aep-kimi/internal/spool"
	"github.com/aep-kimi/aep-kimi/internal/testkit/safefiletest"
	"github.com/aep-kimi/aep-kimi/internal/tokenfile"
)

// A link planted where `up` keeps the relay token: up refuses to start
// (exit 2, one clear line) and neither reads nor replaces the target; the
// daemons reading the same file refuse it too.
func TestHomeTokenLinkRefused(t *testing.T) {
	home := t.TempDir()
	link := safefiletest.Plant(t, filepath.Join(home, tokenfile.HomeName))
	t.Setenv("AEP_HOME", home)
	t.Setenv("AEP_TOKEN", "")
	t.Setenv("AEP_TOKEN_FILE", "")
	code, _, errOut := runCmd(t, nil, "up", "--relay-listen", "127.0.0.1:0", "--adapter-listen", "127.0.0.1:0")
	if code != 2 || !strings.Contains(errOut, "symbolic link") || !strings.Contains(errOut, link.Path) {
		t.Fatalf("up: exit %d stderr %q", code, errOut)
	}
	if _, err := tokenfile.Client(os.Getenv, ""); err == nil || !strings.Contains(err.Error(), "symbolic link") {
		t.Fatalf("relayToken: %v", err)
	}
	link.Untouched(t)
}

// `aep-kimi quarantine` lists both kinds, oldest first, with why.
func TestQuarantineCommand(t *testing.T) {
	home := t.TempDir()
	if code, out, _ := runCmd(t, nil, "quarantine", "--home", home); code != 0 || !strings.Contains(out, "nothing in quarantine") {
		t.Fatalf("empty: exit %d out %q", code, out)
	}
	dir := spool.Dir(home)
	_, rec, err := spool.Append(dir, spool.Header{Reason: "unreachable"}, []byte("raw payload"))
	if err != nil {
		t.Fatal(err)
	}
	q, err := spool.Quarantine(rec, "not a JSON object")
	if err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-2 * time.Hour)
	os.Chtimes(q, old, old)
	logs := filepath.Join(home, "logs", "kimi-code")
	os.MkdirAll(logs, 0o700)
	torn := filepath.Join(logs, "s1.jsonl"+journal.TornSuffix+"20261130T000000.000000000Z")
	os.WriteFile(torn, []byte(`{"partial`), 0o600)

	code, out, errOut := runCmd(t, nil, "quarantine", "--home", home)
	if code != 0 {
		t.Fatalf("exit %d stderr %q", code, errOut)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[1], "spool") || !strings.Contains(lines[1], "2h0m0s") ||
		!strings.Contains(lines[1], q) || !strings.Contains(lines[1], "not a JSON object") ||
		!strings.HasPrefix(lines[2], "torn-tail") || !strings.Contains(lines[2], "cut from s1.jsonl") {
		t.Fatalf("table:\n%s", out)
	}
	code, out, _ = runCmd(t, nil, "quarantine", "--home", home, "--json")
	var first adapter.Quarantined
	if code != 0 || json.Unmarshal([]byte(strings.Split(out, "\n")[0]), &first) != nil || first.Size <= 11 || first.Kind != adapter.QuarantineSpool {
		t.Fatalf("json: exit %d %q", code, out)
	}
	if code, help, _ := runCmd(t, nil, "quarantine", "-h"); code != 0 || !strings.Contains(help, "unredacted") {
		t.Fatalf("help: exit %d %q", code, help)
	}
}

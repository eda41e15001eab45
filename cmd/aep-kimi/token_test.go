package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"rsc.io/qr"

	"github.com/aep-kimi/aep-kimi/access"
)

// The token commands on a home: add prints the token once (JSON here),
// the file keeps only its hash (0600), list never shows a token, rm
// revokes; mistakes are one line and exit 2, a failure exit 1.
func TestTokenCLI(t *testing.T) {
	home := t.TempDir()
	cli := func(args ...string) (int, string, string) {
		t.Helper()
		return runIn(t, "token", append(args, "--home", home)...)
	}
	code, out, errs := cli("add", "alice", "--role", "answer", "--json")
	var got struct{ Name, Role, Capture, Token string }
	if code != 0 || json.Unmarshal([]byte(out), &got) != nil || got.Name != "alice" || got.Role != "answer" || got.Capture != "full" || len(got.Token) < 40 || errs != "" {
		t.Fatalf("add: exit %d, out %q, err %q", code, out, errs)
	}
	// Off a terminal the token, its login link and QR code go to a 0600
	// file, and stdout holds only the file's path (issue 36).
	code, out, _ = cli("add", "walt", "--role", "watch", "--relay", "http://127.0.0.1:8787")
	handover := filepath.Join(home, "logins", "walt.txt")
	hb, err := os.ReadFile(handover)
	if err != nil {
		t.Fatalf("add off a terminal wrote no handover (exit %d %q): %v", code, out, err)
	}
	lines := strings.Split(strings.TrimSpace(string(hb)), "\n")
	if code != 0 || !strings.Contains(out, handover+" (0600)") || strings.Contains(out, lines[1]) || strings.Count(out, "\n") != 1 {
		t.Fatalf("add off a terminal: exit %d %q: the token on stdout, or no path", code, out)
	}
	if fi, _ := os.Stat(handover); fi.Mode().Perm() != 0o600 || !strings.Contains(lines[0], "capture metadata") || len(lines[1]) < 40 ||
		!strings.Contains(string(hb), "http://127.0.0.1:8787/#token="+lines[1]) || !strings.Contains(string(hb), "█") {
		t.Fatalf("the handover (mode %v) lacks the token, its login link or the QR code:\n%s", fi.Mode().Perm(), hb)
	}
	b, err := os.ReadFile(filepath.Join(home, access.FileName))
	if err != nil {
		t.Fatal(err)
	}
	st, _ := os.Stat(filepath.Join(home, access.FileName))
	if bytes.Contains(b, []byte(got.Token)) || bytes.Contains(b, []byte(lines[1])) || st.Mode().Perm() != 0o600 {
		t.Fatalf("the tokens file (mode %v) holds a token:\n%s", st.Mode().Perm(), b)
	}
	code, out, _ = cli("list")
	if code != 0 || !strings.Contains(out, "alice") || !strings.Contains(out, "walt") || !strings.Contains(out, "never") ||
		strings.Contains(out, got.Token) || strings.Contains(out, "sha256") {
		t.Fatalf("list: %d\n%s", code, out)
	}
	for _, c := range []struct {
		args []string
		code int
	}{
		{[]string{"add", "bob"}, 2},
		{[]string{"add", "bob", "--role", "root"}, 2},
		{[]string{"add", "bob", "--role", "watch", "--capture", "none"}, 2},
		{[]string{"add", "owner", "--role", "admin"}, 2},
		{[]string{"add", "b ob", "--role", "admin"}, 2},
		{[]string{"add", "alice", "--role", "admin"}, 1},
		{[]string{"rm", "carol"}, 2},
	} {
		if code, out, errs := cli(c.args...); code != c.code || out != "" || strings.Count(errs, "\n") != 1 {
			t.Errorf("%v: exit %d (want %d), out %q, err %q", c.args, code, c.code, out, errs)
		}
	}
	if code, out, _ := cli("rm", "alice"); code != 0 || out != "removed alice (answer)\n" {
		t.Fatalf("rm: %d %q", code, out)
	}
	if code, out, _ := cli("list", "--json"); code != 0 || strings.Contains(out, "alice") || !strings.Contains(out, `"walt"`) {
		t.Fatalf("list --json after rm: %d %s", code, out)
	}
	// A file it cannot read is refused and left as it is.
	if err := os.WriteFile(filepath.Join(home, access.FileName), []byte("{torn"), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, _, errs := cli("add", "dan", "--role", "watch"); code != 1 || !strings.Contains(errs, "nothing changed") {
		t.Fatalf("add over a torn file: %d %q", code, errs)
	}
	if b, _ := os.ReadFile(filepath.Join(home, access.FileName)); string(b) != "{torn" {
		t.Fatalf("the torn file was changed: %q", b)
	}
}

// The terminal QR code is the link's: reading the half blocks back gives
// the code's modules, light drawn, with a quiet zone.
func TestRenderQR(t *testing.T) {
	code, err := qr.Encode("http://127.0.0.1:8787/#token=abc", qr.M)
	if err != nil {
		t.Fatal(err)
	}
	rows := strings.Split(strings.TrimSuffix(renderQR(code), "\n"), "\n")
	const quiet = 2
	for y := -quiet; y < code.Size+quiet; y++ {
		row := []rune(rows[(y+quiet)/2])
		if len(row) != code.Size+2*quiet {
			t.Fatalf("row %d is %d wide", y, len(row))
		}
		for x := -quiet; x < code.Size+quiet; x++ {
			r := row[x+quiet]
			light := r == '█' || (r == '▀' && (y+quiet)%2 == 0) || (r == '▄' && (y+quiet)%2 == 1)
			dark := x >= 0 && y >= 0 && x < code.Size && y < code.Size && code.Black(x, y)
			if light == dark {
				t.Fatalf("module (%d,%d): drawn light %v, dark %v", x, y, light, dark)
			}
		}
	}
}

package tokenfile

import (
	"os"
	"path/filepath"
	"testing"
)

// The relay's token and every client's token come out of the same trim.
func TestServerAndClientTokensAgree(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "token")
	os.WriteFile(file, []byte("\tsecret-secret-secret \n"), 0o600)
	none := func(string) string { return "" }
	srv, err1 := Server(none, file)
	cli, err2 := Client(none, file)
	if err1 != nil || err2 != nil || srv != "secret-secret-secret" || srv != cli {
		t.Fatalf("server %q (%v), client %q (%v)", srv, err1, cli, err2)
	}
	blank := func(k string) string {
		if k == "AEP_TOKEN" {
			return " \n"
		}
		return ""
	}
	if tok, _ := Server(blank, ""); tok != "" {
		t.Fatalf("blank AEP_TOKEN read as %q", tok)
	}
}

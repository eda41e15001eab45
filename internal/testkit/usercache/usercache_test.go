package usercache

import (
	"os"
	"path/filepath"
	"testing"
)

// Dir is the variable's directory when it is set, else one per name under
// the user cache.
func TestDir(t *testing.T) {
	t.Setenv("AEP_TEST_CACHE", "")
	base, err := os.UserCacheDir()
	if err != nil {
		base = os.TempDir()
	}
	if got, want := Dir("AEP_TEST_CACHE", "tool-1.0"), filepath.Join(base, "aep-kimi", "tool-1.0"); got != want {
		t.Fatalf("Dir = %q, want %q", got, want)
	}
	t.Setenv("AEP_TEST_CACHE", "/elsewhere")
	if got := Dir("AEP_TEST_CACHE", "tool-1.0"); got != "/elsewhere" {
		t.Fatalf("with the variable set, Dir = %q", got)
	}
}

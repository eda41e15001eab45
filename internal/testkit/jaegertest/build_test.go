package jaegertest

import (
	"context"
	"os"
	"testing"
)

// TestBuild builds the pinned Jaeger into the cache when EnvBuild is set:
// how CI prepares it ahead of the tests that run it.
func TestBuild(t *testing.T) {
	if os.Getenv(EnvBuild) == "" {
		t.Skipf("skipping: set %s=1 to build Jaeger %s into %s", EnvBuild, Version, CacheDir())
	}
	bin, err := Bin(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(bin); err != nil || fi.Mode()&0o111 == 0 {
		t.Fatalf("built %s is not an executable: %v", bin, err)
	}
	t.Logf("jaeger %s at %s", Version, bin)
}

// Package usercache places the test tools this project installs once per
// machine (Node and kimi, Jaeger): a directory per pinned version under the
// user cache, unless an environment variable names one.
package usercache

import (
	"os"
	"path/filepath"
)

// Dir is $env when set, else aep-kimi/name under the user cache directory
// (the temporary directory when there is none).
func Dir(env, name string) string {
	if d := os.Getenv(env); d != "" {
		return d
	}
	base, err := os.UserCacheDir()
	if err != nil {
		base = os.TempDir()
	}
	return filepath.Join(base, "aep-kimi", name)
}

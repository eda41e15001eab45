package setup

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/aep-kimi/aep-kimi/internal/buildinfo"
)

// DefaultHookVersionTimeout bounds `kimi-hook --version`: a Go binary
// answers in milliseconds, but a loaded machine can take much longer.
const DefaultHookVersionTimeout = 10 * time.Second

// HookBuild runs `hook --version` and reads the build it prints. A
// kimi-hook older than --version takes the flag for a mistake and forwards
// its (empty) stdin as a hook: so the flag comes last, after a home of our
// own (removed again) and a daemon it refuses to dial, and whatever it
// spools goes nowhere a real adapter reads.
func HookBuild(ctx context.Context, hook string) (buildinfo.Info, error) {
	scratch, err := os.MkdirTemp("", "aep-setup-hook-version")
	if err != nil {
		return buildinfo.Info{}, err
	}
	defer os.RemoveAll(scratch)
	out, err := runVersion(ctx, DefaultHookVersionTimeout, hook, "--home", scratch, "--daemon", "http://kimi-hook-version.invalid", "--version")
	if err != nil {
		return buildinfo.Info{}, err
	}
	in, err := buildinfo.ParseLine(HookCmdName, firstLine(out))
	if err != nil {
		return buildinfo.Info{}, fmt.Errorf("%s --version printed no version (a kimi-hook older than --version?)", hook)
	}
	return in, nil
}

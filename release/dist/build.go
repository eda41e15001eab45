package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// commands are the binaries every archive holds.
var commands = []string{"aep-kimi", "kimi-hook", "aep-setup"}

// platform is one target.
type platform struct{ OS, Arch string }

func (p platform) String() string { return p.OS + "/" + p.Arch }

// dir names the platform in file names: linux_amd64.
func (p platform) dir() string { return p.OS + "_" + p.Arch }

// exe is a command's file name on the platform.
func (p platform) exe(name string) string {
	if p.OS == "windows" {
		return name + ".exe"
	}
	return name
}

// parsePlatforms reads a comma-separated GOOS/GOARCH list; each is checked
// against what the Go toolchain builds when it runs.
func parsePlatforms(list string) ([]platform, error) {
	var ps []platform
	seen := map[platform]bool{}
	for _, s := range strings.Split(list, ",") {
		goos, goarch, ok := strings.Cut(strings.TrimSpace(s), "/")
		p := platform{goos, goarch}
		if !ok || goos == "" || goarch == "" || strings.ContainsAny(s, " _\\") {
			return nil, fmt.Errorf("platform %q: want GOOS/GOARCH, e.g. linux/amd64", s)
		}
		if !seen[p] {
			seen[p] = true
			ps = append(ps, p)
		}
	}
	return ps, nil
}

// release is one release being built.
type release struct {
	src  source
	root string // the module's directory
	out  string // where the release's files go
	url  string // the archives' download directory (a template of Version)
	log  *slog.Logger
	// keep, when set, is where make leaves each platform's binaries
	// (keep/GOOS_GOARCH/), so a packager can take the archives' own bytes
	// rather than build them again.
	keep string
}

// build compiles the commands for p into dir and returns their paths, in
// the order of commands.
func (r release) build(ctx context.Context, p platform, dir string) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	args := []string{"build", "-trimpath", "-ldflags", r.src.ldflags(), "-o", dir + string(filepath.Separator)}
	for _, c := range commands {
		args = append(args, "./cmd/"+c)
	}
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = r.root
	// GOFLAGS stays the caller's (CI's -buildvcs=false): the linker's
	// stamps say which commit this is either way.
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+p.OS, "GOARCH="+p.Arch)
	start := time.Now()
	if b, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("go build for %s: %w\n%s", p, err, b)
	}
	r.log.Info("built", "platform", p.String(), "took", time.Since(start).Round(time.Millisecond))
	paths := make([]string, len(commands))
	for i, c := range commands {
		paths[i] = filepath.Join(dir, p.exe(c))
	}
	return paths, nil
}

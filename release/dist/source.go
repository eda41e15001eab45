package main

import (
	"context"
	"fmt"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// module is the main module's path; buildinfoPkg the package whose
// variables the linker stamps.
const (
	module       = "github.com/aep-kimi/aep-kimi"
	buildinfoPkg = module + "/internal/buildinfo"
)

// semver is what a version must be: npm, Homebrew and Go's module
// versions all read it.
var semver = regexp.MustCompile(`^(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?$`)

// source is what a release is built from and stamped with.
type source struct {
	// Version is X.Y.Z[-pre], without a leading v.
	Version string
	// Commit is the full commit id, or "unknown" outside a git checkout.
	Commit string
	// Date is when the commit was made (or SOURCE_DATE_EPOCH): the build
	// date stamped into the binaries and every file's time in the archives.
	Date time.Time
}

// readSource finds the version (the one given, else $AEP_KIMI_VERSION,
// else `git describe` of a v* tag, else 0.0.0-dev.COMMIT; "-dirty" when
// tracked files changed), the commit and its date. release/npm.sh names
// its packages by the same rule.
func readSource(ctx context.Context, root, version string, getenv func(string) string) (source, error) {
	git := func(args ...string) (string, error) {
		cmd := exec.CommandContext(ctx, "git", args...)
		cmd.Dir = root
		b, err := cmd.Output()
		return strings.TrimSpace(string(b)), err
	}
	s := source{Commit: "unknown"}
	if c, err := git("rev-parse", "HEAD"); err == nil && c != "" {
		s.Commit = c
	}
	dirty := ""
	if s.Commit != "unknown" {
		if st, err := git("status", "--porcelain", "--untracked-files=no"); err == nil && st != "" {
			dirty = "-dirty"
		}
	}
	if version == "" {
		version = getenv("AEP_KIMI_VERSION")
	}
	if version == "" {
		if d, err := git("describe", "--tags", "--match", "v[0-9]*"); err == nil && d != "" {
			version = d + dirty
		} else if s.Commit != "unknown" {
			version = "0.0.0-dev." + s.Commit[:12] + dirty
		} else {
			version = "0.0.0-dev"
		}
	}
	s.Version = strings.TrimPrefix(version, "v")
	if !semver.MatchString(s.Version) {
		return source{}, fmt.Errorf("version %q is not X.Y.Z[-pre] (set -version or AEP_KIMI_VERSION)", s.Version)
	}
	switch epoch := getenv("SOURCE_DATE_EPOCH"); {
	case epoch != "":
		n, err := strconv.ParseInt(epoch, 10, 64)
		if err != nil {
			return source{}, fmt.Errorf("SOURCE_DATE_EPOCH %q: %w", epoch, err)
		}
		s.Date = time.Unix(n, 0).UTC()
	case s.Commit != "unknown":
		ct, err := git("log", "-1", "--format=%ct")
		if err != nil {
			return source{}, fmt.Errorf("the commit's date: %w", err)
		}
		n, err := strconv.ParseInt(ct, 10, 64)
		if err != nil {
			return source{}, fmt.Errorf("the commit's date %q: %w", ct, err)
		}
		s.Date = time.Unix(n, 0).UTC()
	default:
		return source{}, fmt.Errorf("no commit to date the build by: set SOURCE_DATE_EPOCH")
	}
	return s, nil
}

// ldflags stamp the binaries with s (internal/buildinfo) and leave out
// the symbol table and DWARF: a release is not debugged in place, and the
// build information `go version -m` reads stays.
func (s source) ldflags() string {
	return strings.Join([]string{"-s", "-w",
		"-X", buildinfoPkg + ".version=" + s.Version,
		"-X", buildinfoPkg + ".commit=" + s.Commit,
		"-X", buildinfoPkg + ".date=" + s.Date.Format(time.RFC3339),
	}, " ")
}

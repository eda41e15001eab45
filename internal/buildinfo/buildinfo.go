// Package buildinfo says which build of aep-kimi is running: its version,
// commit and build date, the Go that built it and the platform. Every
// binary prints it for --version and `aep-kimi version`, and the adapter
// reports it on /healthz so `aep-setup check` can tell a kimi-hook from
// another release.
//
// A release build stamps the three values with the linker (the date is the
// commit's, in UTC, so the same commit builds the same bytes):
//
//	PKG=github.com/aep-kimi/aep-kimi/internal/buildinfo
//	go build -trimpath -ldflags "\
//	  -X $PKG.version=0.4.0 \
//	  -X $PKG.commit=$(git rev-parse HEAD) \
//	  -X $PKG.date=$(TZ=UTC git log -1 --format=%cd --date=format-local:%Y-%m-%dT%H:%M:%SZ)" ./cmd/...
//
// The version is written without a leading "v" (a leading "v" is dropped
// anyway). An unstamped build (go install, go build in a clone) falls back
// to what the Go toolchain recorded: the module's version and the vcs
// revision and time.
//
// kimi-hook links this package: it holds no init work, and reads the build
// information only when asked.
package buildinfo

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"
)

// Set by the linker (-X, see the package comment); empty when unstamped.
// They are the only package-level variables here, and nothing assigns them.
var (
	version string
	commit  string
	date    string
)

// What an unknown field prints as.
const (
	// Devel is the version of a build that carries none (go build in a
	// clone without VCS information).
	Devel   = "devel"
	Unknown = "unknown"
)

// shortCommit is how much of the commit the one-line form shows.
const shortCommit = 12

// Info is one build's identity.
type Info struct {
	Version  string `json:"version"`
	Commit   string `json:"commit"`
	Date     string `json:"date"`
	Go       string `json:"go"`
	Platform string `json:"platform"`
}

// Get is this binary's build information.
func Get() Info {
	bi, _ := debug.ReadBuildInfo()
	return resolve(stamp{version, commit, date}, bi)
}

// stamp is what the linker set.
type stamp struct{ version, commit, date string }

// resolve fills each field from the stamp, else from bi (nil: none), else
// Devel or Unknown.
func resolve(s stamp, bi *debug.BuildInfo) Info {
	in := Info{Version: s.version, Commit: s.commit, Date: s.date, Go: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	if bi != nil {
		if in.Version == "" && bi.Main.Version != "(devel)" {
			in.Version = bi.Main.Version
		}
		for _, kv := range bi.Settings {
			switch {
			case kv.Key == "vcs.revision" && in.Commit == "":
				in.Commit = kv.Value
			case kv.Key == "vcs.time" && in.Date == "":
				in.Date = kv.Value
			}
		}
		if bi.GoVersion != "" {
			in.Go = bi.GoVersion
		}
	}
	in.Version = strings.TrimPrefix(in.Version, "v")
	in.Version = orElse(in.Version, Devel)
	in.Commit = orElse(in.Commit, Unknown)
	in.Date = orElse(in.Date, Unknown)
	return in
}

func orElse(s, def string) string {
	if s = strings.TrimSpace(s); s == "" {
		return def
	}
	return s
}

// Line is the one-line form --version prints, e.g.
//
//	aep-kimi 0.4.0 (commit 1a2b3c4d5e6f, built 2026-05-01T10:00:00Z, go1.26.8, linux/amd64)
//
// ParseLine reads it back.
func (in Info) Line(prog string) string {
	return fmt.Sprintf("%s %s (commit %s, built %s, %s, %s)", prog, in.Version, in.ShortCommit(), in.Date, in.Go, in.Platform)
}

// ShortCommit is the commit as Line prints it.
func (in Info) ShortCommit() string {
	if len(in.Commit) > shortCommit {
		return in.Commit[:shortCommit]
	}
	return in.Commit
}

// Text is the form `aep-kimi version` prints: one labelled field a line.
func (in Info) Text() string {
	return fmt.Sprintf("version:  %s\ncommit:   %s\nbuilt:    %s\ngo:       %s\nplatform: %s\n",
		in.Version, in.Commit, in.Date, in.Go, in.Platform)
}

// ParseLine reads what Line printed for prog (the commit is then at most
// shortCommit long).
func ParseLine(prog, line string) (Info, error) {
	line = strings.TrimSpace(line)
	rest, ok := strings.CutPrefix(line, prog+" ")
	if !ok {
		return Info{}, fmt.Errorf("not a %s version line: %q", prog, line)
	}
	ver, rest, ok := strings.Cut(rest, " (")
	inner, ok2 := strings.CutSuffix(rest, ")")
	parts := strings.Split(inner, ", ")
	if !ok || !ok2 || len(parts) != 4 || ver == "" {
		return Info{}, fmt.Errorf("not a %s version line: %q", prog, line)
	}
	c, ok := strings.CutPrefix(parts[0], "commit ")
	d, ok2 := strings.CutPrefix(parts[1], "built ")
	if !ok || !ok2 {
		return Info{}, fmt.Errorf("not a %s version line: %q", prog, line)
	}
	return Info{Version: ver, Commit: c, Date: d, Go: parts[2], Platform: parts[3]}, nil
}

// Differs reports whether a and b are known to be different builds: their
// versions differ, or both name a commit and those differ (one may be the
// short form of the other). Unknown fields never make a difference.
func Differs(a, b Info) bool {
	if a.Version != b.Version && a.Version != Devel && b.Version != Devel {
		return true
	}
	if a.Commit == Unknown || b.Commit == Unknown || a.Commit == "" || b.Commit == "" {
		return false
	}
	n := min(len(a.Commit), len(b.Commit))
	return !strings.EqualFold(a.Commit[:n], b.Commit[:n])
}

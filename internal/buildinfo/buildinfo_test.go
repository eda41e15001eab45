package buildinfo

import (
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
)

func TestResolve(t *testing.T) {
	platform := runtime.GOOS + "/" + runtime.GOARCH
	vcs := &debug.BuildInfo{
		GoVersion: "go1.26.8",
		Main:      debug.Module{Path: "github.com/aep-kimi/aep-kimi", Version: "v0.0.0-20260501100000-1a2b3c4d5e6f"},
		Settings: []debug.BuildSetting{
			{Key: "vcs", Value: "git"},
			{Key: "vcs.revision", Value: "1a2b3c4d5e6f7a8b9c0d1a2b3c4d5e6f7a8b9c0d"},
			{Key: "vcs.time", Value: "2026-05-01T10:00:00Z"},
		},
	}
	for _, c := range []struct {
		name string
		s    stamp
		bi   *debug.BuildInfo
		want Info
	}{
		{"stamped wins over the toolchain's record", stamp{"v0.4.0", "ffff", "2026-06-01T00:00:00Z"}, vcs,
			Info{"0.4.0", "ffff", "2026-06-01T00:00:00Z", "go1.26.8", platform}},
		{"unstamped falls back to the module and vcs", stamp{}, vcs,
			Info{"0.0.0-20260501100000-1a2b3c4d5e6f", "1a2b3c4d5e6f7a8b9c0d1a2b3c4d5e6f7a8b9c0d", "2026-05-01T10:00:00Z", "go1.26.8", platform}},
		{"only the version stamped", stamp{version: "0.4.0"}, vcs,
			Info{"0.4.0", "1a2b3c4d5e6f7a8b9c0d1a2b3c4d5e6f7a8b9c0d", "2026-05-01T10:00:00Z", "go1.26.8", platform}},
		{"a devel build without vcs", stamp{}, &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"}},
			Info{Devel, Unknown, Unknown, "go1.26.8", platform}},
		{"no build information", stamp{}, nil, Info{Devel, Unknown, Unknown, runtime.Version(), platform}},
	} {
		if got := resolve(c.s, c.bi); got != c.want {
			t.Errorf("%s:\n got %+v\nwant %+v", c.name, got, c.want)
		}
	}
}

func TestLineRoundTrips(t *testing.T) {
	in := Info{"0.4.0", "1a2b3c4d5e6f7a8b9c0d", "2026-05-01T10:00:00Z", "go1.26.8", "linux/amd64"}
	line := in.Line("kimi-hook")
	if want := "kimi-hook 0.4.0 (commit 1a2b3c4d5e6f, built 2026-05-01T10:00:00Z, go1.26.8, linux/amd64)"; line != want {
		t.Fatalf("Line:\n got %q\nwant %q", line, want)
	}
	got, err := ParseLine("kimi-hook", line+"\n")
	if err != nil {
		t.Fatal(err)
	}
	want := in
	want.Commit = "1a2b3c4d5e6f"
	if got != want {
		t.Errorf("ParseLine: got %+v, want %+v", got, want)
	}
	if Differs(got, in) {
		t.Errorf("a short commit differs from its long form")
	}
	for _, bad := range []string{"", "kimi-hook", "aep-kimi 0.4.0 (commit a, built b, c, d)", "kimi-hook 0.4.0", "kimi-hook 0.4.0 (commit a, built b, c)",
		"kimi-hook: unknown flag", "kimi-hook 0.4.0 (a, b, c, d)"} {
		if _, err := ParseLine("kimi-hook", bad); err == nil {
			t.Errorf("ParseLine(%q) accepted", bad)
		}
	}
}

func TestDiffers(t *testing.T) {
	i := func(v, c string) Info { return Info{Version: v, Commit: c} }
	for _, c := range []struct {
		a, b Info
		want bool
	}{
		{i("0.4.0", "abc"), i("0.4.0", "abc"), false},
		{i("0.4.0", "abc"), i("0.5.0", "abc"), true},
		{i("0.4.0", "abc"), i("0.4.0", "abd"), true},
		{i("0.4.0", "abcdef"), i("0.4.0", "ABC"), false},
		{i(Devel, "abc"), i("0.4.0", "abc"), false},
		{i(Devel, "abc"), i("0.4.0", "abd"), true},
		{i("0.4.0", Unknown), i("0.4.0", "abd"), false},
		{i(Devel, Unknown), i("0.5.0", "abd"), false},
	} {
		if got := Differs(c.a, c.b); got != c.want || Differs(c.b, c.a) != c.want {
			t.Errorf("Differs(%+v, %+v) = %v, want %v both ways", c.a, c.b, got, c.want)
		}
	}
}

func TestTextHasEveryField(t *testing.T) {
	txt := Info{"0.4.0", "c0ffee", "2026-05-01T10:00:00Z", "go1.26.8", "darwin/arm64"}.Text()
	for _, want := range []string{"version:  0.4.0\n", "commit:   c0ffee\n", "built:    2026-05-01T10:00:00Z\n", "go:       go1.26.8\n", "platform: darwin/arm64\n"} {
		if !strings.Contains(txt, want) {
			t.Errorf("Text lacks %q:\n%s", want, txt)
		}
	}
}

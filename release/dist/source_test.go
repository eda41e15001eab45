package main

import (
	"context"
	"strings"
	"testing"
	"time"
)

// The version rule release/npm.sh shares: given, else AEP_KIMI_VERSION,
// else from git; a leading v dropped; anything but semver refused; the
// date the commit's unless SOURCE_DATE_EPOCH says otherwise.
func TestReadSource(t *testing.T) {
	t.Parallel()
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	env := func(kv ...string) func(string) string {
		return func(k string) string {
			for i := 0; i+1 < len(kv); i += 2 {
				if kv[i] == k {
					return kv[i+1]
				}
			}
			return ""
		}
	}
	s, err := readSource(ctx, root, "", env())
	if err != nil {
		t.Fatal(err)
	}
	if !semver.MatchString(s.Version) || len(s.Commit) != 40 || s.Date.IsZero() || s.Date.After(time.Now()) {
		t.Errorf("from git: %+v", s)
	}
	for _, c := range []struct{ flag, env, want string }{
		{"v1.2.3", "9.9.9", "1.2.3"},
		{"", "v2.0.0-rc.1", "2.0.0-rc.1"},
		{"", "1.0.0+build.5", "1.0.0+build.5"},
	} {
		s, err := readSource(ctx, root, c.flag, env("AEP_KIMI_VERSION", c.env))
		if err != nil || s.Version != c.want {
			t.Errorf("version %q, env %q: %q %v, want %q", c.flag, c.env, s.Version, err, c.want)
		}
	}
	for _, bad := range []string{"latest", "1.2", "1.2.3 ", "01.2.3", "1.2.3-"} {
		if s, err := readSource(ctx, root, bad, env()); err == nil {
			t.Errorf("version %q taken as %q", bad, s.Version)
		}
	}
	s, err = readSource(ctx, root, "1.0.0", env("SOURCE_DATE_EPOCH", "1700000000"))
	if err != nil || !s.Date.Equal(time.Unix(1700000000, 0)) {
		t.Errorf("SOURCE_DATE_EPOCH: %v %v", s.Date, err)
	}
	if _, err := readSource(ctx, root, "1.0.0", env("SOURCE_DATE_EPOCH", "yesterday")); err == nil {
		t.Error("SOURCE_DATE_EPOCH=yesterday taken")
	}
	ld := s.ldflags()
	for _, want := range []string{"-s -w", buildinfoPkg + ".version=1.0.0", buildinfoPkg + ".commit=" + s.Commit, buildinfoPkg + ".date=2023-11-14T22:13:20Z"} {
		if !strings.Contains(ld, want) {
			t.Errorf("ldflags %q lack %q", ld, want)
		}
	}
}

func TestParsePlatforms(t *testing.T) {
	t.Parallel()
	ps, err := parsePlatforms(DefaultPlatforms + ",linux/amd64")
	if err != nil || len(ps) != 5 || ps[4] != (platform{"windows", "amd64"}) {
		t.Errorf("%v %v", ps, err)
	}
	for _, bad := range []string{"", "linux", "linux/", "/amd64", "linux_amd64", "linux/amd64,"} {
		if ps, err := parsePlatforms(bad); err == nil {
			t.Errorf("%q parsed as %v", bad, ps)
		}
	}
}

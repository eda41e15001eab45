package service

import (
	"bytes"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// FuzzInspect: whatever a file at the unit's path holds, reading whose it
// is never panics, only a file whose marker matches is ours, and the
// directories it names are absolute.
func FuzzInspect(f *testing.F) {
	for _, k := range []Kind{Systemd, Launchd} {
		data, err := Render(k, goldenSpec(k), goldenCreated[k])
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data, k == Launchd)
	}
	f.Add([]byte("# aep-kimi service sha256=\n"), false)
	f.Add([]byte("<!-- aep-kimi service created %2 -->\n"), true)
	f.Fuzz(func(t *testing.T, data []byte, launchd bool) {
		kind := Systemd
		if launchd {
			kind = Launchd
		}
		o := ownership(kind, data)
		if o == Ours && !bytes.Contains(data, []byte(markerPrefix(kind))) {
			t.Fatalf("ours without a marker: %q", data)
		}
		for _, d := range createdDirs(kind, data) {
			if !filepath.IsAbs(d) {
				t.Fatalf("created %q is not absolute", d)
			}
		}
	})
}

// FuzzRender: any arguments, environment and created directories render
// to a file that is ours, names the same directories, and (a plist)
// parses back to the exact arguments; or they are refused.
func FuzzRender(f *testing.F) {
	f.Add("--home\x00/a b\x00--notify\x00ntfy:@/x%y$z", "AEP_HOME=/a b", "/h/.config/sys--temd")
	f.Fuzz(func(t *testing.T, args, env, created string) {
		s := Spec{Exe: "/usr/bin/aep-kimi", Args: strings.Split(args, "\x00"), Env: []string{env}}
		dirs := []string{"/" + created}
		for _, k := range []Kind{Systemd, Launchd} {
			data, err := Render(k, s, dirs)
			if err != nil {
				return
			}
			if o := ownership(k, data); o != Ours {
				t.Fatalf("%s: rendered file is %s:\n%s", k, o, data)
			}
			if got := createdDirs(k, data); !slices.Equal(got, dirs) {
				t.Fatalf("%s: created %q, want %q", k, got, dirs)
			}
			if k == Launchd {
				v, err := parsePlist(data)
				if err != nil {
					t.Fatalf("plist does not parse: %v\n%s", err, data)
				}
				got := asStrings(v.(map[string]any)["ProgramArguments"])
				if !slices.Equal(got, append([]string{s.Exe, "up"}, s.Args...)) {
					t.Fatalf("ProgramArguments %q, want %q", got, s.Args)
				}
			}
		}
	})
}

package service

import (
	"bytes"
	"encoding/xml"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata")

// trickyArgs are up flags whose values need quoting in a unit and
// escaping in a plist: spaces, specifiers, variables, quotes,
// backslashes, markup.
var trickyArgs = []string{
	"--control", "--home", "/home/op/AEP home", "--notify", "ntfy:@/home/op/.aep/ntfy url#token-file=/home/op/100%/t",
	"--public-url", "https://fleet.example/a?b=1&c=$HOME", `--allowed-hosts=say "hi" \ <there>`,
}

func goldenSpec(kind Kind) Spec {
	s := Spec{Exe: "/usr/local/bin/aep-kimi", Args: trickyArgs, Env: []string{"AEP_HOME=/home/op/AEP home", "KIMI_CODE_HOME=/home/op/.kimi-code"}}
	if kind == Launchd {
		s.Log = "/Users/op/Library/Logs/aep-kimi.log"
	}
	return s
}

var goldenCreated = map[Kind][]string{
	Systemd: {"/home/op/.config/systemd", "/home/op/.config/systemd/user", "/home/op/.config/systemd/user/default.target.wants"},
	Launchd: {"/Users/op/Library/Launch--Agents"},
}

// TestRenderGolden pins the unit and the plist (go test ./service/
// -update rewrites them; read the diff).
func TestRenderGolden(t *testing.T) {
	for kind, name := range map[Kind]string{Systemd: UnitName, Launchd: Label + ".plist"} {
		got, err := Render(kind, goldenSpec(kind), goldenCreated[kind])
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join("testdata", name)
		if *update {
			if err := os.WriteFile(path, got, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%v (go test ./service/ -update writes it)", err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s changed (-update to accept):\n%s", name, got)
		}
		if o := ownership(kind, got); o != Ours {
			t.Errorf("%s: a rendered file is %s", kind, o)
		}
		if c := createdDirs(kind, got); !slices.Equal(c, goldenCreated[kind]) {
			t.Errorf("%s: created %q, want %q", kind, c, goldenCreated[kind])
		}
	}
}

// TestUnitPassesSystemdAnalyze runs the real `systemd-analyze verify
// --user` on the unit for tricky flags, and needs it silent: systemd
// ignores a bad line with a warning and exit 0. A broken copy of the same
// unit must make it speak, so the check is known to look.
func TestUnitPassesSystemdAnalyze(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the real systemd-analyze (seconds); skipped under -short")
	}
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("CI is set but systemd-analyze is missing (.ci/run installs Debian's systemd)")
		}
		t.Skip("no systemd-analyze")
	}
	dir := t.TempDir()
	// verify checks that ExecStart's program exists and runs.
	exe := filepath.Join(dir, "bin dir", "aep-kimi")
	if err := os.MkdirAll(filepath.Dir(exe), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(exe, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	s := goldenSpec(Systemd)
	s.Exe = exe
	unit, err := Render(Systemd, s, []string{filepath.Join(dir, "x")})
	if err != nil {
		t.Fatal(err)
	}
	verify := func(name string, data []byte) string {
		t.Helper()
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		// A user manager needs a runtime directory; in a container
		// nobody made one.
		runtimeDir := filepath.Join(dir, "runtime")
		if err := os.MkdirAll(runtimeDir, 0o700); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(analyze, "verify", "--man=no", "--user", path)
		cmd.Env = append(os.Environ(), "XDG_RUNTIME_DIR="+runtimeDir, "SYSTEMD_LOG_COLOR=0")
		out, err := cmd.CombinedOutput()
		if err != nil {
			return fmt.Sprintf("%v: %s", err, out)
		}
		return string(out)
	}
	if out := verify(UnitName, unit); out != "" {
		t.Errorf("systemd-analyze verify:\n%s\nthe unit:\n%s", out, unit)
	}
	for name, broken := range map[string][]byte{
		"unquoted.service": bytes.Replace(unit, []byte(`"/home/op/AEP home"`), []byte(`"/home/op/AEP home`), 1),
		"restart.service":  bytes.Replace(unit, []byte("Restart=on-failure"), []byte("Restart=sometimes"), 1),
		"missing.service":  bytes.Replace(unit, []byte(exe), []byte(filepath.Join(dir, "nowhere")), 1),
	} {
		if bytes.Equal(broken, unit) {
			t.Fatalf("%s: nothing broken", name)
		}
		if out := verify(name, broken); out == "" {
			t.Errorf("%s: systemd-analyze verify found nothing wrong with a broken unit", name)
		}
	}
}

// TestPlistIsAPropertyList parses the plist as the DTD shapes it (a
// plist of one dict; in a dict, each key followed by one value) and reads
// back the program's arguments and environment exactly. On macOS,
// plutil -lint checks it too.
func TestPlistIsAPropertyList(t *testing.T) {
	s := goldenSpec(Launchd)
	data, err := Render(Launchd, s, goldenCreated[Launchd])
	if err != nil {
		t.Fatal(err)
	}
	v, err := parsePlist(data)
	if err != nil {
		t.Fatalf("%v\n%s", err, data)
	}
	top := v.(map[string]any)
	if got := top["ProgramArguments"]; !slices.Equal(asStrings(got), append([]string{s.Exe, "up"}, s.Args...)) {
		t.Errorf("ProgramArguments %q", got)
	}
	env := top["EnvironmentVariables"].(map[string]any)
	if env["AEP_HOME"] != "/home/op/AEP home" || env["KIMI_CODE_HOME"] != "/home/op/.kimi-code" || len(env) != 2 {
		t.Errorf("EnvironmentVariables %v", env)
	}
	keep := top["KeepAlive"].(map[string]any)
	if top["Label"] != Label || top["RunAtLoad"] != true || keep["SuccessfulExit"] != false || top["ThrottleInterval"] != int64(ThrottleInterval) ||
		top["StandardErrorPath"] != s.Log || top["StandardOutPath"] != s.Log {
		t.Errorf("plist %v", top)
	}
	if plutil, err := exec.LookPath("plutil"); err == nil {
		path := filepath.Join(t.TempDir(), Label+".plist")
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		if out, err := exec.Command(plutil, "-lint", path).CombinedOutput(); err != nil {
			t.Errorf("plutil -lint: %v: %s", err, out)
		}
	}
	// The parser refuses what the DTD does.
	for _, bad := range []string{
		`<plist version="1.0"><dict><key>a</key></dict></plist>`,
		`<plist version="1.0"><dict><string>a</string><string>b</string></dict></plist>`,
		`<plist version="1.0"><dict/><dict/></plist>`,
		`<plist version="2.0"><dict/></plist>`,
		`<plist version="1.0"><dict><key>a</key><integer>x</integer></dict></plist>`,
		`<plist version="1.0"><dict><key>a</key><bogus/></dict></plist>`,
		`<plist version="1.0"><dict><key>a</key><string>b</string>`,
	} {
		if _, err := parsePlist([]byte(bad)); err == nil {
			t.Errorf("parsePlist accepted %s", bad)
		}
	}
}

func asStrings(v any) []string {
	a, _ := v.([]any)
	var out []string
	for _, x := range a {
		s, _ := x.(string)
		out = append(out, s)
	}
	return out
}

// parsePlist reads an XML property list into Go values (dict: map,
// array: slice, string, integer: int64, true/false: bool), refusing
// anything outside the DTD's shape for the elements it knows.
func parsePlist(data []byte) (any, error) {
	d := xml.NewDecoder(bytes.NewReader(data))
	d.Strict = true
	root, err := nextStart(d)
	if err != nil {
		return nil, err
	}
	if root.Name.Local != "plist" || attr(root, "version") != "1.0" {
		return nil, fmt.Errorf("root <%s version=%q>, want <plist version=\"1.0\">", root.Name.Local, attr(root, "version"))
	}
	el, err := nextStart(d)
	if err != nil {
		return nil, err
	}
	v, err := plistValue(d, el)
	if err != nil {
		return nil, err
	}
	if tok, err := nextStart(d); err == nil {
		return nil, fmt.Errorf("a second value <%s> in <plist>", tok.Name.Local)
	} else if !errors.Is(err, errEnd) {
		return nil, err
	}
	for {
		tok, err := d.Token()
		if err == io.EOF {
			return v, nil
		}
		if cd, ok := tok.(xml.CharData); err != nil || !ok || len(bytes.TrimSpace(cd)) > 0 {
			return nil, fmt.Errorf("content after </plist>: %v %v", tok, err)
		}
	}
}

var errEnd = errors.New("end element")

// nextStart skips to the next start element; errEnd at an end element.
func nextStart(d *xml.Decoder) (xml.StartElement, error) {
	for {
		tok, err := d.Token()
		if err != nil {
			return xml.StartElement{}, err
		}
		switch t := tok.(type) {
		case xml.StartElement:
			return t, nil
		case xml.EndElement:
			return xml.StartElement{}, errEnd
		case xml.CharData:
			if len(bytes.TrimSpace(t)) > 0 {
				return xml.StartElement{}, fmt.Errorf("text %q between elements", t)
			}
		}
	}
}

func attr(el xml.StartElement, name string) string {
	for _, a := range el.Attr {
		if a.Name.Local == name {
			return a.Value
		}
	}
	return ""
}

func plistValue(d *xml.Decoder, el xml.StartElement) (any, error) {
	switch el.Name.Local {
	case "dict":
		m := map[string]any{}
		for {
			k, err := nextStart(d)
			if errors.Is(err, errEnd) {
				return m, nil
			}
			if err != nil {
				return nil, err
			}
			if k.Name.Local != "key" {
				return nil, fmt.Errorf("<%s> where a dict needs <key>", k.Name.Local)
			}
			var key string
			if err := d.DecodeElement(&key, &k); err != nil {
				return nil, err
			}
			vEl, err := nextStart(d)
			if err != nil {
				return nil, fmt.Errorf("key %q has no value: %w", key, err)
			}
			if m[key], err = plistValue(d, vEl); err != nil {
				return nil, fmt.Errorf("%s: %w", key, err)
			}
		}
	case "array":
		a := []any{}
		for {
			vEl, err := nextStart(d)
			if errors.Is(err, errEnd) {
				return a, nil
			}
			if err != nil {
				return nil, err
			}
			v, err := plistValue(d, vEl)
			if err != nil {
				return nil, err
			}
			a = append(a, v)
		}
	case "string", "integer":
		var s string
		if err := d.DecodeElement(&s, &el); err != nil {
			return nil, err
		}
		if el.Name.Local == "string" {
			return s, nil
		}
		return strconv.ParseInt(s, 10, 64)
	case "true", "false":
		if err := d.Skip(); err != nil {
			return nil, err
		}
		return el.Name.Local == "true", nil
	}
	return nil, fmt.Errorf("<%s> is not a property list value this test knows", el.Name.Local)
}

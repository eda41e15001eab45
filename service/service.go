// Package service keeps `aep-kimi up` running as the user's own service: a
// systemd --user unit on Linux, a launchd agent on macOS. It renders the
// file (Render), installs it and asks the service manager to enable and
// start it (Install), reports it (Status) and removes exactly what Install
// wrote (Uninstall).
//
// What Install wrote is recorded in the file itself: a marker line holding
// the SHA-256 of the rest, and the directories Install created. A file
// without the marker is not ours and is never replaced or removed; one
// whose rest no longer matches the hash was edited by someone and is left
// alone unless the caller forces it. Nothing secret is written: the unit
// names the executable, up's flags (Check refuses a secret among them) and
// where the AEP home is; tokens stay in their 0600 files under that home.
//
// The service manager is reached through Runner, so tests run a fake.
package service

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/xml"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"unicode/utf8"

	"github.com/aep-kimi/aep-kimi/internal/safefile"
)

// Kind is a service manager.
type Kind string

// The service managers a unit is rendered for.
const (
	Systemd Kind = "systemd"
	Launchd Kind = "launchd"
)

// Names and defaults.
const (
	// UnitName is the systemd unit's file name.
	UnitName = "aep-kimi.service"
	// Label is the launchd agent's label; its plist is Label + ".plist".
	Label = "io.github.aep-kimi.up"
	// RestartSec is how long systemd waits before restarting a failed up.
	RestartSec = 5
	// ThrottleInterval is launchd's least time between two starts.
	ThrottleInterval = 10
	// UsageExit is up's exit code for a configuration mistake: restarting
	// cannot fix one, so systemd does not.
	UsageExit = 2
	// FileMode is the unit's mode: it holds no secret, and the service
	// manager reads it.
	FileMode fs.FileMode = 0o644
	// DirMode is the mode of a directory Install creates.
	DirMode fs.FileMode = 0o700
	// docURL is where the unit says to read about it.
	docURL = "https://github.com/aep-kimi/aep-kimi/blob/main/docs/install.md"
)

// ForOS is the service manager of goos, or an error naming what to use
// instead.
func ForOS(goos string) (Kind, error) {
	switch goos {
	case "linux":
		return Systemd, nil
	case "darwin":
		return Launchd, nil
	case "windows":
		return "", errors.New(`not supported on windows; use Task Scheduler to run "aep-kimi up" at logon (schtasks /create /sc onlogon /tn aep-kimi /tr "C:\path\to\aep-kimi.exe up")`)
	}
	return "", fmt.Errorf("not supported on %s: run aep-kimi up under your own service manager", goos)
}

// ParseKind reads a Kind by name.
func ParseKind(s string) (Kind, error) {
	switch k := Kind(s); k {
	case Systemd, Launchd:
		return k, nil
	}
	return "", fmt.Errorf("unknown service manager %q (want %s or %s)", s, Systemd, Launchd)
}

// Spec is what the service runs: Exe up Args, with Env.
type Spec struct {
	// Exe is the absolute path of aep-kimi.
	Exe string
	// Args are up's flags (Check has passed them).
	Args []string
	// Env is the environment the service gets besides the manager's own,
	// NAME=value each: where the homes and the token file are, no secret.
	Env []string
	// Log is where launchd sends up's output (systemd: the journal).
	Log string
}

// Host is where the user's files are.
type Host struct {
	// Home is the user's home directory.
	Home string
	// ConfigHome is $XDG_CONFIG_HOME ("": Home/.config).
	ConfigHome string
	// UID is the user's id (launchd's gui/UID domain); User the login
	// name (loginctl).
	UID  int
	User string
}

// Path is where kind's file goes for h.
func (h Host) Path(kind Kind) string {
	if kind == Launchd {
		return filepath.Join(h.Home, "Library", "LaunchAgents", Label+".plist")
	}
	return filepath.Join(h.unitDir(), UnitName)
}

func (h Host) unitDir() string {
	cfg := h.ConfigHome
	if cfg == "" {
		cfg = filepath.Join(h.Home, ".config")
	}
	return filepath.Join(cfg, "systemd", "user")
}

// wantsDir is where systemctl enable links the unit.
func (h Host) wantsDir() string { return filepath.Join(h.unitDir(), "default.target.wants") }

// Render is the file Install writes for kind: the unit or plist running
// s, marked ours, naming created (the directories Install made for it).
func Render(kind Kind, s Spec, created []string) ([]byte, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	for _, d := range created {
		if !utf8.ValidString(d) || strings.ContainsFunc(d, unfit) || !filepath.IsAbs(d) {
			return nil, fmt.Errorf("directory %q: not an absolute path a unit can name", d)
		}
	}
	var body []byte
	var err error
	switch kind {
	case Systemd:
		body, err = renderUnit(s, created)
	case Launchd:
		body = renderPlist(s, created)
	default:
		err = fmt.Errorf("unknown service manager %q", kind)
	}
	if err != nil {
		return nil, err
	}
	return seal(kind, body), nil
}

// check refuses what no unit can carry.
func (s Spec) check() error {
	if !filepath.IsAbs(s.Exe) {
		return fmt.Errorf("the executable %q is not an absolute path", s.Exe)
	}
	for _, v := range append(append([]string{s.Exe, s.Log}, s.Args...), s.Env...) {
		if !utf8.ValidString(v) || strings.ContainsFunc(v, unfit) {
			return fmt.Errorf("%q: a control character or invalid UTF-8 cannot go in a unit or a plist", v)
		}
	}
	for _, kv := range s.Env {
		if k, _, ok := strings.Cut(kv, "="); !ok || k == "" {
			return fmt.Errorf("environment %q is not NAME=value", kv)
		}
	}
	return nil
}

// unfit is a character neither a unit line nor XML carries as itself.
func unfit(r rune) bool {
	return r < 0x20 && r != '\t' || r == 0x7f || r == 0xFFFE || r == 0xFFFF || r >= 0xD800 && r <= 0xDFFF
}

// renderUnit is the systemd unit, without its marker line.
func renderUnit(s Spec, created []string) ([]byte, error) {
	var b bytes.Buffer
	b.WriteString("# Written by `aep-kimi service install`; `aep-kimi service uninstall` removes it.\n")
	b.WriteString("# Edit it and uninstall leaves it alone; run install again to change up's flags.\n")
	for _, d := range created {
		fmt.Fprintf(&b, "%s%s\n", createdPrefix(Systemd), encodePath(d))
	}
	b.WriteString("\n[Unit]\n")
	b.WriteString("Description=aep-kimi: Kimi Code's events as AEP (relay, hook adapter, kimi web bridge)\n")
	b.WriteString("Documentation=" + docURL + "\n")
	b.WriteString("\n[Service]\n")
	b.WriteString("Type=simple\n")
	words := []string{systemdWord(s.Exe, true), "up"}
	for _, a := range s.Args {
		words = append(words, systemdWord(a, true))
	}
	b.WriteString("ExecStart=" + strings.Join(words, " ") + "\n")
	for _, kv := range s.Env {
		b.WriteString("Environment=" + systemdWord(kv, false) + "\n")
	}
	b.WriteString("Restart=on-failure\n")
	fmt.Fprintf(&b, "RestartSec=%d\n", RestartSec)
	b.WriteString("# up exits 2 on a configuration mistake: a restart cannot fix it.\n")
	fmt.Fprintf(&b, "RestartPreventExitStatus=%d\n", UsageExit)
	b.WriteString("\n[Install]\n")
	b.WriteString("WantedBy=default.target\n")
	return b.Bytes(), nil
}

// systemdWord quotes one word of ExecStart (exec) or one Environment
// assignment: specifiers (%) escaped by doubling, and in ExecStart
// variables ($) too (Environment expands none), and the word in double
// quotes, its quotes and backslashes escaped, unless it is plain.
func systemdWord(w string, exec bool) string {
	w = strings.ReplaceAll(w, "%", "%%")
	if exec {
		w = strings.ReplaceAll(w, "$", "$$")
	}
	plain := w != ""
	for _, r := range w {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("/._:=@,+-%$", r)) {
			plain = false
			break
		}
	}
	if plain {
		return w
	}
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(w) + `"`
}

// renderPlist is the launchd agent, without its marker line.
func renderPlist(s Spec, created []string) []byte {
	var b bytes.Buffer
	esc := func(v string) string {
		var e strings.Builder
		_ = xml.EscapeText(&e, []byte(v)) // writes to memory
		return e.String()
	}
	str := func(v string) string { return "<string>" + esc(v) + "</string>" }
	b.WriteString(xml.Header[:len(xml.Header)-1] + "\n")
	b.WriteString(`<!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">` + "\n")
	b.WriteString("<!-- Written by `aep-kimi service install`; `aep-kimi service uninstall` removes it. -->\n")
	b.WriteString("<!-- Edit it and uninstall leaves it alone; run install again to change up's flags. -->\n")
	for _, d := range created {
		fmt.Fprintf(&b, "%s%s -->\n", createdPrefix(Launchd), encodePath(d))
	}
	b.WriteString("<plist version=\"1.0\">\n<dict>\n")
	b.WriteString("\t<key>Label</key>\n\t" + str(Label) + "\n")
	b.WriteString("\t<key>ProgramArguments</key>\n\t<array>\n")
	for _, a := range append([]string{s.Exe, "up"}, s.Args...) {
		b.WriteString("\t\t" + str(a) + "\n")
	}
	b.WriteString("\t</array>\n")
	if len(s.Env) > 0 {
		b.WriteString("\t<key>EnvironmentVariables</key>\n\t<dict>\n")
		for _, kv := range s.Env {
			k, v, _ := strings.Cut(kv, "=")
			b.WriteString("\t\t<key>" + esc(k) + "</key>\n\t\t" + str(v) + "\n")
		}
		b.WriteString("\t</dict>\n")
	}
	b.WriteString("\t<key>RunAtLoad</key>\n\t<true/>\n")
	// Restarted when it exits unsuccessfully or is killed; a clean stop
	// (launchctl bootout, a signal it drains on) stays stopped.
	b.WriteString("\t<key>KeepAlive</key>\n\t<dict>\n\t\t<key>SuccessfulExit</key>\n\t\t<false/>\n\t</dict>\n")
	fmt.Fprintf(&b, "\t<key>ThrottleInterval</key>\n\t<integer>%d</integer>\n", ThrottleInterval)
	b.WriteString("\t<key>ProcessType</key>\n\t" + str("Background") + "\n")
	if s.Log != "" {
		b.WriteString("\t<key>StandardOutPath</key>\n\t" + str(s.Log) + "\n")
		b.WriteString("\t<key>StandardErrorPath</key>\n\t" + str(s.Log) + "\n")
	}
	b.WriteString("</dict>\n</plist>\n")
	return b.Bytes()
}

// markerPrefix starts the line holding the hash of the rest of the file.
func markerPrefix(kind Kind) string {
	if kind == Launchd {
		return "<!-- aep-kimi service sha256="
	}
	return "# aep-kimi service sha256="
}

// createdPrefix starts a line naming a directory Install created.
func createdPrefix(kind Kind) string {
	if kind == Launchd {
		return "<!-- aep-kimi service created "
	}
	return "# aep-kimi service created "
}

// encodePath keeps a path fit for a comment line of either format: "%",
// "-" (an XML comment holds no "--") and white space percent-encoded.
func encodePath(p string) string {
	return strings.NewReplacer("%", "%25", "-", "%2D", " ", "%20", "\t", "%09").Replace(p)
}

// seal inserts the marker line: first in a unit, after the XML declaration
// in a plist (which must come first).
func seal(kind Kind, body []byte) []byte {
	sum := sha256.Sum256(body)
	line := markerPrefix(kind) + hex.EncodeToString(sum[:])
	if kind == Launchd {
		line += " -->"
	}
	line += "\n"
	at := 0
	if kind == Launchd {
		at = bytes.IndexByte(body, '\n') + 1
	}
	return append(append(append([]byte{}, body[:at]...), line...), body[at:]...)
}

// Ownership is what a file at the unit's path is to us.
type Ownership string

// The states of the unit's path.
const (
	Absent  Ownership = "absent"
	Ours    Ownership = "installed"
	Edited  Ownership = "edited"  // ours, changed since
	Foreign Ownership = "foreign" // not written by Install
)

// Found is the file at the unit's path.
type Found struct {
	Ownership Ownership
	Data      []byte
	// Created are the directories the file says Install made.
	Created []string
}

// Inspect reads path (never through a link: a link there is Foreign) and
// says whose it is.
func Inspect(kind Kind, path string) (Found, error) {
	st, err := os.Lstat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return Found{Ownership: Absent}, nil
	case err != nil:
		return Found{}, err
	case !st.Mode().IsRegular():
		return Found{Ownership: Foreign}, nil
	}
	data, err := safefile.ReadFile(path)
	if err != nil {
		return Found{}, err
	}
	return Found{Ownership: ownership(kind, data), Data: data, Created: createdDirs(kind, data)}, nil
}

// ownership checks the marker line against the rest of data.
func ownership(kind Kind, data []byte) Ownership {
	prefix := []byte(markerPrefix(kind))
	var rest []byte
	var sum string
	found := false
	for _, line := range bytes.SplitAfter(data, []byte("\n")) {
		if !found && bytes.HasPrefix(line, prefix) {
			found = true
			sum = strings.TrimSuffix(strings.TrimSpace(string(line[len(prefix):])), " -->")
			continue
		}
		rest = append(rest, line...)
	}
	if !found {
		return Foreign
	}
	want := sha256.Sum256(rest)
	if sum != hex.EncodeToString(want[:]) {
		return Edited
	}
	return Ours
}

// createdDirs reads the directories a file says Install created.
func createdDirs(kind Kind, data []byte) []string {
	prefix := createdPrefix(kind)
	var dirs []string
	for _, line := range strings.Split(string(data), "\n") {
		rest, ok := strings.CutPrefix(line, prefix)
		if !ok {
			continue
		}
		rest = strings.TrimSuffix(strings.TrimSpace(rest), " -->")
		if d, err := url.PathUnescape(rest); err == nil && filepath.IsAbs(d) {
			dirs = append(dirs, d)
		}
	}
	return dirs
}

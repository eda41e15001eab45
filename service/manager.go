package service

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aep-kimi/aep-kimi/internal/atomicfile"
)

// CommandTimeout bounds one call of the service manager.
const CommandTimeout = 30 * time.Second

// Runner runs one command of the service manager (systemctl, launchctl,
// loginctl) and returns its standard output, also when it exits non-zero
// (systemctl is-active prints "inactive" and exits 3); the error then
// carries the first line of its standard error.
type Runner interface {
	Run(ctx context.Context, name string, args ...string) (string, error)
}

// Exec is the Runner that runs the real commands.
type Exec struct{}

// Run runs name with args within CommandTimeout.
func (Exec) Run(ctx context.Context, name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, CommandTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.WaitDelay = time.Second
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(errb.String())
		if i := strings.IndexByte(msg, '\n'); i >= 0 {
			msg = msg[:i]
		}
		if msg != "" {
			return out.String(), fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, msg)
		}
		return out.String(), fmt.Errorf("%s %s: %w", name, strings.Join(args, " "), err)
	}
	return out.String(), nil
}

// Manager installs, reports and removes the service for one user.
type Manager struct {
	Kind Kind
	Host Host
	Run  Runner
	// Out receives what was done and advice, a line each.
	Out io.Writer
}

func (m Manager) say(format string, a ...any) { fmt.Fprintf(m.Out, format+"\n", a...) }

// systemctl runs systemctl --user args.
func (m Manager) systemctl(ctx context.Context, args ...string) (string, error) {
	return m.Run.Run(ctx, "systemctl", append([]string{"--user"}, args...)...)
}

// launchctl runs launchctl args.
func (m Manager) launchctl(ctx context.Context, args ...string) (string, error) {
	return m.Run.Run(ctx, "launchctl", args...)
}

func (m Manager) domain() string  { return "gui/" + strconv.Itoa(m.Host.UID) }
func (m Manager) target() string  { return m.domain() + "/" + Label }
func (m Manager) path() string    { return m.Host.Path(m.Kind) }
func (m Manager) logHint() string { return "journalctl --user -u " + UnitName }

// Plan is what Install would do for s: write data to path after making
// the directories missing. It refuses what Install refuses.
func (m Manager) Plan(s Spec, force bool) (path string, data []byte, missing []string, err error) {
	path = m.path()
	found, err := Inspect(m.Kind, path)
	if err != nil {
		return "", nil, nil, err
	}
	switch found.Ownership {
	case Foreign:
		return "", nil, nil, fmt.Errorf("%s exists and was not written by aep-kimi service install: left alone (move it away, then install)", path)
	case Edited:
		if !force {
			return "", nil, nil, fmt.Errorf("%s was edited since aep-kimi service install wrote it: left alone (install --force replaces it)", path)
		}
	}
	missing = m.missingDirs()
	created := slices.Clone(found.Created)
	for _, d := range missing {
		if !slices.Contains(created, d) {
			created = append(created, d)
		}
	}
	data, err = Render(m.Kind, s, created)
	return path, data, missing, err
}

// Install writes the file running s, replacing one Install wrote (an
// edited one only with force; one it did not write never), and enables
// and (re)starts it, so it runs with s from now on and at each login.
func (m Manager) Install(ctx context.Context, s Spec, force bool) error {
	path, data, missing, err := m.Plan(s, force)
	if err != nil {
		return err
	}
	for _, d := range missing {
		if d == m.Host.wantsDir() {
			continue // systemctl enable makes it
		}
		if err := os.Mkdir(d, DirMode); err != nil && !errors.Is(err, os.ErrExist) {
			return err
		}
	}
	if err := atomicfile.Write(path, data, atomicfile.Options{Perm: FileMode}); err != nil {
		return err
	}
	m.say("wrote %s", path)
	if err := m.start(ctx); err != nil {
		return fmt.Errorf("%s is written, but %w", path, err)
	}
	if m.Kind == Systemd {
		m.say("enabled and started %s; its log: %s", UnitName, m.logHint())
		m.lingerAdvice(ctx)
	} else {
		m.say("loaded and started %s; its log: %s", Label, s.Log)
	}
	return nil
}

// start has the manager (re)read the file, enable it and (re)start it.
func (m Manager) start(ctx context.Context) error {
	if m.Kind == Systemd {
		for _, args := range [][]string{{"daemon-reload"}, {"enable", UnitName}, {"restart", UnitName}} {
			if _, err := m.systemctl(ctx, args...); err != nil {
				return fmt.Errorf("%w (in your login session: systemctl --user daemon-reload && systemctl --user enable --now %s)", err, UnitName)
			}
		}
		return nil
	}
	// A loaded agent keeps its old definition: unload it first (an error
	// here means it was not loaded).
	_, _ = m.launchctl(ctx, "bootout", m.target())
	if _, err := m.launchctl(ctx, "enable", m.target()); err != nil {
		return err
	}
	_, err := m.launchctl(ctx, "bootstrap", m.domain(), m.path())
	return err
}

// lingerAdvice says how to keep the service across logout and reboot
// when the user's manager does not linger. It is advice: enabling
// lingering is the user's (or an administrator's) call, never ours.
func (m Manager) lingerAdvice(ctx context.Context) {
	out, err := m.Run.Run(ctx, "loginctl", "show-user", m.Host.User, "--property=Linger", "--value")
	if err == nil && strings.TrimSpace(out) == "yes" {
		return
	}
	m.say("note: systemd stops your user services when your last session ends and starts them at your next login;")
	m.say("note: to keep aep-kimi running after you log out and start it at boot, run: loginctl enable-linger %s", m.Host.User)
}

// missingDirs are the directories the file's path needs that do not
// exist, parents first, and (systemd) the one enable links the unit in.
func (m Manager) missingDirs() []string {
	var dirs []string
	for d := filepath.Dir(m.path()); d != m.Host.Home && d != filepath.Dir(d); d = filepath.Dir(d) {
		if _, err := os.Lstat(d); err == nil {
			break
		}
		dirs = append([]string{d}, dirs...)
	}
	if m.Kind == Systemd {
		if _, err := os.Lstat(m.Host.wantsDir()); err != nil {
			dirs = append(dirs, m.Host.wantsDir())
		}
	}
	return dirs
}

// Uninstall stops and disables the service and removes the file Install
// wrote, then the directories it created when they are empty. A file it
// did not write is never removed; an edited one, or one the manager
// cannot be asked to stop, only with force.
func (m Manager) Uninstall(ctx context.Context, force bool) error {
	path := m.path()
	found, err := Inspect(m.Kind, path)
	if err != nil {
		return err
	}
	switch found.Ownership {
	case Absent:
		m.say("nothing to remove: %s does not exist", path)
		return nil
	case Foreign:
		return fmt.Errorf("%s was not written by aep-kimi service install: left alone", path)
	case Edited:
		if !force {
			return fmt.Errorf("%s was edited since aep-kimi service install wrote it: left alone (uninstall --force removes it)", path)
		}
	}
	if err := m.stop(ctx); err != nil {
		if !force {
			return fmt.Errorf("%w; nothing removed (uninstall --force removes the file anyway)", err)
		}
		m.say("note: %v", err)
	}
	if err := os.Remove(path); err != nil {
		return err
	}
	m.say("removed %s", path)
	if m.Kind == Systemd {
		if _, err := m.systemctl(ctx, "daemon-reload"); err != nil {
			m.say("note: %v", err)
		}
	}
	m.removeDirs(found.Created)
	return nil
}

// stop disables and stops the service.
func (m Manager) stop(ctx context.Context) error {
	if m.Kind == Systemd {
		_, err := m.systemctl(ctx, "disable", "--now", UnitName)
		return err
	}
	if _, err := m.launchctl(ctx, "bootout", m.target()); err != nil {
		// Not loaded is stopped already.
		if _, perr := m.launchctl(ctx, "print", m.target()); perr == nil {
			return err
		}
	}
	return nil
}

// removeDirs removes the directories Install created, deepest first, each
// only if it is empty and on the file's own path (or systemd's wants
// directory): a file may name others, and those stay.
func (m Manager) removeDirs(created []string) {
	ours := map[string]bool{m.Host.wantsDir(): m.Kind == Systemd}
	for d := filepath.Dir(m.path()); d != filepath.Dir(d); d = filepath.Dir(d) {
		ours[d] = true
	}
	dirs := slices.Clone(created)
	slices.SortFunc(dirs, func(a, b string) int { return len(b) - len(a) })
	for _, d := range dirs {
		if !ours[d] {
			continue
		}
		if err := os.Remove(d); err == nil {
			m.say("removed %s", d)
		} else if !errors.Is(err, os.ErrNotExist) {
			m.say("kept %s: not empty", d)
		}
	}
}

// Report is the service's state.
type Report struct {
	Kind      Kind
	Path      string
	Ownership Ownership
	// Enabled and Active are the manager's words ("enabled", "active",
	// "inactive", "failed", launchd's "running"...), or "unknown: why".
	Enabled, Active string
	// Linger is systemd's: "yes", "no" or "" (unknown).
	Linger string
}

// OK reports a service installed by Install, enabled and running.
func (r Report) OK() bool {
	return (r.Ownership == Ours || r.Ownership == Edited) && r.Enabled == "enabled" && (r.Active == "active" || r.Active == "running")
}

// WriteText prints r a fact a line.
func (r Report) WriteText(w io.Writer) error {
	whose := map[Ownership]string{
		Absent: "not installed", Ours: "installed by aep-kimi service install",
		Edited: "installed by aep-kimi service install, edited since", Foreign: "not written by aep-kimi service install",
	}[r.Ownership]
	var b strings.Builder
	fmt.Fprintf(&b, "file:    %s (%s)\n", r.Path, whose)
	fmt.Fprintf(&b, "enabled: %s\n", r.Enabled)
	fmt.Fprintf(&b, "active:  %s\n", r.Active)
	if r.Kind == Systemd {
		linger := r.Linger
		switch linger {
		case "":
			linger = "unknown"
		case "no":
			linger = "no (the service stops when you log out: loginctl enable-linger)"
		}
		fmt.Fprintf(&b, "linger:  %s\n", linger)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// Status reports the file and what the manager says of the service.
func (m Manager) Status(ctx context.Context) (Report, error) {
	r := Report{Kind: m.Kind, Path: m.path()}
	found, err := Inspect(m.Kind, r.Path)
	if err != nil {
		return r, err
	}
	r.Ownership = found.Ownership
	if m.Kind == Systemd {
		r.Enabled = m.word(ctx, "is-enabled")
		r.Active = m.word(ctx, "is-active")
		if out, err := m.Run.Run(ctx, "loginctl", "show-user", m.Host.User, "--property=Linger", "--value"); err == nil {
			r.Linger = strings.TrimSpace(out)
		}
		return r, nil
	}
	out, err := m.launchctl(ctx, "print", m.target())
	if err != nil {
		r.Active = "not loaded"
	} else {
		r.Active = "loaded"
		for _, line := range strings.Split(out, "\n") {
			if v, ok := strings.CutPrefix(strings.TrimSpace(line), "state = "); ok {
				r.Active = v
				break
			}
		}
	}
	r.Enabled = "enabled"
	if found.Ownership == Absent {
		r.Enabled = "not installed"
	}
	if out, err := m.launchctl(ctx, "print-disabled", m.domain()); err != nil {
		r.Enabled = "unknown: " + err.Error()
	} else if launchdDisabled(out) {
		r.Enabled = "disabled"
	}
	return r, nil
}

// word is systemctl --user's one-word answer to verb (is-enabled,
// is-active), which it prints also when it exits non-zero.
func (m Manager) word(ctx context.Context, verb string) string {
	out, err := m.systemctl(ctx, verb, UnitName)
	if w := strings.TrimSpace(out); w != "" {
		return w
	}
	if err != nil {
		return "unknown: " + err.Error()
	}
	return "unknown"
}

// launchdDisabled reads launchctl print-disabled's list for Label:
// `"LABEL" => disabled` (or `=> true` before macOS 13).
func launchdDisabled(out string) bool {
	for _, line := range strings.Split(out, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), "=>")
		if ok && strings.Trim(strings.TrimSpace(k), `"`) == Label {
			v = strings.TrimSpace(v)
			return v == "disabled" || v == "true"
		}
	}
	return false
}

package service

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// fakeManager plays systemctl --user, launchctl and loginctl: it records
// every call, links the unit into the wants directory on enable the way
// systemctl does (and unlinks it on disable), and answers from its state.
type fakeManager struct {
	host    Host
	calls   []string
	enabled bool
	active  bool
	linger  string
	// fail makes the call starting with this fail.
	fail string
}

func (f *fakeManager) Run(_ context.Context, name string, args ...string) (string, error) {
	call := strings.Join(append([]string{name}, args...), " ")
	f.calls = append(f.calls, call)
	if f.fail != "" && strings.HasPrefix(call, f.fail) {
		return "", errors.New(call + ": Failed to connect to bus")
	}
	link := filepath.Join(f.host.wantsDir(), UnitName)
	switch call {
	case "systemctl --user enable " + UnitName:
		if err := os.MkdirAll(f.host.wantsDir(), 0o755); err != nil {
			return "", err
		}
		f.enabled = true
		if err := os.Symlink(f.host.Path(Systemd), link); err != nil && !errors.Is(err, fs.ErrExist) {
			return "", err
		}
	case "systemctl --user restart " + UnitName:
		f.active = true
	case "systemctl --user disable --now " + UnitName:
		f.enabled, f.active = false, false
		if err := os.Remove(link); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return "", err
		}
	case "systemctl --user is-enabled " + UnitName:
		if f.enabled {
			return "enabled\n", nil
		}
		return "disabled\n", errors.New("exit status 1")
	case "systemctl --user is-active " + UnitName:
		if f.active {
			return "active\n", nil
		}
		return "inactive\n", errors.New("exit status 3")
	case "loginctl show-user op --property=Linger --value":
		return f.linger + "\n", nil
	}
	if name == "launchctl" {
		switch args[0] {
		case "bootstrap":
			f.active, f.enabled = true, true
		case "bootout":
			if !f.active {
				return "", errors.New("Boot-out failed: 3: No such process")
			}
			f.active = false
		case "print":
			if !f.active {
				return "", errors.New("Could not find service")
			}
			return "gui/501/" + Label + " = {\n\tstate = running\n\tpid = 42\n}\n", nil
		case "print-disabled":
			return "disabled services = {\n\t\"com.apple.x\" => disabled\n}\n", nil
		}
	}
	return "", nil
}

// tree lists every path under dir with its type, for "nothing left
// behind".
func tree(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		out = append(out, p+" "+d.Type().String())
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func testManager(t *testing.T, kind Kind) (Manager, *fakeManager, *bytes.Buffer) {
	t.Helper()
	h := Host{Home: t.TempDir(), UID: 501, User: "op"}
	f := &fakeManager{host: h, linger: "no"}
	var out bytes.Buffer
	return Manager{Kind: kind, Host: h, Run: f, Out: &out}, f, &out
}

func testSpec(m Manager, args ...string) Spec {
	return Spec{Exe: "/opt/aep/bin/aep-kimi", Args: args, Env: []string{"AEP_HOME=" + filepath.Join(m.Host.Home, ".aep")}}
}

// TestSystemdInstallUninstallLeavesNothing: install writes the unit in
// directories it makes, enables and starts it and advises lingering;
// status reads it back; uninstall stops it and removes the unit and every
// directory install made: the home is as it was. A second install with
// other flags restarts the service with them.
func TestSystemdInstallUninstallLeavesNothing(t *testing.T) {
	ctx := context.Background()
	m, f, out := testManager(t, Systemd)
	// A directory of the user's own on the way stays.
	if err := os.Mkdir(filepath.Join(m.Host.Home, ".config"), 0o755); err != nil {
		t.Fatal(err)
	}
	before := tree(t, m.Host.Home)

	if err := m.Install(ctx, testSpec(m, "--control"), false); err != nil {
		t.Fatal(err)
	}
	want := []string{"systemctl --user daemon-reload", "systemctl --user enable " + UnitName, "systemctl --user restart " + UnitName,
		"loginctl show-user op --property=Linger --value"}
	if !slices.Equal(f.calls, want) {
		t.Errorf("calls %q, want %q", f.calls, want)
	}
	data, err := os.ReadFile(m.Host.Path(Systemd))
	if err != nil || !bytes.Contains(data, []byte("ExecStart=/opt/aep/bin/aep-kimi up --control\n")) {
		t.Fatalf("unit %v:\n%s", err, data)
	}
	if st, _ := os.Stat(m.Host.Path(Systemd)); st.Mode().Perm() != FileMode {
		t.Errorf("unit mode %v", st.Mode())
	}
	if !strings.Contains(out.String(), "loginctl enable-linger op") {
		t.Errorf("no linger advice:\n%s", out)
	}
	r, err := m.Status(ctx)
	if err != nil || !r.OK() || r.Ownership != Ours || r.Linger != "no" {
		t.Errorf("status %+v %v", r, err)
	}

	f.calls = nil
	if err := m.Install(ctx, testSpec(m, "--control", "--web=false"), false); err != nil {
		t.Fatal(err)
	}
	data, _ = os.ReadFile(m.Host.Path(Systemd))
	if !bytes.Contains(data, []byte("up --control --web=false\n")) || !slices.Contains(f.calls, "systemctl --user restart "+UnitName) {
		t.Errorf("reinstall: calls %q\n%s", f.calls, data)
	}

	f.calls = nil
	if err := m.Uninstall(ctx, false); err != nil {
		t.Fatal(err)
	}
	if want := []string{"systemctl --user disable --now " + UnitName, "systemctl --user daemon-reload"}; !slices.Equal(f.calls, want) {
		t.Errorf("uninstall calls %q, want %q", f.calls, want)
	}
	if after := tree(t, m.Host.Home); !slices.Equal(after, before) {
		t.Errorf("left behind:\n%s\nwas:\n%s", strings.Join(after, "\n"), strings.Join(before, "\n"))
	}
	r, err = m.Status(ctx)
	if err != nil || r.OK() || r.Ownership != Absent {
		t.Errorf("status after uninstall %+v %v", r, err)
	}
	if err := m.Uninstall(ctx, false); err != nil || !strings.Contains(out.String(), "nothing to remove") {
		t.Errorf("second uninstall: %v\n%s", err, out)
	}
}

// TestLingerOnIsQuiet: no advice when the user's manager lingers.
func TestLingerOnIsQuiet(t *testing.T) {
	m, f, out := testManager(t, Systemd)
	f.linger = "yes"
	if err := m.Install(context.Background(), testSpec(m), false); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out.String(), "linger") {
		t.Errorf("linger advice though it lingers:\n%s", out)
	}
}

// TestEditedAndForeignUnitsAreLeftAlone: a unit edited since install is
// neither replaced nor removed without --force; one install did not write
// (no marker, or a link) never, not even with it.
func TestEditedAndForeignUnitsAreLeftAlone(t *testing.T) {
	ctx := context.Background()
	for _, kind := range []Kind{Systemd, Launchd} {
		t.Run(string(kind), func(t *testing.T) {
			m, f, _ := testManager(t, kind)
			path := m.Host.Path(kind)
			if err := m.Install(ctx, testSpec(m), false); err != nil {
				t.Fatal(err)
			}
			data, _ := os.ReadFile(path)
			edited := bytes.Replace(data, []byte("aep-kimi up"), []byte("aep-kimi  up"), 1)
			if kind == Launchd {
				edited = bytes.Replace(data, []byte("<string>up</string>"), []byte("<string>up</string><string>-v</string>"), 1)
			}
			if bytes.Equal(edited, data) {
				t.Fatal("nothing edited")
			}
			if err := os.WriteFile(path, edited, 0o644); err != nil {
				t.Fatal(err)
			}
			if r, _ := m.Status(ctx); r.Ownership != Edited {
				t.Errorf("status of an edited unit: %+v", r)
			}
			f.calls = nil
			err := m.Uninstall(ctx, false)
			if err == nil || !strings.Contains(err.Error(), "edited") || len(f.calls) != 0 {
				t.Errorf("uninstall of an edited unit: %v, calls %q", err, f.calls)
			}
			if err := m.Install(ctx, testSpec(m, "--web=false"), false); err == nil || !strings.Contains(err.Error(), "edited") {
				t.Errorf("install over an edited unit: %v", err)
			}
			if got, _ := os.ReadFile(path); !bytes.Equal(got, edited) {
				t.Fatal("the edited unit was changed")
			}
			if err := m.Uninstall(ctx, true); err != nil {
				t.Fatalf("uninstall --force: %v", err)
			}
			if _, err := os.Lstat(path); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("uninstall --force left %s", path)
			}

			// Not ours: a file without the marker, then a link to ours.
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				t.Fatal(err)
			}
			mine := bytes.Replace(data, []byte("aep-kimi service sha256="), []byte("my own service sha256="), 1)
			ours := filepath.Join(t.TempDir(), "ours")
			if err := os.WriteFile(ours, data, 0o644); err != nil {
				t.Fatal(err)
			}
			for name, plant := range map[string]func() error{
				"no marker": func() error { return os.WriteFile(path, mine, 0o644) },
				"a link":    func() error { return os.Symlink(ours, path) },
			} {
				if err := plant(); err != nil {
					t.Fatal(err)
				}
				for _, force := range []bool{false, true} {
					if err := m.Uninstall(ctx, force); err == nil || !strings.Contains(err.Error(), "not written by aep-kimi") {
						t.Errorf("%s: uninstall force=%v: %v", name, force, err)
					}
					if err := m.Install(ctx, testSpec(m), force); err == nil || !strings.Contains(err.Error(), "not written by aep-kimi") {
						t.Errorf("%s: install force=%v: %v", name, force, err)
					}
				}
				if _, err := os.Lstat(path); err != nil {
					t.Fatalf("%s: removed: %v", name, err)
				}
				if r, _ := m.Status(ctx); r.Ownership != Foreign {
					t.Errorf("%s: status %+v", name, r)
				}
				if err := os.Remove(path); err != nil {
					t.Fatal(err)
				}
			}
			if got, _ := os.ReadFile(ours); !bytes.Equal(got, data) {
				t.Error("the link's target was changed")
			}
		})
	}
}

// TestUninstallKeepsTheUnitWhenTheManagerCannotStopIt: a unit that may
// still run is not orphaned: nothing is removed unless forced.
func TestUninstallKeepsTheUnitWhenTheManagerCannotStopIt(t *testing.T) {
	ctx := context.Background()
	m, f, _ := testManager(t, Systemd)
	if err := m.Install(ctx, testSpec(m), false); err != nil {
		t.Fatal(err)
	}
	f.fail = "systemctl --user disable"
	if err := m.Uninstall(ctx, false); err == nil || !strings.Contains(err.Error(), "nothing removed") {
		t.Fatalf("uninstall: %v", err)
	}
	if r, _ := m.Status(ctx); r.Ownership != Ours {
		t.Fatalf("after a refused uninstall: %+v", r)
	}
	if err := m.Uninstall(ctx, true); err != nil {
		t.Fatal(err)
	}
	if r, _ := m.Status(ctx); r.Ownership != Absent {
		t.Fatalf("after uninstall --force: %+v", r)
	}
}

// TestInstallReportsAManagerItCannotReach: the unit is written (uninstall
// removes it) and the error says what to run in a login session.
func TestInstallReportsAManagerItCannotReach(t *testing.T) {
	m, f, _ := testManager(t, Systemd)
	f.fail = "systemctl --user daemon-reload"
	err := m.Install(context.Background(), testSpec(m), false)
	if err == nil || !strings.Contains(err.Error(), "is written, but") || !strings.Contains(err.Error(), "systemctl --user enable --now "+UnitName) {
		t.Fatalf("install: %v", err)
	}
	if r, _ := m.Status(context.Background()); r.Ownership != Ours || r.OK() {
		t.Fatalf("status: %+v", r)
	}
}

// TestLaunchdInstallUninstallLeavesNothing: the agent is bootstrapped in
// the user's gui domain (booted out first, so a reinstall takes the new
// plist) and booted out and removed again.
func TestLaunchdInstallUninstallLeavesNothing(t *testing.T) {
	ctx := context.Background()
	m, f, out := testManager(t, Launchd)
	if err := os.Mkdir(filepath.Join(m.Host.Home, "Library"), 0o755); err != nil {
		t.Fatal(err)
	}
	before := tree(t, m.Host.Home)
	s := testSpec(m)
	s.Log = filepath.Join(m.Host.Home, "Library", "Logs", "aep-kimi.log")
	if err := m.Install(ctx, s, false); err != nil {
		t.Fatal(err)
	}
	path := m.Host.Path(Launchd)
	want := []string{"launchctl bootout gui/501/" + Label, "launchctl enable gui/501/" + Label, "launchctl bootstrap gui/501 " + path}
	if !slices.Equal(f.calls, want) {
		t.Errorf("calls %q, want %q", f.calls, want)
	}
	if strings.Contains(out.String(), "linger") {
		t.Errorf("linger advice on macOS:\n%s", out)
	}
	if r, err := m.Status(ctx); err != nil || !r.OK() || r.Active != "running" {
		t.Errorf("status %+v %v", r, err)
	}
	f.calls = nil
	if err := m.Uninstall(ctx, false); err != nil {
		t.Fatal(err)
	}
	if want := []string{"launchctl bootout gui/501/" + Label}; !slices.Equal(f.calls, want) {
		t.Errorf("uninstall calls %q, want %q", f.calls, want)
	}
	if after := tree(t, m.Host.Home); !slices.Equal(after, before) {
		t.Errorf("left behind:\n%s", strings.Join(after, "\n"))
	}
}

// TestCreatedDirsOffThePathStay: an edited list of created directories
// cannot make uninstall remove anything but the unit's own directories.
func TestCreatedDirsOffThePathStay(t *testing.T) {
	ctx := context.Background()
	m, _, _ := testManager(t, Systemd)
	elsewhere := filepath.Join(m.Host.Home, "empty")
	if err := os.Mkdir(elsewhere, 0o700); err != nil {
		t.Fatal(err)
	}
	s := testSpec(m)
	if err := os.MkdirAll(filepath.Dir(m.Host.Path(Systemd)), 0o700); err != nil {
		t.Fatal(err)
	}
	data, err := Render(Systemd, s, []string{elsewhere})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(m.Host.Path(Systemd), data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := m.Uninstall(ctx, false); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(elsewhere); err != nil {
		t.Errorf("%s was removed: %v", elsewhere, err)
	}
}

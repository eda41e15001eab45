package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"runtime"
	"slices"
	"strings"

	"github.com/aep-kimi/aep-kimi/internal/cli"
	"github.com/aep-kimi/aep-kimi/service"
)

// serviceEnv is the environment a service carries over from the shell
// that installs it: where things are, never a secret.
var serviceEnv = []string{"AEP_HOME", "KIMI_CODE_HOME", "AEP_TOKEN_FILE"}

// serviceDeps is what the service command reaches outside itself;
// tests replace it.
type serviceDeps struct {
	goos   string
	runner service.Runner
	exe    func() (string, error)
}

func realServiceDeps() serviceDeps {
	return serviceDeps{goos: runtime.GOOS, runner: service.Exec{}, exe: os.Executable}
}

// serviceCommand is `aep-kimi service`: up as the user's own service.
func serviceCommand(getenv func(string) string, std stdio) cli.Command {
	return serviceCommandWith(getenv, std, realServiceDeps())
}

func serviceCommandWith(getenv func(string) string, std stdio, deps serviceDeps) cli.Command {
	upFlags := "[-- UP-FLAGS...]"
	return cli.Command{
		Name:    "service",
		Summary: "keep aep-kimi up running as your user service (systemd --user or launchd)",
		About: "install writes a systemd --user unit (Linux) or a launchd agent (macOS) that runs\n" +
			"`aep-kimi up UP-FLAGS` and restarts it when it fails, then enables and starts it; run it again to\n" +
			"change the flags. The unit holds no secret: an inline notify URL or OTLP header is refused\n" +
			"(give @FILE), and tokens stay in their 0600 files under $AEP_HOME. Of the shell's environment\n" +
			"it keeps only " + strings.Join(serviceEnv, ", ") + ". uninstall stops the service and removes\n" +
			"exactly what install wrote; a file install did not write is never touched, and one edited\n" +
			"since only with --force. status reports it; print shows the file install would write.\n" +
			"On Linux, a user service stops at logout unless lingering is on: loginctl enable-linger.",
		Exit: "Exit codes: 0 ok (status: installed, enabled and running), 1 failed or not running, 2 usage.",
		Examples: []string{"aep-kimi service install -- --control --notify ntfy:@$HOME/.aep/ntfy-url",
			"aep-kimi service status", "aep-kimi service print", "aep-kimi service uninstall"},
		Modes: []cli.Command{
			{
				Name: "install", Forms: []string{"[--exe PATH] [--force] " + upFlags}, Args: cli.AnyArgs,
				Flags: func(fs *flag.FlagSet) cli.Run {
					exe := fs.String("exe", "", "the aep-kimi the service runs (default: this one)")
					force := fs.Bool("force", false, "replace a unit edited since install wrote it")
					return func(ctx context.Context, args []string) int {
						return serviceRun(std, "install", func() error {
							m, s, err := serviceSetup(getenv, std, deps, "", *exe, args)
							if err != nil {
								return err
							}
							shellNotes(getenv, std)
							return m.Install(ctx, s, *force)
						})
					}
				},
			},
			{
				Name: "uninstall", Forms: []string{"[--force]"}, Args: cli.NoArgs,
				Flags: func(fs *flag.FlagSet) cli.Run {
					force := fs.Bool("force", false, "remove a unit edited since install wrote it, or one the service manager cannot be asked to stop")
					return func(ctx context.Context, _ []string) int {
						return serviceRun(std, "uninstall", func() error {
							m, err := serviceManager(getenv, std, deps, "")
							if err != nil {
								return err
							}
							return m.Uninstall(ctx, *force)
						})
					}
				},
			},
			{
				Name: "status", Forms: []string{""}, Args: cli.NoArgs,
				Flags: func(*flag.FlagSet) cli.Run {
					return func(ctx context.Context, _ []string) int {
						ok := false
						code := serviceRun(std, "status", func() error {
							m, err := serviceManager(getenv, std, deps, "")
							if err != nil {
								return err
							}
							r, err := m.Status(ctx)
							if err != nil {
								return err
							}
							ok = r.OK()
							return r.WriteText(std.out)
						})
						if code == 0 && !ok {
							return 1
						}
						return code
					}
				},
			},
			{
				Name: "print", Forms: []string{"[--exe PATH] [--for systemd|launchd] " + upFlags}, Args: cli.AnyArgs,
				Flags: func(fs *flag.FlagSet) cli.Run {
					exe := fs.String("exe", "", "the aep-kimi the service runs (default: this one)")
					kind := fs.String("for", "", "the service manager: systemd or launchd (default: this platform's)")
					return func(_ context.Context, args []string) int {
						return serviceRun(std, "print", func() error {
							m, s, err := serviceSetup(getenv, std, deps, *kind, *exe, args)
							if err != nil {
								return err
							}
							_, data, _, err := m.Plan(s, true)
							if err != nil {
								return err
							}
							_, err = std.out.Write(data)
							return err
						})
					}
				},
			},
		},
	}
}

// serviceRun runs do for mode, printing its error as one line.
func serviceRun(std stdio, mode string, do func() error) int {
	err := do()
	if err == nil {
		return 0
	}
	fmt.Fprintf(std.err, "aep-kimi service %s: %s\n", mode, strings.ReplaceAll(err.Error(), "\n", " "))
	var ue usageErr
	if errors.As(err, &ue) {
		return cli.ExitUsage
	}
	return 1
}

// usageErr is a mistake in the command line: exit 2.
type usageErr struct{ error }

// shellNotes says which of up's variables set in this shell the service
// will not see.
func shellNotes(getenv func(string) string, std stdio) {
	var dropped []string
	for _, name := range upCommand(getenv, std).Env {
		if getenv(name) != "" && !slices.Contains(serviceEnv, name) {
			dropped = append(dropped, name)
		}
	}
	if len(dropped) > 0 {
		fmt.Fprintf(std.out, "note: the service does not see %s from this shell: give up's flags after --", strings.Join(dropped, ", "))
		if slices.Contains(dropped, "AEP_TOKEN") {
			fmt.Fprint(std.out, "; no token goes in the unit: the relay keeps $AEP_HOME/token, or reads the file $AEP_TOKEN_FILE names")
		}
		fmt.Fprintln(std.out)
	}
}

// serviceManager is the manager for kind ("": this platform's) and this
// user.
func serviceManager(getenv func(string) string, std stdio, deps serviceDeps, kind string) (service.Manager, error) {
	var k service.Kind
	var err error
	if kind != "" {
		k, err = service.ParseKind(kind)
		if err != nil {
			return service.Manager{}, usageErr{err}
		}
	} else if k, err = service.ForOS(deps.goos); err != nil {
		return service.Manager{}, err
	}
	home := getenv("HOME")
	if home == "" {
		return service.Manager{}, errors.New("$HOME is not set: the service lives in your home")
	}
	h := service.Host{Home: home, ConfigHome: getenv("XDG_CONFIG_HOME"), UID: os.Getuid(), User: getenv("USER")}
	if u, err := user.Current(); err == nil {
		h.User = u.Username
	}
	return service.Manager{Kind: k, Host: h, Run: deps.runner, Out: std.out}, nil
}

// serviceSetup is the manager and what the service runs: exe (default
// this executable) up upArgs, checked against up's own flags and for
// secrets, with the shell's serviceEnv.
func serviceSetup(getenv func(string) string, std stdio, deps serviceDeps, kind, exe string, upArgs []string) (service.Manager, service.Spec, error) {
	m, err := serviceManager(getenv, std, deps, kind)
	if err != nil {
		return m, service.Spec{}, err
	}
	if exe == "" {
		if exe, err = deps.exe(); err != nil {
			return m, service.Spec{}, fmt.Errorf("cannot tell where aep-kimi is (%w): give --exe PATH", err)
		}
		// npx runs packages from a cache npm may clear: a service pointing
		// there would stop starting one day.
		if strings.Contains(filepath.ToSlash(exe), "/_npx/") {
			return m, service.Spec{}, usageErr{fmt.Errorf("this aep-kimi runs from npx's cache (%s), which npm may clear: install it (npm install -g aep-kimi) and run its service install, or give --exe PATH", exe)}
		}
	}
	if exe, err = filepath.Abs(exe); err != nil {
		return m, service.Spec{}, err
	}
	// up's own flags parse them, so a mistake shows now and not at the
	// service's first start.
	up := upCommand(getenv, std)
	fs := up.FlagSet("aep-kimi up")
	up.Flags(fs)
	given := service.Record(fs)
	if err := fs.Parse(upArgs); err != nil {
		return m, service.Spec{}, usageErr{fmt.Errorf("up's flags: %w", err)}
	}
	if fs.NArg() > 0 {
		return m, service.Spec{}, usageErr{fmt.Errorf("up's flags: unexpected argument %q", fs.Arg(0))}
	}
	if err := service.CheckFlags(*given); err != nil {
		return m, service.Spec{}, usageErr{err}
	}
	s := service.Spec{Exe: exe, Args: upArgs}
	for _, name := range serviceEnv {
		v := getenv(name)
		if v == "" {
			continue
		}
		if !filepath.IsAbs(v) {
			return m, service.Spec{}, usageErr{fmt.Errorf("$%s=%q is relative: the service needs an absolute path", name, v)}
		}
		s.Env = append(s.Env, name+"="+v)
	}
	if m.Kind == service.Launchd {
		s.Log = filepath.Join(m.Host.Home, "Library", "Logs", "aep-kimi.log")
	}
	return m, s, nil
}

// Command aep-setup registers the AEP hook shim (kimi-hook) in Kimi Code's
// config.toml, removes it again, and checks the registration.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/aep-kimi/aep-kimi/internal/buildinfo"
	"github.com/aep-kimi/aep-kimi/internal/cli"
	"github.com/aep-kimi/aep-kimi/setup"
)

// Exit codes.
const (
	exitOK      = 0
	exitFailed  = 1
	exitUsage   = 2
	programName = "aep-setup"
)

// Environment variables read (only here).
const (
	envKimiHome    = "KIMI_CODE_HOME"
	envAEPHome     = "AEP_HOME"
	envHoldMs      = "AEP_ATTENTION_TIMEOUT_MS"
	envControl     = "AEP_KIMI_CONTROL"
	envHome        = "HOME"
	envPath        = "PATH"
	defaultKimiBin = "kimi"
	kimiHomeDir    = ".kimi-code"
	aepHomeDir     = ".aep"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], processEnv(), os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// env is the process surroundings run reads, injectable for tests.
type env struct {
	getenv     func(string) string
	executable func() (string, error)
}

func processEnv() env { return env{getenv: os.Getenv, executable: os.Executable} }

// usageError is a bad command line: exit 2 with one line.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return usageError{fmt.Sprintf(format, args...)} }

// options are the parsed flags of one subcommand.
type options struct {
	home, hookCmd, daemon, aepHome, kimi, kimiVersion string
	control, dryRun                                   bool
}

func run(ctx context.Context, args []string, e env, stdout, stderr io.Writer) int {
	p := cli.Program{Name: programName, Commands: commands(e, stdout, stderr), Out: stdout, Err: stderr,
		Version: func() string { return buildinfo.Get().Line(programName) }}
	return p.Main(ctx, args)
}

// commands is aep-setup's table: write, remove and check, each naming the
// agent (kimi-code) with its flags before or after it.
func commands(e env, stdout, stderr io.Writer) []cli.Command {
	return []cli.Command{
		{
			Name:    "write",
			Summary: "register the AEP hooks in Kimi's config.toml (or refresh them)",
			Forms: []string{setup.AgentKimiCode + " [--home DIR] [--hook-cmd PATH] [--daemon URL] [--aep-home DIR]\n" +
				"[--kimi PATH] [--kimi-version V] [--control] [--dry-run]"},
			About: "Appends one fenced block of [[hooks]] tables (one per event the installed Kimi accepts) to\n" +
				"config.toml, or refreshes the block in place; backs the file up first; writes nothing when\n" +
				"the block is already current.",
			Env:  []string{envKimiHome, envAEPHome, "AEP_KIMI_ADDR", envHoldMs, envControl, envPath},
			Exit: exitCodes,
			Examples: []string{"aep-setup write " + setup.AgentKimiCode,
				"aep-setup write " + setup.AgentKimiCode + " --dry-run --kimi-version 2.1.0"},
			Args: agentArgs, Interspersed: true,
			Flags: func(fs *flag.FlagSet) cli.Run {
				o := registerFlags(fs, "write", e)
				return func(ctx context.Context, args []string) int {
					return finish(stderr, checkAgent("write", args), func() error { return runWrite(ctx, *o, e, stdout, stderr) })
				}
			},
		},
		{
			Name:     "remove",
			Summary:  "remove the AEP hooks from Kimi's config.toml",
			Forms:    []string{setup.AgentKimiCode + " [--home DIR] [--dry-run]"},
			About:    "Strips the block (and unfenced kimi-hook tables); the rest of config.toml is byte-identical.",
			Env:      []string{envKimiHome},
			Exit:     exitCodes,
			Examples: []string{"aep-setup remove " + setup.AgentKimiCode},
			Args:     agentArgs, Interspersed: true,
			Flags: func(fs *flag.FlagSet) cli.Run {
				o := registerFlags(fs, "remove", e)
				return func(ctx context.Context, args []string) int {
					return finish(stderr, checkAgent("remove", args), func() error { return runRemove(ctx, *o, e, stdout) })
				}
			},
		},
		{
			Name:    "check",
			Summary: "report the hooks' registration, the Kimi version and the adapter's reachability",
			Forms: []string{setup.AgentKimiCode + " [--home DIR] [--daemon URL] [--kimi PATH] [--kimi-version V]\n" +
				"[--hook-cmd PATH] [--aep-home DIR] [--control]"},
			About: "Reports the Kimi version, expected and registered events, the block's state\n" +
				"(absent/current/stale/unfenced), the adapter's reachability and problems. When the adapter's\n" +
				"gate is on, the --control registration for its hold is expected, and a PreToolUse timeout\n" +
				"too short for the hold is a problem. When the running adapter reports its build, a kimi-hook\n" +
				"of another build (registered, or the one write would register) is a warning.",
			Env:      []string{envKimiHome, envAEPHome, "AEP_KIMI_ADDR", envHoldMs, envControl, envPath},
			Exit:     "Exit codes: 0 ok, 1 problems found (or failed), 2 usage error.",
			Examples: []string{"aep-setup check " + setup.AgentKimiCode},
			Args:     agentArgs, Interspersed: true,
			Flags: func(fs *flag.FlagSet) cli.Run {
				o := registerFlags(fs, "check", e)
				return func(ctx context.Context, args []string) int {
					err := checkAgent("check", args)
					if err == nil && o.dryRun {
						err = usagef("check: --dry-run does not apply (check never writes)")
					}
					if err != nil {
						return fail(stderr, err)
					}
					ok, err := runCheck(ctx, *o, e, stdout, stderr)
					if err != nil {
						return fail(stderr, err)
					}
					if !ok {
						return exitFailed
					}
					return exitOK
				}
			},
		},
	}
}

// exitCodes is the exit codes of write and remove.
const exitCodes = "Exit codes: 0 ok, 1 refused or failed, 2 usage error."

// agentArgs is the agent name every command takes: its absence is reported
// by checkAgent, which names the agents supported.
var agentArgs = cli.Args{Min: 0, Max: 1}

// checkAgent checks the positional agent name.
func checkAgent(cmd string, args []string) error {
	switch {
	case len(args) == 0:
		return usagef("%s: missing agent name (supported: %s)", cmd, setup.AgentKimiCode)
	case args[0] != setup.AgentKimiCode:
		return usagef("unknown agent %q (supported: %s)", args[0], setup.AgentKimiCode)
	}
	return nil
}

// finish runs do unless err (a usage mistake) is set, and maps the outcome
// to an exit code.
func finish(stderr io.Writer, err error, do func() error) int {
	if err == nil {
		err = do()
	}
	if err != nil {
		return fail(stderr, err)
	}
	return exitOK
}

// registerFlags registers cmd's flags on fs.
func registerFlags(fs *flag.FlagSet, cmd string, e env) *options {
	var o options
	fs.StringVar(&o.home, "home", "", "Kimi home holding config.toml ($"+envKimiHome+", else ~/"+kimiHomeDir+")")
	if cmd != "check" {
		fs.BoolVar(&o.dryRun, "dry-run", false, "change nothing; print what would be written")
	} else {
		// check never writes; the flag is accepted only to say so.
		fs.BoolVar(&o.dryRun, "dry-run", false, "not for check: it never writes")
	}
	if cmd == "remove" {
		return &o
	}
	fs.StringVar(&o.hookCmd, "hook-cmd", "", "kimi-hook executable (default: next to aep-setup, else on PATH)")
	// The adapter's own AEP_KIMI_ADDR names where it listens; the hooks
	// must point there too.
	daemon := setup.DefaultDaemonURL
	if addr := cli.EnvOr(e.getenv, "AEP_KIMI_ADDR", ""); addr != "" {
		daemon = "http://" + addr
	}
	fs.StringVar(&o.daemon, "daemon", daemon, "adapter URL (default http://$AEP_KIMI_ADDR when it is set)")
	fs.StringVar(&o.aepHome, "aep-home", "", "AEP state directory passed to kimi-hook ($"+envAEPHome+", else ~/"+aepHomeDir+")")
	fs.StringVar(&o.kimi, "kimi", defaultKimiBin, "kimi binary used to detect the version (a bare name is looked up on PATH)")
	fs.StringVar(&o.kimiVersion, "kimi-version", "", "skip detection; 0.32.0 and later get 20 events, older 16")
	fs.BoolVar(&o.control, "control", cli.EnvBool(e.getenv, envControl, false),
		"raise the PreToolUse timeout to fit the held permission gate (ceil($"+envHoldMs+"/1000)+10 s, default 60; "+
			"default on when $"+envControl+" is 1 or true)")
	return &o
}

// kimiHome resolves --home, $KIMI_CODE_HOME, ~/.kimi-code to an absolute path.
func kimiHome(o options, e env) (string, error) {
	return dirDefault(o.home, e.getenv(envKimiHome), kimiHomeDir, "--home", e)
}

func dirDefault(flagVal, envVal, homeRel, flagName string, e env) (string, error) {
	p := flagVal
	if p == "" {
		p = envVal
	}
	if p == "" {
		h := e.getenv(envHome)
		if h == "" {
			return "", usagef("$HOME is not set; pass %s", flagName)
		}
		p = filepath.Join(h, homeRel)
	}
	abs, err := filepath.Abs(p)
	if err != nil {
		return "", fmt.Errorf("%s %q: %w", flagName, p, err)
	}
	return abs, nil
}

// baseConfig builds the setup.Config shared by write and check.
func baseConfig(ctx context.Context, o options, e env, stderr io.Writer) (setup.Config, error) {
	var cfg setup.Config
	var err error
	if cfg.Home, err = kimiHome(o, e); err != nil {
		return cfg, err
	}
	if cfg.AEPHome, err = dirDefault(o.aepHome, e.getenv(envAEPHome), aepHomeDir, "--aep-home", e); err != nil {
		return cfg, err
	}
	cfg.DaemonURL = o.daemon
	cfg.Control = o.control
	if raw := strings.TrimSpace(e.getenv(envHoldMs)); raw != "" {
		ms, err := strconv.Atoi(raw)
		if err != nil || ms < 0 {
			return cfg, usagef("%s=%q is not a whole number of milliseconds", envHoldMs, raw)
		}
		cfg.HoldMs = ms
	}
	if cfg.KimiVersion, err = kimiVersion(ctx, o, e, stderr); err != nil {
		return cfg, err
	}
	return cfg, nil
}

// kimiVersion takes --kimi-version or asks the kimi binary; a kimi that
// cannot be run means "unknown" (the safe 16 events), with a note.
func kimiVersion(ctx context.Context, o options, e env, stderr io.Writer) (string, error) {
	if o.kimiVersion != "" {
		v, err := setup.ParseVersion(o.kimiVersion)
		if err != nil {
			return "", usagef("--kimi-version %q is not a version like 2.1.0", o.kimiVersion)
		}
		return v.String(), nil
	}
	bin := o.kimi
	if !strings.ContainsRune(bin, filepath.Separator) {
		found, ok := lookPath(bin, e.getenv(envPath))
		if !ok {
			note(stderr, "%q not found on PATH; registering the safe %d events (pass --kimi PATH or --kimi-version V)", bin, setup.BaseEventCount)
			return "", nil
		}
		bin = found
	}
	v, err := setup.DetectVersion(ctx, bin)
	if err != nil {
		note(stderr, "cannot tell the Kimi version (%v); registering the safe %d events", err, setup.BaseEventCount)
		return "", nil
	}
	return v, nil
}

// hookCmd resolves --hook-cmd, else kimi-hook next to this executable, else
// on PATH. The PATH hit is kept unresolved so a symlinked install survives
// upgrades.
func hookCmd(o options, e env) (string, error) {
	if o.hookCmd != "" {
		abs, err := filepath.Abs(o.hookCmd)
		if err != nil {
			return "", fmt.Errorf("--hook-cmd %q: %w", o.hookCmd, err)
		}
		return abs, nil
	}
	self := "aep-setup"
	if exe, err := e.executable(); err == nil {
		if resolved, err := filepath.EvalSymlinks(exe); err == nil {
			exe = resolved
		}
		self = exe
		if p := filepath.Join(filepath.Dir(exe), setup.HookCmdName); isExecutable(p) {
			return p, nil
		}
	}
	if p, ok := lookPath(setup.HookCmdName, e.getenv(envPath)); ok {
		return filepath.Abs(p)
	}
	return "", fmt.Errorf("cannot find %s next to %s or on PATH; pass --hook-cmd PATH", setup.HookCmdName, self)
}

// lookPath searches pathList (not the process's PATH, so tests can set it).
func lookPath(name, pathList string) (string, bool) {
	for _, dir := range filepath.SplitList(pathList) {
		if dir == "" {
			dir = "."
		}
		p := filepath.Join(dir, name)
		if isExecutable(p) {
			return p, true
		}
	}
	return "", false
}

func isExecutable(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0
}

func runWrite(ctx context.Context, o options, e env, stdout, stderr io.Writer) error {
	cfg, err := baseConfig(ctx, o, e, stderr)
	if err != nil {
		return err
	}
	if cfg.HookCmd, err = hookCmd(o, e); err != nil {
		return err
	}
	cfg.DryRun = o.dryRun
	res, err := setup.Write(ctx, cfg)
	if err != nil {
		return err
	}
	if !isExecutable(cfg.HookCmd) {
		note(stderr, "%s is not an executable file yet; Kimi will run it for every hook", cfg.HookCmd)
	}
	if filepath.Base(cfg.HookCmd) != setup.HookCmdName {
		note(stderr, "aep-setup recognises its hooks by the program name %s; if a Kimi settings save strips the fence lines, tables running %s will not be found and a re-run will add the block again",
			setup.HookCmdName, filepath.Base(cfg.HookCmd))
	}
	what := fmt.Sprintf("%d AEP hooks (%s)", len(res.Events), versionLabel(cfg.KimiVersion))
	switch {
	case !res.Changed:
		fmt.Fprintf(stdout, "%s: %s already holds the current block: %s; nothing written\n", programName, res.Path, what)
	case o.dryRun:
		fmt.Fprintf(stdout, "%s: dry run: would %s %s (block %s): %s; the block:\n",
			programName, verb(res.Created), res.Path, res.Before, what)
		_, err = stdout.Write(res.Block)
	case res.Created:
		fmt.Fprintf(stdout, "%s: created %s with %s\n", programName, res.Path, what)
	default:
		fmt.Fprintf(stdout, "%s: updated %s (block was %s): %s; backup %s\n", programName, res.Path, res.Before, what, res.Backup)
	}
	if err == nil && !o.dryRun {
		gateNote(ctx, cfg, stderr)
	}
	return err
}

// gateNote says what the running adapter makes of the registration just
// written: its gate follows it from the next call, without a restart, or
// it holds no call at all until it runs with --control.
func gateNote(ctx context.Context, cfg setup.Config, w io.Writer) {
	reachable, g := setup.AdapterGateNow(ctx, cfg)
	switch {
	case !reachable:
	case g == nil && cfg.Control:
		note(w, "the running adapter holds no tool call: restart it with --control (aep-kimi up --control) to hold them")
	case g != nil:
		note(w, "the running adapter holds the next tool call up to %s, then %s (no restart needed)",
			time.Duration(g.EffectiveHoldMs)*time.Millisecond, g.OnTimeout)
	}
}

func verb(created bool) string {
	if created {
		return "create"
	}
	return "update"
}

func versionLabel(v string) string {
	if v == "" {
		return "Kimi version unknown: the safe set"
	}
	return "Kimi " + v
}

func runRemove(ctx context.Context, o options, e env, stdout io.Writer) error {
	var cfg setup.Config
	var err error
	if cfg.Home, err = kimiHome(o, e); err != nil {
		return err
	}
	cfg.DryRun = o.dryRun
	res, err := setup.Remove(ctx, cfg)
	if err != nil {
		return err
	}
	switch {
	case !res.Changed:
		fmt.Fprintf(stdout, "%s: no AEP hooks in %s; nothing written\n", programName, res.Path)
	case o.dryRun:
		fmt.Fprintf(stdout, "%s: dry run: would remove %d block(s) and %d unfenced kimi-hook table(s) from %s\n", programName, res.Blocks, res.Unfenced, res.Path)
	default:
		fmt.Fprintf(stdout, "%s: removed %d block(s) and %d unfenced kimi-hook table(s) from %s; backup %s\n", programName, res.Blocks, res.Unfenced, res.Path, res.Backup)
	}
	return nil
}

func runCheck(ctx context.Context, o options, e env, stdout, stderr io.Writer) (bool, error) {
	cfg, err := baseConfig(ctx, o, e, stderr)
	if err != nil {
		return false, err
	}
	hook, hookErr := hookCmd(o, e)
	cfg.HookCmd = hook
	rep := setup.Check(ctx, cfg)
	if hookErr != nil {
		rep.Notes = append(rep.Notes, hookErr.Error())
	}
	if err := rep.WriteText(stdout); err != nil {
		return false, err
	}
	return rep.OK(), nil
}

func note(w io.Writer, format string, args ...any) {
	fmt.Fprintf(w, "%s: note: %s\n", programName, oneLine(fmt.Sprintf(format, args...)))
}

// fail prints err as one line and maps it to an exit code.
func fail(stderr io.Writer, err error) int {
	code := exitFailed
	var ue usageError
	if errors.As(err, &ue) || errors.Is(err, setup.ErrBadConfig) {
		code = exitUsage
	}
	fmt.Fprintf(stderr, "%s: %s\n", programName, oneLine(err.Error()))
	return code
}

// oneLine keeps a message on one line (a quoted value may hold a newline).
func oneLine(s string) string {
	return strings.NewReplacer("\r\n", " ", "\n", " ", "\r", " ").Replace(strings.TrimSpace(s))
}

package setup

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strings"
	"time"

	"github.com/aep-kimi/aep-kimi/internal/buildinfo"
	"github.com/aep-kimi/aep-kimi/mapping"
	"github.com/aep-kimi/aep-kimi/relay/consumer"
)

// DetectVersion runs `kimiPath --version` and returns the version it prints
// (e.g. "2.1.0"). The caller decides what an error means; Write and Check
// fall back to the safe 16 events.
func DetectVersion(ctx context.Context, kimiPath string) (string, error) {
	out, err := runVersion(ctx, DefaultVersionTimeout, kimiPath, "--version")
	if err != nil {
		return "", err
	}
	v, err := ParseVersion(out)
	if err != nil {
		return "", fmt.Errorf("%s --version printed %q: %w", kimiPath, firstLine(out), err)
	}
	return v.String(), nil
}

// runVersion runs prog with args (ending in --version) within timeout and
// returns what it prints on stdout; an error names prog and quotes the
// first line of its stderr.
func runVersion(ctx context.Context, timeout time.Duration, prog string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, prog, args...)
	cmd.WaitDelay = time.Second
	out, err := cmd.Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) && len(ee.Stderr) > 0 {
			return "", fmt.Errorf("%s --version: %w: %s", prog, err, firstLine(string(ee.Stderr)))
		}
		return "", fmt.Errorf("%s --version: %w", prog, err)
	}
	return string(out), nil
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	return s
}

// Report is what Check found.
type Report struct {
	Path        string
	KimiVersion string // "" when unknown
	Expected    []string
	Registered  []string // events of our tables, fenced or not, in file order
	State       BlockState
	// StateDetail says what differs when State is stale.
	StateDetail string
	// HookPrograms are the distinct kimi-hook paths our tables run.
	HookPrograms []string
	DaemonURL    string
	// DaemonStatus is the health probe's outcome ("200 OK" or the error).
	DaemonStatus    string
	DaemonReachable bool
	// AdapterBuild is the build the running adapter reports (nil: not
	// reachable, or too old to say).
	AdapterBuild *buildinfo.Info
	// Problems make Check fail; Notes and Warnings do not. A warning is
	// something likely to go wrong: a kimi-hook of another build than the
	// running adapter.
	Problems []string
	Warnings []string
	Notes    []string
}

// OK reports whether Check found no problems.
func (r Report) OK() bool { return len(r.Problems) == 0 }

// Check inspects cfg.Home/config.toml without changing it: the block's state
// against what Write would produce from cfg, the events registered, whether
// Kimi would accept the hooks section, whether the hook program exists, and
// whether the adapter answers GET <daemon>/healthz within
// cfg.HealthTimeout (reported, never a problem: the adapter may simply not be
// running yet). When the adapter's gate is on, the registration expected is
// the --control one for its hold, and a PreToolUse timeout shorter than the
// gate needs is a problem. When the adapter reports its build, each
// kimi-hook registered or named by cfg.HookCmd of another build is a
// warning. An empty cfg.HookCmd means "compare against the registered
// kimi-hook path".
func Check(ctx context.Context, cfg Config) Report {
	holdSet := cfg.HoldMs != 0
	cfg, err := cfg.withDefaults()
	r := Report{
		KimiVersion: cfg.KimiVersion,
		Expected:    cfg.Events(),
		DaemonURL:   cfg.DaemonURL,
		State:       StateAbsent,
	}
	if err != nil {
		r.problem("%v", err)
	}
	if !cfg.VersionKnown() {
		r.KimiVersion = ""
		r.Notes = append(r.Notes, fmt.Sprintf("Kimi version unknown: expecting the safe %d events", BaseEventCount))
	}
	var gate *AdapterGate
	r.DaemonReachable, r.DaemonStatus, gate, r.AdapterBuild = probeHealth(ctx, cfg)
	if gate != nil {
		// The running adapter holds tool calls: the registration it needs
		// is the --control one, for its hold.
		cfg.Control = true
		if !holdSet {
			cfg.HoldMs = int(gate.HoldMs)
		}
		r.Notes = append(r.Notes, fmt.Sprintf("the adapter's gate is on (holds a tool call up to %s, then %s): expecting the --control registration",
			time.Duration(gate.HoldMs)*time.Millisecond, gate.OnTimeout))
	} else if !cfg.Control {
		r.acceptControl(&cfg, holdSet)
	}
	r.checkFile(cfg, gate)
	if r.AdapterBuild != nil {
		r.compareHooks(ctx, cfg.HookCmd, *r.AdapterBuild)
	}
	return r
}

// compareHooks warns of each kimi-hook that is not the running adapter's
// build: those Kimi runs (registered) and hookCmd, the one a write would
// register. Mixed builds may not speak the same protocol.
func (r *Report) compareHooks(ctx context.Context, hookCmd string, adapter buildinfo.Info) {
	hooks := slices.Clone(r.HookPrograms)
	if hookCmd != "" && !slices.Contains(hooks, hookCmd) && checkExecutable(hookCmd) == nil {
		hooks = append(hooks, hookCmd)
	}
	fix := "install kimi-hook and aep-kimi from one release, then restart the adapter"
	for _, h := range hooks {
		if checkExecutable(h) != nil {
			continue // a problem already
		}
		hb, err := HookBuild(ctx, h)
		switch {
		case err != nil:
			r.Warnings = append(r.Warnings, fmt.Sprintf("cannot tell which build %s is (%v), while the running adapter is %s: %s",
				h, err, buildLabel(adapter), fix))
		case buildinfo.Differs(hb, adapter):
			r.Warnings = append(r.Warnings, fmt.Sprintf("%s is %s but the running adapter is %s: %s",
				h, buildLabel(hb), buildLabel(adapter), fix))
		}
	}
}

// buildLabel names a build in a warning, its commit as short as
// kimi-hook --version prints it.
func buildLabel(in buildinfo.Info) string {
	return fmt.Sprintf("version %s (commit %s)", in.Version, in.ShortCommit())
}

// acceptControl takes a --control registration as meant when the gate is
// not known to be on (the adapter stopped, or running without it): the hooks
// work either way, and rewriting them plain would undo control for the
// next `aep-kimi up --control`. cfg then expects that registration.
func (r *Report) acceptControl(cfg *Config, holdSet bool) {
	reg, err := Registered(cfg.Home)
	pre, ok := reg[mapping.HookPreToolUse]
	if err != nil || !ok || pre.Timeout <= DefaultHookTimeout {
		return
	}
	cfg.Control = true
	if !holdSet {
		cfg.HoldMs = (pre.Timeout - GateTimeoutSlack) * 1000
	}
	gate := "the adapter is not running: the gate holds tool calls when it runs with --control (aep-kimi up --control)"
	if r.DaemonReachable {
		gate = "the running adapter's gate is off, so no call is held: restart it with --control (aep-kimi up --control) to hold them, " +
			"or run `" + WriteCommand(Config{}) + "` to register without control"
	}
	r.Notes = append(r.Notes, fmt.Sprintf("registered with --control (PreToolUse timeout %ds); %s", pre.Timeout, gate))
}

// AdapterGateNow probes the adapter cfg names: whether it answers, and
// its gate when the gate is on (nil otherwise).
func AdapterGateNow(ctx context.Context, cfg Config) (reachable bool, gate *AdapterGate) {
	cfg, _ = cfg.withDefaults()
	reachable, _, gate, _ = probeHealth(ctx, cfg)
	return reachable, gate
}

// AdapterGate is the gate timing the adapter reports on /healthz ("gate").
type AdapterGate struct {
	HoldMs int64 `json:"hold_ms"`
	// EffectiveHoldMs is what Kimi's registration lets the next call be
	// held.
	EffectiveHoldMs   int64  `json:"effective_hold_ms"`
	OnTimeout         string `json:"on_timeout"`
	NeedsKimiTimeoutS int    `json:"needs_kimi_timeout_s"`
}

// WriteCommand is the command that registers what cfg describes: with
// --control when the gate is on, and the hold it needs when that is not the
// default.
func WriteCommand(cfg Config) string {
	cmd := "aep-setup write " + AgentKimiCode
	if !cfg.Control {
		return cmd
	}
	cmd += " --control"
	if cfg.HoldMs > 0 && cfg.HoldMs != DefaultAttentionTimeoutMs {
		cmd = fmt.Sprintf("AEP_ATTENTION_TIMEOUT_MS=%d %s", cfg.HoldMs, cmd)
	}
	return cmd
}

func (r *Report) problem(format string, args ...any) {
	r.Problems = append(r.Problems, fmt.Sprintf(format, args...))
}

func (r *Report) checkFile(cfg Config, gate *AdapterGate) {
	fix := "`" + WriteCommand(cfg) + "`"
	if err := cfg.validateHome(); err != nil {
		r.problem("%v", err)
		return
	}
	cur, err := readConfig(cfg.ConfigPath())
	r.Path = cur.path
	if err != nil {
		r.State = StateInvalid
		r.problem("%v", err)
		return
	}
	if !cur.exists {
		r.problem("%s does not exist: run %s", cur.path, fix)
		return
	}
	l, err := analyze(cur.data)
	if err != nil {
		r.State = StateInvalid
		r.problem("%s: %v", cur.path, err)
		return
	}
	doc, _ := parseCheck(cur.data) // analyze already parsed it
	hooks, _ := doc["hooks"].([]any)
	got := map[string]hookSpec{}
	for _, e := range l.entries {
		if !e.ours() {
			continue
		}
		spec := specOf(hooks, e.index)
		if spec.event != "" {
			r.Registered = append(r.Registered, spec.event)
			got[spec.event] = spec
		}
		if p := commandProgram(spec.command); p != "" && !slices.Contains(r.HookPrograms, p) {
			r.HookPrograms = append(r.HookPrograms, p)
		}
	}
	if cfg.HookCmd == "" && len(r.HookPrograms) > 0 {
		cfg.HookCmd = r.HookPrograms[0]
		r.Notes = append(r.Notes, "comparing against the registered kimi-hook path "+cfg.HookCmd)
	}
	var merged []byte
	block, err := Render(cfg)
	if err == nil {
		merged, err = l.merge(block)
	}
	if err != nil {
		r.problem("aep-setup write would refuse: %v", err)
	}
	r.State = l.state(merged)
	if err := Validate(cur.data, cfg.acceptedEvents()); err != nil {
		r.problem("Kimi would ignore every hook in %s: %v", cur.path, err)
	}
	switch r.State {
	case StateAbsent:
		r.problem("no AEP hooks are registered: run %s", fix)
	case StateUnfenced:
		r.problem("the AEP hooks lost their fence lines (a Kimi settings save re-serializes config.toml): run %s to re-fence them", fix)
	case StateStale:
		if block != nil {
			r.StateDetail = staleDetail(cfg, got, len(l.blocks))
		}
		r.problem("the aep-setup block is stale (%s): run %s", r.StateDetail, fix)
	}
	if pre, ok := got[mapping.HookPreToolUse]; ok && gate != nil {
		t, isInt := pre.timeout.(int64)
		if !isInt {
			t = KimiDefaultHookTimeout
		}
		if int(t) < gate.NeedsKimiTimeoutS {
			r.problem("the adapter's gate holds a tool call up to %s, but Kimi's PreToolUse timeout is %ds (it needs %ds), so Kimi stops waiting first: run %s",
				time.Duration(gate.HoldMs)*time.Millisecond, t, gate.NeedsKimiTimeoutS, fix)
		}
	}
	for _, p := range r.HookPrograms {
		if err := checkExecutable(p); err != nil {
			r.problem("hook program %v", err)
		}
	}
}

// hookSpec is one hooks entry as Kimi sees it.
type hookSpec struct {
	event, command string
	timeout        any
}

func specOf(hooks []any, i int) hookSpec {
	if i >= len(hooks) {
		return hookSpec{}
	}
	m, _ := hooks[i].(map[string]any)
	ev, _ := m["event"].(string)
	cmd, _ := m["command"].(string)
	return hookSpec{event: ev, command: cmd, timeout: m["timeout"]}
}

// staleDetail names what differs between the registered tables and cfg's.
func staleDetail(cfg Config, got map[string]hookSpec, blocks int) string {
	var missing, extra, cmdDiff, timeoutDiff []string
	want := cfg.Events()
	for _, ev := range want {
		g, ok := got[ev]
		if !ok {
			missing = append(missing, ev)
			continue
		}
		t := cfg.HookTimeout(ev)
		if g.command != cfg.HookCommand(t) {
			cmdDiff = append(cmdDiff, ev)
		}
		if ti, ok := g.timeout.(int64); !ok || ti != int64(t) {
			timeoutDiff = append(timeoutDiff, fmt.Sprintf("%s %v (want %d)", ev, g.timeout, t))
		}
	}
	for ev := range got {
		if !slices.Contains(want, ev) {
			extra = append(extra, ev)
		}
	}
	slices.Sort(extra)
	var parts []string
	if len(missing) > 0 {
		parts = append(parts, "missing "+strings.Join(missing, ", "))
	}
	if len(extra) > 0 {
		parts = append(parts, "not for this Kimi "+strings.Join(extra, ", "))
	}
	if len(cmdDiff) == 1 {
		parts = append(parts, "command differs for "+cmdDiff[0])
	} else if len(cmdDiff) > 1 {
		parts = append(parts, fmt.Sprintf("command differs for %d events", len(cmdDiff)))
	}
	if len(timeoutDiff) > 0 {
		parts = append(parts, "timeout "+strings.Join(timeoutDiff, ", "))
	}
	if g, ok := got[mapping.HookPreToolUse]; ok && !cfg.Control {
		if ti, isInt := g.timeout.(int64); isInt && ti > DefaultHookTimeout {
			parts = append(parts, "written with --control?")
		}
	}
	if blocks > 1 {
		parts = append(parts, fmt.Sprintf("%d blocks", blocks))
	}
	if len(parts) == 0 {
		return "layout or comments differ"
	}
	return strings.Join(parts, "; ")
}

func checkExecutable(p string) error {
	fi, err := os.Stat(p)
	if err != nil {
		return fmt.Errorf("%s: %w", p, err)
	}
	if !fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0 {
		return fmt.Errorf("%s is not an executable file", p)
	}
	return nil
}

// probeHealth GETs <daemon>/healthz within the health timeout; gate is
// the adapter's gate report when it holds tool calls, build the build it
// reports (nil: none).
func probeHealth(ctx context.Context, cfg Config) (ok bool, status string, gate *AdapterGate, build *buildinfo.Info) {
	url := strings.TrimRight(cfg.DaemonURL, "/") + HealthPath
	ctx, cancel := context.WithTimeout(ctx, cfg.HealthTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return false, err.Error(), nil, nil
	}
	resp, err := cfg.HTTPClient.Do(req)
	if err != nil {
		return false, err.Error(), nil, nil
	}
	defer resp.Body.Close()
	var body struct {
		Gate  *AdapterGate    `json:"gate"`
		Build *buildinfo.Info `json:"build"`
	}
	// A 503 (logs not durable) still says which build answers.
	if json.NewDecoder(io.LimitReader(resp.Body, 1<<16)).Decode(&body) == nil {
		if resp.StatusCode == http.StatusOK && body.Gate != nil && body.Gate.HoldMs > 0 {
			gate = body.Gate
		}
		if b := body.Build; b != nil && b.Version != "" && b.Commit != "" {
			build = b
		}
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
	return true, resp.Status, gate, build
}

// WriteText prints the report for a person, one fact a line. Paths, what
// other programs printed (kimi-hook --version, the adapter's /healthz) and
// the messages quoting them go through consumer.Line: a control character
// or a newline in one cannot rewrite the screen or forge a line.
func (r Report) WriteText(w io.Writer) error {
	version := r.KimiVersion
	if version == "" {
		version = "unknown"
	}
	registered := "none"
	if len(r.Registered) > 0 {
		registered = fmt.Sprintf("%d: %s", len(r.Registered), strings.Join(r.Registered, " "))
	}
	state := string(r.State)
	if r.StateDetail != "" {
		state += " (" + r.StateDetail + ")"
	}
	adapter := "unreachable: " + r.DaemonStatus
	if r.DaemonReachable {
		adapter = "reachable: " + r.DaemonStatus
	}
	if r.AdapterBuild != nil {
		adapter += ", " + buildLabel(*r.AdapterBuild)
	}
	hook := "none registered"
	if len(r.HookPrograms) > 0 {
		hook = strings.Join(r.HookPrograms, " ")
	}
	var b strings.Builder
	fmt.Fprintf(&b, "config:     %s\n", consumer.Line(r.Path))
	fmt.Fprintf(&b, "kimi:       %s\n", consumer.Line(version))
	fmt.Fprintf(&b, "expected:   %d: %s\n", len(r.Expected), consumer.Line(strings.Join(r.Expected, " ")))
	fmt.Fprintf(&b, "registered: %s\n", consumer.Line(registered))
	fmt.Fprintf(&b, "block:      %s\n", consumer.Line(state))
	fmt.Fprintf(&b, "hook:       %s\n", consumer.Line(hook))
	fmt.Fprintf(&b, "adapter:    %s\n", consumer.Line(strings.TrimRight(r.DaemonURL, "/")+HealthPath+" "+adapter))
	for _, n := range r.Notes {
		fmt.Fprintf(&b, "note:       %s\n", consumer.Line(n))
	}
	for _, w := range r.Warnings {
		fmt.Fprintf(&b, "warning:    %s\n", consumer.Line(w))
	}
	if len(r.Problems) == 0 {
		b.WriteString("problems:   none\n")
	}
	for _, p := range r.Problems {
		fmt.Fprintf(&b, "problem:    %s\n", consumer.Line(p))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

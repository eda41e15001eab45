package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aep-kimi/aep-kimi/internal/testkit/kimiharness"
	"github.com/aep-kimi/aep-kimi/internal/testkit/netaddr"
	"github.com/aep-kimi/aep-kimi/internal/testkit/npmtest"
	"github.com/aep-kimi/aep-kimi/internal/testkit/stacktest"
	"github.com/aep-kimi/aep-kimi/internal/testkit/syncbuf"
	"github.com/aep-kimi/aep-kimi/mapping"
	"github.com/aep-kimi/aep-kimi/setup"
)

// shBlocks returns text's ```sh blocks in order, indented ones included.
func shBlocks(text string) []string {
	var blocks []string
	for _, m := range regexp.MustCompile("(?sm)^ *```sh\n(.*?)^ *```").FindAllStringSubmatch(text, -1) {
		var lines []string
		for _, l := range strings.Split(strings.TrimSpace(m[1]), "\n") {
			lines = append(lines, strings.TrimSpace(l))
		}
		blocks = append(blocks, strings.Join(lines, "\n"))
	}
	return blocks
}

// blockCommands are a block's command lines without comments or blank lines.
func blockCommands(block string) []string {
	var out []string
	for _, line := range strings.Split(block, "\n") {
		if cmd := strings.TrimSpace(strings.SplitN(line, "#", 2)[0]); cmd != "" {
			out = append(out, cmd)
		}
	}
	return out
}

// firstHour is what the README's opening section, "Your first ten
// minutes", tells a stranger to run.
type firstHour struct {
	Kimi    string // installs Kimi Code CLI
	install string // installs aep-kimi from npm
	Up      string // runs it
	clone   string // contributors: gets the code and enters it
	source  string // contributors: installs and runs it from the code
	Next    []string
	short   string // the unit tests
	full    string // every test, as CI runs them
	control []string
}

// firstTenMinutes reads the README's opening section, failing the test
// where it no longer says what a stranger needs in the order they need it.
func firstTenMinutes(t *testing.T) (string, firstHour) {
	t.Helper()
	root, text := stacktest.Readme(t)
	const heading = "## Your first ten minutes\n"
	start := strings.Index(text, "\n## ")
	if start < 0 || !strings.HasPrefix(text[start+1:], heading) {
		t.Fatalf("the README's first section is not %q", strings.TrimSpace(heading))
	}
	section := text[start+1:]
	if end := strings.Index(section[len(heading):], "\n## "); end >= 0 {
		section = section[:len(heading)+end]
	}
	blocks := shBlocks(section)
	if len(blocks) != 5 {
		t.Fatalf("the first section has %d sh blocks, want 5 (install Kimi, install and run from npm, from source, next steps, tests):\n%s", len(blocks), section)
	}
	var fh firstHour
	if c := blockCommands(blocks[0]); len(c) != 1 || c[0] != "npm install -g "+kimiharness.KimiPackage {
		t.Errorf("the Kimi install is %q, want npm install -g %s", c, kimiharness.KimiPackage)
	} else {
		fh.Kimi = c[0]
	}
	if !strings.Contains(blocks[0], kimiharness.KimiVersion) {
		t.Errorf("the Kimi install does not name the version the tests pin (%s): %q", kimiharness.KimiVersion, blocks[0])
	}
	node := strings.SplitN(kimiharness.NodeVersion, ".", 2)[0]
	if !strings.Contains(section, "Node "+node) || !strings.Contains(section, "Node 20 fails") {
		t.Errorf("the prerequisites do not name Node %s (the harness's) and that Node 20 fails", node)
	}
	// Nobody needs Go to run it: npm first, the same way Kimi came.
	npm := blockCommands(blocks[1])
	if len(npm) != 2 || npm[0] != "npm install -g "+npmtest.Main || npm[1] != "aep-kimi up" {
		t.Fatalf("the npm block is %q, want npm install -g %s then aep-kimi up", npm, npmtest.Main)
	}
	fh.install, fh.Up = npm[0], npm[1]
	if !strings.Contains(section, "`npx aep-kimi up`") {
		t.Errorf("the first section does not offer `npx aep-kimi up`")
	}
	const installLink = "(docs/install.md)"
	if _, err := os.Stat(filepath.Join(root, "docs", "install.md")); err != nil || !strings.Contains(section, installLink) {
		t.Errorf("the first section does not link %s (%v)", installLink, err)
	}
	gomod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	module := regexp.MustCompile(`(?m)^module (\S+)$`).FindSubmatch(gomod)
	goVersion := regexp.MustCompile(`(?m)^go (\S+)$`).FindSubmatch(gomod)
	if module == nil || goVersion == nil {
		t.Fatalf("go.mod has no module or go line")
	}
	if !strings.Contains(section, "**Go "+string(goVersion[1])+"** or newer") {
		t.Errorf("the contributors' path does not name go.mod's Go %s", goVersion[1])
	}
	get := blockCommands(blocks[2])
	wantClone := fmt.Sprintf("git clone https://%s && cd %s", module[1], path.Base(string(module[1])))
	if len(get) != 2 || get[0] != wantClone || !strings.Contains(get[1], "go install ./cmd/...") || !strings.Contains(get[1], "aep-kimi up") {
		t.Fatalf("the from-source block is %q, want %q then go install ./cmd/... and aep-kimi up", get, wantClone)
	}
	fh.clone, fh.source = get[0], get[1]
	fh.Next = blockCommands(blocks[3])
	if len(fh.Next) != 2 || fh.Next[0] != "aep-setup write kimi-code" || fh.Next[1] != "aep-kimi tail" {
		t.Fatalf("README's next steps are %q, want aep-setup write kimi-code then aep-kimi tail", fh.Next)
	}
	tests := blockCommands(blocks[4])
	if len(tests) != 2 || tests[0] != "go test -short ./..." {
		t.Fatalf("the tests block is %q, want go test -short ./... then the full run", tests)
	}
	fh.short, fh.full = tests[0], tests[1]
	ci, err := os.ReadFile(filepath.Join(root, ".ci", "run"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(ci), "\n"+fh.full+"\n") {
		t.Errorf(".ci/run does not run the README's test command %q", fh.full)
	}
	// Control in one place: both halves named, the details linked.
	const controlHeading, controlLink = "# Control: answering and steering (opt-in)\n", "(docs/control.md)"
	fh.control = []string{"aep-kimi up --control", "aep-setup write kimi-code --control"}
	for _, c := range fh.control {
		if !strings.Contains(section, "`"+c+"`") {
			t.Errorf("the first section does not say `%s`", c)
		}
	}
	control, err := os.ReadFile(filepath.Join(root, "docs", "control.md"))
	if err != nil || !strings.Contains(section, controlLink) || !strings.HasPrefix(string(control), controlHeading) {
		t.Errorf("the first section does not link %s, a page headed %q (%v)", controlLink, strings.TrimSpace(controlHeading), err)
	}
	return root, fh
}

// TestREADMEFirstTenMinutes checks the README's opening against what it
// describes: the npm package, go.mod's Go, the Kimi package and Node the
// harness installs, the module's clone URL, the test command CI runs,
// control's two halves.
func TestREADMEFirstTenMinutes(t *testing.T) {
	firstTenMinutes(t)
}

// startUp runs cmdline (one that ends running aep-kimi up) with bash in
// its own process group and waits until the relay and the adapter answer
// /healthz; the test's end stops it with SIGTERM. It returns up's output.
func startUp(t *testing.T, dir string, env []string, cmdline, relayURL, adapterURL string) *syncbuf.Buffer {
	t.Helper()
	up := exec.Command("bash", "-c", cmdline)
	up.Dir = dir
	up.Env = env
	upOut := &syncbuf.Buffer{}
	up.Stdout, up.Stderr = upOut, upOut
	kimiharness.OwnGroup(up)
	if err := up.Start(); err != nil {
		t.Fatal(err)
	}
	upDone := make(chan error, 1)
	go func() { upDone <- up.Wait() }()
	t.Cleanup(func() {
		kimiharness.SignalGroup(up.Process, syscall.SIGTERM)
		select {
		case <-upDone:
		case <-time.After(15 * time.Second):
			kimiharness.SignalGroup(up.Process, syscall.SIGKILL)
			t.Error("aep-kimi up did not stop on SIGTERM")
		}
	})
	stacktest.WaitHealthy(t, adapterURL+"/healthz", upDone, upOut)
	stacktest.WaitHealthy(t, relayURL+"/healthz", upDone, upOut)
	return upOut
}

// TestREADMEQuickstart follows the README literally, as a stranger would on a
// clean machine: `npm install -g aep-kimi` (from a registry on loopback
// serving the packages release/npm.sh made), `aep-kimi up`, `aep-setup
// write kimi-code`, one real Kimi print-mode session, the events seen
// through `aep-kimi tail`, the hooks control needs registered by the
// first section's control line, and docs/team.md's people and audit commands.
func TestREADMEQuickstart(t *testing.T) {
	kimi := kimiharness.Require(t)
	set := stacktest.NpmPackages(t)
	_, fh := firstTenMinutes(t)

	scratch := t.TempDir()
	prefix := filepath.Join(scratch, "npm-global")
	nodeDir := filepath.Dir(kimiharness.Node(kimi))
	env, home, relayURL, adapterURL := stacktest.UserEnv(t, kimi, scratch, filepath.Join(prefix, "bin"), nodeDir)
	env = append(env, npmtest.Env(prefix)...)
	env = append(env, "npm_config_registry="+npmtest.Serve(t, set))

	// 1. Install and run.
	stacktest.RunShell(t, scratch, env, fh.install)
	upOut := startUp(t, scratch, env, fh.Up, relayURL, adapterURL)
	if out := upOut.String(); !strings.Contains(out, "aep-setup write kimi-code") || !strings.Contains(out, "aep-kimi tail") {
		t.Errorf("up did not print the next two commands:\n%s", out)
	}

	// 2. Register the hooks, exactly as printed.
	kimiHome := stacktest.WithProvider(t, home)
	stacktest.RunShell(t, scratch, env, fh.Next[0])
	if out := stacktest.RunShell(t, scratch, env, "kimi doctor"); !strings.Contains(out, "valid") {
		t.Fatalf("kimi doctor after %s: %s", fh.Next[0], out)
	}
	// 3-4. One real Kimi session, seen through the tail.
	stacktest.FirstSession(t, scratch, env, fh.Next[1])
	// Kimi waits on the hook: it runs the native binary, not the launcher.
	stacktest.AssertNativeHook(t, kimiHome, prefix)

	// 5. Control's hooks, as the first section says: the PreToolUse
	// timeout fits the gate's default hold.
	stacktest.RunShell(t, scratch, env, fh.control[1])
	reg, err := setup.Registered(kimiHome)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := reg[mapping.HookPreToolUse].Timeout, setup.DefaultAttentionTimeoutMs/1000+setup.GateTimeoutSlack; got != want {
		t.Errorf("after %q the PreToolUse timeout is %ds, want %ds", fh.control[1], got, want)
	}

	// 6. Running it for a team: docs/team.md's commands, as printed, on
	// this machine's relay: people added, listed and removed, then the
	// audit from the relay and from the logs.
	team := teamCommands(t)
	outs := map[string]string{}
	for _, c := range team {
		outs[c] = stacktest.RunShell(t, scratch, env, c)
	}
	var ci struct{ Name, Role, Capture, Token string }
	for c, out := range outs {
		if strings.Contains(c, "token add") && strings.Contains(c, "--json") {
			if err := json.Unmarshal([]byte(out), &ci); err != nil || ci.Token == "" || ci.Role != "watch" || ci.Capture != "metadata" {
				t.Errorf("%s: %v: %s", c, err, out)
			}
		}
		if strings.HasPrefix(c, "aep-kimi audit") && !strings.Contains(c, ">") && !strings.Contains(c, "--json") &&
			!strings.Contains(out, "no attention request has an outcome yet") {
			t.Errorf("%s, with nothing answered yet: %s", c, out)
		}
	}
	if list := stacktest.RunShell(t, scratch, env, "aep-kimi token list"); !strings.Contains(list, ci.Name) || strings.Contains(list, ci.Token) {
		t.Errorf("token list after the README's commands, %s's token hidden: %s", ci.Name, list)
	}
	if csv, err := os.ReadFile(filepath.Join(scratch, "audit.csv")); err != nil || !strings.HasPrefix(string(csv), "time,session,label,request,") {
		t.Errorf("the README's audit.csv: %v %q", err, csv)
	}

	// npx runs the same package without installing it.
	if out := stacktest.RunShell(t, scratch, env, "npx --yes aep-kimi --help"); !strings.Contains(out, "usage: aep-kimi") {
		t.Errorf("npx aep-kimi --help: %s", out)
	}
}

// TestREADMEFromSource follows the contributors' path: the clone (this
// checkout) and its install-and-run line, into a scratch GOBIN, until up
// answers.
func TestREADMEFromSource(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: builds the binaries; skipped under -short")
	}
	root, fh := firstTenMinutes(t)
	scratch := t.TempDir()
	gobin := filepath.Join(scratch, "bin")
	home := filepath.Join(scratch, "home")
	for _, d := range []string{gobin, home} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	gocache, _ := exec.Command("go", "env", "GOCACHE").Output()
	gomodcache, _ := exec.Command("go", "env", "GOMODCACHE").Output()
	rport, aport := netaddr.FreePort(t), netaddr.FreePort(t)
	env := []string{
		"HOME=" + home,
		"PATH=" + gobin + string(os.PathListSeparator) + os.Getenv("PATH"),
		"GOBIN=" + gobin,
		"GOCACHE=" + strings.TrimSpace(string(gocache)),
		"GOMODCACHE=" + strings.TrimSpace(string(gomodcache)),
		"GOFLAGS=-buildvcs=false",
		fmt.Sprintf("AEP_PORT=%d", rport),
		fmt.Sprintf("AEP_KIMI_ADDR=127.0.0.1:%d", aport),
		fmt.Sprintf("AEP_KIMI_WEB_ADDR=127.0.0.1:%d", netaddr.FreePort(t)),
	}
	startUp(t, root, env, fh.source, fmt.Sprintf("http://127.0.0.1:%d", rport), fmt.Sprintf("http://127.0.0.1:%d", aport))
	for _, c := range []string{"aep-kimi", "kimi-hook", "aep-setup"} {
		if _, err := os.Stat(filepath.Join(gobin, c)); err != nil {
			t.Errorf("%q did not install %s: %v", fh.source, c, err)
		}
	}
}

// teamCommands are the people and audit commands of docs/team.md's sh
// blocks (its TLS commands start relays and are TestE2ETLS's), which must
// name each of token add, list and rm and the audit.
func teamCommands(t *testing.T) []string {
	t.Helper()
	root, _ := stacktest.Readme(t)
	page, err := os.ReadFile(filepath.Join(root, "docs", "team.md"))
	if err != nil {
		t.Fatal(err)
	}
	wants := []string{"aep-kimi token add", "aep-kimi token list", "aep-kimi token rm", "aep-kimi audit"}
	var cmds []string
	for _, b := range shBlocks(string(page)) {
		for _, c := range blockCommands(b) {
			if slices.ContainsFunc(wants, func(w string) bool { return strings.HasPrefix(c, w) }) {
				cmds = append(cmds, c)
			}
		}
	}
	for _, want := range wants {
		if !slices.ContainsFunc(cmds, func(c string) bool { return strings.HasPrefix(c, want) }) {
			t.Errorf("docs/team.md runs no %s: %q", want, cmds)
		}
	}
	return cmds
}

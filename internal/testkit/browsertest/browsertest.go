// Package browsertest drives a real Chromium for the fleet page's tests
// (chromedp over the DevTools protocol). Waits poll the page's own state with
// generous bounds, so a loaded machine makes a test slower, never flaky; on
// failure the page's screenshot and DOM are written for the reader.
package browsertest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/cdproto"
	"github.com/chromedp/cdproto/cdp"
	cdpruntime "github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/cdproto/target"
	"github.com/chromedp/chromedp"

	"github.com/aep-kimi/aep-kimi/internal/testkit/poll"
)

// Wait bounds one wait for the page to reach a state.
const Wait = 90 * time.Second

// EnvArtifacts names the directory failure screenshots go to; unset, they go
// to a fresh directory under the system temp dir (named in the test log).
const EnvArtifacts = "AEP_ARTIFACTS"

// browsers are the Chromium binaries tried, in order.
func browsers() [4]string {
	return [...]string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"}
}

// Find returns a Chromium binary or stops the test: skipped under -short,
// failed under CI when none is installed, else skipped with the reason.
func Find(t testing.TB) string {
	t.Helper()
	if testing.Short() {
		t.Skip("browser test: runs Chromium; skipped under -short")
	}
	for _, b := range browsers() {
		if p, err := exec.LookPath(b); err == nil {
			return p
		}
	}
	if os.Getenv("CI") != "" {
		t.Fatalf("CI is set but no Chromium is installed (tried %v; .ci/run installs Debian's chromium)", browsers())
	}
	t.Skipf("skipping: no Chromium (tried %v; apt-get install chromium)", browsers())
	return ""
}

// Browser is one headless Chromium tab.
type Browser struct {
	t      testing.TB
	Ctx    context.Context
	name   string // "" for the browser's first tab, "-tabN" for the Nth it opened
	tabs   int    // tabs opened with Tab
	width  int    // the window's size, the tabs' too
	height int
	root   context.Context      // the shared browser's first tab
	bctx   cdp.BrowserContextID // the test's browser context, the tabs' too
}

// New opens a tab in a browser context of its own (cookies, storage,
// permissions and service workers of its own: a fresh profile, in effect),
// closed when the test ends; width and height size its window (360 wide is
// a phone). The tabs of one test binary share one headless Chromium,
// started by the first: a browser costs more CPU to start than most tests
// spend in it.
func New(t testing.TB, width, height int) *Browser {
	t.Helper()
	bin := Find(t)
	browserCtx, err := shared.browser(bin)
	if err != nil {
		t.Fatalf("start %s: %v", bin, err)
	}
	c := chromedp.FromContext(browserCtx)
	bctx, err := target.CreateBrowserContext().WithDisposeOnDetach(true).Do(cdp.WithExecutor(browserCtx, c.Browser))
	if err != nil {
		t.Fatalf("a browser context in %s: %v", bin, err)
	}
	ctx, cancelTab, err := openTab(browserCtx, bctx, width, height)
	if err != nil {
		disposeBrowserContext(browserCtx, bctx)
		t.Fatalf("open a tab in %s: %v", bin, err)
	}
	return watch(t, &Browser{t: t, Ctx: ctx, width: width, height: height, root: browserCtx, bctx: bctx}, func() {
		cancelTab()
		disposeBrowserContext(browserCtx, bctx)
	})
}

// NewOwn is New with a Chromium of the test's own and a profile on disk,
// for what Chromium allows no context off the record: installing the page
// as an app. It costs a browser's start.
func NewOwn(t testing.TB, width, height int) *Browser {
	t.Helper()
	bin := Find(t)
	ctx, stop, err := start(bin, width, height)
	if err != nil {
		t.Fatalf("start %s: %v", bin, err)
	}
	return watch(t, &Browser{t: t, Ctx: ctx, width: width, height: height, root: ctx}, func() { stop(t) })
}

// watch logs b's page errors until the test ends, then writes a failed
// test's artifacts and closes b with end.
func watch(t testing.TB, b *Browser, end func()) *Browser {
	// The page's uncaught errors go to the test log, until the test ends.
	var mu sync.Mutex
	ended := false
	chromedp.ListenTarget(b.Ctx, func(ev any) {
		mu.Lock()
		defer mu.Unlock()
		if ended {
			return
		}
		if e, ok := ev.(*cdpruntime.EventExceptionThrown); ok && e.ExceptionDetails != nil {
			msg := e.ExceptionDetails.Text
			if e.ExceptionDetails.Exception != nil {
				msg += " " + e.ExceptionDetails.Exception.Description
			}
			t.Logf("page error: %s (%s:%d)", msg, e.ExceptionDetails.URL, e.ExceptionDetails.LineNumber)
		}
	})
	t.Cleanup(func() {
		if t.Failed() {
			b.artifacts()
		}
		mu.Lock()
		ended = true
		mu.Unlock()
		end()
	})
	return b
}

// openTab opens a tab in its own window of the browser context bctx,
// width by height (as --window-size sizes a browser's first window), and
// attaches to it; cancel closes it.
func openTab(browserCtx context.Context, bctx cdp.BrowserContextID, width, height int) (context.Context, context.CancelFunc, error) {
	c := chromedp.FromContext(browserCtx)
	id, err := target.CreateTarget("about:blank").WithBrowserContextID(bctx).WithNewWindow(true).
		WithWidth(int64(width)).WithHeight(int64(height)).Do(cdp.WithExecutor(browserCtx, c.Browser))
	if err != nil {
		return nil, nil, err
	}
	ctx, cancel := chromedp.NewContext(browserCtx, chromedp.WithTargetID(id))
	if err := chromedp.Run(ctx); err != nil {
		cancel()
		return nil, nil, err
	}
	// A tab chromedp.NewContext opens from this one joins its browser
	// context, as one opened with Tab does.
	chromedp.FromContext(ctx).BrowserContextID = bctx
	return ctx, cancel, nil
}

// disposeBrowserContext closes a browser context and all its tabs, within
// a bound of its own (the test's context may have ended).
func disposeBrowserContext(browserCtx context.Context, bctx cdp.BrowserContextID) {
	c := chromedp.FromContext(browserCtx)
	ctx, cancel := context.WithTimeout(browserCtx, 10*time.Second)
	defer cancel()
	target.DisposeBrowserContext(bctx).Do(cdp.WithExecutor(ctx, c.Browser)) //nolint:errcheck // the browser may be gone; nothing is left to close then
}

// shared is the Chromium of this test binary's browser tests. It is
// package state on purpose: one browser outlives the tests that use it.
var shared sharedBrowser

// sharedBrowser starts one headless Chromium on first use and again if it
// has gone (a crash ends only the tests running in it).
type sharedBrowser struct {
	mu  sync.Mutex
	ctx context.Context // the browser's first tab, never closed
}

func (s *sharedBrowser) browser(bin string) (context.Context, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ctx != nil && s.ctx.Err() == nil {
		return s.ctx, nil
	}
	// Never stopped: Chromium dies with the test binary (chromedp sets its
	// parent-death signal) and leaves its profile behind, so each start
	// removes those of binaries that have exited.
	removeStaleProfiles()
	ctx, _, err := start(bin, 0, 0)
	if err != nil {
		return nil, err
	}
	s.ctx = ctx
	return ctx, nil
}

// start starts a headless Chromium, its first window width by height
// (zero: Chromium's default), and returns its first tab and what stops
// it and removes its profile. Debian's Chromium now and then crashes as
// it starts (crashpad's "no stack mapping", no DevTools address): that
// says nothing about the page a test drives, and with one browser per test
// binary it would fail every browser test in it, so a failed start is
// tried again, startAttempts times in all.
func start(bin string, width, height int) (ctx context.Context, stop func(testing.TB), err error) {
	for range startAttempts {
		if ctx, stop, err = startOnce(bin, width, height); err == nil {
			return ctx, stop, nil
		}
	}
	return nil, nil, fmt.Errorf("%d starts: %w", startAttempts, err)
}

// startAttempts bounds start's tries.
const startAttempts = 3

// startOnce is one start of Chromium.
func startOnce(bin string, width, height int) (context.Context, func(testing.TB), error) {
	// Not t.TempDir: Chromium's helper processes can still be writing the
	// profile for a moment after the browser is gone, and a failed removal
	// there would fail the test. stop retries instead.
	profile, err := os.MkdirTemp("", fmt.Sprintf("%s%d-", profilePrefix, os.Getpid()))
	if err != nil {
		return nil, nil, fmt.Errorf("browser profile: %w", err)
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(bin),
		chromedp.NoSandbox, // CI runs as root, where Chromium's sandbox cannot start
		chromedp.DisableGPU,
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.UserDataDir(profile),
		// Notifications in Chromium's own message center, not the desktop's
		// (there is none): what a page shows stays listed until closed.
		chromedp.Flag("disable-features", "NativeNotifications"),
	)
	if width > 0 && height > 0 {
		opts = append(opts, chromedp.WindowSize(width, height))
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	stop := func(t testing.TB) {
		cancel()
		cancelAlloc()
		removeProfile(t, profile)
	}
	if err := chromedp.Run(ctx); err != nil {
		cancel()
		cancelAlloc()
		os.RemoveAll(profile)
		return nil, nil, err
	}
	return ctx, stop, nil
}

// removeProfile removes a browser profile, retrying while the browser's
// last helpers exit.
func removeProfile(t testing.TB, dir string) {
	var err error
	if poll.Until(2*time.Second, func() bool { err = os.RemoveAll(dir); return err == nil }) {
		return
	}
	t.Logf("browser profile %s left behind: %v", dir, err)
}

// profilePrefix starts the name of a shared browser's profile directory,
// followed by the test binary's process ID.
const profilePrefix = "aep-kimi-chromium-"

// removeStaleProfiles removes the profiles of shared browsers whose test
// binary is no longer running.
func removeStaleProfiles() {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), profilePrefix+"*"))
	for _, dir := range dirs {
		pidText, _, ok := strings.Cut(strings.TrimPrefix(filepath.Base(dir), profilePrefix), "-")
		pid, err := strconv.Atoi(pidText)
		if !ok || err != nil || pid == os.Getpid() || processExists(pid) {
			continue
		}
		os.RemoveAll(dir)
	}
}

// processExists reports whether a process pid is running (or a zombie).
func processExists(pid int) bool {
	p, err := os.FindProcess(pid)
	if err != nil {
		return false
	}
	err = p.Signal(syscall.Signal(0))
	return err == nil || errors.Is(err, syscall.EPERM)
}

// Tab opens another tab in b's browser context, as a person opens a new
// window: it shares b's cookies and local storage, not its session storage.
// closeTab closes it (the tab's page is gone, as when a phone closes an app);
// the test's end closes it too.
func (b *Browser) Tab() (tab *Browser, closeTab func()) {
	b.t.Helper()
	b.tabs++
	ctx, cancel, err := openTab(b.root, b.bctx, b.width, b.height)
	if err != nil {
		b.t.Fatalf("open a tab: %v", err)
	}
	tab = &Browser{t: b.t, Ctx: ctx, name: fmt.Sprintf("%s-tab%d", b.name, b.tabs), width: b.width, height: b.height, root: b.root, bctx: b.bctx}
	b.t.Cleanup(func() {
		if b.t.Failed() && ctx.Err() == nil {
			tab.artifacts()
		}
		cancel()
	})
	return tab, cancel
}

// Run runs actions within Wait.
func (b *Browser) Run(actions ...chromedp.Action) error {
	ctx, cancel := context.WithTimeout(b.Ctx, Wait)
	defer cancel()
	return chromedp.Run(ctx, actions...)
}

// MustRun runs actions within Wait and fails the test on error, naming what.
func (b *Browser) MustRun(what string, actions ...chromedp.Action) {
	b.t.Helper()
	if err := b.Run(actions...); err != nil {
		b.t.Fatalf("%s: %v", what, err)
	}
}

// Click clicks the element sel names (a CSS selector) with the mouse, as a
// person would, once it holds still. A page that redraws the element
// between finding it and clicking it (a live view does) gets another try,
// within Wait.
func (b *Browser) Click(what, sel string) {
	b.t.Helper()
	b.steady(sel)
	var err error
	if !poll.Until(Wait, func() bool {
		ctx, cancel := context.WithTimeout(b.Ctx, 10*time.Second)
		defer cancel()
		err = chromedp.Run(ctx, chromedp.Click(sel, chromedp.ByQuery))
		return err == nil || b.Ctx.Err() != nil
	}) || err != nil {
		b.t.Fatalf("click %s: %v", what, err)
	}
}

// ClickUntil clicks sel until done (a JavaScript expression) is true,
// up to three clicks: a box can still move after steady saw it still (a
// card redrawn taller by an event that came just then), and the mouse
// then clicks whatever took its place. Only for a click that is harmless
// to repeat (picking a choice), never for one that sends.
func (b *Browser) ClickUntil(what, sel, done string) {
	b.t.Helper()
	var err error
	for range 3 {
		b.Click(what, sel)
		if err = b.Within(done, 2*time.Second); err == nil {
			return
		}
	}
	b.t.Fatalf("click %s: three clicks, and still not %s: %v", what, done, err)
}

// steady waits, up to a few seconds, until sel's box is the same on two
// readings a frame or more apart. The mouse clicks where the box was: on
// a page still laying out (the pane that just opened, a list that just
// loaded above it) that is whatever moved into its place.
func (b *Browser) steady(sel string) {
	js := fmt.Sprintf(`(() => { const e = document.querySelector(%s); if (!e) return ''; const r = e.getBoundingClientRect(); return [r.x, r.y, r.width, r.height].join(','); })()`, Quote(sel))
	prev := ""
	poll.Until(3*time.Second, func() bool {
		var cur string
		if b.Run(chromedp.Evaluate(js, &cur)) != nil {
			return false
		}
		still := cur != "" && cur == prev
		prev = cur
		return still
	})
}

// WaitJS polls a JavaScript expression until it is truthy, within Wait.
func (b *Browser) WaitJS(what, expr string) {
	b.t.Helper()
	if err := b.Within(expr, Wait); err != nil {
		b.t.Fatalf("waiting for %s: %v", what, err)
	}
}

// Within polls until expr is true in the tab's page, for at most d. A
// page whose JavaScript context goes while it polls (a navigation that
// commits after chromedp.Navigate returned, a reload) is polled again in
// its new context: chromedp's poll evaluates in the context it began in
// and fails with "Cannot find context with specified id" once that is
// gone, which says nothing about expr.
func (b *Browser) Within(expr string, d time.Duration) error {
	ctx, cancel := context.WithTimeout(b.Ctx, d)
	defer cancel()
	for {
		err := chromedp.Run(ctx, chromedp.Poll(expr, nil, chromedp.WithPollingInterval(100*time.Millisecond), chromedp.WithPollingTimeout(d)))
		if err == nil || !lostContext(err) || ctx.Err() != nil {
			return err
		}
	}
}

// lostContext reports whether err is Chromium's answer to an evaluation
// in a JavaScript context that no longer exists.
func lostContext(err error) bool {
	var ce *cdproto.Error
	return errors.As(err, &ce) && ce.Message == "Cannot find context with specified id"
}

// Eval evaluates expr into out.
func (b *Browser) Eval(what, expr string, out any) {
	b.t.Helper()
	b.MustRun(what, chromedp.Evaluate(expr, out))
}

// EvalAwait evaluates expr, a promise, into what it resolves to.
func (b *Browser) EvalAwait(what, expr string, out any) {
	b.t.Helper()
	b.MustRun(what, chromedp.Evaluate(expr, out, func(p *cdpruntime.EvaluateParams) *cdpruntime.EvaluateParams { return p.WithAwaitPromise(true) }))
}

// AfterFrames wraps a JavaScript expression so that EvalAwait reads it once
// two animation frames have been drawn: what the user sees, after the
// observers that run before paint (a ResizeObserver) have run.
func AfterFrames(expr string) string {
	return `new Promise((done) => requestAnimationFrame(() => requestAnimationFrame(() => done(` + expr + `))))`
}

var unsafeName = regexp.MustCompile(`[^A-Za-z0-9._-]+`)

// artifacts writes the tab's screenshot and DOM for a failed test.
func (b *Browser) artifacts() {
	dir := os.Getenv(EnvArtifacts)
	if dir == "" {
		var err error
		if dir, err = os.MkdirTemp("", "aep-kimi-browser-"); err != nil {
			b.t.Logf("no artifacts: %v", err)
			return
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		b.t.Logf("no artifacts: %v", err)
		return
	}
	base := filepath.Join(dir, unsafeName.ReplaceAllString(b.t.Name()+b.name, "_"))
	ctx, cancel := context.WithTimeout(b.Ctx, 20*time.Second)
	defer cancel()
	var png []byte
	var html string
	err := chromedp.Run(ctx, chromedp.FullScreenshot(&png, 90), chromedp.OuterHTML("html", &html, chromedp.ByQuery))
	if err != nil {
		b.t.Logf("no screenshot: %v", err)
		return
	}
	for name, data := range map[string][]byte{base + ".png": png, base + ".html": []byte(html)} {
		if err := os.WriteFile(name, data, 0o644); err != nil {
			b.t.Logf("artifact %s: %v", name, err)
		}
	}
	b.t.Logf("failure artifacts: %s.png, %s.html", base, base)
}

// Quote renders s as a JavaScript string literal.
func Quote(s string) string { return fmt.Sprintf("%q", s) }

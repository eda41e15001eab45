// Command fleetpage measures the fleet page in a real Chromium at fleet size:
// the time from navigation to a fully rendered fleet with N sessions and M
// buffered events, the tab's memory, and, at a set live rate, the latency
// from the relay's fan-out to the DOM. Each figure has a same-run baseline:
// a plain Go consumer reading the same replay and the same live events from
// the same relay (the wire's floor), the same page over an empty relay, and
// a blank document in the same browser (the browser's floor).
//
//	go run ./bench/fleetpage                                  # 500 sessions, 50,000 events, 1,000 ev/s
//	go run ./bench/fleetpage -screenshot docs/fleet.png       # also the README's picture
//	go run ./bench/fleetpage -stress 8 -old DIR               # under a load of its own, against another build
package main

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/performance"
	"github.com/chromedp/cdproto/profiler"
	"github.com/chromedp/cdproto/tracing"
	"github.com/chromedp/chromedp"
	"github.com/coder/websocket"

	"github.com/aep-kimi/aep-kimi/aep"
	"github.com/aep-kimi/aep-kimi/fleetpage"
	"github.com/aep-kimi/aep-kimi/relay"
)

const token = "bench-fleetpage-token-0123456789"

type options struct {
	sessions, events, rate, runs int
	live                         time.Duration
	screenshot, chromium, old    string
	profile                      string
	trace, waterfall, network    bool
	stress                       int
	minLoad                      float64
}

func main() {
	var o options
	flag.IntVar(&o.sessions, "sessions", 500, "sessions the relay holds")
	flag.IntVar(&o.events, "events", 50000, "events buffered across them")
	flag.IntVar(&o.rate, "rate", 1000, "live events per second")
	flag.IntVar(&o.runs, "runs", 3, "runs (each page variant once per run, interleaved)")
	flag.DurationVar(&o.live, "live", 10*time.Second, "how long to send live events")
	flag.StringVar(&o.old, "old", "", "directories of other builds' page assets (app.js, state.js, style.css, index.html), comma-separated, each measured in the same runs as the embedded page")
	flag.StringVar(&o.profile, "profile", "", "write the embedded page's JavaScript CPU profile of the first run's live phase here (.cpuprofile) and print where the time went")
	flag.BoolVar(&o.trace, "trace", false, "trace Chromium's main thread during each variant's first live phase and print where its time went (script, style, layout, paint, ...)")
	flag.BoolVar(&o.waterfall, "waterfall", false, "print each first render's requests (start, first byte and end, ms since navigation) and the page's own marks: the first render's critical path")
	flag.BoolVar(&o.network, "inspect-network", false, "leave DevTools' network inspector on (chromedp turns it on; it copies and decodes every response body on the page's main thread), as the tool did before 2026-12-06")
	flag.StringVar(&o.screenshot, "screenshot", "", "write a screenshot of the loaded fleet view here (PNG)")
	flag.StringVar(&o.chromium, "chromium", "chromium", "the Chromium binary")
	flag.IntVar(&o.stress, "stress", 0, "load the machine with this many CPU-bound busy threads (a child process) for the whole measurement")
	flag.Float64Var(&o.minLoad, "min-load", defaultMinLoad, "with -stress, wait (up to 3 minutes) for the 1-minute load average to reach this before the first run")
	spin := flag.Int("spin", 0, "internal: be the -stress child, spinning this many threads until stdin closes")
	corpus := flag.String("corpus", "", "write the fleet's replay (each event as the page reads it, one JSON per line) to this file and exit: the input of apply.mjs")
	flag.Parse()
	if *spin > 0 {
		spinUntilEOF(*spin)
		return
	}
	if *corpus != "" {
		if err := writeCorpus(o, *corpus); err != nil {
			fmt.Fprintln(os.Stderr, "fleetpage bench:", err)
			os.Exit(1)
		}
		return
	}
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "fleetpage bench:", err)
		os.Exit(1)
	}
}

// variant is one build of the page: the embedded one, or another's assets.
type variant struct {
	name string
	dir  string // "" for the embedded assets
}

// result is one variant's figures in one run.
type result struct {
	load, emptyLoad, wire float64 // ms
	blank                 float64 // ms: a page of one paragraph, no script, same browser
	page, floor           []float64
	frames                []float64 // ms of script in each animation frame callback during the live phase
	styleLayout, script   float64   // ms over the live phase (Chromium's own accounting)
	loadAvg               []float64 // 1-minute load average, sampled each second of the live phase
	loadAvgAtLoad         float64   // and when the page was opened on the full relay
	heap, heap2           int64
}

// defaultMinLoad is the load average the page's goals are stated at.
const defaultMinLoad = 8

// spinUntilEOF keeps n OS threads busy (each counts in the load average)
// until the parent closes stdin or dies.
func spinUntilEOF(n int) {
	runtime.GOMAXPROCS(n + 1)
	for i := 0; i < n; i++ {
		go func() {
			runtime.LockOSThread()
			x := uint64(1)
			for {
				x = x*6364136223846793005 + 1442695040888963407
			}
		}()
	}
	_, _ = io.Copy(io.Discard, os.Stdin)
}

// startStress runs the -spin child and waits for the load average to reach
// minLoad; the function it returns stops the child.
func startStress(n int, minLoad float64) (func(), error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(exe, "-spin", strconv.Itoa(n))
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	// The child keeps nothing: killed at once. Should this process die
	// first, the child's stdin closes and it ends by itself.
	stop := func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		stdin.Close()
	}
	deadline := time.Now().Add(3 * time.Minute)
	for {
		l, err := loadAverage()
		if err != nil {
			stop()
			return nil, err
		}
		if l >= minLoad {
			fmt.Printf("stress: %d busy threads (pid %d), load average %.1f\n", n, cmd.Process.Pid, l)
			return stop, nil
		}
		if time.Now().After(deadline) {
			fmt.Printf("stress: %d busy threads, load average only %.1f after 3 minutes: measuring anyway\n", n, l)
			return stop, nil
		}
		time.Sleep(5 * time.Second)
	}
}

func run(o options) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	if o.stress > 0 {
		stop, err := startStress(o.stress, o.minLoad)
		if err != nil {
			return fmt.Errorf("stress: %w", err)
		}
		defer stop()
	}
	variants := []variant{{name: "page"}}
	for i, dir := range strings.Split(o.old, ",") {
		if dir == "" {
			continue
		}
		name := "old page"
		if i > 0 {
			name = fmt.Sprintf("old page %d", i+1)
		}
		variants = append(variants, variant{name: name, dir: dir})
	}
	all := map[string][]result{}
	for i := 0; i < o.runs; i++ {
		for k := range variants {
			// Interleave: the old build first in odd runs.
			v := variants[(k+i)%len(variants)]
			profile := ""
			if i == 0 && v.dir == "" {
				profile = o.profile
			}
			shot := ""
			if i == 0 && v.dir == "" {
				shot = o.screenshot
			}
			fmt.Printf("run %d, %s\n", i+1, v.name)
			r, err := measure(ctx, o, v, profile, shot, o.trace && i < len(variants))
			if err != nil {
				return fmt.Errorf("run %d, %s: %w", i+1, v.name, err)
			}
			printRun(r)
			all[v.name] = append(all[v.name], r)
		}
	}
	summarize(o, variants, all)
	return nil
}

func printRun(r result) {
	fmt.Printf("  load: page %.0f ms, empty relay %.0f ms, blank page %.0f ms, Go replay reader %.0f ms; JS heap %.1f MB; load average %.1f\n", r.load, r.emptyLoad, r.blank, r.wire, float64(r.heap)/(1<<20), r.loadAvgAtLoad)
	fmt.Printf("  live: page n=%d p50 %.1f p99 %.1f max %.1f ms; Go consumer n=%d p50 %.1f p99 %.1f ms; load average %.1f (%.1f-%.1f) sampled each second\n",
		len(r.page), pct(r.page, 50), pct(r.page, 99), pct(r.page, 100), len(r.floor), pct(r.floor, 50), pct(r.floor, 99),
		pct(r.loadAvg, 50), pct(r.loadAvg, 0), pct(r.loadAvg, 100))
	fmt.Printf("  frames: %d, script %.2f ms mean (p99 %.1f), style+layout %.2f ms per frame; all script %.0f ms; JS heap after %.1f MB\n",
		len(r.frames), mean(r.frames), pct(r.frames, 99), perFrame(r.styleLayout, r), r.script, float64(r.heap2)/(1<<20))
}

func perFrame(total float64, r result) float64 {
	if len(r.frames) == 0 {
		return 0
	}
	return total / float64(len(r.frames))
}

// figure is one number per run of a variant.
type figure struct {
	name string
	of   func(result) float64
}

var figures = []figure{
	{"first render, 500 sessions (ms)", func(r result) float64 { return r.load }},
	{"  same page, empty relay (ms)", func(r result) float64 { return r.emptyLoad }},
	{"  Go reader of the replay (ms)", func(r result) float64 { return r.wire }},
	{"  a blank page, same browser (ms)", func(r result) float64 { return r.blank }},
	{"live p99 post -> DOM (ms)", func(r result) float64 { return pct(r.page, 99) }},
	{"  live p50 (ms)", func(r result) float64 { return pct(r.page, 50) }},
	{"  Go WebSocket consumer p99 (ms)", func(r result) float64 { return pct(r.floor, 99) }},
	{"rendering per frame (ms)", func(r result) float64 { return mean(r.frames) + perFrame(r.styleLayout, r) }},
	{"  script per frame (ms)", func(r result) float64 { return mean(r.frames) }},
	{"  style+layout per frame (ms)", func(r result) float64 { return perFrame(r.styleLayout, r) }},
	{"  frames in the live phase", func(r result) float64 { return float64(len(r.frames)) }},
	{"  all script in the live phase (ms)", func(r result) float64 { return r.script }},
	{"load average during the live phase", func(r result) float64 { return pct(r.loadAvg, 50) }},
	{"load average at the first render", func(r result) float64 { return r.loadAvgAtLoad }},
	{"JS heap after live (MB)", func(r result) float64 { return float64(r.heap2) / (1 << 20) }},
}

func summarize(o options, variants []variant, all map[string][]result) {
	fmt.Printf("\n%d sessions, %d events buffered, %d ev/s live for %s; median (range) of %d runs\n", o.sessions, o.events, o.rate, o.live, o.runs)
	fmt.Printf("%-38s", "")
	for _, v := range variants {
		fmt.Printf("  %-24s", v.name)
	}
	fmt.Println()
	for _, f := range figures {
		fmt.Printf("%-38s", f.name)
		for _, v := range variants {
			var xs []float64
			for _, r := range all[v.name] {
				xs = append(xs, f.of(r))
			}
			fmt.Printf("  %-24s", fmt.Sprintf("%.2f (%.2f-%.2f)", pct(xs, 50), pct(xs, 0), pct(xs, 100)))
		}
		fmt.Println()
	}
	// Ratios within each run, then their median.
	ratio := func(name string, num, den func(result) float64, a, b string) {
		var xs []float64
		for i := range all[a] {
			if i < len(all[b]) && den(all[b][i]) > 0 {
				xs = append(xs, num(all[a][i])/den(all[b][i]))
			}
		}
		if len(xs) > 0 {
			fmt.Printf("%-58s %.2fx (%.2f-%.2f)\n", name, pct(xs, 50), pct(xs, 0), pct(xs, 100))
		}
	}
	fmt.Println("\nratios within each run (median, range)")
	p99 := func(r result) float64 { return pct(r.page, 99) }
	for _, v := range variants {
		ratio(v.name+": live p99 / Go consumer p99", p99, func(r result) float64 { return pct(r.floor, 99) }, v.name, v.name)
		ratio(v.name+": first render / Go replay reader", func(r result) float64 { return r.load }, func(r result) float64 { return r.wire }, v.name, v.name)
		ratio(v.name+": empty relay / blank page", func(r result) float64 { return r.emptyLoad }, func(r result) float64 { return r.blank }, v.name, v.name)
	}
	for _, v := range variants[1:] {
		a, b := variants[0].name, v.name
		ratio(a+" / "+b+": live p99", p99, p99, a, b)
		ratio(a+" / "+b+": rendering per frame", figures[6].of, figures[6].of, a, b)
		ratio(a+" / "+b+": first render", figures[0].of, figures[0].of, a, b)
		ratio(a+" / "+b+": first render, empty relay", figures[1].of, figures[1].of, a, b)
	}
}

// measure runs one variant once: fresh relays (one empty, one filled), a
// fresh browser, the load, then the live phase.
func measure(ctx context.Context, o options, v variant, profile, screenshot string, trace bool) (result, error) {
	var r result
	empty, stopEmpty, err := startRelay(ctx, v.dir)
	if err != nil {
		return r, err
	}
	defer stopEmpty()
	base, stop, err := startRelay(ctx, v.dir)
	if err != nil {
		return r, err
	}
	defer stop()

	claim, err := claimSessions(ctx, base, screenshotSessions)
	if err != nil {
		return r, err
	}
	defer claim.CloseNow() //nolint:errcheck // bench
	n, err := fill(ctx, base, o.sessions, o.events)
	if err != nil {
		return r, err
	}
	wire, err := replayFloor(ctx, base, n)
	if err != nil {
		return r, err
	}
	r.wire = float64(wire) / float64(time.Millisecond)

	browser, closeBrowser, err := newBrowser(ctx, o.chromium, o.network)
	if err != nil {
		return r, err
	}
	defer closeBrowser()
	var endEmptyTrace func() error
	if trace {
		if endEmptyTrace, err = startTrace(browser, "the empty relay's first render", 2); err != nil {
			return r, err
		}
	}
	if r.emptyLoad, err = load(browser, empty, 0, 0); err != nil {
		return r, fmt.Errorf("empty fleet: %w", err)
	}
	if endEmptyTrace != nil {
		if err := endEmptyTrace(); err != nil {
			return r, err
		}
	}
	if o.waterfall {
		if err := printWaterfall(browser, "empty relay"); err != nil {
			return r, err
		}
	}
	// After the empty relay, whose figure stays its browser's first
	// navigation: the blank page has the browser warm, a floor no higher.
	if r.blank, err = loadBlank(ctx, browser); err != nil {
		return r, fmt.Errorf("blank page: %w", err)
	}
	if profile != "" {
		if err := chromedp.Run(browser, profiler.Enable(), profiler.SetSamplingInterval(200), profiler.Start()); err != nil {
			return r, err
		}
	}
	r.loadAvgAtLoad, _ = loadAverage()
	var endLoadTrace func() error
	if trace {
		if endLoadTrace, err = startTrace(browser, "the first render", 20); err != nil {
			return r, err
		}
	}
	if r.load, err = load(browser, base, o.sessions, n); err != nil {
		return r, fmt.Errorf("full fleet: %w", err)
	}
	if endLoadTrace != nil {
		if err := endLoadTrace(); err != nil {
			return r, err
		}
	}
	if profile != "" {
		if err := stopProfile(browser, strings.TrimSuffix(profile, ".cpuprofile")+"-load.cpuprofile", "the load"); err != nil {
			return r, err
		}
	}
	if o.waterfall {
		if err := printWaterfall(browser, "full relay"); err != nil {
			return r, err
		}
	}
	if r.heap, _, err = memory(browser); err != nil {
		return r, err
	}
	if screenshot != "" {
		if err := shoot(browser, screenshot); err != nil {
			return r, err
		}
		fmt.Printf("  screenshot: %s\n", screenshot)
	}
	if err := liveLatency(ctx, browser, base, o, profile, trace, &r); err != nil {
		return r, err
	}
	if r.heap2, _, err = memory(browser); err != nil {
		return r, err
	}
	return r, nil
}

// oldAssets serves another build's page files in place of the embedded
// ones; everything else (login, auth) is the page's own.
type oldAssets struct {
	*fleetpage.Page
	dir string
}

func (a oldAssets) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	name := strings.TrimPrefix(r.URL.Path, "/app/")
	if r.URL.Path == "/" {
		name = "index.html"
	}
	if r.Method == http.MethodGet && name != r.URL.Path && !strings.ContainsAny(name, "/\\") {
		if _, err := os.Stat(filepath.Join(a.dir, name)); err == nil {
			http.ServeFile(w, r, filepath.Join(a.dir, name))
			return
		}
	}
	a.Page.ServeHTTP(w, r)
}

func startRelay(ctx context.Context, assets string) (string, func(), error) {
	page, err := fleetpage.New(fleetpage.Config{Token: token})
	if err != nil {
		return "", nil, err
	}
	var p relay.Page = page
	if assets != "" {
		p = oldAssets{Page: page, dir: assets}
	}
	srv, err := relay.NewServer(relay.Config{Token: token, Page: p})
	if err != nil {
		return "", nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	sctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { _ = srv.Serve(sctx, ln); close(done) }()
	return "http://" + ln.Addr().String(), func() { cancel(); <-done }, nil
}

// screenshotSessions are claimed by a live emitter socket, so their held
// requests show answer buttons.
const screenshotSessions = 3

func sessionID(i int) string { return fmt.Sprintf("kimi-%04d", i) }

var titles = []string{
	"fix the flaky relay resume test", "add --json to aep-kimi pending", "port the spool to Windows",
	"explain the epoch bump", "refactor mapping/synth.go", "write the bridge README", "bump chi to v5.2",
	"profile the SSE writer", "triage issue 12", "draft the release notes",
}

var tools = []string{"Bash", "ReadFile", "WriteFile", "Grep", "Glob", "StrReplaceFile", "SearchWeb", "Task"}

func event(session string, seq int, typ string, fields map[string]any) map[string]any {
	ev := map[string]any{
		"aep": "0.1", "id": aep.NewID(), "type": typ, "time": aep.FormatTime(time.Now()),
		"source": aep.SourceURI("bench", "kimi-code", session), "agent": "kimi-code", "session": session,
		"seq": seq, "epoch": 1,
	}
	for k, v := range fields {
		ev[k] = v
	}
	return ev
}

// sessionEvents is one session's story: start, a run of tool calls, and for
// some a held request or an end.
func sessionEvents(i, n int) []map[string]any {
	s := sessionID(i)
	run := fmt.Sprintf("r-%04d", i)
	evs := []map[string]any{event(s, 0, "session.started", map[string]any{"data": map[string]any{
		"label": titles[i%len(titles)], "gen_ai.request.model": "kimi-k2-turbo"}})}
	evs = append(evs, event(s, 1, "run.started", map[string]any{"run": run}))
	for len(evs) < n-2 {
		tool := tools[(i+len(evs))%len(tools)]
		call := fmt.Sprintf("c%d", len(evs))
		evs = append(evs,
			event(s, len(evs), "tool.requested", map[string]any{"run": run, "subject": tool, "data": map[string]any{"tool": map[string]any{"name": tool, "call_id": call}}}),
			event(s, len(evs)+1, "tool.completed", map[string]any{"run": run, "subject": tool, "data": map[string]any{"tool": map[string]any{"name": tool, "call_id": call}, "status": "success", "duration_ms": 40 + (i*7+len(evs))%900}}))
	}
	switch {
	case i < screenshotSessions || i%25 == 0:
		evs = append(evs, event(s, len(evs), "attention.requested", map[string]any{"run": run, "subject": "Bash", "capture": "redacted", "severity": "notice",
			"data": map[string]any{"kind": "permission", "prompt": "Run Bash: go test ./relay/...", "respond_via": []any{"control"},
				"options": []any{map[string]any{"id": "allow", "label": "Allow"}, map[string]any{"id": "deny", "label": "Deny"}}}}))
	case i%25 == 1:
		evs = append(evs, event(s, len(evs), "attention.requested", map[string]any{"run": run, "subject": "Shell", "capture": "redacted", "severity": "notice",
			"data": map[string]any{"kind": "permission", "prompt": "Kimi asks to run Shell", "respond_via": []any{"oob"}}}))
	case i%5 == 2:
		evs = append(evs, event(s, len(evs), "run.finished", map[string]any{"run": run, "data": map[string]any{"duration_ms": 61000}}),
			event(s, len(evs)+1, "session.ended", map[string]any{"data": map[string]any{"reason": "normal"}}))
	case i%5 == 3:
		evs = append(evs, event(s, len(evs), "run.finished", map[string]any{"run": run, "data": map[string]any{"duration_ms": 42000}}))
	}
	return evs
}

// claimSessions opens an emitter socket that declares it takes answers and
// cancels, and claims the first n sessions.
func claimSessions(ctx context.Context, base string, n int) (*websocket.Conn, error) {
	h := http.Header{}
	h.Set("Authorization", "Bearer "+token)
	c, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(base, "http")+"/socket", &websocket.DialOptions{HTTPHeader: h})
	if err != nil {
		return nil, err
	}
	hello := `{"type":"hello","versions":["0.1"],"role":"emitter","identity":{"agent":"kimi-code","instance":"bench"},` +
		`"capabilities":{"control":{"accepts":["control.attention.respond","control.cancel"]}}}`
	if err := c.Write(ctx, websocket.MessageText, []byte(hello)); err != nil {
		return nil, err
	}
	go func() {
		for {
			if _, _, err := c.Read(ctx); err != nil {
				return
			}
		}
	}()
	for i := 0; i < n; i++ {
		for _, ev := range sessionEvents(i, 100) {
			b, _ := json.Marshal(ev)
			if err := c.Write(ctx, websocket.MessageText, b); err != nil {
				return nil, err
			}
		}
	}
	return c, nil
}

// fill posts the rest of the sessions' events in NDJSON batches.
func fill(ctx context.Context, base string, sessions, events int) (int, error) {
	per := events / sessions
	total := screenshotSessions * 0
	var batch strings.Builder
	count := 0
	flush := func() error {
		if count == 0 {
			return nil
		}
		if err := post(ctx, base, batch.String()); err != nil {
			return err
		}
		total += count
		batch.Reset()
		count = 0
		return nil
	}
	for i := 0; i < sessions; i++ {
		evs := sessionEvents(i, per)
		if i < screenshotSessions {
			total += len(evs) // sent on the claiming socket
			continue
		}
		for _, ev := range evs {
			b, _ := json.Marshal(ev)
			batch.Write(b)
			batch.WriteByte('\n')
			count++
			if count == 5000 {
				if err := flush(); err != nil {
					return 0, err
				}
			}
		}
	}
	return total, flush()
}

func post(ctx context.Context, base, body string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/events", strings.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("AEP-Version", "0.1")
	req.Header.Set("Content-Type", "application/x-ndjson")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	res.Body.Close()
	if res.StatusCode/100 != 2 {
		return fmt.Errorf("POST /events: %s", res.Status)
	}
	return nil
}

// writeCorpus fills a relay as a run does and writes its replay's events,
// one per line, to path.
func writeCorpus(o options, path string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	base, stop, err := startRelay(ctx, "")
	if err != nil {
		return err
	}
	defer stop()
	// As a run fills it: a few sessions through a claiming socket.
	claim, err := claimSessions(ctx, base, screenshotSessions)
	if err != nil {
		return err
	}
	defer claim.CloseNow() //nolint:errcheck // bench
	n, err := fill(ctx, base, o.sessions, o.events)
	if err != nil {
		return err
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(f)
	got := 0
	err = readReplay(ctx, base, func(data string) {
		w.WriteString(data + "\n")
		got++
	})
	if err := errors.Join(err, w.Flush(), f.Close()); err != nil {
		return err
	}
	if got != n {
		return fmt.Errorf("replay gave %d events, want %d", got, n)
	}
	fmt.Printf("%d events in %d sessions written to %s\n", n, o.sessions, path)
	return nil
}

// replayFloor is the wire's time to the same replay: a Go reader of
// /stream?live=0&from=all that parses every event.
func replayFloor(ctx context.Context, base string, want int) (time.Duration, error) {
	t0 := time.Now()
	n := 0
	err := readReplay(ctx, base, func(data string) {
		var ev map[string]any
		if json.Unmarshal([]byte(data), &ev) == nil {
			n++
		}
	})
	if err != nil {
		return 0, err
	}
	if n != want {
		return 0, fmt.Errorf("replay gave %d events, want %d", n, want)
	}
	return time.Since(t0), nil
}

// readReplay reads what the relay at base holds (/stream?live=0&from=all)
// and hands each event's data line to each, in order.
func readReplay(ctx context.Context, base string, each func(data string)) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/stream?live=0&from=all", nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			each(data)
		}
	}
	return sc.Err()
}

func newBrowser(ctx context.Context, bin string, inspectNetwork bool) (context.Context, func(), error) {
	dir, err := os.MkdirTemp("", "fleetpage-bench-")
	if err != nil {
		return nil, nil, err
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(bin), chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.Flag("disable-dev-shm-usage", true), chromedp.WindowSize(1280, 900), chromedp.UserDataDir(dir))
	actx, cancelA := chromedp.NewExecAllocator(ctx, opts...)
	bctx, cancelB := chromedp.NewContext(actx)
	setup := []chromedp.Action{chromedp.Navigate("about:blank"), performance.Enable(), chromedp.ActionFunc(func(ctx context.Context) error {
		_, err := page.AddScriptToEvaluateOnNewDocument(frameTimer).Do(ctx)
		return err
	})}
	// chromedp turns on DevTools' network inspector, which keeps and
	// decodes every response body on the page's main thread as it ends: a
	// third of a second for the replay, on the first render's path, that
	// no reader's browser spends.
	if !inspectNetwork {
		setup = append(setup, network.Disable())
	}
	if err := chromedp.Run(bctx, setup...); err != nil {
		cancelB()
		cancelA()
		return nil, nil, err
	}
	return bctx, func() { cancelB(); cancelA(); os.RemoveAll(dir) }, nil
}

// load navigates to the page's login URL and returns the page's own clock
// (ms since navigation) when every session is rendered and every event
// applied.
func load(browser context.Context, base string, sessions, events int) (float64, error) {
	cond := fmt.Sprintf(`window.aepFleet && document.getElementById('conn').dataset.conn === 'live' && aepFleet.state.version >= %d && document.getElementById('fleet-count').textContent === '%d of %d'`, events, sessions, sessions)
	return navigateUntil(browser, fleetpage.LoginURL(base, token), cond)
}

// navigateUntil opens url after about:blank and returns the page's clock at
// the frame after cond first held.
func navigateUntil(browser context.Context, url, cond string) (float64, error) {
	ctx, cancel := context.WithTimeout(browser, 5*time.Minute)
	defer cancel()
	var at float64
	if err := chromedp.Run(ctx, chromedp.Navigate("about:blank"), chromedp.Navigate(url)); err != nil {
		return 0, err
	}
	// A poll can lose the page's execution context to the navigation's
	// late commit; the figure is the page's own clock, so asking again
	// changes nothing.
	for {
		err := chromedp.Run(ctx, chromedp.Poll(fmt.Sprintf(drawn, cond), &at, chromedp.WithPollingInterval(5*time.Millisecond), chromedp.WithPollingTimeout(4*time.Minute)))
		if err == nil || !strings.Contains(err.Error(), "Cannot find context") || ctx.Err() != nil {
			return at, err
		}
	}
}

// blankPage is the floor under the page's own first render: a document with
// nothing to fetch or run, drawn by the same browser the same way. No page
// that loads a script, logs in and opens a socket can be drawn sooner.
const blankPage = `<!doctype html><html lang="en"><meta charset="utf-8"><title>blank</title><p>blank</p></html>`

// loadBlank serves blankPage on a loopback port for one navigation and
// times it as load times the page: the frame after it is parsed.
func loadBlank(ctx context.Context, browser context.Context) (float64, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = io.WriteString(w, blankPage)
	}), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Shutdown(ctx) //nolint:errcheck // bench
	return navigateUntil(browser, "http://"+ln.Addr().String()+"/", `document.readyState !== 'loading'`)
}

// waterfall lists, on the page's clock, every request the page made (start,
// first byte, end) and its performance marks and measures, in start order.
const waterfall = `(() => {
  const out = [];
  const nav = performance.getEntriesByType('navigation')[0];
  if (nav) out.push(['document', 0, nav.responseStart, nav.responseEnd]);
  for (const e of performance.getEntriesByType('resource')) out.push([e.name.replace(location.origin, ''), e.startTime, e.responseStart, e.responseEnd]);
  for (const e of performance.getEntriesByType('mark')) out.push(['mark ' + e.name, e.startTime, e.startTime, e.startTime]);
  for (const e of performance.getEntriesByType('paint')) out.push([e.name, e.startTime, e.startTime, e.startTime]);
  if (nav) out.push(['DOMContentLoaded', nav.domContentLoadedEventStart, nav.domContentLoadedEventStart, nav.domContentLoadedEventEnd]);
  out.push(['first render (bench)', window.__drawnAt, window.__drawnAt, window.__drawnAt]);
  return out.sort((a, b) => a[1] - b[1]);
})()`

func printWaterfall(browser context.Context, what string) error {
	var raw [][]any
	if err := chromedp.Run(browser, chromedp.Evaluate(waterfall, &raw)); err != nil {
		return err
	}
	fmt.Printf("  waterfall, %s (ms since navigation: start, first byte, end)\n", what)
	for _, r := range raw {
		num := func(i int) float64 {
			f, _ := r[i].(float64)
			return f
		}
		name, _ := r[0].(string)
		fmt.Printf("    %7.1f %7.1f %7.1f  %s\n", num(1), num(2), num(3), name)
	}
	return nil
}

// drawn is the page's clock once the frame after the condition (%s) held
// has run (the page draws in animation frames): the time a fleet counted in
// full is also on screen, whichever build of the page.
const drawn = `(() => {
  if (window.__drawnAt) return window.__drawnAt;
  if (!window.__drawing && (%s)) {
    window.__drawing = true;
    requestAnimationFrame(() => setTimeout(() => { window.__drawnAt = performance.now(); }));
  }
  return false;
})()`

func memory(browser context.Context) (heap int64, nodes int64, err error) {
	m, err := metrics(browser)
	return int64(m["JSHeapUsedSize"]), int64(m["Nodes"]), err
}

func shoot(browser context.Context, path string) error {
	var png []byte
	err := chromedp.Run(browser,
		emulation.SetDeviceMetricsOverride(1280, 800, 1, false),
		chromedp.Evaluate(`window.scrollTo(0, 0)`, nil),
		chromedp.Sleep(300*time.Millisecond),
		chromedp.CaptureScreenshot(&png),
		emulation.ClearDeviceMetricsOverride(),
	)
	if err != nil {
		return err
	}
	return os.WriteFile(path, png, 0o644)
}

// frameTimer times every animation frame callback that changed the DOM
// (the page renders in them), once window.__frames is an array: it works
// the same on any build of the page.
const frameTimer = `(() => {
  const raf = window.requestAnimationFrame.bind(window);
  const seen = new MutationObserver(() => {});
  addEventListener('DOMContentLoaded', () => seen.observe(document.body, { subtree: true, childList: true, characterData: true, attributes: true }));
  window.__frames = null;
  window.requestAnimationFrame = (cb) => raf((t) => {
    const t0 = performance.now();
    try { cb(t); } finally {
      if (window.__frames && seen.takeRecords().length > 0) window.__frames.push(performance.now() - t0);
    }
  });
})()`

// liveInView scrolls the group the live sessions are listed in (idle: a run
// finished, none open) to the top of the window, on any build: the events
// measured change rows on screen (a session changing off screen is not
// drawn until it comes into view).
const liveInView = `(() => { const g = document.querySelector('#fleet .group[data-group="idle"]'); if (g) g.scrollIntoView(); return true; })()`

// observer records, on every DOM change of the fleet view, the wall clock
// and the state version the page had rendered; afterwards each event's
// latency is the first render at or after its version, less its send time.
const observer = `(() => {
  window.__marks = [];
  new MutationObserver(() => { __marks.push([performance.timeOrigin + performance.now(), aepFleet.state.version]); })
    .observe(document.getElementById('fleet'), { subtree: true, childList: true, characterData: true, attributes: true });
  window.__base = aepFleet.state.version;
  window.__frames = [];
  return true;
})()`

const collect = `(() => {
  const out = [];
  let v = 0, m = 0;
  for (const rec of aepFleet.state.byId.values()) {
    v++;
    const sent = rec.ev.data && rec.ev.data.bench_sent_ms;
    if (!sent) continue;
    while (m < __marks.length && __marks[m][1] < v) m++;
    if (m < __marks.length) out.push([sent, __marks[m][0] - sent]);
  }
  return out;
})()`

// liveLatency sends events at o.rate to live sessions and measures post ->
// DOM on the page and post -> receipt on a Go WebSocket reader, the page's
// rendering per frame and the machine's load meanwhile.
func liveLatency(ctx context.Context, browser context.Context, base string, o options, profile string, trace bool, res *result) error {
	before, err := metrics(browser)
	if err != nil {
		return err
	}
	if err := chromedp.Run(browser, chromedp.Evaluate(liveInView, nil), chromedp.Sleep(300*time.Millisecond), chromedp.Evaluate(observer, nil)); err != nil {
		return err
	}
	var endTrace func() error
	if trace {
		if endTrace, err = startTrace(browser, "the live phase", 0); err != nil {
			return err
		}
	}
	if profile != "" {
		if err := chromedp.Run(browser, profiler.Enable(), profiler.SetSamplingInterval(200), profiler.Start()); err != nil {
			return err
		}
	}
	h := http.Header{}
	h.Set("Authorization", "Bearer "+token)
	c, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(base, "http")+"/socket", &websocket.DialOptions{HTTPHeader: h})
	if err != nil {
		return err
	}
	defer c.CloseNow() //nolint:errcheck // bench
	c.SetReadLimit(16 << 20)
	_ = c.Write(ctx, websocket.MessageText, []byte(`{"type":"hello","versions":["0.1"],"role":"consumer","identity":{"agent":"bench","instance":"b"},"capabilities":{}}`))
	_ = c.Write(ctx, websocket.MessageText, []byte(`{"type":"subscribe","id":"live"}`))
	var mu sync.Mutex
	var floor []float64
	rctx, stopRead := context.WithCancel(ctx)
	defer stopRead()
	go func() {
		for {
			_, b, err := c.Read(rctx)
			if err != nil {
				return
			}
			now := float64(time.Now().UnixNano()) / 1e6
			var ev struct {
				Data struct {
					Sent float64 `json:"bench_sent_ms"`
				} `json:"data"`
			}
			if json.Unmarshal(b, &ev) == nil && ev.Data.Sent > 0 {
				mu.Lock()
				floor = append(floor, now-ev.Data.Sent)
				mu.Unlock()
			}
		}
	}()
	time.Sleep(200 * time.Millisecond) // the subscription is in place

	// Live sessions continue at their next seq; 10 ms ticks carry rate/100.
	seqs := map[int]int{}
	per := o.events / o.sessions
	rng := rand.New(rand.NewPCG(1, 2))
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	perTick := max(1, o.rate/100)
	deadline := time.Now().Add(o.live)
	nextLoad := time.Now()
	sent := 0
	for time.Now().Before(deadline) {
		<-tick.C
		if time.Now().After(nextLoad) {
			if l, err := loadAverage(); err == nil {
				res.loadAvg = append(res.loadAvg, l)
			}
			nextLoad = nextLoad.Add(time.Second)
		}
		var b strings.Builder
		for k := 0; k < perTick; k++ {
			i := screenshotSessions + 5*rng.IntN((o.sessions-screenshotSessions)/5) // i%5 == 3: open, not ended
			i += (3 - i%5 + 5) % 5
			if i >= o.sessions {
				i -= 5
			}
			if _, ok := seqs[i]; !ok {
				seqs[i] = len(sessionEvents(i, per))
			}
			s := sessionID(i)
			ev := event(s, seqs[i], "progress.status", map[string]any{"data": map[string]any{"message": "working", "bench_sent_ms": float64(time.Now().UnixNano()) / 1e6}})
			seqs[i]++
			line, _ := json.Marshal(ev)
			b.Write(line)
			b.WriteByte('\n')
			sent++
		}
		if err := post(ctx, base, b.String()); err != nil {
			return err
		}
	}
	time.Sleep(1500 * time.Millisecond) // the last renders
	stopRead()
	if endTrace != nil {
		if err := endTrace(); err != nil {
			return err
		}
	}
	if profile != "" {
		if err := stopProfile(browser, profile, "the live phase"); err != nil {
			return err
		}
	}
	var pairs [][2]float64
	if err := chromedp.Run(browser, chromedp.Evaluate(collect, &pairs), chromedp.Evaluate(`window.__frames`, &res.frames)); err != nil {
		return err
	}
	page := make([]float64, len(pairs))
	for i, p := range pairs {
		page[i] = p[1]
	}
	if trace {
		fmt.Printf("  events slower than 100 ms, by second of the live phase: %v\n", slowBySecond(pairs))
	}
	after, err := metrics(browser)
	if err != nil {
		return err
	}
	res.styleLayout = 1000 * (after["RecalcStyleDuration"] + after["LayoutDuration"] - before["RecalcStyleDuration"] - before["LayoutDuration"])
	res.script = 1000 * (after["ScriptDuration"] - before["ScriptDuration"])
	mu.Lock()
	defer mu.Unlock()
	res.page, res.floor = page, floor
	if len(page) < sent*9/10 {
		return errors.New("the page rendered fewer than 90% of the live events: " + fmt.Sprint(len(page), " of ", sent))
	}
	return nil
}

// startTrace records Chromium's timeline; the function it returns stops it
// and prints, for the page's main thread, the time in each kind of work
// (nested kinds are inside their parents: RunTask holds the rest).
func startTrace(browser context.Context, what string, timelineMs float64) (func() error, error) {
	var mu sync.Mutex
	var raw [][]byte
	finished := false
	done := make(chan struct{})
	chromedp.ListenTarget(browser, func(ev any) {
		switch e := ev.(type) {
		case *tracing.EventDataCollected:
			mu.Lock()
			if finished {
				mu.Unlock()
				return
			}
			for _, v := range e.Value {
				raw = append(raw, v)
			}
			mu.Unlock()
		case *tracing.EventTracingComplete:
			// A later trace's completion reaches this listener too.
			mu.Lock()
			if !finished {
				finished = true
				close(done)
			}
			mu.Unlock()
		}
	})
	start := tracing.Start().WithTransferMode(tracing.TransferModeReportEvents).
		WithTraceConfig(&tracing.TraceConfig{IncludedCategories: []string{"devtools.timeline", "disabled-by-default-devtools.timeline", "blink", "v8", "blink.user_timing"}})
	if err := chromedp.Run(browser, start); err != nil {
		return nil, err
	}
	return func() error {
		if err := chromedp.Run(browser, tracing.End()); err != nil {
			return err
		}
		select {
		case <-done:
		case <-time.After(time.Minute):
			return errors.New("the trace did not complete")
		}
		mu.Lock()
		defer mu.Unlock()
		type event struct {
			Name string  `json:"name"`
			Ph   string  `json:"ph"`
			Pid  int     `json:"pid"`
			Tid  int     `json:"tid"`
			Dur  float64 `json:"dur"`
			Tdur float64 `json:"tdur"` // on the CPU
			Ts   float64 `json:"ts"`
			Args struct {
				Name         string `json:"name"`
				ElementCount int    `json:"elementCount"`
				BeginData    struct {
					DirtyObjects int `json:"dirtyObjects"`
					TotalObjects int `json:"totalObjects"`
				} `json:"beginData"`
			} `json:"args"`
		}
		type thread struct{ pid, tid int }
		mains, workers := map[thread]bool{}, map[thread]bool{}
		var evs []event
		var navStart float64 // the last navigation's start (µs), for the timeline
		for _, v := range raw {
			var e event
			if json.Unmarshal(v, &e) != nil {
				continue
			}
			if e.Ph == "M" && e.Name == "thread_name" && e.Args.Name == "CrRendererMain" {
				mains[thread{e.Pid, e.Tid}] = true
			}
			if e.Ph == "M" && e.Name == "thread_name" && strings.Contains(e.Args.Name, "Worker") {
				workers[thread{e.Pid, e.Tid}] = true
			}
			if e.Ph == "X" {
				evs = append(evs, e)
			}
			if e.Name == "navigationStart" && (navStart == 0 || e.Ts > navStart) {
				navStart = e.Ts
			}
		}
		// The page's main thread is the renderer main thread that worked most.
		busy := map[thread]float64{}
		for _, e := range evs {
			if t := (thread{e.Pid, e.Tid}); mains[t] && (e.Name == "ThreadControllerImpl::RunTask" || e.Name == "RunTask") {
				busy[t] += e.Dur
			}
		}
		var main thread
		for t, b := range busy {
			if b > busy[main] {
				main = t
			}
		}
		total, onCPU, count := map[string]float64{}, map[string]float64{}, map[string]int{}
		var styled, dirty, objects int
		for _, e := range evs {
			if (thread{e.Pid, e.Tid}) == main {
				total[e.Name] += e.Dur / 1000
				onCPU[e.Name] += e.Tdur / 1000
				count[e.Name]++
				styled += e.Args.ElementCount
				dirty += e.Args.BeginData.DirtyObjects
				objects += e.Args.BeginData.TotalObjects
			}
		}
		names := make([]string, 0, len(total))
		for n := range total {
			names = append(names, n)
		}
		slices.SortFunc(names, func(a, b string) int { return cmp.Compare(total[b], total[a]) })
		fmt.Printf("  trace of %s, the page's main thread (ms, ms on the CPU, count; nested kinds inside their parents)\n", what)
		fmt.Printf("    style recalculated for %d elements in %d passes; layout of %d dirty objects (of %d) in %d passes\n",
			styled, count["UpdateLayoutTree"], dirty, objects, count["Layout"])
		for _, n := range names[:min(len(names), 25)] {
			fmt.Printf("    %8.0f %8.0f  %6d  %s\n", total[n], onCPU[n], count[n], n)
		}
		// The longest tasks, and what inside each took 5 ms or more.
		var tasks []event
		for _, e := range evs {
			if (thread{e.Pid, e.Tid}) == main && (e.Name == "ThreadControllerImpl::RunTask" || e.Name == "RunTask") {
				tasks = append(tasks, e)
			}
		}
		slices.SortFunc(tasks, func(a, b event) int { return cmp.Compare(b.Dur, a.Dur) })
		fmt.Printf("  the longest tasks\n")
		for _, t := range tasks[:min(len(tasks), 5)] {
			var in []string
			for _, e := range evs {
				if (thread{e.Pid, e.Tid}) == main && e.Ts >= t.Ts && e.Ts+e.Dur <= t.Ts+t.Dur && e.Dur >= 5000 && e.Name != t.Name {
					in = append(in, fmt.Sprintf("%s %.0f", e.Name, e.Dur/1000))
				}
			}
			fmt.Printf("    %6.0f ms: %s\n", t.Dur/1000, strings.Join(in, ", "))
		}
		// What the machine's load changes least: the CPU the page's threads
		// used from the navigation on.
		var wall, cpu, wcpu float64
		for _, e := range evs {
			if e.Ts < navStart || (e.Name != "ThreadControllerImpl::RunTask" && e.Name != "RunTask") {
				continue
			}
			if t := (thread{e.Pid, e.Tid}); t == main {
				wall += e.Dur / 1000
				cpu += e.Tdur / 1000
			} else if workers[t] {
				wcpu += e.Tdur / 1000
			}
		}
		fmt.Printf("  from the navigation on: the main thread's tasks %.0f ms, %.0f ms of it on the CPU; workers' tasks %.0f ms on the CPU\n", wall, cpu, wcpu)
		if timelineMs > 0 {
			of := func(e event) (string, float64, float64, float64) { return e.Name, e.Ts, e.Dur, e.Tdur }
			fmt.Printf("  the main thread's tasks of %g ms or more (ms since navigation, duration, on the CPU, inside)\n", timelineMs)
			printTimeline(evs, func(e event) bool { return (thread{e.Pid, e.Tid}) == main }, of, navStart, timelineMs*1000)
			fmt.Printf("  the workers' tasks of %g ms or more\n", timelineMs/4)
			printTimeline(evs, func(e event) bool { return workers[thread{e.Pid, e.Tid}] }, of, navStart, timelineMs*250)
		}
		return nil
	}, nil
}

// slowBySecond counts, for each second since the first event was sent, the
// events whose latency passed 100 ms: a tail that comes in bursts points at
// work done at that time.
func slowBySecond(pairs [][2]float64) []int {
	if len(pairs) == 0 {
		return nil
	}
	first := pairs[0][0]
	for _, p := range pairs {
		first = min(first, p[0])
	}
	var out []int
	for _, p := range pairs {
		i := int((p[0] - first) / 1000)
		for len(out) <= i {
			out = append(out, 0)
		}
		if p[1] > 100 {
			out[i]++
		}
	}
	return out
}

// loadAverage is the machine's 1-minute load average (Linux).
func loadAverage() (float64, error) {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0, err
	}
	var l float64
	_, err = fmt.Sscan(string(b), &l)
	return l, err
}

func metrics(browser context.Context) (map[string]float64, error) {
	var ms []*performance.Metric
	if err := chromedp.Run(browser, chromedp.ActionFunc(func(ctx context.Context) error {
		var err error
		ms, err = performance.GetMetrics().Do(ctx)
		return err
	})); err != nil {
		return nil, err
	}
	out := make(map[string]float64, len(ms))
	for _, m := range ms {
		out[m.Name] = m.Value
	}
	return out, nil
}

func stopProfile(browser context.Context, path, what string) error {
	var p *profiler.Profile
	if err := chromedp.Run(browser, chromedp.ActionFunc(func(ctx context.Context) error {
		var err error
		p, err = profiler.Stop().Do(ctx)
		return err
	})); err != nil {
		return err
	}
	return writeProfile(path, what, p)
}

// writeProfile keeps the CPU profile (DevTools opens it) and prints where
// the time went: self time by function, and the time inside the page's own
// functions (inclusive).
func writeProfile(path, what string, p *profiler.Profile) error {
	b, err := json.Marshal(p)
	if err != nil {
		return err
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		return err
	}
	parent := map[int64]int64{}
	byID := map[int64]*profiler.ProfileNode{}
	for _, n := range p.Nodes {
		byID[n.ID] = n
		for _, c := range n.Children {
			parent[c] = n.ID
		}
	}
	name := func(n *profiler.ProfileNode) string {
		f := n.CallFrame
		u := f.URL
		if i := strings.LastIndex(u, "/"); i >= 0 {
			u = u[i+1:]
		}
		if u == "" {
			return f.FunctionName
		}
		fn := f.FunctionName
		if fn == "" {
			fn = "(anonymous)"
		}
		return fmt.Sprintf("%s %s:%d", fn, u, f.LineNumber+1)
	}
	self, incl := map[string]float64{}, map[string]float64{}
	var total float64
	for i, id := range p.Samples {
		if i >= len(p.TimeDeltas) {
			break
		}
		d := float64(p.TimeDeltas[i]) / 1000
		n := byID[id]
		if n == nil {
			continue
		}
		total += d
		self[name(n)] += d
		seen := map[string]bool{}
		for x := n; x != nil; x = byID[parent[x.ID]] {
			k := name(x)
			if !seen[k] {
				seen[k] = true
				incl[k] += d
			}
			if _, ok := parent[x.ID]; !ok {
				break
			}
		}
	}
	top := func(title string, m map[string]float64, only func(string) bool) {
		type kv struct {
			k string
			v float64
		}
		var xs []kv
		for k, v := range m {
			if only(k) {
				xs = append(xs, kv{k, v})
			}
		}
		slices.SortFunc(xs, func(a, b kv) int { return cmp.Compare(b.v, a.v) })
		fmt.Printf("  %s\n", title)
		for _, x := range xs[:min(len(xs), 20)] {
			fmt.Printf("    %8.0f ms  %4.1f%%  %s\n", x.v, 100*x.v/total, x.k)
		}
	}
	fmt.Printf("  profile of %s: %.0f ms sampled, written to %s\n", what, total, path)
	top("self time", self, func(string) bool { return true })
	top("inclusive, the page's functions", incl, func(k string) bool { return strings.Contains(k, ".js:") })
	return nil
}

func pct(xs []float64, p float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	i := int(float64(len(s)-1) * p / 100)
	return s[i]
}

func mean(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	var t float64
	for _, x := range xs {
		t += x
	}
	return t / float64(len(xs))
}

// printTimeline lists, in order, the main thread's tasks of 2 ms or more
// after the navigation (ms since it), each with what inside it took 1 ms or
// more: what the first render waited on while the page's own clock ran.
func printTimeline[E any](evs []E, onMain func(E) bool, of func(E) (string, float64, float64, float64), navStart, least float64) {
	var tasks, inner []E
	for _, e := range evs {
		name, ts, dur, _ := of(e)
		if !onMain(e) || ts < navStart {
			continue
		}
		if name == "ThreadControllerImpl::RunTask" || name == "RunTask" {
			if dur >= least {
				tasks = append(tasks, e)
			}
		} else if dur >= least/2 {
			inner = append(inner, e)
		}
	}
	at := func(e E) float64 { _, ts, _, _ := of(e); return ts }
	slices.SortFunc(tasks, func(a, b E) int { return cmp.Compare(at(a), at(b)) })
	for _, t := range tasks {
		_, ts, dur, cpu := of(t)
		var in []string
		for _, e := range inner {
			name, ets, edur, _ := of(e)
			if ets >= ts && ets+edur <= ts+dur {
				in = append(in, fmt.Sprintf("%s %.0f", name, edur/1000))
			}
		}
		fmt.Printf("    %7.1f %6.1f %6.1f  %s\n", (ts-navStart)/1000, dur/1000, cpu/1000, strings.Join(in, ", "))
	}
}

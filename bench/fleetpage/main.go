// Command fleetpage measures the fleet page in a real Chromium at fleet size:
// the time from navigation to a fully rendered fleet with N sessions and M
// buffered events, the tab's memory, and, at a set live rate, the latency
// from the relay's fan-out to the DOM. Each figure has a same-run baseline:
// a plain Go consumer reading the same replay and the same live events from
// the same relay (the wire's floor), and the same page over an empty relay.
//
//	go run ./bench/fleetpage                                  # 500 sessions, 50,000 events, 1,000 ev/s
//	go run ./bench/fleetpage -screenshot docs/fleet.png       # also the README's picture
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/performance"
	"github.com/chromedp/chromedp"
	"github.com/coder/websocket"

	"github.com/aep-kimi/aep-kimi/aep"
	"github.com/aep-kimi/aep-kimi/fleetpage"
	"github.com/aep-kimi/aep-kimi/relay"
)

const token = "bench-fleetpage-token-0123456789"

type options struct {
	sessions, events, rate int
	live                   time.Duration
	screenshot, chromium   string
}

func main() {
	var o options
	flag.IntVar(&o.sessions, "sessions", 500, "sessions the relay holds")
	flag.IntVar(&o.events, "events", 50000, "events buffered across them")
	flag.IntVar(&o.rate, "rate", 1000, "live events per second")
	flag.DurationVar(&o.live, "live", 10*time.Second, "how long to send live events")
	flag.StringVar(&o.screenshot, "screenshot", "", "write a screenshot of the loaded fleet view here (PNG)")
	flag.StringVar(&o.chromium, "chromium", "chromium", "the Chromium binary")
	flag.Parse()
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "fleetpage bench:", err)
		os.Exit(1)
	}
}

func run(o options) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	empty, stopEmpty, err := startRelay(ctx)
	if err != nil {
		return err
	}
	defer stopEmpty()
	base, stop, err := startRelay(ctx)
	if err != nil {
		return err
	}
	defer stop()

	claim, err := claimSessions(ctx, base, screenshotSessions)
	if err != nil {
		return err
	}
	defer claim.CloseNow() //nolint:errcheck // bench
	t0 := time.Now()
	n, err := fill(ctx, base, o.sessions, o.events)
	if err != nil {
		return err
	}
	fmt.Printf("relay: %d sessions, %d events buffered in %s\n", o.sessions, n, time.Since(t0).Round(time.Millisecond))

	wire, err := replayFloor(ctx, base, n)
	if err != nil {
		return err
	}

	browser, closeBrowser, err := newBrowser(ctx, o.chromium)
	if err != nil {
		return err
	}
	defer closeBrowser()
	emptyLoad, err := load(browser, empty, 0, 0)
	if err != nil {
		return fmt.Errorf("empty fleet: %w", err)
	}
	fullLoad, err := load(browser, base, o.sessions, n)
	if err != nil {
		return fmt.Errorf("full fleet: %w", err)
	}
	heap, nodes, err := memory(browser)
	if err != nil {
		return err
	}
	fmt.Printf("\nload to a rendered fleet (%d sessions, %d events)\n", o.sessions, n)
	fmt.Printf("  page, full relay      %8.0f ms\n", fullLoad)
	fmt.Printf("  page, empty relay     %8.0f ms   (baseline: the page itself)\n", emptyLoad)
	fmt.Printf("  Go reader, replay     %8.0f ms   (baseline: the wire)\n", float64(wire)/float64(time.Millisecond))
	fmt.Printf("tab: JS heap %.1f MB, %d DOM nodes\n", float64(heap)/(1<<20), nodes)

	if o.screenshot != "" {
		if err := shoot(browser, o.screenshot); err != nil {
			return err
		}
		fmt.Printf("screenshot: %s\n", o.screenshot)
	}

	page, floor, err := liveLatency(ctx, browser, base, o)
	if err != nil {
		return err
	}
	heap2, nodes2, err := memory(browser)
	if err != nil {
		return err
	}
	fmt.Printf("\nlive at %d ev/s for %s: post -> DOM (page) and post -> Go WebSocket reader (baseline)\n", o.rate, o.live)
	fmt.Printf("  page      n=%6d  p50 %6.1f ms  p99 %6.1f ms  max %6.1f ms\n", len(page), pct(page, 50), pct(page, 99), pct(page, 100))
	fmt.Printf("  baseline  n=%6d  p50 %6.1f ms  p99 %6.1f ms  max %6.1f ms\n", len(floor), pct(floor, 50), pct(floor, 99), pct(floor, 100))
	fmt.Printf("tab after the live phase: JS heap %.1f MB, %d DOM nodes\n", float64(heap2)/(1<<20), nodes2)
	return nil
}

func startRelay(ctx context.Context) (string, func(), error) {
	page, err := fleetpage.New(fleetpage.Config{Token: token})
	if err != nil {
		return "", nil, err
	}
	srv, err := relay.NewServer(relay.Config{Token: token, Page: page})
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

// replayFloor is the wire's time to the same replay: a Go reader of
// /stream?live=0&from=all that parses every event.
func replayFloor(ctx context.Context, base string, want int) (time.Duration, error) {
	t0 := time.Now()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/stream?live=0&from=all", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer res.Body.Close()
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(nil, 16<<20)
	n := 0
	for sc.Scan() {
		if line, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			var ev map[string]any
			if json.Unmarshal([]byte(line), &ev) == nil {
				n++
			}
		}
	}
	if n != want {
		return 0, fmt.Errorf("replay gave %d events, want %d", n, want)
	}
	return time.Since(t0), nil
}

func newBrowser(ctx context.Context, bin string) (context.Context, func(), error) {
	dir, err := os.MkdirTemp("", "fleetpage-bench-")
	if err != nil {
		return nil, nil, err
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(bin), chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.Flag("disable-dev-shm-usage", true), chromedp.WindowSize(1280, 900), chromedp.UserDataDir(dir))
	actx, cancelA := chromedp.NewExecAllocator(ctx, opts...)
	bctx, cancelB := chromedp.NewContext(actx)
	if err := chromedp.Run(bctx, chromedp.Navigate("about:blank"), performance.Enable()); err != nil {
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
	ctx, cancel := context.WithTimeout(browser, 5*time.Minute)
	defer cancel()
	cond := fmt.Sprintf(`(window.aepFleet && document.getElementById('conn').dataset.conn === 'live' && aepFleet.state.version >= %d && document.querySelectorAll('#fleet [data-session]').length >= %d) ? performance.now() : false`, events, sessions)
	var at float64
	err := chromedp.Run(ctx,
		chromedp.Navigate("about:blank"),
		chromedp.Navigate(fleetpage.LoginURL(base, token)),
		chromedp.Poll(cond, &at, chromedp.WithPollingInterval(5*time.Millisecond), chromedp.WithPollingTimeout(4*time.Minute)),
	)
	return at, err
}

func memory(browser context.Context) (heap int64, nodes int64, err error) {
	var ms []*performance.Metric
	if err := chromedp.Run(browser, chromedp.ActionFunc(func(ctx context.Context) error {
		var err error
		ms, err = performance.GetMetrics().Do(ctx)
		return err
	})); err != nil {
		return 0, 0, err
	}
	for _, m := range ms {
		switch m.Name {
		case "JSHeapUsedSize":
			heap = int64(m.Value)
		case "Nodes":
			nodes = int64(m.Value)
		}
	}
	return heap, nodes, nil
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

// observer records, on every DOM change of the fleet view, the wall clock
// and the state version the page had rendered; afterwards each event's
// latency is the first render at or after its version, less its send time.
const observer = `(() => {
  window.__marks = [];
  new MutationObserver(() => { __marks.push([performance.timeOrigin + performance.now(), aepFleet.state.version]); })
    .observe(document.getElementById('fleet'), { subtree: true, childList: true, characterData: true, attributes: true });
  window.__base = aepFleet.state.version;
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
    if (m < __marks.length) out.push(__marks[m][0] - sent);
  }
  return out;
})()`

// liveLatency sends events at o.rate to live sessions and measures post ->
// DOM on the page and post -> receipt on a Go WebSocket reader.
func liveLatency(ctx context.Context, browser context.Context, base string, o options) (page, floor []float64, err error) {
	if err := chromedp.Run(browser, chromedp.Evaluate(observer, nil)); err != nil {
		return nil, nil, err
	}
	h := http.Header{}
	h.Set("Authorization", "Bearer "+token)
	c, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(base, "http")+"/socket", &websocket.DialOptions{HTTPHeader: h})
	if err != nil {
		return nil, nil, err
	}
	defer c.CloseNow() //nolint:errcheck // bench
	c.SetReadLimit(16 << 20)
	_ = c.Write(ctx, websocket.MessageText, []byte(`{"type":"hello","versions":["0.1"],"role":"consumer","identity":{"agent":"bench","instance":"b"},"capabilities":{}}`))
	_ = c.Write(ctx, websocket.MessageText, []byte(`{"type":"subscribe","id":"live"}`))
	var mu sync.Mutex
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
	sent := 0
	for time.Now().Before(deadline) {
		<-tick.C
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
			return nil, nil, err
		}
	}
	time.Sleep(1500 * time.Millisecond) // the last renders
	stopRead()
	if err := chromedp.Run(browser, chromedp.Evaluate(collect, &page)); err != nil {
		return nil, nil, err
	}
	mu.Lock()
	defer mu.Unlock()
	if len(page) < sent*9/10 {
		return nil, nil, errors.New("the page rendered fewer than 90% of the live events: " + fmt.Sprint(len(page), " of ", sent))
	}
	return page, floor, nil
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

// Command fanout is the relay's second, independent tail-latency tool: a
// figure bench/relay shows is a figure only when this one shows it too.
// It shares no code with bench/relay or the relay's test kit; every part
// of a measurement is its own process, all of them this binary run in a
// role:
//
//   - serve: the server under test, either the relay (relay.NewServer with
//     its defaults, memory store) or this tool's own raw forwarder (see
//     raw.go), on a fresh loopback port;
//   - subscribe: N SSE consumers of one session (GET /stream), each timing
//     every event it reads against the send time the event carries
//     (data.sent_ns, the wall clock read by the publisher just before the
//     POST that carried it), into a per-consumer histogram (10 µs
//     buckets to 20 ms, 1 ms buckets to 2 s);
//   - publish: HTTP NDJSON batches (POST /events) of -batch events, paced
//     on an absolute schedule to -rate events/s (a late batch goes at once,
//     never skipped), from -lanes sessions each on its own keep-alive
//     connection: batch k goes on lane k mod -lanes, so one slow answer
//     holds back one lane's next batch, not the schedule.
//
// The orchestrator (no -role) runs -rounds rounds; each round measures the
// relay and the raw forwarder, alternating which goes first (relay, raw,
// raw, relay, ...), each on freshly started processes, so a shared
// machine's drift hits both alike. It prints each measurement's p50, p99,
// p99.9 and max over the events after -warmup, each round's p99 relay −
// raw, and the median of those differences with the load average. A
// measurement whose publisher fell below 95% of -rate is marked: the
// machine, not the server, set its latencies.
//
//	go run ./bench/fanout -rounds 10                 # 100 subs, batches of 10 at 10,000 events/s
//	go run ./bench/fanout -rounds 10 -duration 10s -subs 100 -rate 10000 -batch 10
//	go run ./bench/fanout -rounds 10 -lanes 4      # the same load from 4 sessions, 4 connections
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"time"
)

// Defaults: the load issue 40 names.
const (
	defaultSubs     = 100
	defaultRate     = 10000
	defaultBatch    = 10
	defaultSize     = 380
	defaultDuration = 6 * time.Second
	defaultWarmup   = time.Second
	defaultRounds   = 10
	// idleEnd ends a subscriber that has seen nothing new for this long
	// after the publisher finished: what is missing then is counted lost.
	idleEnd = 2 * time.Second
	// startWait bounds a child's first line (its address, or ready).
	startWait = 30 * time.Second
	// sustained is the share of -rate a publisher must reach for its
	// measurement to count as paced.
	sustained = 0.95
)

type config struct {
	role, target, url, session, trace string
	subs, rate, batch, size, rounds   int
	lanes                             int
	duration, warmup                  time.Duration
	events                            int
}

func main() {
	var c config
	flag.StringVar(&c.role, "role", "", "internal: serve, subscribe or publish (the orchestrator runs these)")
	flag.StringVar(&c.target, "target", "", "internal, for -role serve: relay or raw")
	flag.StringVar(&c.url, "url", "", "internal: the server's base URL")
	flag.StringVar(&c.session, "session", "", "internal: the session the events carry")
	flag.IntVar(&c.events, "events", 0, "internal, for -role subscribe: events each consumer expects")
	flag.IntVar(&c.subs, "subs", defaultSubs, "SSE consumers")
	flag.IntVar(&c.rate, "rate", defaultRate, "events per second published")
	flag.IntVar(&c.batch, "batch", defaultBatch, "events per POST")
	flag.IntVar(&c.lanes, "lanes", 1, "sessions the events are spread over, each published on its own connection (batch k on lane k mod lanes)")
	flag.IntVar(&c.size, "size", defaultSize, "approximate event size in bytes")
	flag.IntVar(&c.rounds, "rounds", defaultRounds, "rounds, each one relay and one raw measurement")
	flag.DurationVar(&c.duration, "duration", defaultDuration, "how long each measurement publishes")
	flag.DurationVar(&c.warmup, "warmup", defaultWarmup, "events sent in the first this-long of a measurement are not timed")
	flag.StringVar(&c.trace, "trace", "", "write an execution trace of the server process (go tool trace) to this file, FILE.relay and FILE.raw of the first round")
	flag.Parse()
	var err error
	switch c.role {
	case "":
		err = orchestrate(c)
	case "serve":
		err = serve(c)
	case "subscribe":
		err = subscribe(c)
	case "publish":
		err = publish(c)
	default:
		err = fmt.Errorf("-role %q: want serve, subscribe or publish", c.role)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "fanout:", err)
		os.Exit(1)
	}
}

// subResult is what a subscriber process reports on its last line.
type subResult struct {
	Delivered int64   `json:"delivered"`
	Missing   int64   `json:"missing"`
	Timed     int64   `json:"timed"`
	P50       float64 `json:"p50_ms"`
	P99       float64 `json:"p99_ms"`
	P999      float64 `json:"p999_ms"`
	Max       float64 `json:"max_ms"`
}

// pubResult is what a publisher process reports on its last line.
type pubResult struct {
	Events  int     `json:"events"`
	Seconds float64 `json:"seconds"`
	// LateP99 is the p99 of how late batches left against the schedule:
	// a publisher that cannot keep the pace shows here.
	LateP99 float64 `json:"late_p99_ms"`
}

func orchestrate(c config) error {
	if c.subs < 1 || c.rate < 1 || c.batch < 1 || c.rounds < 1 || c.lanes < 1 || c.size < 200 {
		return errors.New("-subs, -rate, -batch, -lanes and -rounds must be >= 1, -size >= 200")
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	fmt.Printf("fanout: %d SSE consumers, HTTP NDJSON batches of %d at %d events/s from %d session(s) for %v (first %v untimed), %d rounds\n",
		c.subs, c.batch, c.rate, c.lanes, c.duration, c.warmup, c.rounds)
	var diffs []float64
	var rel, raw []float64
	short := 0 // measurements that did not sustain the rate
	for r := range c.rounds {
		order := []string{"relay", "raw"}
		if r%2 == 1 {
			slices.Reverse(order)
		}
		got := map[string]subResult{}
		for _, t := range order {
			res, pub, err := measure(self, c, t)
			if err != nil {
				return fmt.Errorf("round %d, %s: %w", r+1, t, err)
			}
			got[t] = res
			rate := float64(pub.Events) / pub.Seconds
			note := ""
			if rate < sustained*float64(c.rate) {
				note = " NOT SUSTAINED: the machine could not publish at the rate"
				short++
			}
			fmt.Printf("round %2d %-5s p50 %6.2f  p99 %6.2f  p99.9 %6.2f  max %7.2f ms; %d delivered, %d missing; published %.0f events/s (late p99 %.2f ms); load %s%s\n",
				r+1, t, res.P50, res.P99, res.P999, res.Max, res.Delivered, res.Missing, rate, pub.LateP99, loadAvg(), note)
		}
		c.trace = "" // the first round's only
		d := got["relay"].P99 - got["raw"].P99
		diffs = append(diffs, d)
		rel, raw = append(rel, got["relay"].P99), append(raw, got["raw"].P99)
		fmt.Printf("round %2d p99 relay - raw: %+.2f ms (%.2fx)\n", r+1, d, got["relay"].P99/got["raw"].P99)
	}
	within := 0
	for _, d := range diffs {
		if d <= 1 {
			within++
		}
	}
	fmt.Printf("\nmedians of %d rounds: relay p99 %.2f ms, raw p99 %.2f ms (%.2fx); p99 relay - raw %+.2f ms (per round %+.2f to %+.2f; %d of %d within 1 ms); load %s\n",
		c.rounds, median(rel), median(raw), median(rel)/median(raw), median(diffs), slices.Min(diffs), slices.Max(diffs), within, c.rounds, loadAvg())
	if short > 0 {
		fmt.Printf("%d of %d measurements did not sustain %d events/s: their latencies are the machine's backlog, not the servers'\n", short, 2*c.rounds, c.rate)
	}
	return nil
}

// measure runs one measurement of target on fresh processes.
func measure(self string, c config, target string) (subResult, pubResult, error) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	args := []string{"-role", "serve", "-target", target}
	if c.trace != "" {
		args = append(args, "-trace", c.trace+"."+target)
	}
	srv, addr, err := start(ctx, self, args...)
	if err != nil {
		return subResult{}, pubResult{}, fmt.Errorf("serve: %w", err)
	}
	defer srv.stop()
	url := "http://" + addr
	session := fmt.Sprintf("fanout-%d", time.Now().UnixNano())
	events := int(float64(c.rate)*c.duration.Seconds()) / c.batch * c.batch
	common := []string{"-url", url, "-session", session, "-subs", fmt.Sprint(c.subs), "-rate", fmt.Sprint(c.rate),
		"-batch", fmt.Sprint(c.batch), "-size", fmt.Sprint(c.size), "-duration", c.duration.String(), "-warmup", c.warmup.String(),
		"-lanes", fmt.Sprint(c.lanes)}
	sub, line, err := start(ctx, self, append([]string{"-role", "subscribe", "-events", fmt.Sprint(events)}, common...)...)
	if err != nil {
		return subResult{}, pubResult{}, fmt.Errorf("subscribe: %w", err)
	}
	defer sub.stop()
	if line != "ready" {
		return subResult{}, pubResult{}, fmt.Errorf("subscribe said %q, not ready", line)
	}
	pub, _, err := start(ctx, self, append([]string{"-role", "publish"}, common...)...)
	if err != nil {
		return subResult{}, pubResult{}, fmt.Errorf("publish: %w", err)
	}
	var pr pubResult
	if err := pub.result(&pr); err != nil {
		return subResult{}, pubResult{}, fmt.Errorf("publish: %w", err)
	}
	var sr subResult
	if err := sub.result(&sr); err != nil {
		return subResult{}, pubResult{}, fmt.Errorf("subscribe: %w", err)
	}
	return sr, pr, nil
}

// child is a role process: its first stdout line says it is ready (or
// where it listens), its last is its JSON result.
type child struct {
	cmd    *exec.Cmd
	out    *bufio.Scanner
	stderr strings.Builder
}

// start runs self with args and returns its first stdout line.
func start(ctx context.Context, self string, args ...string) (*child, string, error) {
	ch := &child{cmd: exec.CommandContext(ctx, self, args...)}
	ch.cmd.Stderr = &ch.stderr
	ch.cmd.SysProcAttr = childAttr()
	out, err := ch.cmd.StdoutPipe()
	if err != nil {
		return nil, "", err
	}
	if err := ch.cmd.Start(); err != nil {
		return nil, "", err
	}
	ch.out = bufio.NewScanner(out)
	first := make(chan string, 1)
	go func() {
		if ch.out.Scan() {
			first <- ch.out.Text()
		}
		close(first)
	}()
	select {
	case l, ok := <-first:
		if !ok {
			ch.stop()
			return nil, "", fmt.Errorf("exited before starting: %s", strings.TrimSpace(ch.stderr.String()))
		}
		return ch, l, nil
	case <-time.After(startWait):
		ch.stop()
		return nil, "", fmt.Errorf("no first line in %v", startWait)
	}
}

// result reads the child's JSON result line into v and waits for it.
func (ch *child) result(v any) error {
	var last string
	for ch.out.Scan() {
		last = ch.out.Text()
	}
	if err := ch.cmd.Wait(); err != nil {
		return fmt.Errorf("%w: %s", err, strings.TrimSpace(ch.stderr.String()))
	}
	return json.Unmarshal([]byte(last), v)
}

// stop interrupts the child and reaps it, killing it when it lingers.
func (ch *child) stop() {
	if ch.cmd.ProcessState != nil {
		return
	}
	_ = ch.cmd.Process.Signal(os.Interrupt)
	done := make(chan struct{})
	go func() { _ = ch.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		_ = ch.cmd.Process.Kill()
		<-done
	}
}

func median(v []float64) float64 {
	v = slices.Clone(v)
	slices.Sort(v)
	if len(v)%2 == 1 {
		return v[len(v)/2]
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2
}

// loadAvg is the one-minute load average (Linux), or "unknown".
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	if f := strings.Fields(string(b)); len(f) > 0 {
		return f[0]
	}
	return "unknown"
}

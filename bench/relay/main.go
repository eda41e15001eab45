// Command relay is a load tool for the aep-kimi relay: it ingests events at a
// set rate (HTTP POST batches or an emitter socket), fans them out to N
// consumers over real SSE or WebSocket connections, and reports ingest rate,
// deliveries per second, ingest-to-delivery latency percentiles and drops.
// Every run also measures a baseline on the same machine in the same run: a
// minimal SSE fan-out server pushing the same bytes to the same number of
// consumers, so the relay's figure reads as a fraction of the raw floor.
//
// With -rounds N the relay and the baseline alternate N times each (relay,
// baseline, baseline, relay, ...) so drift on a shared machine hits both
// alike, and the summary gives each one's median and their ratio.
//
//	go run ./bench/relay -subs 100 -duration 10s            # max deliveries/s
//	go run ./bench/relay -subs 100 -rate 10000 -ingest ws   # latency at 10k ev/s
//	go run ./bench/relay -store jetstream -rounds 3         # the durable store
//	go run ./bench/relay -peer centrifugo -rounds 2         # against Centrifugo
//
// With -peer centrifugo the tool compares aep-kimi relay binaries, each run
// as its own process, with a Centrifugo binary under the same load and the
// same consumers, and charges each only its server process's CPU (see
// peer.go).
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"runtime"
	"runtime/metrics"
	"runtime/pprof"
	"runtime/trace"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"

	"github.com/aep-kimi/aep-kimi/aep"
	"github.com/aep-kimi/aep-kimi/internal/httpguard"
	"github.com/aep-kimi/aep-kimi/internal/testkit/relaytest"
	"github.com/aep-kimi/aep-kimi/relay"
	"github.com/aep-kimi/aep-kimi/relay/wire"
)

type options struct {
	relayURL, token, transport, ingest string
	store                              string
	subs, rate, size, batch, queue     int
	rounds                             int
	duration                           time.Duration
	baseline                           bool
	// peer mode (peer.go)
	peer, centrifugo, relayBins string
	pacedRate, pacedBatch       int
}

func main() {
	var o options
	flag.StringVar(&o.relayURL, "relay", "", "relay base URL to load (default: run one in-process on a loopback port)")
	flag.StringVar(&o.token, "token", httpguard.TrimToken(os.Getenv("AEP_TOKEN")), "bearer token for -relay")
	flag.StringVar(&o.transport, "transport", "sse", "consumer binding: sse or ws")
	flag.StringVar(&o.ingest, "ingest", "http", "ingest binding: http (NDJSON batches) or ws (one event per frame on an emitter socket)")
	flag.IntVar(&o.subs, "subs", 100, "consumers")
	flag.IntVar(&o.rate, "rate", 0, "events per second to ingest (0: as fast as the relay takes them)")
	flag.IntVar(&o.size, "size", 380, "approximate event size in bytes")
	flag.IntVar(&o.batch, "batch", 100, "events per POST (http ingest)")
	flag.IntVar(&o.queue, "queue", 0, "per-consumer queue of the in-process relay (0: the relay default)")
	flag.StringVar(&o.store, "store", relay.StoreMemory, "store of the in-process relay: memory or jetstream (embedded, in a temporary directory)")
	flag.IntVar(&o.rounds, "rounds", 1, "measurements of each, relay and baseline alternating")
	flag.DurationVar(&o.duration, "duration", 10*time.Second, "how long to ingest")
	flag.BoolVar(&o.baseline, "baseline", true, "also measure the raw SSE fan-out baseline of the same bytes")
	flag.StringVar(&o.peer, "peer", "", "compare with another server instead of the raw baseline: centrifugo")
	flag.StringVar(&o.centrifugo, "centrifugo", defaultCentrifugo(), "Centrifugo binary for -peer centrifugo")
	flag.StringVar(&o.relayBins, "aep-kimi", "", "for -peer: aep-kimi binaries to run as the relay, label=path comma-separated (default: build this checkout's)")
	flag.IntVar(&o.pacedRate, "paced-rate", defaultPacedRate, "for -peer: events per second of the paced latency measurement (0: none)")
	flag.IntVar(&o.pacedBatch, "paced-batch", defaultPacedBatch, "for -peer: events per request in the paced measurement")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile of the whole run (relay, load and baseline) to this file")
	memProfile := flag.String("memprofile", "", "write an allocation profile of the whole run to this file")
	mutexProfile := flag.String("mutexprofile", "", "write a profile of the whole run's mutex contention to this file")
	traceOut := flag.String("trace", "", "write an execution trace of the whole run to this file (go tool trace)")
	flag.Parse()
	if *traceOut != "" {
		f, err := os.Create(*traceOut)
		if err == nil {
			err = trace.Start(f)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench/relay:", err)
			os.Exit(1)
		}
		defer trace.Stop()
	}
	if *memProfile != "" {
		defer writeProfile("allocs", *memProfile)
	}
	if *mutexProfile != "" {
		runtime.SetMutexProfileFraction(1)
		defer writeProfile("mutex", *mutexProfile)
	}
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench/relay:", err)
			os.Exit(1)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintln(os.Stderr, "bench/relay:", err)
			os.Exit(1)
		}
		defer pprof.StopCPUProfile()
	}
	if err := run(o); err != nil {
		pprof.StopCPUProfile()
		trace.Stop()
		fmt.Fprintln(os.Stderr, "bench/relay:", err)
		os.Exit(1)
	}
}

// writeProfile writes the named runtime profile to path.
func writeProfile(name, path string) {
	f, err := os.Create(path)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench/relay:", err)
		return
	}
	defer f.Close()
	if err := pprof.Lookup(name).WriteTo(f, 0); err != nil {
		fmt.Fprintln(os.Stderr, "bench/relay:", err)
	}
}

func run(o options) error {
	if o.transport != "sse" && o.transport != "ws" {
		return fmt.Errorf("-transport %q: want sse or ws", o.transport)
	}
	if o.ingest != "http" && o.ingest != "ws" {
		return fmt.Errorf("-ingest %q: want http or ws", o.ingest)
	}
	if o.store != relay.StoreMemory && o.store != relay.StoreJetStream {
		return fmt.Errorf("-store %q: want %s or %s", o.store, relay.StoreMemory, relay.StoreJetStream)
	}
	if o.subs < 1 || o.batch < 1 || o.size < 100 || o.rounds < 1 {
		return errors.New("-subs, -batch and -rounds must be >= 1, -size >= 100")
	}
	ctx := context.Background()
	if o.peer != "" {
		return runPeer(ctx, o)
	}
	base := o.relayURL
	if base == "" {
		stop, u, err := startRelay(ctx, o)
		if err != nil {
			return err
		}
		defer stop()
		base = u
		fmt.Printf("relay: in-process at %s (%s store)\n", base, o.store)
	}
	withBaseline := o.baseline && o.transport == "sse"
	var rel, raw []*result
	measureRelay := func() error {
		res, err := load(ctx, o, relayTarget(o, base, o.token, o.transport))
		if err != nil {
			return err
		}
		res.print("relay", o)
		rel = append(rel, res)
		return nil
	}
	measureBaseline := func() error {
		stop, u, err := startBaseline()
		if err != nil {
			return err
		}
		b, err := load(ctx, o, relayTarget(o, u, "", "sse"))
		stop()
		if err != nil {
			return err
		}
		b.print("baseline (raw SSE fan-out of the same bytes)", o)
		raw = append(raw, b)
		return nil
	}
	for r := range o.rounds {
		order := []func() error{measureRelay, measureBaseline}
		switch {
		case !withBaseline:
			order = order[:1]
		case r%2 == 1:
			order[0], order[1] = order[1], order[0]
		}
		for _, m := range order {
			if err := m(); err != nil {
				return err
			}
		}
		if !withBaseline {
			continue
		}
		a, b := rel[len(rel)-1], raw[len(raw)-1]
		fmt.Printf("round %d relay/baseline: deliveries %.2fx, CPU per delivery %.2fx, p99 latency %.2fx (%+.2f ms), load %s\n", r+1,
			a.deliveryRate()/b.deliveryRate(), a.cpuPerDelivery()/b.cpuPerDelivery(), a.p(0.99).Seconds()/b.p(0.99).Seconds(),
			(a.p(0.99)-b.p(0.99)).Seconds()*1000, loadAvg())
	}
	if withBaseline && o.rounds > 1 {
		dr, db := median(rel, (*result).deliveryRate), median(raw, (*result).deliveryRate)
		p99 := func(r *result) float64 { return r.p(0.99).Seconds() * 1000 }
		pr, pb := median(rel, p99), median(raw, p99)
		cr, cb := median(rel, (*result).cpuPerDelivery), median(raw, (*result).cpuPerDelivery)
		fmt.Printf("\nmedians of %d rounds: relay %.0f deliveries/s, %.3f us CPU each, p99 %.2f ms; baseline %.0f deliveries/s, %.3f us CPU each, p99 %.2f ms\n",
			o.rounds, dr, cr, pr, db, cb, pb)
		fmt.Printf("relay/baseline (medians): deliveries %.2fx, CPU per delivery %.2fx, p99 %+.2f ms\n", dr/db, cr/cb, pr-pb)
	}
	return nil
}

func per100(n, of int64) float64 {
	if of == 0 {
		return 0
	}
	return float64(n) * 100 / float64(of)
}

// syscalls reads a process's read and write system call counts from
// /proc/PROC/io (PROC a pid or "self"); zeros where there is none.
func syscalls(proc string) (r, w int64) {
	b, err := os.ReadFile("/proc/" + proc + "/io")
	if err != nil {
		return 0, 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		k, v, _ := strings.Cut(l, ": ")
		n, _ := strconv.ParseInt(v, 10, 64)
		switch k {
		case "syscr":
			r = n
		case "syscw":
			w = n
		}
	}
	return r, w
}

func median(rs []*result, f func(*result) float64) float64 {
	v := make([]float64, len(rs))
	for i, r := range rs {
		v[i] = f(r)
	}
	return medianOf(v)
}

func medianOf(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	v = slices.Clone(v)
	slices.Sort(v)
	if len(v)%2 == 1 {
		return v[len(v)/2]
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2
}

// gcStats is the process's garbage collection so far: the relay, the
// baseline, the load generator and the consumers share one heap, so a
// difference between runs is what the server under test allocates.
type gcStats struct {
	cycles, allocBytes uint64
	cpu                time.Duration
}

func readGC() gcStats {
	m := []metrics.Sample{{Name: "/gc/cycles/total:gc-cycles"}, {Name: "/gc/heap/allocs:bytes"}, {Name: "/cpu/classes/gc/total:cpu-seconds"}}
	metrics.Read(m)
	var g gcStats
	if m[0].Value.Kind() == metrics.KindUint64 {
		g.cycles = m[0].Value.Uint64()
	}
	if m[1].Value.Kind() == metrics.KindUint64 {
		g.allocBytes = m[1].Value.Uint64()
	}
	if m[2].Value.Kind() == metrics.KindFloat64 {
		g.cpu = time.Duration(m[2].Value.Float64() * float64(time.Second))
	}
	return g
}

func (g gcStats) sub(o gcStats) gcStats {
	return gcStats{cycles: g.cycles - o.cycles, allocBytes: g.allocBytes - o.allocBytes, cpu: g.cpu - o.cpu}
}

// loadAvg is the one-minute load average, where the system reports one.
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return "unknown"
	}
	return f[0]
}

func startRelay(ctx context.Context, o options) (func(), string, error) {
	cfg := relay.Config{Token: o.token, QueueSize: o.queue}
	closeStore := func() {}
	if o.store == relay.StoreJetStream {
		dir, err := os.MkdirTemp("", "bench-relay-js-")
		if err != nil {
			return nil, "", err
		}
		js, err := relay.OpenJetStream(ctx, relay.JetStreamConfig{Dir: dir})
		if err != nil {
			_ = os.RemoveAll(dir)
			return nil, "", err
		}
		cfg.Backend = js
		closeStore = func() { _ = js.Close(); _ = os.RemoveAll(dir) }
	}
	srv, err := relay.NewServer(cfg)
	if err != nil {
		closeStore()
		return nil, "", err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		closeStore()
		return nil, "", err
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { _ = srv.Serve(ctx, ln); close(done) }()
	return func() { cancel(); <-done; closeStore() }, "http://" + ln.Addr().String(), nil
}

type result struct {
	ingested  int64
	delivered int64
	missing   int64
	ingestDur time.Duration
	deliverTo time.Duration
	latencies []time.Duration
	ended     int64
	// cpu is the CPU over the run of what the target charges: in-process,
	// the whole process (the server under test, the load generator and the
	// consumers, which cost the same in every measurement, so a difference
	// is the server's); with -peer, the server's own process alone.
	cpu time.Duration
	// syscr and syscw count the same process's read and write system
	// calls over the run (Linux; zero elsewhere).
	syscr, syscw int64
	// charged names what cpu counts; load is the one-minute load average
	// when the run ended.
	charged, load string
	// gc is this process's garbage collection over the run.
	gc gcStats
}

// cpuPerDelivery is the process's CPU time per delivery, in microseconds.
func (r *result) cpuPerDelivery() float64 {
	if r.delivered == 0 {
		return 0
	}
	return r.cpu.Seconds() * 1e6 / float64(r.delivered)
}

func (r *result) deliveryRate() float64 { return float64(r.delivered) / r.deliverTo.Seconds() }

func (r *result) p(q float64) time.Duration {
	if len(r.latencies) == 0 {
		return 0
	}
	return r.latencies[min(len(r.latencies)-1, int(q*float64(len(r.latencies))))]
}

func (r *result) print(name string, o options) {
	mode := fmt.Sprintf("%s, batch %d", o.ingest, o.batch)
	if o.ingest == "ws" {
		mode = "ws, one event per frame"
	}
	fmt.Printf("\n%s:\n", name)
	fmt.Printf("  ingest:    %d events in %v = %.0f events/s (%s)\n", r.ingested, r.ingestDur.Round(time.Millisecond), float64(r.ingested)/r.ingestDur.Seconds(), mode)
	fmt.Printf("  delivered: %d to %d %s consumers in %v = %.0f deliveries/s (missing %d, streams cut %d)\n",
		r.delivered, o.subs, o.transport, r.deliverTo.Round(time.Millisecond), r.deliveryRate(), r.missing, r.ended)
	fmt.Printf("  %s CPU: %v = %.3f us per delivery; system calls per 100 deliveries: %.2f reads, %.2f writes (load %s)\n",
		r.charged, r.cpu.Round(time.Millisecond), r.cpuPerDelivery(), per100(r.syscr, r.delivered), per100(r.syscw, r.delivered), r.load)
	if r.ingested > 0 {
		fmt.Printf("  process GC: %d cycles, %.0f bytes allocated per event, GC CPU %v\n",
			r.gc.cycles, float64(r.gc.allocBytes)/float64(r.ingested), r.gc.cpu.Round(time.Millisecond))
	}
	fmt.Printf("  latency ingest->deliver (n=%d): p50 %v  p90 %v  p99 %v  max %v\n", len(r.latencies),
		r.p(0.5).Round(time.Microsecond), r.p(0.9).Round(time.Microsecond), r.p(0.99).Round(time.Microsecond), r.p(1).Round(time.Microsecond))
}

// clock is shared by producer and consumers: when each seq was sent, in
// nanoseconds since the run started, in a ring indexed by seq.
type clock struct {
	start time.Time
	ring  []sent
}

type sent struct{ seq, at atomic.Int64 }

const ringSize = 1 << 20

func (c *clock) now() int64 { return int64(time.Since(c.start)) }

func (c *clock) mark(seq, at int64) {
	s := &c.ring[seq%ringSize]
	s.at.Store(0)
	s.seq.Store(seq)
	s.at.Store(at)
}

// sentAt returns when seq was sent, or 0 when the ring has moved on.
func (c *clock) sentAt(seq int64) int64 {
	s := &c.ring[seq%ringSize]
	at := s.at.Load()
	if s.seq.Load() != seq {
		return 0
	}
	return at
}

// target is one server under load: how its consumers read it, how events
// reach it and whose resources a run charges.
type target struct {
	// consume reads one consumer's stream of session's events: it sends
	// nil on ready once subscribed (or why it could not), then calls
	// onEvent with each delivered event's seq until ctx ends.
	consume func(ctx context.Context, session string, ready chan<- error, onEvent func(int64)) error
	// open starts ingest for session's events: send takes NDJSON lines.
	open func(ctx context.Context, session string) (send func([]byte) error, closeSend func(), err error)
	// usage is the CPU time and read and write system calls so far of
	// what a run charges; charged names it.
	usage   func() (cpu time.Duration, r, w int64)
	charged string
}

// relayTarget is an aep-kimi relay (or the raw baseline) at base, in this
// process or not, charged this process's usage.
func relayTarget(o options, base, token, transport string) target {
	return target{
		consume: func(ctx context.Context, session string, ready chan<- error, onEvent func(int64)) error {
			if transport == "sse" {
				return consumeSSE(ctx, base, token, session, ready, onEvent)
			}
			return consumeWS(ctx, base, token, session, ready, onEvent)
		},
		open: func(ctx context.Context, _ string) (func([]byte) error, func(), error) {
			return sender(ctx, o, base, token)
		},
		usage:   selfUsage,
		charged: "process",
	}
}

func selfUsage() (time.Duration, int64, int64) {
	r, w := syscalls("self")
	return cpuTime(), r, w
}

// load runs one measurement against t.
func load(ctx context.Context, o options, t target) (*result, error) {
	session := fmt.Sprintf("load-%d", time.Now().UnixNano())
	maxEvents := 1 << 62
	if o.rate > 0 {
		maxEvents = int(float64(o.rate)*o.duration.Seconds()) + 1
	}
	clk := &clock{ring: make([]sent, ringSize)}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	type consumer struct {
		got  atomic.Int64
		lat  []time.Duration
		last atomic.Int64
	}
	cons := make([]*consumer, o.subs)
	var ended atomic.Int64
	var wg sync.WaitGroup
	ready := make(chan error, o.subs)
	for i := range cons {
		c := &consumer{}
		cons[i] = c
		wg.Add(1)
		go func() {
			defer wg.Done()
			onEvent := func(seq int64) {
				c.got.Add(1)
				c.last.Store(clk.now())
				if seq%16 == 0 {
					if at := clk.sentAt(seq); at > 0 {
						c.lat = append(c.lat, time.Duration(clk.now()-at))
					}
				}
			}
			if err := t.consume(ctx, session, ready, onEvent); err != nil && ctx.Err() == nil {
				ended.Add(1)
			}
		}()
	}
	for range cons {
		if err := <-ready; err != nil {
			return nil, err
		}
	}
	time.Sleep(100 * time.Millisecond) // every subscription attached

	tmpl := template(session, o.size)
	cpu0, r0, w0 := t.usage()
	gc0 := readGC()
	clk.start = time.Now()
	n, ingestDur, err := produce(ctx, o, t, session, tmpl, clk, maxEvents)
	if err != nil {
		return nil, err
	}
	// Wait until deliveries stop (all arrived, or nothing new for 2 s).
	want := int64(n) * int64(o.subs)
	var total int64
	lastChange, prev := time.Now(), int64(-1)
	for {
		total = 0
		for _, c := range cons {
			total += c.got.Load()
		}
		if total >= want || time.Since(lastChange) > 2*time.Second {
			break
		}
		if total != prev {
			prev, lastChange = total, time.Now()
		}
		time.Sleep(5 * time.Millisecond)
	}
	var lastAt int64
	for _, c := range cons {
		lastAt = max(lastAt, c.last.Load())
	}
	cpu1, r1, w1 := t.usage()
	gc1 := readGC()
	cancel()
	wg.Wait()
	r := &result{ingested: int64(n), delivered: total, missing: want - total, ingestDur: ingestDur,
		deliverTo: time.Duration(lastAt), ended: ended.Load(), cpu: cpu1 - cpu0,
		syscr: r1 - r0, syscw: w1 - w0, charged: t.charged, load: loadAvg(), gc: gc1.sub(gc0)}
	for _, c := range cons {
		r.latencies = append(r.latencies, c.lat...)
	}
	slices.Sort(r.latencies)
	return r, nil
}

// template is one event's bytes with a placeholder for seq and id, padded
// to about size bytes.
type eventTemplate struct {
	head, mid, tail []byte
}

func template(session string, size int) eventTemplate {
	e := &aep.Event{AEP: aep.Version, ID: "ID", Type: "tool.completed", Subject: "Bash",
		Time: aep.FormatTime(time.Now()), Source: "aep://bench/agent/kimi-code/session/" + session,
		Agent: "kimi-code", Session: session, Seq: aep.Int64(123456789), Epoch: aep.Int64(0),
		Severity: "notice", Capture: "metadata"}
	b, _ := e.MarshalJSON()
	pad := max(0, size-len(b)-60)
	b = append(b[:len(b)-1], []byte(`,"data":{"tool":{"name":"Bash"},"status":"success","result_digest":"`+strings.Repeat("a", pad)+`"}}`)...)
	i := bytes.Index(b, []byte(`"ID"`))
	j := bytes.Index(b, []byte(`123456789`))
	return eventTemplate{head: b[:i], mid: b[i+4 : j], tail: b[j+9:]}
}

func (t eventTemplate) appendEvent(dst []byte, seq int64) []byte {
	dst = append(dst, t.head...)
	dst = fmt.Appendf(dst, `"B%025d"`, seq)
	dst = append(dst, t.mid...)
	dst = fmt.Append(dst, seq)
	return append(dst, t.tail...)
}

// produce ingests events at the configured rate for the duration.
func produce(ctx context.Context, o options, tg target, session string, t eventTemplate, clk *clock, maxEvents int) (int, time.Duration, error) {
	send, closeSend, err := tg.open(ctx, session)
	if err != nil {
		return 0, 0, err
	}
	defer closeSend()
	batch := o.batch
	if o.ingest == "ws" {
		batch = 1
	}
	var buf []byte
	seq := 0
	start := time.Now()
	for time.Since(start) < o.duration && seq+batch <= maxEvents {
		if o.rate > 0 {
			due := start.Add(time.Duration(float64(seq) / float64(o.rate) * float64(time.Second)))
			if d := time.Until(due); d > 0 {
				time.Sleep(d)
			}
		}
		buf = buf[:0]
		now := clk.now()
		for k := 0; k < batch; k++ {
			clk.mark(int64(seq+k), now)
			buf = t.appendEvent(buf, int64(seq+k))
			buf = append(buf, '\n')
		}
		if err := send(buf); err != nil {
			return seq, time.Since(start), err
		}
		seq += batch
	}
	return seq, time.Since(start), nil
}

func sender(ctx context.Context, o options, base, token string) (func([]byte) error, func(), error) {
	if o.ingest == "http" {
		h := http.Header{"Content-Type": {"application/x-ndjson"}, "Aep-Version": {aep.Version}}
		if token != "" {
			h.Set("Authorization", "Bearer "+token)
		}
		post := poster(ctx, base+"/events", h, http.StatusAccepted)
		return func(body []byte) error {
			_, err := post(body)
			return err
		}, func() {}, nil
	}
	c, err := dialWS(ctx, base, token, wire.NewHello(wire.RoleEmitter, wire.Identity{Agent: "kimi-code", Instance: "bench"}, wire.Capabilities{}))
	if err != nil {
		return nil, nil, err
	}
	return func(b []byte) error {
		return c.Write(ctx, websocket.MessageText, bytes.TrimSuffix(b, []byte{'\n'}))
	}, func() { _ = c.CloseNow() }, nil
}

// poster POSTs bodies to url with the header h, one connection pool for
// all, and returns each answer's body; an answer other than want is an
// error.
func poster(ctx context.Context, url string, h http.Header, want int) func(body []byte) ([]byte, error) {
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
	return func(body []byte) ([]byte, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
		if err != nil {
			return nil, err
		}
		req.Header = h.Clone()
		resp, err := client.Do(req)
		if err != nil {
			return nil, err
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != want {
			return nil, fmt.Errorf("POST %s: HTTP %d %s", req.URL.Path, resp.StatusCode, b)
		}
		return b, nil
	}
}

func dialWS(ctx context.Context, base, token string, hello *wire.Hello) (*websocket.Conn, error) {
	h := http.Header{}
	if token != "" {
		h.Set("Authorization", "Bearer "+token)
	}
	c, _, err := websocket.Dial(ctx, strings.Replace(base, "http", "ws", 1)+"/socket", &websocket.DialOptions{HTTPHeader: h})
	if err != nil {
		return nil, err
	}
	c.SetReadLimit(64 << 20)
	if err := c.Write(ctx, websocket.MessageText, wire.Encode(hello)); err != nil {
		return nil, err
	}
	if _, _, err := c.Read(ctx); err != nil {
		return nil, err
	}
	return c, nil
}

// consumeSSE reads a stream without allocating per event: it only looks at
// id lines, whose last field is the seq.
func consumeSSE(ctx context.Context, base, token, session string, ready chan<- error, onEvent func(int64)) error {
	q := url.Values{"filter": {`{"session":"` + session + `"}`}}
	h := http.Header{}
	if token != "" {
		h.Set("Authorization", "Bearer "+token)
	}
	body, err := getStream(ctx, base+"/stream?"+q.Encode(), h)
	if err != nil {
		ready <- err
		return err
	}
	defer body.Close()
	ready <- nil
	br := bufio.NewReaderSize(body, 256<<10)
	for {
		l, err := br.ReadSlice('\n')
		if err != nil {
			return err
		}
		if bytes.HasPrefix(l, []byte("id: ")) {
			onEvent(lastInt(l))
		}
	}
}

// getStream opens the response stream of a GET of u with the header h; an
// answer other than 200 is an error.
func getStream(ctx context.Context, u string, h http.Header) (io.ReadCloser, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	req.Header = h
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		return nil, fmt.Errorf("GET %s: HTTP %d", req.URL.Path, resp.StatusCode)
	}
	return resp.Body, nil
}

func consumeWS(ctx context.Context, base, token, session string, ready chan<- error, onEvent func(int64)) error {
	c, err := dialWS(ctx, base, token, wire.NewHello(wire.RoleConsumer, wire.Identity{}, wire.Capabilities{}))
	if err != nil {
		ready <- err
		return err
	}
	defer c.CloseNow()
	sub, _ := json.Marshal(map[string]any{"type": "subscribe", "id": "load", "filter": map[string]string{"session": session}})
	if err := c.Write(ctx, websocket.MessageText, sub); err != nil {
		ready <- err
		return err
	}
	ready <- nil
	var buf bytes.Buffer
	for {
		_, r, err := c.Reader(ctx)
		if err != nil {
			return err
		}
		buf.Reset()
		if _, err := buf.ReadFrom(r); err != nil {
			return err
		}
		b := buf.Bytes()
		if i := bytes.Index(b, []byte(`"seq":`)); i >= 0 {
			onEvent(leadingInt(b[i+6:]))
		}
	}
}

func lastInt(l []byte) int64 {
	l = bytes.TrimRight(l, "\r\n")
	return leadingInt(l[bytes.LastIndexByte(l, ':')+1:])
}

func leadingInt(b []byte) int64 {
	var n int64
	for _, c := range b {
		if c < '0' || c > '9' {
			break
		}
		n = n*10 + int64(c-'0')
	}
	return n
}

// startBaseline serves the raw floor, relaytest.Forwarder.
func startBaseline() (func(), string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, "", err
	}
	hs := &http.Server{Handler: relaytest.Forwarder()}
	go func() { _ = hs.Serve(ln) }()
	return func() { _ = hs.Close() }, "http://" + ln.Addr().String(), nil
}

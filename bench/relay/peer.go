package main

// -peer centrifugo: aep-kimi relay binaries against Centrifugo under the
// same load generator, the same envelopes and the same number of SSE
// consumers, every server its own process started afresh on a loopback
// port for each measurement, and charged only its own CPU (/proc/PID/stat).
// Centrifugo gets the events as publications in one channel, posted in
// batches through its server HTTP API (/api/batch), and its consumers read
// its unidirectional SSE transport (/connection/uni_sse), subscribed to
// that channel by their connection token.

import (
	"bufio"
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"debug/buildinfo"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aep-kimi/aep-kimi/internal/testkit/fixtures"
	"github.com/aep-kimi/aep-kimi/internal/testkit/netaddr"
	"github.com/aep-kimi/aep-kimi/internal/testkit/proctest"
	"github.com/aep-kimi/aep-kimi/internal/testkit/usercache"
)

const (
	peerCentrifugo    = "centrifugo"
	centrifugoModule  = "github.com/centrifugal/centrifugo/v6"
	centrifugoVersion = "v6.9.1"
	defaultPacedRate  = 5000
	defaultPacedBatch = 10
	// userHz is the unit of the times in /proc/PID/stat: USER_HZ, 100 on
	// every Linux architecture whatever the kernel's own tick.
	userHz = 100
	// serverUpWait bounds a started server's first answer.
	serverUpWait = 20 * time.Second
	// serverStopWait bounds its graceful stop; past it, it is killed.
	serverStopWait = 5 * time.Second
)

// defaultCentrifugo is where the install command in the missing-binary
// error puts it.
func defaultCentrifugo() string {
	return filepath.Join(usercache.Dir("", "centrifugo-"+centrifugoVersion), "centrifugo")
}

// peerServer is one server of the comparison, started afresh for each
// measurement.
type peerServer struct {
	name string
	// start runs it in dir, a fresh temporary directory, listening on
	// addr, and returns how to load it.
	start func(dir, addr string) (*proc, target, error)
}

// measurement is one phase of every round: as fast as the server takes
// events, or paced.
type measurement struct {
	name string
	o    options
}

func runPeer(ctx context.Context, o options) error {
	if o.peer != peerCentrifugo {
		return fmt.Errorf("-peer %q: want %s", o.peer, peerCentrifugo)
	}
	if o.relayURL != "" || o.transport != "sse" || o.ingest != "http" {
		return errors.New("-peer runs its own servers over SSE with HTTP ingest: drop -relay, -transport and -ingest")
	}
	if o.pacedRate < 0 || o.pacedBatch < 1 {
		return errors.New("-paced-rate must be >= 0 and -paced-batch >= 1")
	}
	if _, err := os.Stat(o.centrifugo); err != nil {
		return fmt.Errorf("no Centrifugo binary at %s (-centrifugo); build it outside the repository with: GOBIN=%s go install %s@%s",
			o.centrifugo, filepath.Dir(defaultCentrifugo()), centrifugoModule, centrifugoVersion)
	}
	work, err := os.MkdirTemp("", "bench-relay-peer-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	bins, err := relayBinaries(ctx, o.relayBins, work)
	if err != nil {
		return err
	}
	var servers []peerServer
	for _, b := range bins {
		fmt.Printf("relay %s: %s relay --store %s\n", b.label, b.path, o.store)
		servers = append(servers, relayServer(o, b))
	}
	fmt.Printf("centrifugo: %s (%s)\n", o.centrifugo, moduleVersion(o.centrifugo))
	servers = append(servers, centrifugoServer(o.centrifugo))

	phases := []measurement{{name: fmt.Sprintf("as fast as taken, batches of %d", o.batch), o: o}}
	if o.pacedRate > 0 {
		p := o
		p.rate, p.batch = o.pacedRate, o.pacedBatch
		phases = append(phases, measurement{name: fmt.Sprintf("paced at %d events/s, batches of %d", p.rate, p.batch), o: p})
	}
	// results[phase][server] holds one result per round.
	results := make([][][]*result, len(phases))
	for i := range results {
		results[i] = make([][]*result, len(servers))
	}
	for r := range o.rounds {
		order := make([]int, len(servers))
		for i := range order {
			order[i] = i
		}
		if r%2 == 1 {
			slices.Reverse(order)
		}
		for _, si := range order {
			for pi, ph := range phases {
				res, err := measurePeer(ctx, ph.o, servers[si], work)
				if err != nil {
					return fmt.Errorf("%s: %w", servers[si].name, err)
				}
				res.print(fmt.Sprintf("round %d, %s, %s", r+1, servers[si].name, ph.name), ph.o)
				results[pi][si] = append(results[pi][si], res)
			}
		}
	}
	peer := len(servers) - 1
	for pi, ph := range phases {
		fmt.Printf("\n%s, %d SSE consumers, medians of %d rounds:\n", ph.name, o.subs, o.rounds)
		for si, s := range servers {
			rs := results[pi][si]
			var missing int64
			for _, x := range rs {
				missing += x.missing
			}
			fmt.Printf("  %-12s %9.0f deliveries/s, %.3f us server CPU each, p50 %.2f ms, p99 %.2f ms, missing %d\n", s.name,
				median(rs, (*result).deliveryRate), median(rs, (*result).cpuPerDelivery), median(rs, p50ms), median(rs, p99ms), missing)
		}
		for si := range peer {
			var dr, cr, lr []float64
			for r := range o.rounds {
				a, b := results[pi][si][r], results[pi][peer][r]
				dr = append(dr, a.deliveryRate()/b.deliveryRate())
				cr = append(cr, a.cpuPerDelivery()/b.cpuPerDelivery())
				lr = append(lr, p99ms(a)/p99ms(b))
				fmt.Printf("  round %d %s ÷ %s: deliveries %.2fx, server CPU per delivery %.2fx, p99 %.2fx (%.2f vs %.2f ms), load %s / %s\n",
					r+1, servers[si].name, servers[peer].name, dr[r], cr[r], lr[r], p99ms(a), p99ms(b), a.load, b.load)
			}
			fmt.Printf("  %s ÷ %s, medians of the rounds' ratios: deliveries %.2fx, server CPU per delivery %.2fx, p99 %.2fx\n",
				servers[si].name, servers[peer].name, medianOf(dr), medianOf(cr), medianOf(lr))
		}
	}
	return nil
}

func p50ms(r *result) float64 { return r.p(0.5).Seconds() * 1000 }
func p99ms(r *result) float64 { return r.p(0.99).Seconds() * 1000 }

// measurePeer starts s in a fresh directory, loads it once and stops it.
func measurePeer(ctx context.Context, o options, s peerServer, work string) (*result, error) {
	dir, err := os.MkdirTemp(work, "server-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	addr, err := netaddr.Free()
	if err != nil {
		return nil, err
	}
	p, t, err := s.start(dir, addr)
	if err != nil {
		return nil, err
	}
	if _, err := p.cpu(); err != nil {
		p.stop()
		return nil, fmt.Errorf("-peer reads a server's CPU time from /proc (Linux): %w", err)
	}
	res, err := load(ctx, o, t)
	p.stop()
	if err != nil {
		return nil, fmt.Errorf("%w%s", err, p.logTail())
	}
	return res, nil
}

// relayBinary is an aep-kimi binary labelled for the report.
type relayBinary struct{ label, path string }

// relayBinaries parses -aep-kimi (label=path,...); without it, it builds
// this checkout's aep-kimi into work.
func relayBinaries(ctx context.Context, list, work string) ([]relayBinary, error) {
	if list == "" {
		root, err := fixtures.ModuleRoot()
		if err != nil {
			return nil, err
		}
		bin := filepath.Join(work, "aep-kimi")
		if err := proctest.GoBuild(ctx, root, bin, "./cmd/aep-kimi"); err != nil {
			return nil, err
		}
		return []relayBinary{{"aep-kimi", bin}}, nil
	}
	var bins []relayBinary
	for _, item := range strings.Split(list, ",") {
		label, path, ok := strings.Cut(item, "=")
		if !ok || label == "" || path == "" {
			return nil, fmt.Errorf("-aep-kimi %q: want label=path, comma-separated", list)
		}
		if _, err := os.Stat(path); err != nil {
			return nil, fmt.Errorf("-aep-kimi %s: %w", label, err)
		}
		bins = append(bins, relayBinary{label, path})
	}
	return bins, nil
}

func relayServer(o options, b relayBinary) peerServer {
	return peerServer{name: b.label, start: func(dir, addr string) (*proc, target, error) {
		// The relay's own settings come from its flags and a fresh home,
		// none from this environment: no token, so none in the load.
		env := environWithout("AEP_", "AEP_HOME="+dir)
		p, err := startServer(dir, env, "http://"+addr+"/healthz", b.path, "relay", "--listen", addr, "--store", o.store)
		if err != nil {
			return nil, target{}, err
		}
		t := relayTarget(o, "http://"+addr, "", "sse")
		t.usage, t.charged = p.usage, "server"
		return p, t, nil
	}}
}

func centrifugoServer(bin string) peerServer {
	return peerServer{name: peerCentrifugo, start: func(dir, addr string) (*proc, target, error) {
		tokenKey, apiKey := randomKey(), randomKey()
		cfg, err := centrifugoConfig(addr, tokenKey, apiKey)
		if err != nil {
			return nil, target{}, err
		}
		// The keys stay in this 0600 file, never on a command line.
		path := filepath.Join(dir, "config.json")
		if err := os.WriteFile(path, cfg, 0o600); err != nil {
			return nil, target{}, err
		}
		base := "http://" + addr
		// Its settings are the file's alone: CENTRIFUGO_* variables would
		// override them.
		p, err := startServer(dir, environWithout("CENTRIFUGO_"), base+"/api/info", bin, "--config", path)
		if err != nil {
			return nil, target{}, err
		}
		h := http.Header{"Content-Type": {"application/json"}, "X-Api-Key": {apiKey}}
		return p, target{
			consume: func(ctx context.Context, session string, ready chan<- error, onEvent func(int64)) error {
				return consumeUniSSE(ctx, base, connectToken(tokenKey, session), ready, onEvent)
			},
			open: func(ctx context.Context, session string) (func([]byte) error, func(), error) {
				post := poster(ctx, base+"/api/batch", h, http.StatusOK)
				var body []byte
				return func(lines []byte) error {
					body = publishBatch(body[:0], session, lines)
					reply, err := post(body)
					if err == nil && bytes.Contains(reply, []byte(`"error"`)) {
						err = fmt.Errorf("POST /api/batch: %.200s", reply)
					}
					return err
				}, func() {}, nil
			},
			usage:   p.usage,
			charged: "server",
		}, nil
	}}
}

// centrifugoConfig is a Centrifugo v6 configuration serving its HTTP API
// and unidirectional SSE on addr alone, connections authenticated by
// HMAC-signed tokens, and nothing sent anywhere else.
func centrifugoConfig(addr, tokenKey, apiKey string) ([]byte, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	p, err := strconv.Atoi(port)
	if err != nil {
		return nil, fmt.Errorf("port of %s: %w", addr, err)
	}
	type obj = map[string]any
	return json.MarshalIndent(obj{
		"http_server": obj{"address": host, "port": p},
		"log":         obj{"level": "error"},
		"client":      obj{"token": obj{"hmac_secret_key": tokenKey}},
		"http_api":    obj{"key": apiKey},
		"uni_sse":     obj{"enabled": true},
		"usage_stats": obj{"disabled": true},
	}, "", "  ")
}

// connectToken is an HS256 connection JWT whose channels claim subscribes
// the connection to channel on the server's side, as a unidirectional
// client cannot subscribe itself.
func connectToken(key, channel string) string {
	enc := base64.RawURLEncoding
	claims, _ := json.Marshal(map[string]any{"sub": "bench", "channels": []string{channel}, "exp": time.Now().Add(time.Hour).Unix()})
	s := enc.EncodeToString([]byte(`{"alg":"HS256","typ":"JWT"}`)) + "." + enc.EncodeToString(claims)
	m := hmac.New(sha256.New, []byte(key))
	m.Write([]byte(s))
	return s + "." + enc.EncodeToString(m.Sum(nil))
}

// publishBatch appends an /api/batch body publishing each NDJSON line of
// lines, in order, as one publication's data in channel.
func publishBatch(dst []byte, channel string, lines []byte) []byte {
	dst = append(dst, `{"commands":[`...)
	for first := true; len(lines) > 0; first = false {
		var l []byte
		l, lines, _ = bytes.Cut(lines, []byte{'\n'})
		if !first {
			dst = append(dst, ',')
		}
		dst = append(dst, `{"publish":{"channel":`...)
		dst = strconv.AppendQuote(dst, channel)
		dst = append(dst, `,"data":`...)
		dst = append(dst, l...)
		dst = append(dst, `}}`...)
	}
	return append(dst, `]}`...)
}

// consumeUniSSE reads a Centrifugo unidirectional SSE connection: ready
// once its connect push lists the subscription, then each publication's
// seq, found by a byte scan as consumeSSE does.
func consumeUniSSE(ctx context.Context, base, token string, ready chan<- error, onEvent func(int64)) error {
	q := url.Values{"cf_connect": {`{"token":"` + token + `"}`}}
	body, err := getStream(ctx, base+"/connection/uni_sse?"+q.Encode(), http.Header{})
	if err != nil {
		ready <- err
		return err
	}
	defer body.Close()
	br := bufio.NewReaderSize(body, 256<<10)
	connected := false
	for {
		l, err := br.ReadSlice('\n')
		if err != nil {
			if !connected {
				ready <- fmt.Errorf("uni_sse ended before its connect push: %w", err)
			}
			return err
		}
		if !bytes.HasPrefix(l, []byte("data: ")) {
			continue
		}
		switch {
		case bytes.Contains(l, []byte(`"pub":`)):
			if i := bytes.Index(l, []byte(`"seq":`)); i >= 0 {
				onEvent(leadingInt(l[i+6:]))
			}
		case !connected && bytes.HasPrefix(l, []byte(`data: {"connect":`)):
			connected = true
			ready <- nil
		case !connected:
			err := fmt.Errorf("uni_sse answered %.200s before its connect push", l)
			ready <- err
			return err
		}
	}
}

// proc is a started server.
type proc struct {
	cmd    *exec.Cmd
	exited chan struct{}
	dir    string
}

// startServer starts bin with args in dir, its output in dir/server.log,
// and waits until up answers at all.
func startServer(dir string, env []string, up, bin string, args ...string) (*proc, error) {
	logf, err := os.Create(filepath.Join(dir, "server.log"))
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	cmd := exec.Command(bin, args...)
	cmd.Dir, cmd.Env, cmd.Stdout, cmd.Stderr = dir, env, logf, logf
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &proc{cmd: cmd, exited: make(chan struct{}), dir: dir}
	go func() { _ = cmd.Wait(); close(p.exited) }()
	for deadline := time.Now().Add(serverUpWait); time.Now().Before(deadline); {
		select {
		case <-p.exited:
			return nil, fmt.Errorf("%s exited at start: %s%s", filepath.Base(bin), cmd.ProcessState, p.logTail())
		default:
		}
		if resp, err := http.Get(up); err == nil {
			resp.Body.Close()
			return p, nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	p.stop()
	return nil, fmt.Errorf("%s did not answer %s in %v%s", filepath.Base(bin), up, serverUpWait, p.logTail())
}

// stop interrupts the server and kills it if it is still there after
// serverStopWait.
func (p *proc) stop() {
	_ = p.cmd.Process.Signal(os.Interrupt)
	select {
	case <-p.exited:
	case <-time.After(serverStopWait):
		_ = p.cmd.Process.Kill()
		<-p.exited
	}
}

// logTail is the end of the server's output, to explain a failure.
func (p *proc) logTail() string {
	b, _ := os.ReadFile(filepath.Join(p.dir, "server.log"))
	b = bytes.TrimSpace(b)
	if len(b) == 0 {
		return ""
	}
	if len(b) > 800 {
		b = b[len(b)-800:]
	}
	return "; its output ends:\n" + string(b)
}

// usage reads the server's CPU time (user and system) from /proc/PID/stat
// and its read and write system calls from /proc/PID/io.
func (p *proc) usage() (time.Duration, int64, int64) {
	cpu, err := p.cpu()
	if err != nil {
		return 0, 0, 0
	}
	r, w := syscalls(strconv.Itoa(p.cmd.Process.Pid))
	return cpu, r, w
}

func (p *proc) cpu() (time.Duration, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(p.cmd.Process.Pid) + "/stat")
	if err != nil {
		return 0, err
	}
	return statCPU(b)
}

// statCPU is utime + stime of a /proc/PID/stat line. The command name in
// brackets may hold spaces and brackets: fields count from the last ')'.
func statCPU(b []byte) (time.Duration, error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, errors.New("stat: no command name")
	}
	// f[0] is field 3 (the state); utime and stime are fields 14 and 15.
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0, fmt.Errorf("stat: %d fields after the command name", len(f))
	}
	u, err := strconv.ParseInt(f[11], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("stat utime: %w", err)
	}
	st, err := strconv.ParseInt(f[12], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("stat stime: %w", err)
	}
	return time.Duration(u+st) * time.Second / userHz, nil
}

// moduleVersion is the main module and version a Go binary was built from.
func moduleVersion(bin string) string {
	bi, err := buildinfo.ReadFile(bin)
	if err != nil {
		return "version unknown: " + err.Error()
	}
	return bi.Main.Path + " " + bi.Main.Version + ", " + bi.GoVersion
}

func randomKey() string { return rand.Text() }

// environWithout is this process's environment without the variables
// named with prefix, and with extra.
func environWithout(prefix string, extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, prefix) {
			env = append(env, kv)
		}
	}
	return append(env, extra...)
}

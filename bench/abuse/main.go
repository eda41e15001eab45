// Command abuse replays two resource attacks against a built aep-kimi binary
// and reports the daemon's resident memory (Linux /proc) and how long the
// attack held on. It starts the daemon itself, on a loopback port, so the
// figures start from a fresh process.
//
//	go build -o /tmp/aep-kimi ./cmd/aep-kimi
//	go run ./bench/abuse -bin /tmp/aep-kimi -attack flood -mb 300          # 300 MB of ~1 MiB events
//	go run ./bench/abuse -bin /tmp/aep-kimi -attack slow -conns 60         # 60 bodies trickling 1 byte/s
//	go run ./bench/abuse -bin /tmp/aep-kimi -attack slow -daemon adapter
//
// flood: POST -mb megabytes of -size byte events (each its own session, so
// the per-session cap never trims) and report RSS before, after and at peak.
// slow: open -conns connections that each declare a 16 MiB body and send one
// byte a second; report the RSS they add and when the daemon closed them.
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

type options struct {
	bin, attack, daemon string
	mb, size, conns     int
	bufferBytes         int64
	hold                time.Duration
}

func main() {
	var o options
	flag.StringVar(&o.bin, "bin", "", "path to a built aep-kimi binary (required)")
	flag.StringVar(&o.attack, "attack", "flood", "flood (large events) or slow (trickled bodies)")
	flag.StringVar(&o.daemon, "daemon", "relay", "slow attack target: relay or adapter")
	flag.IntVar(&o.mb, "mb", 300, "flood: megabytes to POST")
	flag.IntVar(&o.size, "size", 1<<20, "flood: bytes per event")
	flag.Int64Var(&o.bufferBytes, "buffer-bytes", 0, "flood: relay AEP_BUFFER_BYTES (0: the relay's default)")
	flag.IntVar(&o.conns, "conns", 60, "slow: connections")
	flag.DurationVar(&o.hold, "hold", 60*time.Second, "slow: give up waiting for the daemon to close them after this long")
	flag.Parse()
	if o.bin == "" {
		fmt.Fprintln(os.Stderr, "abuse: -bin is required (go build -o /tmp/aep-kimi ./cmd/aep-kimi)")
		os.Exit(2)
	}
	var err error
	switch o.attack {
	case "flood":
		err = flood(o)
	case "slow":
		err = slow(o)
	default:
		err = fmt.Errorf("unknown -attack %q", o.attack)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "abuse:", err)
		os.Exit(1)
	}
}

// daemon is a started aep-kimi subcommand.
type daemon struct {
	cmd  *exec.Cmd
	addr string
	home string
}

func start(bin, sub string, env ...string) (*daemon, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	addr := ln.Addr().String()
	ln.Close()
	home, err := os.MkdirTemp("", "aep-abuse")
	if err != nil {
		return nil, err
	}
	args := []string{sub, "--listen", addr}
	if sub == "adapter" {
		args = append(args, "--relay", "none")
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), append([]string{"AEP_HOME=" + home, "AEP_TOKEN=", "AEP_TOKEN_FILE="}, env...)...)
	cmd.Stderr = io.Discard
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	d := &daemon{cmd: cmd, addr: addr, home: home}
	for deadline := time.Now().Add(20 * time.Second); ; {
		if resp, err := http.Get("http://" + addr + "/healthz"); err == nil {
			resp.Body.Close()
			return d, nil
		}
		if time.Now().After(deadline) {
			d.stop()
			return nil, fmt.Errorf("%s did not come up", sub)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (d *daemon) stop() {
	d.cmd.Process.Kill() //nolint:errcheck // gone either way
	d.cmd.Wait()         //nolint:errcheck // killed
	os.RemoveAll(d.home)
}

// memKB returns VmRSS and VmHWM (peak RSS) of pid in kB.
func memKB(pid int) (rss, peak int64) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return -1, -1
	}
	for _, l := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(l, ":")
		if !ok {
			continue
		}
		n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		switch k {
		case "VmRSS":
			rss = n
		case "VmHWM":
			peak = n
		}
	}
	return rss, peak
}

func mb(kb int64) string { return fmt.Sprintf("%.0f MB", float64(kb)/1024) }

func flood(o options) error {
	var env []string
	if o.size > 16<<20-1024 {
		env = append(env, fmt.Sprintf("AEP_MAX_BODY=%d", o.size+4096))
	}
	if o.bufferBytes > 0 {
		env = append(env, fmt.Sprintf("AEP_BUFFER_BYTES=%d", o.bufferBytes))
	}
	d, err := start(o.bin, "relay", env...)
	if err != nil {
		return err
	}
	defer d.stop()
	pid := d.cmd.Process.Pid
	before, _ := memKB(pid)
	pad := strings.Repeat("x", max(o.size-300, 1))
	n := o.mb << 20 / o.size
	client := &http.Client{Timeout: time.Minute}
	t0 := time.Now()
	for i := range n {
		ev := fmt.Sprintf(`{"aep":"0.1","id":"flood-%d","type":"progress.status","time":"2026-01-01T00:00:00Z","source":"aep://abuse/agent/a","agent":"a","session":"flood-%d","seq":0,"epoch":0,"data":{"pad":"%s"}}`, i, i, pad)
		req, _ := http.NewRequest(http.MethodPost, "http://"+d.addr+"/events", strings.NewReader(ev))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("AEP-Version", "0.1")
		resp, err := client.Do(req)
		if err != nil {
			return fmt.Errorf("event %d: %w", i, err)
		}
		io.Copy(io.Discard, resp.Body) //nolint:errcheck // drained for reuse
		resp.Body.Close()
		if resp.StatusCode != http.StatusAccepted {
			return fmt.Errorf("event %d: HTTP %d", i, resp.StatusCode)
		}
	}
	time.Sleep(2 * time.Second) // let the runtime settle
	after, peak := memKB(pid)
	health, _ := get("http://" + d.addr + "/healthz")
	fmt.Printf("flood: %d events of %d bytes (%d MB) in %v\n", n, o.size, n*o.size>>20, time.Since(t0).Round(time.Millisecond))
	fmt.Printf("relay RSS: before %s, after %s, peak %s\n", mb(before), mb(after), mb(peak))
	fmt.Printf("healthz: %s\n", strings.TrimSpace(health))
	return nil
}

func get(u string) (string, error) {
	resp, err := http.Get(u)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

func slow(o options) error {
	d, err := start(o.bin, o.daemon)
	if err != nil {
		return err
	}
	defer d.stop()
	head := "POST /events HTTP/1.1\r\nHost: " + d.addr + "\r\nContent-Type: application/json\r\nAEP-Version: 0.1\r\nContent-Length: 16777216\r\n\r\n{"
	if o.daemon == "adapter" {
		tok, err := os.ReadFile(filepath.Join(d.home, "kimi", "hook.token"))
		if err != nil {
			return err
		}
		head = "POST /hook HTTP/1.1\r\nHost: " + d.addr + "\r\nContent-Type: application/json\r\nAuthorization: Bearer " +
			strings.TrimSpace(string(tok)) + "\r\nContent-Length: 16777216\r\n\r\n{"
	}
	pid := d.cmd.Process.Pid
	before, _ := memKB(pid)
	ctx, cancel := context.WithTimeout(context.Background(), o.hold)
	defer cancel()
	t0 := time.Now()
	var wg sync.WaitGroup
	closed := make(chan time.Duration, o.conns)
	statuses := make(chan string, o.conns)
	for range o.conns {
		conn, err := net.Dial("tcp", d.addr)
		if err != nil {
			return err
		}
		if _, err := io.WriteString(conn, head); err != nil {
			return err
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer conn.Close()
			go func() { // one byte a second until closed
				t := time.NewTicker(time.Second)
				defer t.Stop()
				for {
					select {
					case <-ctx.Done():
						conn.Close()
						return
					case <-t.C:
						if _, err := conn.Write([]byte(" ")); err != nil {
							return
						}
					}
				}
			}()
			r := bufio.NewReader(conn)
			status, _ := r.ReadString('\n')
			_, err := io.Copy(io.Discard, r)
			if ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				statuses <- "still open at -hold"
				return
			}
			statuses <- strings.TrimSpace(status)
			closed <- time.Since(t0)
		}()
	}
	time.Sleep(5 * time.Second)
	during, _ := memKB(pid)
	wg.Wait()
	close(closed)
	close(statuses)
	var last time.Duration
	n := 0
	for c := range closed {
		last = max(last, c)
		n++
	}
	seen := map[string]int{}
	for s := range statuses {
		seen[s]++
	}
	_, peak := memKB(pid)
	fmt.Printf("slow: %d connections to the %s declaring 16 MiB, 1 byte/s\n", o.conns, o.daemon)
	fmt.Printf("%s RSS: before %s, after 5 s %s (+%s), peak %s\n", o.daemon, mb(before), mb(during), mb(during-before), mb(peak))
	fmt.Printf("closed by the daemon: %d of %d, the last after %v; replies %v\n", n, o.conns, last.Round(100*time.Millisecond), seen)
	return nil
}

package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"runtime/trace"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/aep-kimi/aep-kimi/relay"
)

// serve runs the target on a loopback port, prints its address and serves
// until interrupted.
func serve(c config) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	if c.trace != "" {
		f, err := os.Create(c.trace)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := trace.Start(f); err != nil {
			return err
		}
		defer trace.Stop()
	}
	fmt.Println(ln.Addr())
	switch c.target {
	case "relay":
		srv, err := relay.NewServer(relay.Config{})
		if err != nil {
			return err
		}
		return srv.Serve(ctx, ln)
	case "raw":
		hs := &http.Server{Handler: newRaw()}
		go func() { <-ctx.Done(); _ = hs.Close() }()
		if err := hs.Serve(ln); err != http.ErrServerClosed {
			return err
		}
		return nil
	}
	return fmt.Errorf("-target %q: want relay or raw", c.target)
}

// The histogram has fine buckets up to fineUpTo and coarse ones past it up
// to 2 s; samples past the last count there.
const (
	fine      = 10 * time.Microsecond
	fineUpTo  = 20 * time.Millisecond
	coarse    = time.Millisecond
	nFine     = int(fineUpTo / fine)
	nBuckets  = nFine + int((2*time.Second-fineUpTo)/coarse)
	msPerNano = 1 / float64(time.Millisecond)
)

type histogram [nBuckets]int64

func (h *histogram) add(d time.Duration) {
	i := int(max(d, 0) / fine)
	if d >= fineUpTo {
		i = nFine + int((d-fineUpTo)/coarse)
	}
	h[min(i, nBuckets-1)]++
}

// upper is bucket i's upper edge.
func upper(i int) time.Duration {
	if i < nFine {
		return time.Duration(i+1) * fine
	}
	return fineUpTo + time.Duration(i-nFine+1)*coarse
}

// quantile is the upper edge of the bucket holding the q-th of n samples,
// in ms; q = 1 is the largest sample's.
func (h *histogram) quantile(q float64, n int64) float64 {
	want := min(int64(q*float64(n)), n-1)
	var seen int64
	for i, c := range h {
		if seen += c; seen > want {
			return float64(upper(i)) * msPerNano
		}
	}
	return float64(upper(nBuckets-1)) * msPerNano
}

// subscribe opens c.subs streams of c.session, says ready once every one
// has its response headers (the relay answers only once it has
// subscribed), then times events until each stream has c.events or
// nothing new came for idleEnd, and prints its subResult.
func subscribe(c config) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	filter, _ := json.Marshal(map[string]any{"session": laneSessions(c)})
	q := url.Values{"filter": {string(filter)}}
	client := &http.Client{Transport: &http.Transport{MaxConnsPerHost: 0, MaxIdleConnsPerHost: c.subs}}
	type stream struct {
		body  io.ReadCloser
		hist  histogram
		got   int64
		timed int64
	}
	streams := make([]*stream, c.subs)
	for i := range streams {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.url+"/stream?"+q.Encode(), nil)
		if err != nil {
			return err
		}
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("GET /stream: HTTP %d", resp.StatusCode)
		}
		streams[i] = &stream{body: resp.Body}
	}
	// The first timed event is the first sent warmup after the first
	// event's send time; every stream reads that first send time from
	// the first event it sees, the same for all.
	warm := c.warmup.Nanoseconds()
	var mu sync.Mutex
	last := time.Now()
	var wg sync.WaitGroup
	for _, s := range streams {
		wg.Add(1)
		go func() {
			defer wg.Done()
			br := bufio.NewReaderSize(s.body, 64<<10)
			var first int64
			for s.got < int64(c.events) {
				l, err := br.ReadSlice('\n')
				if err != nil {
					return
				}
				if !bytes.HasPrefix(l, []byte("data: ")) {
					continue
				}
				now := time.Now().UnixNano()
				sent := intAfter(l, `"sent_ns":`)
				if sent == 0 {
					continue
				}
				s.got++
				if s.got&1023 == 0 {
					mu.Lock()
					last = time.Now()
					mu.Unlock()
				}
				if first == 0 {
					// The send time of the run's first event, from any
					// event's: each carries its place in the schedule (n).
					first = sent - intAfter(l, `"n":`)*int64(time.Second)/int64(c.rate)
				}
				if sent-first < warm {
					continue
				}
				s.hist.add(time.Duration(now - sent))
				s.timed++
			}
		}()
	}
	fmt.Println("ready")
	readyAt := time.Now()
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	// The publisher's run plus idleEnd bounds the wait; past the run, a
	// quiet idleEnd ends it.
	deadline := time.Now().Add(c.duration + startWait)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
wait:
	for {
		select {
		case <-done:
			break wait
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
			mu.Lock()
			quiet := time.Since(last)
			mu.Unlock()
			if time.Now().After(deadline) || quiet > idleEnd && time.Since(readyAt) > c.duration {
				break wait
			}
		}
	}
	for _, s := range streams {
		_ = s.body.Close()
	}
	<-done
	var all histogram
	var res subResult
	for _, s := range streams {
		for i, n := range s.hist {
			all[i] += n
		}
		res.Delivered += s.got
		res.Timed += s.timed
	}
	res.Missing = int64(c.events)*int64(c.subs) - res.Delivered
	res.P50, res.P99, res.P999 = all.quantile(0.5, res.Timed), all.quantile(0.99, res.Timed), all.quantile(0.999, res.Timed)
	res.Max = all.quantile(1, res.Timed)
	b, _ := json.Marshal(res)
	fmt.Println(string(b))
	return nil
}

// publish POSTs c.events' worth of batches on the schedule and prints its
// pubResult. Batch k is due at k·batch/rate after the start and goes on
// lane k mod lanes: each lane is a session of its own on a connection of
// its own, posting its batches in order, so a slow answer delays that
// lane's next batch only.
func publish(c config) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	fmt.Println("started")
	events := int(float64(c.rate)*c.duration.Seconds()) / c.batch * c.batch
	batches := events / c.batch
	sessions := laneSessions(c)
	lates := make([]time.Duration, batches)
	start := time.Now()
	var g errgroup.Group
	for lane, session := range sessions {
		g.Go(func() error {
			ev := newEvent(session, c.size)
			client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1}}
			var body []byte
			seq := 0
			for k := lane; k < batches; k += len(sessions) {
				n := k * c.batch
				due := start.Add(time.Duration(n) * time.Second / time.Duration(c.rate))
				if d := time.Until(due); d > 0 {
					time.Sleep(d)
				}
				now := time.Now()
				lates[k] = now.Sub(due)
				body = body[:0]
				for i := range c.batch {
					body = ev.append(body, seq+i, n+i, now.UnixNano())
				}
				seq += c.batch
				if err := postBatch(ctx, client, c.url, body); err != nil {
					return err
				}
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	elapsed := time.Since(start)
	slices.Sort(lates)
	res := pubResult{Events: events, Seconds: elapsed.Seconds()}
	if len(lates) > 0 {
		res.LateP99 = float64(lates[len(lates)*99/100]) / float64(time.Millisecond)
	}
	b, _ := json.Marshal(res)
	fmt.Println(string(b))
	return nil
}

// postBatch POSTs one NDJSON batch and wants it accepted.
func postBatch(ctx context.Context, client *http.Client, base string, body []byte) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/events", bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/x-ndjson")
	req.Header.Set("AEP-Version", "0.1")
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		return fmt.Errorf("POST /events: HTTP %d %s", resp.StatusCode, b)
	}
	return nil
}

// laneSessions names the sessions the events are spread over: the one
// session itself when there is one lane.
func laneSessions(c config) []string {
	if c.lanes <= 1 {
		return []string{c.session}
	}
	out := make([]string, c.lanes)
	for i := range out {
		out[i] = fmt.Sprintf("%s-%d", c.session, i)
	}
	return out
}

// event writes one AEP tool.completed event as an NDJSON line, padded to
// about size bytes, with its seq, its place in the whole schedule (data.n)
// and the send time in data.sent_ns.
type event struct{ head, mid, tail string }

func newEvent(session string, size int) event {
	head := `{"aep":"0.1","id":"F`
	mid := `","type":"tool.completed","subject":"Bash","time":"` + time.Now().UTC().Format("2006-01-02T15:04:05.000Z") +
		`","source":"aep://fanout/agent/kimi-code/session/` + session + `","agent":"kimi-code","session":"` + session +
		`","epoch":0,"severity":"notice","capture":"metadata","seq":`
	tail := `,"data":{"tool":{"name":"Bash"},"status":"success","n":%d,"sent_ns":`
	pad := max(0, size-len(head)-len(mid)-len(tail)-25-10-10-19-20)
	return event{head: head, mid: mid, tail: tail + "%d" + `,"pad":"` + strings.Repeat("p", pad) + `"}}`}
}

func (e event) append(dst []byte, seq, n int, sentNs int64) []byte {
	dst = append(dst, e.head...)
	id := strconv.Itoa(seq)
	dst = append(dst, strings.Repeat("0", max(0, 25-len(id)))...)
	dst = append(dst, id...)
	dst = append(dst, e.mid...)
	dst = strconv.AppendInt(dst, int64(seq), 10)
	t, rest, _ := strings.Cut(e.tail, "%d")
	dst = append(dst, t...)
	dst = strconv.AppendInt(dst, int64(n), 10)
	t, rest, _ = strings.Cut(rest, "%d")
	dst = append(dst, t...)
	dst = strconv.AppendInt(dst, sentNs, 10)
	dst = append(dst, rest...)
	return append(dst, '\n')
}

// intAfter reads the digits after the first key in l; 0 when none.
func intAfter(l []byte, key string) int64 {
	i := bytes.Index(l, []byte(key))
	if i < 0 {
		return 0
	}
	var n int64
	for _, c := range l[i+len(key):] {
		if c < '0' || c > '9' {
			break
		}
		n = n*10 + int64(c-'0')
	}
	return n
}

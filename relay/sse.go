package relay

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/aep-kimi/aep-kimi/aep"
	"github.com/aep-kimi/aep-kimi/internal/httpguard"
	"github.com/aep-kimi/aep-kimi/relay/wire"
)

var (
	errDraining = errors.New("relay draining")
	errOverflow = errors.New("consumer too slow")
	errRevoked  = errors.New("credential ended")
)

// streamParams is a parsed subscription request, shared by SSE and the
// socket's subscribe frame.
type streamParams struct {
	filter *aep.Filter
	// filterKey is the filter as sent, which identical filters share.
	filterKey string
	ceiling   aep.Capture
	capped    bool
	from      wire.From
}

// serveStream is GET /stream (AEP-0003 §3.3): filter, capture ceiling, from
// (positions or "all") or Last-Event-ID, and live=0 for a single replay pass.
// Every refusal is answered before any header goes out.
func (s *Server) serveStream(w http.ResponseWriter, r *http.Request) {
	if s.draining() {
		httpguard.WriteError(w, http.StatusServiceUnavailable, wire.CodeShuttingDown, "relay is shutting down")
		return
	}
	release, ok := s.takeConn(w, bindingSSE)
	if !ok {
		return
	}
	defer release()
	q := r.URL.Query()
	var p streamParams
	var err error
	if p.filter, err = aep.ParseFilter([]byte(q.Get("filter"))); err != nil {
		httpguard.WriteError(w, http.StatusBadRequest, wire.CodeInvalidFilter, err.Error())
		return
	}
	p.filterKey = q.Get("filter")
	if c := q.Get("capture"); c != "" {
		if p.ceiling, err = aep.ParseCapture(c); err != nil {
			httpguard.WriteError(w, http.StatusBadRequest, wire.CodeInvalidCapture, err.Error())
			return
		}
		p.capped = true
	}
	switch {
	case q.Has("from"):
		if p.from, err = wire.ParseFrom([]byte(q.Get("from"))); err != nil {
			httpguard.WriteError(w, http.StatusBadRequest, wire.CodeInvalidFilter, "from: "+err.Error())
			return
		}
	case r.Header.Get("Last-Event-ID") != "":
		res, err := wire.ParseEventID(r.Header.Get("Last-Event-ID"))
		if err != nil {
			httpguard.WriteError(w, http.StatusBadRequest, wire.CodeInvalidFilter, err.Error())
			return
		}
		p.from = wire.From{Positions: []wire.Resume{res}}
	}
	if n := len(p.from.Positions); n > s.cfg.MaxFrom {
		httpguard.WriteError(w, http.StatusBadRequest, wire.CodeLimitExceeded,
			fmt.Sprintf("from names %d positions; the limit (AEP_MAX_FROM) is %d", n, s.cfg.MaxFrom))
		return
	}
	live := q.Get("live") != "0" && q.Get("live") != "false"
	adm := admissionOf(r)
	p.capTo(adm)

	// Subscribe before answering: once the client sees 200 it is attached.
	queue := newOutQueue(s.cfg.QueueSize, s.metrics)
	sub := newSubscription("", queue, 0, 0)
	sub.ceiling, sub.capped = p.ceiling, p.capped
	cancel, err := s.backend.Subscribe(SubscribeRequest{Filter: p.filter, From: p.from, filterKey: p.filterKey}, sub)
	if err != nil {
		httpguard.WriteError(w, http.StatusServiceUnavailable, wire.CodeLimitExceeded, err.Error())
		return
	}
	defer cancel()

	// Counted before the first byte goes out, so a client that has its
	// headers already shows in /healthz and /metrics.
	s.nSSE.Add(1)
	defer s.nSSE.Add(-1)
	conns := s.metrics.connections.WithLabelValues(bindingSSE)
	conns.Inc()
	defer conns.Dec()
	s.metrics.subs.Inc()
	defer s.metrics.subs.Dec()

	rc := http.NewResponseController(w)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream; charset=utf-8")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	if live && r.ProtoMajor == 1 {
		// The body runs until the connection closes, unchunked: each
		// flush is then one write(2) of what was written, where chunking
		// adds a header and a trailer that cost a system call each.
		// (net/http's provision for event streams; HTTP/2 has its own
		// framing and drops the header.)
		h.Set("Transfer-Encoding", "identity")
	}
	w.WriteHeader(http.StatusOK)
	direct := &deadlineWriter{w: w, rc: rc, timeout: s.cfg.WriteTimeout}
	out := bufio.NewWriterSize(direct, 64<<10)
	_, _ = out.WriteString("retry: 3000\n\n")
	if err := out.Flush(); err != nil {
		return
	}

	sw := &sseWriter{srv: s, out: out, direct: direct, sub: sub, ctx: r.Context(), revoked: adm.done()}
	if err := sw.run(live); err != nil {
		if errors.Is(err, os.ErrDeadlineExceeded) {
			// A write stalled past WriteTimeout: the consumer is cut off
			// like one whose queue overflowed, and counted the same way.
			sub.q.overflow()
		}
		switch {
		case errors.Is(err, errDraining):
			_, _ = out.WriteString(": shutting-down\n\n")
		case errors.Is(err, errOverflow):
			_, _ = out.WriteString(": slow-consumer: stream ended so nothing at notice or above is lost; resume from the last id\n\n")
		case errors.Is(err, errRevoked):
			_, _ = out.WriteString(": " + adm.ended() + "\n\n")
		}
		_ = out.Flush()
	}
}

// deadlineWriter keeps a write deadline on the client's connection and
// flushes every write through, so a stalled client is cut off instead of
// holding its stream forever: every write starts with between timeout and
// a quarter more (deadlineSlack) before the deadline. The deadline is re-armed
// only when less than timeout is left, not before every write: at 10,000
// events/s to 100 streams a re-arm per write was 100,000 timer updates a
// second on the writers' path, which the raw forwarder does not pay.
type deadlineWriter struct {
	w        http.ResponseWriter
	rc       *http.ResponseController
	timeout  time.Duration
	deadline time.Time
}

// deadlineSlack divides timeout into how much later than timeout a re-armed
// deadline lies: the writes in between need not re-arm it.
const deadlineSlack = 4

func (d *deadlineWriter) Write(p []byte) (int, error) {
	if now := time.Now(); d.deadline.Sub(now) < d.timeout {
		d.deadline = now.Add(d.timeout + d.timeout/deadlineSlack)
		_ = d.rc.SetWriteDeadline(d.deadline)
	}
	n, err := d.w.Write(p)
	if err != nil {
		return n, err
	}
	return n, d.rc.Flush()
}

type sseWriter struct {
	srv *Server
	out *bufio.Writer
	// direct is what out writes to: a run's shared frames large enough to
	// be worth a system call of their own go there as they are.
	direct  io.Writer
	sub     *subscription
	ctx     context.Context
	revoked <-chan struct{} // closed when the credential that admitted the stream ends
	scratch []byte
}

// run writes the replay then, when live, queued deliveries until the client
// leaves, the relay drains or the queue overflows. Each wake-up writes
// everything queued since the last in one buffered pass and one flush.
func (sw *sseWriter) run(live bool) error {
	s := sw.srv
	q := sw.sub.q
	// The replay was queued first by Start, before Subscribe returned.
	items := q.take(nil)
	if len(items) > 0 && items[0].replay != nil {
		if err := sw.replay(items[0].replay); err != nil {
			return err
		}
		if err := sw.out.Flush(); err != nil {
			return err
		}
		items = items[1:]
	}
	if !live {
		return nil
	}
	_, _ = sw.out.WriteString(": " + wire.ReplayedComment + "\n\n")
	if err := sw.deliverAll(items); err != nil {
		return err
	}
	items = release(items)
	ping := time.NewTicker(s.cfg.PingInterval)
	defer ping.Stop()
	for {
		select {
		case <-q.wake:
			items = q.take(items)
			err := sw.deliverAll(items)
			items = release(items)
			if err != nil {
				return err
			}
		case <-ping.C:
			_, _ = sw.out.WriteString(": ping\n\n")
			if err := sw.out.Flush(); err != nil {
				return err
			}
		case <-q.over:
			return errOverflow
		case <-s.drainCh:
			return errDraining
		case <-sw.revoked:
			return errRevoked
		case <-sw.ctx.Done():
			return sw.ctx.Err()
		}
	}
}

// deliverAll writes the live deliveries among items and flushes once.
func (sw *sseWriter) deliverAll(items []outItem) error {
	n, oldest := 0, time.Time{}
	for i := range items {
		it := &items[i]
		var first *Message
		switch {
		case it.run != nil:
			if err := sw.deliverRun(it.run); err != nil {
				return err
			}
			n += len(it.run.msgs)
			first = it.run.msgs[0]
		case it.msg != nil:
			if err := sw.deliver(it.msg); err != nil {
				return err
			}
			n++
			first = it.msg
		default:
			continue
		}
		if oldest.IsZero() {
			oldest = first.Ingested
		}
	}
	if err := sw.out.Flush(); err != nil {
		return err
	}
	if n > 0 {
		sw.srv.metrics.deliverSSE.Add(float64(n))
	}
	if !oldest.IsZero() {
		sw.srv.metrics.latency.Observe(time.Since(oldest).Seconds())
	}
	return nil
}

// deliverRun writes a run: in one piece, framed once for every stream,
// when the subscription's ceiling leaves all of it as sent.
func (sw *sseWriter) deliverRun(r *msgRun) error {
	if !sw.sub.capped || r.capture <= sw.sub.ceiling {
		f := r.sseFrames()
		if len(f) < directWriteMin || sw.direct == nil {
			_, err := sw.out.Write(f)
			return err
		}
		// Every stream shares these bytes: writing them to the socket
		// from where they lie saves each stream a copy into its buffer,
		// which at a hundred streams costs more than the relay's whole
		// ingest of the run.
		if err := sw.out.Flush(); err != nil {
			return err
		}
		_, err := sw.direct.Write(f)
		return err
	}
	for _, m := range r.msgs {
		if err := sw.deliver(m); err != nil {
			return err
		}
	}
	return nil
}

func (sw *sseWriter) replay(r Replay) error {
	for _, ex := range r.Exhausted() {
		if strings.ContainsAny(ex.Session, "\r\n") {
			continue
		}
		_, _ = fmt.Fprintf(sw.out, ": replay-exhausted %s %s\n\n", ex.Session, ex.Earliest)
	}
	n := 0
	err := r.Each(sw.ctx, func(m *Message) error {
		if n++; n&255 == 0 {
			select {
			case <-sw.srv.drainCh:
				return errDraining
			case <-sw.sub.q.over:
				return errOverflow
			case <-sw.revoked:
				return errRevoked
			default:
			}
		}
		return sw.deliver(m)
	})
	sw.srv.metrics.deliverSSE.Add(float64(n))
	return err
}

// deliver writes one SSE message: id (positioned events only), event = the
// AEP type, data = the event (down-leveled to the ceiling) on one line.
func (sw *sseWriter) deliver(m *Message) error {
	b, err := sw.sub.wire(m)
	if err != nil {
		// Never deliver above the ceiling: an event that cannot be
		// down-leveled is withheld.
		sw.srv.log.Warn("sse: event withheld: down-level failed", "type", m.Type, "err", err)
		return nil
	}
	sw.scratch = appendSSE(sw.scratch[:0], m, b)
	_, err = sw.out.Write(sw.scratch)
	if cap(sw.scratch) > maxScratch {
		sw.scratch = nil
	}
	return err
}

// directWriteMin is the size from which a run's shared frames skip the
// stream's buffer: one system call more at most (for what was buffered
// before them) costs less than copying this much.
const directWriteMin = 8 << 10

// maxScratch bounds the framing buffer a stream keeps between messages.
const maxScratch = 64 << 10

// sseOverhead is what framing adds to an event besides its session and
// type: the field names, the position's numbers, the line ends.
const sseOverhead = 64

// appendSSE appends m framed as one SSE message carrying data.
func appendSSE(dst []byte, m *Message, data []byte) []byte {
	if m.Kind == KindSession && lineSafe(m.Session) {
		dst = append(dst, "id: "...)
		dst = append(dst, m.Session...)
		dst = append(dst, ':')
		dst = strconv.AppendInt(dst, m.Pos.Epoch, 10)
		dst = append(dst, ':')
		dst = strconv.AppendInt(dst, m.Pos.Seq, 10)
		dst = append(dst, '\n')
	}
	dst = append(dst, "event: "...)
	dst = append(dst, m.Type...)
	dst = append(dst, "\ndata: "...)
	dst = append(dst, data...)
	return append(dst, "\n\n"...)
}

// lineSafe reports whether s can sit in an SSE field: no line break, no NUL.
func lineSafe(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c == '\r' || c == '\n' || c == 0 {
			return false
		}
	}
	return true
}

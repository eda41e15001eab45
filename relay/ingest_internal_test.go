package relay

import (
	"bufio"
	"bytes"
	"context"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"

	"github.com/aep-kimi/aep-kimi/aep"
	"github.com/aep-kimi/aep-kimi/internal/httpguard"
)

// flushRecorder notes, when the handler flushes its answer, whether any of
// the watched writers had been woken by then.
type flushRecorder struct {
	*httptest.ResponseRecorder
	qs             []*outQueue
	flushed, woken bool
}

func (f *flushRecorder) Flush() {
	if !f.flushed {
		f.flushed = true
		for _, q := range f.qs {
			f.woken = f.woken || len(q.wake) > 0
		}
	}
	f.ResponseRecorder.Flush()
}

// POST /events answers the sender before it wakes the streams the batch
// feeds, and wakes them before it returns: woken first, the writers are
// queued to run ahead of the reply.
func TestIngestAnswersBeforeWaking(t *testing.T) {
	t.Parallel()
	srv, err := NewServer(Config{})
	if err != nil {
		t.Fatal(err)
	}
	f, err := aep.ParseFilter([]byte(`{"session":"s"}`))
	if err != nil {
		t.Fatal(err)
	}
	// Two streams of one filter share a run; a stream alone with its
	// filter takes the messages themselves.
	qs := []*outQueue{
		liveQueue(t, srv.backend, srv.metrics, SubscribeRequest{}),
		liveQueue(t, srv.backend, srv.metrics, SubscribeRequest{}),
		liveQueue(t, srv.backend, srv.metrics, SubscribeRequest{Filter: f, filterKey: `{"session":"s"}`}),
	}
	for _, n := range []int{3, 1} {
		var body []byte
		for i := range n {
			body = append(append(body, benchEvent(t, "s", int64(10*n+i)).Raw...), '\n')
		}
		req := httptest.NewRequest(http.MethodPost, "http://127.0.0.1/events", bytes.NewReader(body))
		req.Host = "127.0.0.1"
		req.Header.Set("Content-Type", "application/x-ndjson")
		req.Header.Set("AEP-Version", "0.1")
		rec := &flushRecorder{ResponseRecorder: httptest.NewRecorder(), qs: qs}
		srv.Handler().ServeHTTP(rec, req)
		if rec.Code != http.StatusAccepted {
			t.Fatalf("POST of %d: %d %s", n, rec.Code, rec.Body)
		}
		if !rec.flushed || rec.woken {
			t.Fatalf("POST of %d: answer flushed %v, stream woken before it %v; want true, false", n, rec.flushed, rec.woken)
		}
		for i, q := range qs {
			if len(q.wake) != 1 || q.queued() != n {
				t.Fatalf("POST of %d, stream %d: woken %v with %d queued, want woken with %d", n, i, len(q.wake) == 1, q.queued(), n)
			}
			<-q.wake
			q.take(nil)
		}
	}
}

// writeLog records each write: its bytes and where they lay.
type writeLog struct {
	all    bytes.Buffer
	starts []*byte
}

func (w *writeLog) Write(p []byte) (int, error) {
	if len(p) > 0 {
		w.starts = append(w.starts, &p[0])
	}
	return w.all.Write(p)
}

// A run's shared frames, when large, go to the socket from where they lie
// instead of being copied into each stream's buffer, in order with what
// the stream had buffered around them.
func TestSSEWritesLargeRunsInPlace(t *testing.T) {
	t.Parallel()
	srv, err := NewServer(Config{})
	if err != nil {
		t.Fatal(err)
	}
	sub := newSubscription("", newOutQueue(4096, srv.metrics), 0, 0)
	dst := &writeLog{}
	sw := &sseWriter{srv: srv, out: bufio.NewWriterSize(dst, 64<<10), direct: dst, sub: sub, ctx: context.Background()}
	var small []*Message
	for i := range 2 {
		small = append(small, benchEvent(t, "s", int64(i)))
	}
	var big []*Message
	for i := range 100 {
		big = append(big, benchEvent(t, "s", int64(10+i)))
	}
	run := newMsgRun(big)
	frames := run.sseFrames()
	if len(frames) < directWriteMin {
		t.Fatalf("a run of %d bytes is below the direct write size %d", len(frames), directWriteMin)
	}
	if err := sw.deliverAll([]outItem{{msg: small[0], sub: sub}, {run: run, sub: sub}, {msg: small[1], sub: sub}}); err != nil {
		t.Fatal(err)
	}
	want := appendSSE(nil, small[0], small[0].Raw)
	want = append(want, frames...)
	want = appendSSE(want, small[1], small[1].Raw)
	if !bytes.Equal(dst.all.Bytes(), want) {
		t.Fatalf("stream wrote\n%.300q\nwant\n%.300q", dst.all.Bytes(), want)
	}
	inPlace := false
	for _, p := range dst.starts {
		inPlace = inPlace || p == &frames[0]
	}
	if !inPlace {
		t.Fatalf("the run's frames were copied before the write (%d writes)", len(dst.starts))
	}
}

// The batch answer is what WriteJSON makes of the same counts, headers and
// body alike.
func TestWriteAcceptedAsWriteJSON(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ accepted, buffered, dups int }{{1, 1, 0}, {10, 7, 3}, {10000, 0, 10000}} {
		want := httptest.NewRecorder()
		httpguard.WriteJSON(want, http.StatusAccepted, map[string]int{"accepted": c.accepted, "buffered": c.buffered, "duplicates": c.dups})
		got := httptest.NewRecorder()
		writeAccepted(got, c.accepted, IngestResult{Buffered: c.buffered, Duplicates: c.dups})
		if got.Code != want.Code || got.Body.String() != want.Body.String() || !maps.EqualFunc(got.Header(), want.Header(), slices.Equal) {
			t.Fatalf("writeAccepted: %d %v %q; WriteJSON: %d %v %q", got.Code, got.Header(), got.Body, want.Code, want.Header(), want.Body)
		}
	}
}

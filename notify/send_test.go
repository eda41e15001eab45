package notify

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"time"

	"github.com/aep-kimi/aep-kimi/internal/backoff"
)

// targetsFor is one target of each kind aimed at base (whose path the
// kinds extend), for tests that hold for all three.
func targetsFor(t *testing.T, base string) []Target {
	t.Helper()
	var out []Target
	for _, spec := range []string{
		"ntfy:" + base + "/aepalerts",
		"slack:" + base + "/services/T/B/SLACKSECRET",
		"webhook:" + base + "/in?key=QUERYSECRET#secret-file=" + secretFile(t, strings.Repeat("k", 32), 0o600),
	} {
		tg, err := ParseTarget(spec)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, tg)
	}
	return out
}

func sendErr(tg Target, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return tg.Send(ctx, request())
}

func TestSendStatusErrors(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		status     int
		header     string
		retry      bool
		retryAfter time.Duration
		want       string
	}{
		{http.StatusTooManyRequests, "7", true, 7 * time.Second, "HTTP 429 Too Many Requests"},
		{http.StatusServiceUnavailable, "", true, 0, "HTTP 503"},
		{http.StatusInternalServerError, "", true, 0, "HTTP 500"},
		{http.StatusBadRequest, "", false, 0, "HTTP 400 Bad Request"},
		{http.StatusNotFound, "", false, 0, "HTTP 404"},
		{http.StatusForbidden, "", false, 0, "HTTP 403"},
		{http.StatusMovedPermanently, "", false, 0, "redirects are not followed"},
	} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if c.header != "" {
				w.Header().Set("Retry-After", c.header)
			}
			if c.status == http.StatusMovedPermanently {
				w.Header().Set("Location", "https://elsewhere.example/")
			}
			w.WriteHeader(c.status)
			io.WriteString(w, "refused:\x1b[31m red\nsecond line")
		}))
		for _, tg := range targetsFor(t, srv.URL) {
			err := sendErr(tg, 5*time.Second)
			var se *SendError
			if !errors.As(err, &se) {
				t.Errorf("%s %d: err %v, want a *SendError", tg.Name(), c.status, err)
				continue
			}
			if se.Status != c.status || errors.Is(err, ErrPermanent) == c.retry || se.RetryAfter != c.retryAfter || !strings.Contains(err.Error(), c.want) {
				t.Errorf("%s %d: %v (status %d retry %v after %v), want %q retry %v after %v",
					tg.Name(), c.status, err, se.Status, !errors.Is(err, ErrPermanent), se.RetryAfter, c.want, c.retry, c.retryAfter)
			}
			if msg := err.Error(); strings.ContainsAny(msg, "\x1b\n") || strings.Contains(msg, "SECRET") {
				t.Errorf("%s: error %q must be one safe line without the URL's secret", tg.Name(), msg)
			}
		}
		srv.Close()
	}
}

func TestSendUnreachableIsNotPermanent(t *testing.T) {
	t.Parallel()
	// A port nothing listens on: taken, then released.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	for _, tg := range targetsFor(t, "http://"+addr) {
		err := sendErr(tg, 5*time.Second)
		if err == nil || errors.Is(err, ErrPermanent) {
			t.Errorf("%s: %v, want retryable", tg.Name(), err)
		}
		if strings.Contains(err.Error(), "SECRET") || strings.Contains(err.Error(), "aepalerts") {
			t.Errorf("%s: error %q quotes the URL", tg.Name(), err)
		}
	}
}

func TestSendSlowReceiverBounded(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	defer srv.Close()
	defer close(release)
	for _, tg := range targetsFor(t, srv.URL) {
		start := time.Now()
		err := sendErr(tg, 50*time.Millisecond)
		if took := time.Since(start); took > 3*time.Second {
			t.Errorf("%s: Send took %v past a 50ms deadline", tg.Name(), took)
		}
		if errors.Is(err, ErrPermanent) || !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("%s: %v, want a retryable deadline error", tg.Name(), err)
		}
	}
	// A context the caller cancelled (shutdown) is not retried.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for _, tg := range targetsFor(t, srv.URL) {
		if err := tg.Send(ctx, request()); !errors.Is(err, ErrPermanent) {
			t.Errorf("%s: cancelled context: %v, want a final error", tg.Name(), err)
		}
	}
}

func TestSendReadsABoundedAnswer(t *testing.T) {
	t.Parallel()
	var written atomic.Int64
	const total = 64 << 20
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusBadGateway)
		chunk := []byte(strings.Repeat("x", 32<<10))
		for written.Load() < total {
			n, err := w.Write(chunk)
			written.Add(int64(n))
			if err != nil {
				return
			}
		}
	}))
	defer srv.Close()
	tg := targetsFor(t, srv.URL)[2]
	err := sendErr(tg, 10*time.Second)
	var se *SendError
	if !errors.As(err, &se) || se.Status != http.StatusBadGateway || len(se.Detail) > errorSnippet+8 {
		t.Fatalf("err %v", err)
	}
	srv.CloseClientConnections()
	if w := written.Load(); w >= total {
		t.Errorf("the receiver wrote its whole %d-byte answer: the read is not bounded", w)
	}
}

// The queue retries what the targets mark retryable and gives up at once
// on what they mark permanent.
func TestQueueRetriesTargetErrors(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	statuses := []int{http.StatusServiceUnavailable, http.StatusTooManyRequests, http.StatusOK, http.StatusBadRequest}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(statuses[min(int(calls.Add(1))-1, len(statuses)-1)])
	}))
	defer srv.Close()
	for i, tg := range targetsFor(t, srv.URL) {
		calls.Store(0)
		statuses = []int{http.StatusServiceUnavailable, http.StatusTooManyRequests, http.StatusOK}
		if i == 2 {
			statuses = []int{http.StatusBadRequest}
		}
		q := NewQueue(tg, "test", nil, nil)
		q.wait = func(ctx context.Context, _ *backoff.Backoff) bool { return backoff.Sleep(ctx, 10*time.Millisecond) }
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { _ = q.Run(ctx); close(done) }()
		res := make(chan error, 1)
		q.Put(request(), func(err error) { res <- err })
		var err error
		select {
		case err = <-res:
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: no result", tg.Name())
		}
		cancel()
		<-done
		wantCalls, wantErr := int32(3), false
		if i == 2 {
			wantCalls, wantErr = 1, true
		}
		if calls.Load() != wantCalls || (err != nil) != wantErr {
			t.Errorf("%s: %d attempts, err %v; want %d attempts, error %v", tg.Name(), calls.Load(), err, wantCalls, wantErr)
		}
	}
}

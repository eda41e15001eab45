package notify

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/aep-kimi/aep-kimi/internal/backoff"
)

// postTarget posts each message's tag to a URL: a real HTTP hop for the
// queue's tests, whatever the formats the real targets speak.
type postTarget struct{ url string }

func (t postTarget) Name() string { return "test:" + t.url }

func (t postTarget) Send(ctx context.Context, m Message) error {
	b, _ := json.Marshal(map[string]string{"tag": m.Tag})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.url, bytes.NewReader(b))
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusGone:
		return fmt.Errorf("gone: %w", ErrPermanent)
	case resp.StatusCode >= 300:
		return fmt.Errorf("status %d", resp.StatusCode)
	}
	return nil
}

func fastQueue(t *testing.T, url string) (*Queue, *Metrics) {
	met := NewMetrics()
	q := NewQueue(postTarget{url}, "test", met, nil)
	q.wait = func(ctx context.Context, _ *backoff.Backoff) bool { return backoff.Sleep(ctx, 10*time.Millisecond) }
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = q.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return q, met
}

func TestQueueRetriesUntilSent(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if calls.Add(1) < 3 {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	defer srv.Close()
	q, met := fastQueue(t, srv.URL)
	res := make(chan error, 1)
	if !q.Put(Message{Kind: KindTest, Tag: "t1"}, func(err error) { res <- err }) {
		t.Fatal("Put refused on an empty queue")
	}
	select {
	case err := <-res:
		if err != nil {
			t.Fatalf("delivery: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no result")
	}
	if n := calls.Load(); n != 3 {
		t.Errorf("attempts = %d, want 3", n)
	}
	if got := testutil.ToFloat64(met.deliveries.WithLabelValues("test", resultRetried)); got != 2 {
		t.Errorf("retried = %v, want 2", got)
	}
	if got := testutil.ToFloat64(met.deliveries.WithLabelValues("test", resultSent)); got != 1 {
		t.Errorf("sent = %v, want 1", got)
	}
}

func TestQueueGivesUp(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		var m map[string]string
		_ = json.NewDecoder(r.Body).Decode(&m)
		if m["tag"] == "gone" {
			w.WriteHeader(http.StatusGone)
			return
		}
		w.WriteHeader(http.StatusInternalServerError)
	}))
	defer srv.Close()
	q, met := fastQueue(t, srv.URL)
	for _, tc := range []struct {
		tag   string
		tries int32
	}{{"gone", 1}, {"broken", MaxAttempts}} {
		calls.Store(0)
		res := make(chan error, 1)
		q.Put(Message{Tag: tc.tag}, func(err error) { res <- err })
		select {
		case err := <-res:
			if err == nil {
				t.Fatalf("%s: delivered, want an error", tc.tag)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: no result", tc.tag)
		}
		if n := calls.Load(); n != tc.tries {
			t.Errorf("%s: attempts = %d, want %d", tc.tag, n, tc.tries)
		}
	}
	if got := testutil.ToFloat64(met.deliveries.WithLabelValues("test", resultFailed)); got != 2 {
		t.Errorf("failed = %v, want 2", got)
	}
}

// A receiver that never answers holds one message in flight; everything
// past QueueSize is dropped at once, and Put never waits.
func TestQueueSlowReceiverNeverBlocks(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(release)
	q, met := fastQueue(t, srv.URL)
	accepted := 0
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range QueueSize + 20 {
			if q.Put(Message{Tag: fmt.Sprint(i)}, nil) {
				accepted++
			}
		}
	}()
	select {
	case <-done:
	case <-time.After(2 * time.Second):
		t.Fatalf("Put blocked behind a receiver that never answers")
	}
	// One may already be in flight, freeing its slot.
	if accepted < QueueSize || accepted > QueueSize+1 {
		t.Errorf("accepted %d, want %d or %d", accepted, QueueSize, QueueSize+1)
	}
	if got := testutil.ToFloat64(met.deliveries.WithLabelValues("test", resultDropped)); int(got) != QueueSize+20-accepted {
		t.Errorf("dropped = %v, want %d", got, QueueSize+20-accepted)
	}
}

package client

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/aep-kimi/aep-kimi/aep"
	"github.com/aep-kimi/aep-kimi/internal/testkit/poll"
)

// sheddingRelay refuses every socket, stream and POST with 503 and a
// Retry-After of retry, as a relay at its connection limit or with its
// store down does, and records when each was asked.
type sheddingRelay struct {
	mu    sync.Mutex
	asked map[string][]time.Time
}

func newSheddingRelay(t *testing.T, retry time.Duration) (*sheddingRelay, string) {
	s := &sheddingRelay{asked: map[string][]time.Time{}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.asked[r.URL.Path] = append(s.asked[r.URL.Path], time.Now())
		s.mu.Unlock()
		w.Header().Set("Retry-After", strconv.Itoa(int(retry/time.Second)))
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = w.Write([]byte(`{"error":"limit_exceeded"}`))
	}))
	t.Cleanup(srv.Close)
	return s, srv.URL
}

// times is when path was asked for, once it was asked n times.
func (s *sheddingRelay) times(t *testing.T, path string, n int) []time.Time {
	t.Helper()
	var got []time.Time
	poll.Must(t, 10*time.Second, path+" asked for twice", func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		got = append([]time.Time(nil), s.asked[path]...)
		return len(got) >= n
	})
	return got
}

// progress is event seq of session s1, as the publisher's emitter would
// send it.
func progress(seq int64) *aep.Event {
	return &aep.Event{AEP: aep.Version, ID: aep.NewID(), Type: "progress.status", Time: aep.FormatTime(time.Now()),
		Source: "aep://test/agent/tester/session/s1", Agent: "tester", Session: "s1", Seq: aep.Int64(seq), Epoch: aep.Int64(0)}
}

// A relay's Retry-After holds a client off at least that long, however
// short the client's own backoff: the publisher's socket and its POST
// fallback (new events arriving meanwhile do not bring the POST forward),
// and a tail's stream. Before, each retried at its own backoff (10 ms
// here), and the POST at every new event.
func TestRetryAfterHoldsClientsOff(t *testing.T) {
	t.Parallel()
	const retry = time.Second
	relay, url := newSheddingRelay(t, retry)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	pub, err := NewPublisher(PublisherConfig{URL: url, Agent: "tester", BackoffMin: 10 * time.Millisecond, BackoffMax: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Add(3)
	go func() { defer wg.Done(); _ = pub.Run(ctx, nil) }()
	go func() {
		defer wg.Done()
		for seq := int64(0); ctx.Err() == nil; seq++ {
			pub.Publish(progress(seq))
			select {
			case <-ctx.Done():
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	tail, err := NewTailer(TailConfig{URL: url, Live: true, BackoffMin: 10 * time.Millisecond, BackoffMax: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	go func() { defer wg.Done(); _ = tail.Run(ctx) }()

	for _, path := range []string{"/socket", "/events", "/stream"} {
		at := relay.times(t, path, 2)
		if gap := at[1].Sub(at[0]); gap < retry {
			t.Errorf("%s asked again %v after a Retry-After of %v", path, gap.Round(time.Millisecond), retry)
		}
	}
	cancel()
}

// A batch the relay refused with Retry-After is kept, not dropped: once
// the relay takes POSTs again every event published meanwhile arrives,
// each once and in order.
func TestRetryAfterKeepsRefusedBatches(t *testing.T) {
	t.Parallel()
	const events = 20
	var mu sync.Mutex
	refused, got := 0, []int64{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/events" {
			w.WriteHeader(http.StatusNotFound) // no socket: the POST fallback carries everything
			return
		}
		mu.Lock()
		defer mu.Unlock()
		if refused == 0 {
			refused++
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		body, _ := io.ReadAll(r.Body)
		for _, l := range bytes.Split(bytes.TrimSpace(body), []byte("\n")) {
			ev, err := aep.ParseEvent(l)
			if err != nil {
				t.Errorf("relay got %q: %v", l, err)
				continue
			}
			got = append(got, *ev.Seq)
		}
		w.WriteHeader(http.StatusAccepted)
	}))
	defer srv.Close()
	ctx, cancel := context.WithCancel(context.Background())
	pub, err := NewPublisher(PublisherConfig{URL: srv.URL, Agent: "tester", BackoffMin: 10 * time.Millisecond, BackoffMax: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { defer close(done); _ = pub.Run(ctx, nil) }()
	defer func() { cancel(); <-done }()
	for seq := int64(0); seq < events; seq++ {
		pub.Publish(progress(seq))
	}
	poll.Must(t, 10*time.Second, "every event posted after the refusal", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(got) >= events
	})
	mu.Lock()
	defer mu.Unlock()
	for i, s := range got {
		if s != int64(i) || len(got) != events {
			t.Fatalf("relay got seqs %v after one refused batch, want 0..%d once each, in order", got, events-1)
		}
	}
}

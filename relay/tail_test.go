package relay_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aep-kimi/aep-kimi/aep"
	"github.com/aep-kimi/aep-kimi/internal/testkit/relaytest"
	"github.com/aep-kimi/aep-kimi/relay"
	"github.com/aep-kimi/aep-kimi/relay/client"
	"github.com/aep-kimi/aep-kimi/relay/wire"
)

type tailLog struct {
	mu       sync.Mutex
	events   []*aep.Event
	statuses []client.TailStatus
}

func (l *tailLog) onEvent(ev *aep.Event) { l.mu.Lock(); l.events = append(l.events, ev); l.mu.Unlock() }
func (l *tailLog) onStatus(s client.TailStatus) {
	l.mu.Lock()
	l.statuses = append(l.statuses, s)
	l.mu.Unlock()
}
func (l *tailLog) ids() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, e := range l.events {
		out = append(out, e.ID)
	}
	return out
}

func runTailOnce(t *testing.T, cfg client.TailConfig) *tailLog {
	t.Helper()
	l := &tailLog{}
	cfg.OnEvent, cfg.OnStatus = l.onEvent, l.onStatus
	tl, err := client.NewTailer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := tl.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	return l
}

// A tail resumes where the last run stopped (state file), and replaying
// everything again shows only what it has not shown yet.
func TestTailerResumeAcrossRuns(t *testing.T) {
	t.Parallel()
	srv := relaytest.RunServer(t, relay.Config{Token: testToken, Buffer: 4})
	path := filepath.Join(t.TempDir(), "state.json")
	evs := seqEvents("s-tail", 0, 3)
	mustPost(t, srv, evs...)
	state, err := client.LoadTailState(path)
	if err != nil {
		t.Fatal(err)
	}
	first := runTailOnce(t, client.TailConfig{URL: srv.URL, Token: testToken, From: wire.From{All: true}, State: state})
	if got := first.ids(); len(got) != 3 {
		t.Fatalf("first run saw %d events", len(got))
	}
	if err := state.Save(path); err != nil {
		t.Fatal(err)
	}
	evs = append(evs, seqEvents("s-tail", 3, 9)...)
	mustPost(t, srv, evs[3:]...)
	state, err = client.LoadTailState(path)
	if err != nil {
		t.Fatal(err)
	}
	second := runTailOnce(t, client.TailConfig{URL: srv.URL, Token: testToken, State: state})
	// Held: seq 5..8; seq 3 and 4 were evicted while the tail was away.
	if got := second.ids(); len(got) != 4 || got[0] != evs[5].ID {
		t.Fatalf("resumed run saw %d events starting %v", len(got), got)
	}
	var exhausted []string
	for _, s := range second.statuses {
		if s.Kind == client.TailExhausted {
			exhausted = append(exhausted, s.Detail)
		}
	}
	if len(exhausted) != 1 || exhausted[0] != "s-tail 0:5" {
		t.Fatalf("exhausted reports %v, want [s-tail 0:5]", exhausted)
	}
	// From all means all, whatever the state has seen (issue 36).
	third := runTailOnce(t, client.TailConfig{URL: srv.URL, Token: testToken, From: wire.From{All: true}, State: state})
	if got := third.ids(); len(got) != 4 || got[0] != evs[5].ID {
		t.Fatalf("replaying all again showed %d events, want the 4 held", len(got))
	}
}

// A live tail that loses its relay shows, once back, a session begun while
// it was away (spooled by kimi-hook while the relay was down, say): its
// reconnection asks for every held session, not only the ones it knew,
// and shows nothing twice.
func TestTailerCatchesSessionsBegunInAGap(t *testing.T) {
	t.Parallel()
	srv := relaytest.RunServer(t, relay.Config{Token: testToken})
	target, _ := url.Parse(srv.URL)
	var down atomic.Bool
	rp := httputil.NewSingleHostReverseProxy(target)
	rp.FlushInterval = -1
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if down.Load() {
			http.Error(w, "down", http.StatusBadGateway)
			return
		}
		rp.ServeHTTP(w, r)
	}))
	defer proxy.Close()
	// History from before the tail began, which a live tail never asked
	// for: no reconnection shows it either.
	mustPost(t, srv, seqEvents("s-old", 0, 2, func(e *aep.Event) { e.Time = aep.FormatTime(time.Now().Add(-time.Minute)) })...)
	l := &tailLog{}
	tl, err := client.NewTailer(client.TailConfig{URL: proxy.URL, Token: testToken, Live: true,
		BackoffMin: 50 * time.Millisecond, BackoffMax: 100 * time.Millisecond, OnEvent: l.onEvent, OnStatus: l.onStatus})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- tl.Run(ctx) }()
	defer func() { cancel(); <-done }()
	eventually(t, "the tail connects", func() bool {
		l.mu.Lock()
		defer l.mu.Unlock()
		return len(l.statuses) > 0
	})
	known := seqEvents("s-known", 0, 2)
	mustPost(t, srv, known...)
	eventually(t, "the known session shown", func() bool { return len(l.ids()) == 2 })
	down.Store(true)
	proxy.CloseClientConnections()
	eventually(t, "the tail finds the relay gone", func() bool {
		l.mu.Lock()
		defer l.mu.Unlock()
		for _, s := range l.statuses {
			if s.Kind == client.TailUnreachable {
				return true
			}
		}
		return false
	})
	gap := seqEvents("s-gap", 0, 3)
	mustPost(t, srv, gap...)
	down.Store(false)
	eventually(t, "the session begun in the gap shown", func() bool { return len(l.ids()) >= 5 })
	// An event posted now arrives live, after whatever the reconnection
	// replays: once it shows, a repeat or an old event would have shown.
	after := mkEvent("s-after", 0)
	mustPost(t, srv, after)
	eventually(t, "an event posted after the gap shown", func() bool { return slices.Contains(l.ids(), after.ID) })
	if got := l.ids(); len(got) != 6 || got[2] != gap[0].ID || got[5] != after.ID {
		t.Fatalf("shown %v, want the 2 known then the 3 from the gap once, none from before the tail, then the one after", got)
	}
}

func TestTailerRefusalAndUnreachable(t *testing.T) {
	t.Parallel()
	srv := relaytest.RunServer(t, relay.Config{Token: testToken})
	tl, _ := client.NewTailer(client.TailConfig{URL: srv.URL, Token: "wrong"})
	var te *client.TailError
	if err := tl.Run(context.Background()); !errors.As(err, &te) || te.Status != 403 {
		t.Fatalf("wrong token: %v", err)
	}
	if _, err := client.NewTailer(client.TailConfig{URL: srv.URL, Filter: `{"seq":1}`}); err == nil {
		t.Fatal("an illegal filter was accepted")
	}

	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := ln.Addr().String()
	ln.Close()
	l := &tailLog{}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	tl, _ = client.NewTailer(client.TailConfig{URL: "http://" + addr, Live: true, BackoffMin: 5e6, BackoffMax: 20e6,
		OnEvent: l.onEvent, OnStatus: l.onStatus})
	done := make(chan error, 1)
	go func() { done <- tl.Run(ctx) }()
	eventually(t, "unreachable reported", func() bool {
		l.mu.Lock()
		defer l.mu.Unlock()
		return len(l.statuses) >= 2 && l.statuses[0].Kind == client.TailUnreachable && l.statuses[1].Attempt == 2
	})
	startRelayAt(t, addr, relay.Config{})
	up := &relaytest.Server{URL: "http://" + addr}
	// Connected, then the end of the (empty) replay: live events follow.
	eventually(t, "connected", func() bool {
		l.mu.Lock()
		defer l.mu.Unlock()
		n := len(l.statuses)
		return n >= 2 && l.statuses[n-2].Kind == client.TailConnected && l.statuses[n-1].Kind == client.TailReplayed
	})
	ev := mkEvent("s-late", 0)
	mustPost(t, up, ev)
	eventually(t, "event", func() bool { return len(l.ids()) == 1 && l.ids()[0] == ev.ID })
	mustPost(t, up, ev) // a redelivery is shown once
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if n := len(l.ids()); n != 1 {
		t.Fatalf("shown %d times", n)
	}
}

func TestTailStateFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "sub", "state.json")
	s, err := client.LoadTailState(path)
	if err != nil || len(s.From().Positions) != 0 {
		t.Fatalf("missing file: %v", err)
	}
	for i := range 300 {
		s.Advance("s"+string(rune('a'+i%26))+string(rune('a'+i/26)), wire.Position{Seq: int64(i)})
	}
	if !s.Advance("x", wire.Position{Epoch: 1, Seq: 0}) || s.Advance("x", wire.Position{Epoch: 0, Seq: 99}) {
		t.Fatal("Advance must only move forward")
	}
	if err := s.Save(path); err != nil {
		t.Fatal(err)
	}
	back, err := client.LoadTailState(path)
	if err != nil {
		t.Fatal(err)
	}
	from := back.From().Positions
	if len(from) != client.DefaultTailSessions || from[0].Session != "x" {
		t.Fatalf("kept %d sessions, most recent %v", len(from), from[0])
	}
	entries, _ := os.ReadDir(filepath.Dir(path))
	if len(entries) != 1 {
		t.Fatalf("temp files left behind: %v", entries)
	}
	if err := os.WriteFile(path, []byte("{torn"), 0o600); err != nil {
		t.Fatal(err)
	}
	if s, err := client.LoadTailState(path); err == nil || len(s.From().Positions) != 0 {
		t.Fatal("a corrupt state file must be reported and start fresh")
	}
}

// An event that arrives late, below a position the tail already showed on
// the same connection, is shown too: only what an earlier connection or run
// showed is skipped.
func TestTailerShowsLateArrivals(t *testing.T) {
	t.Parallel()
	srv := relaytest.RunServer(t, relay.Config{Token: testToken})
	l := &tailLog{}
	tl, err := client.NewTailer(client.TailConfig{URL: srv.URL, Token: testToken, Live: true, OnEvent: l.onEvent, OnStatus: l.onStatus})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- tl.Run(ctx) }()
	defer func() { cancel(); <-done }()
	eventually(t, "the tail connects", func() bool {
		l.mu.Lock()
		defer l.mu.Unlock()
		return len(l.statuses) > 0
	})
	evs := []*aep.Event{mkEvent("s-late", 0), mkEvent("s-late", 2), mkEvent("s-late", 1)}
	for _, e := range evs {
		mustPost(t, srv, e)
	}
	eventually(t, "all three events shown", func() bool { return len(l.ids()) == 3 })
	if got := l.ids(); got[2] != evs[2].ID {
		t.Fatalf("shown %v, want the late seq 1 last", got)
	}
}

// A person's tail ends within the relay's 2 s when their token is removed:
// the stream's end says token-revoked, and the tail asks again at once
// (not after its backoff, here 5 s) and is refused.
func TestTailerEndsWhenTokenRevoked(t *testing.T) {
	t.Parallel()
	tm := newTeam(t)
	l := &tailLog{}
	tl, err := client.NewTailer(client.TailConfig{URL: tm.srv.URL, Token: tm.walt, Live: true,
		BackoffMin: 5 * time.Second, BackoffMax: 10 * time.Second, OnEvent: l.onEvent, OnStatus: l.onStatus})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- tl.Run(context.Background()) }()
	eventually(t, "connected", func() bool {
		l.mu.Lock()
		defer l.mu.Unlock()
		return len(l.statuses) > 0 && l.statuses[len(l.statuses)-1].Kind == client.TailReplayed
	})
	start := time.Now()
	if _, err := tm.store.Remove("walt"); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		var te *client.TailError
		if !errors.As(err, &te) || te.Status != http.StatusForbidden {
			t.Fatalf("the tail ended with %v, want a 403 refusal", err)
		}
		if took := time.Since(start); took > 2*time.Second {
			t.Fatalf("the tail ended %v after the token was removed", took)
		}
	case <-time.After(4 * time.Second):
		t.Fatal("the tail still runs 4 s after its token was removed")
	}
}

// A relay serving TLS asked in plain HTTP answers a bare 400 (Go's TLS
// server does): the refusal says what to do, not "HTTP 400 " and nothing.
func TestTailerPlainHTTPToTLS(t *testing.T) {
	t.Parallel()
	srv := httptest.NewTLSServer(http.NotFoundHandler())
	defer srv.Close()
	tl, err := client.NewTailer(client.TailConfig{URL: strings.Replace(srv.URL, "https://", "http://", 1)})
	if err != nil {
		t.Fatal(err)
	}
	err = tl.Run(context.Background())
	var te *client.TailError
	if !errors.As(err, &te) || te.Status != http.StatusBadRequest || !strings.Contains(err.Error(), "use an https:// URL") {
		t.Fatalf("plain HTTP to a TLS server: %v", err)
	}
}

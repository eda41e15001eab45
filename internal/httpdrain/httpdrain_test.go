package httpdrain

import (
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// testGrace is the tests' grace: a tenth of the product's, the same rule.
const testGrace = Grace / 10

func serve(t *testing.T, h http.Handler) (*http.Server, *Tracker, string, chan error) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var states atomic.Int32
	hs := &http.Server{Handler: h, ConnState: func(net.Conn, http.ConnState) { states.Add(1) }}
	tr := Track(hs)
	tr.Grace = testGrace
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	t.Cleanup(func() {
		hs.Close()
		if states.Load() == 0 {
			t.Error("the ConnState hook already installed was dropped")
		}
	})
	return hs, tr, ln.Addr().String(), errc
}

// A client's spare connection that never sends a request must not hold
// the shutdown past its budget (net/http alone waits 5 s on it).
func TestShutdownClosesUnusedConnections(t *testing.T) {
	t.Parallel()
	hs, tr, addr, errc := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	spare, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer spare.Close()
	// One used connection too, so the sweep is shown to pick only the spare.
	resp, err := http.Get("http://" + addr + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	// Real time passes the spare's grace (a clock rule, nothing to wait
	// on; not a synchronisation): it is past it once Shutdown sweeps.
	time.Sleep(testGrace)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := tr.Shutdown(ctx, hs); err != nil {
		t.Fatalf("Shutdown with an unused connection open: %v", err)
	}
	if err := <-errc; err != http.ErrServerClosed {
		t.Fatalf("Serve returned %v", err)
	}
	spare.SetReadDeadline(time.Now().Add(2 * time.Second))
	if _, err := spare.Read(make([]byte, 1)); err != io.EOF && !strings.Contains(err.Error(), "reset") {
		t.Fatalf("spare connection not closed by the server: %v", err)
	}
}

// A request in flight is still waited for.
func TestShutdownWaitsForActiveRequests(t *testing.T) {
	t.Parallel()
	started, release := make(chan struct{}), make(chan struct{})
	hs, tr, addr, _ := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(started)
		<-release
		io.WriteString(w, "done")
	}))
	got := make(chan string, 1)
	go func() {
		resp, err := http.Get("http://" + addr + "/")
		if err != nil {
			got <- err.Error()
			return
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		got <- string(b)
	}()
	<-started
	shut := make(chan error, 1)
	go func() { shut <- tr.Shutdown(context.Background(), hs) }()
	select {
	case err := <-shut:
		t.Fatalf("Shutdown returned %v with a request in flight", err)
	case <-time.After(3 * testGrace):
	}
	close(release)
	if err := <-shut; err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	if b := <-got; b != "done" {
		t.Fatalf("in-flight request got %q", b)
	}
}

func TestEndpoint(t *testing.T) {
	t.Parallel()
	ep := NewEndpoint("probe", "127.0.0.1:0", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "ok")
	}))
	a1, err := ep.Listen()
	if err != nil {
		t.Fatal(err)
	}
	if a2, _ := ep.Listen(); a2.String() != a1.String() {
		t.Fatalf("second Listen bound %s, first %s", a2, a1)
	}
	busy := NewEndpoint("probe", a1.String(), http.NotFoundHandler())
	if _, err := busy.Serve(); err == nil || !strings.HasPrefix(err.Error(), "probe: listen "+a1.String()) {
		t.Fatalf("binding a taken port: %v", err)
	}
	errc, err := ep.Serve()
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get("http://" + a1.String() + "/")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(b) != "ok" {
		t.Fatalf("served %q", b)
	}
	if err := ep.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err, open := <-errc; open || err != nil {
		t.Fatalf("after Shutdown the serve channel yields (%v, %v), want closed", err, open)
	}
}

func TestLocalURL(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		addr net.Addr
		want string
	}{
		{&net.TCPAddr{IP: net.IPv4zero, Port: 8787}, "http://127.0.0.1:8787"},
		{&net.TCPAddr{IP: net.IPv6unspecified, Port: 1}, "http://127.0.0.1:1"},
		{&net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 2}, "http://127.0.0.1:2"},
		{&net.TCPAddr{IP: net.IPv6loopback, Port: 3}, "http://[::1]:3"},
	} {
		if got := LocalURL(c.addr); got != c.want {
			t.Errorf("LocalURL(%v) = %q, want %q", c.addr, got, c.want)
		}
	}
}

package station

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aep-kimi/aep-kimi/relay"
)

// One intake component failing stops the others, then the collector,
// which outlives them; the failure is what Supervise returns.
func TestSuperviseStopsAllCollectorLast(t *testing.T) {
	var mu sync.Mutex
	var order []string
	note := func(s string) { mu.Lock(); order = append(order, s); mu.Unlock() }
	boom := errors.New("boom")
	// a, told to stop, looks at the collector's context: one stopped with
	// the intake is already done then.
	collector := make(chan context.Context, 1)
	err := Supervise(context.Background(),
		Component{"collector", func(ctx context.Context) error { collector <- ctx; <-ctx.Done(); note("collector"); return nil }},
		Component{"a", func(ctx context.Context) error {
			<-ctx.Done()
			if (<-collector).Err() != nil {
				note("the collector told to stop with a")
			}
			note("a")
			return nil
		}},
		Component{"b", func(context.Context) error { note("b"); return boom }},
	)
	if !errors.Is(err, boom) {
		t.Fatalf("Supervise = %v, want boom", err)
	}
	if got := strings.Join(order, ","); got != "b,a,collector" {
		t.Fatalf("stop order %s, want b,a,collector", got)
	}
	err = Supervise(context.Background(), Component{"collector", func(ctx context.Context) error { <-ctx.Done(); return nil }},
		Component{"quiet", func(context.Context) error { return nil }})
	if err == nil || !strings.Contains(err.Error(), "quiet stopped on its own") {
		t.Fatalf("a component returning early: %v", err)
	}
}

// Close releases the relay's listener and what each component bound, when
// the station never runs.
func TestCloseReleases(t *testing.T) {
	srv, err := relay.NewServer(relay.Config{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	s, err := Listen(srv, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(s.RelayURL(), "http://127.0.0.1:") {
		t.Fatalf("RelayURL %s", s.RelayURL())
	}
	released := false
	s.Add(Component{Name: "x"}, func() { released = true })
	addr := s.Addr().String()
	s.Close()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("the relay's address is still held: %v", err)
	}
	ln.Close()
	if !released {
		t.Fatal("the component's release did not run")
	}
}

// The banner carries the page's login (the token) only when asked to, for
// a terminal; otherwise the page line points at aep-kimi open.
func TestBannerLoginOnlyOnRequest(t *testing.T) {
	b := Banner{RelayAddr: "127.0.0.1:8787", RelayURL: "http://127.0.0.1:8787", AdapterURL: "http://127.0.0.1:8398",
		Token: "s3cret-token", TokenFile: "/home/op/.aep/token", HookToken: "/h", Logs: "/l", Bridge: "off"}
	var piped, tty bytes.Buffer
	b.Write(&piped, false)
	b.Write(&tty, true)
	if strings.Contains(piped.String(), "s3cret") || !strings.Contains(piped.String(), "page     http://127.0.0.1:8787/   the fleet page: aep-kimi open") {
		t.Errorf("piped banner:\n%s", piped.String())
	}
	if !strings.Contains(tty.String(), "page     http://127.0.0.1:8787/#token=s3cret-token") {
		t.Errorf("terminal banner:\n%s", tty.String())
	}
	for _, want := range []string{"token /home/op/.aep/token (0600)", "aep-setup write kimi-code", "aep-kimi tail"} {
		if !strings.Contains(piped.String(), want) {
			t.Errorf("banner lacks %q:\n%s", want, piped.String())
		}
	}
}

// With the gate on, the banner says how long a call is held, what happens
// then, and that the hooks need the --control registration; a hold that
// Kimi's registered timeout cut short says so, with the fix.
func TestBannerGate(t *testing.T) {
	b := Banner{RelayAddr: "127.0.0.1:8787", RelayURL: "http://127.0.0.1:8787", AdapterURL: "http://127.0.0.1:8398",
		Token: "t", TokenFile: "/f", HookToken: "/h", Logs: "/l", Bridge: "off",
		Control: Control{Gate: true, Hold: 50 * time.Second, OnTimeout: "deny", Setup: "aep-setup write kimi-code --control"}}
	var out bytes.Buffer
	b.Write(&out, false)
	for _, want := range []string{"held up to 50s", "then it is denied (--on-timeout deny)",
		"1. register the hooks with Kimi:  aep-setup write kimi-code --control\n"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("banner lacks %q:\n%s", want, out.String())
		}
	}
	b.Control = Control{Gate: true, Hold: 8 * time.Second, OnTimeout: "allow", KimiTimeout: 10 * time.Second, Setup: "aep-setup write kimi-code --control"}
	out.Reset()
	b.Write(&out, false)
	if !strings.Contains(out.String(), "held up to 8s for an answer (aep-kimi respond), then Kimi runs it") ||
		!strings.Contains(out.String(), "Kimi's PreToolUse timeout (10s) cuts the hold short: aep-setup write kimi-code --control") {
		t.Errorf("capped banner:\n%s", out.String())
	}
	b.Control = Control{}
	out.Reset()
	b.Write(&out, false)
	if !strings.Contains(out.String(), "gate off (--control or AEP_KIMI_CONTROL=1") || !strings.Contains(out.String(), "Kimi:  aep-setup write kimi-code\n") {
		t.Errorf("gate off:\n%s", out.String())
	}
}

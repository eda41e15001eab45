package relay_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"io"
	"net"
	"regexp"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/aep-kimi/aep-kimi/relay"
	"github.com/aep-kimi/aep-kimi/relay/wire"
)

// A command routed to a relay in the moment it lets a session go, after its
// NATS client dropped the route subscription but before the server heard,
// is answered by that relay, not lost: the routing relay would otherwise
// wait out DefaultRouteTimeout and its sender hear nothing meanwhile.
// Relay A reaches the NATS through a proxy that holds A's unsubscribe until
// the command has reached A's connection.
func TestRoutedCommandDuringReleaseIsAnswered(t *testing.T) {
	t.Parallel()
	ns := runNATS(t, "n1", nil, nil)
	px := newHoldProxy(t, ns.Addr().String())
	open := func(url string) *relay.JetStreamBackend {
		b, err := relay.OpenJetStream(context.Background(), relay.JetStreamConfig{URL: url})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.Close() })
		return b
	}
	a, b := open("nats://"+px.addr()), open(ns.ClientURL())
	const gone = "no socket here claims it now"
	a.ServeRoutes(func(*relay.Message) (string, string, uint64) { return wire.CodeNoRoute, gone, 0 })
	const session = "s-move"
	route := routePrefix(session)
	sid := px.watchSub(route)
	a.Claimed(session, true)
	cmd := msg(t, command("control.cancel", session, `{}`))
	eventually(t, "A's route subscription answers", func() bool {
		code, detail := b.RouteRemote(cmd)
		return code == wire.CodeNoRoute && detail == gone
	})

	px.holdOn("UNSUB " + <-sid + " ") // the client's unsubscribe line

	a.Claimed(session, false)
	px.waitHeld(t)
	seen := px.watchDown(route)
	type answer struct{ code, detail string }
	answered := make(chan answer, 1)
	go func() {
		code, detail := b.RouteRemote(cmd)
		answered <- answer{code, detail}
	}()
	select {
	case <-seen:
	case <-time.After(waitShort):
		t.Fatal("the routed command did not reach A's connection")
	}
	px.release()
	if got := <-answered; got.code != wire.CodeNoRoute || got.detail != gone {
		t.Fatalf("a command routed while A let the session go: %s %q, want A's answer %q", got.code, got.detail, gone)
	}
}

// routePrefix is what the subjects of commands routed for session between
// relays on the default stream begin with; the routing relay's identity
// follows.
func routePrefix(session string) string {
	return "aep.AEP.route." + base64.RawURLEncoding.EncodeToString([]byte(session)) + "."
}

// routeClaimants is how many relays subscribe on ns to the commands routed
// for session: those a command for it can reach from another relay.
func routeClaimants(t testing.TB, ns *server.Server, session string) int {
	t.Helper()
	sz, err := ns.Subsz(&server.SubszOptions{Subscriptions: true, Test: routePrefix(session) + "probe"})
	if err != nil {
		t.Fatal(err)
	}
	return len(sz.Subs)
}

// holdProxy relays TCP connections to a server, reading both directions:
// it can report a subscription's id and a subject sent down to the
// client, and hold everything a client sends from a given protocol line
// on until released.
type holdProxy struct {
	ln     net.Listener
	target string

	mu       sync.Mutex
	up, down []byte // what clients sent, what the server sent
	subRe    *regexp.Regexp
	sid      chan string
	hold     string
	holdFrom int
	held     chan struct{} // closed once a client's line matched hold
	freed    chan struct{} // closed by release
	watch    string
	watchAt  int
	seen     chan struct{}
}

func newHoldProxy(t testing.TB, target string) *holdProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &holdProxy{ln: ln, target: target, held: make(chan struct{}), freed: make(chan struct{})}
	var wg sync.WaitGroup
	var conns []net.Conn
	var connsMu sync.Mutex
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			connsMu.Lock()
			conns = append(conns, c, s)
			connsMu.Unlock()
			wg.Add(2)
			go func() { defer wg.Done(); p.pipe(s, c, true) }()
			go func() { defer wg.Done(); p.pipe(c, s, false) }()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		p.release()
		connsMu.Lock()
		for _, c := range conns {
			c.Close()
		}
		connsMu.Unlock()
		wg.Wait()
	})
	return p
}

func (p *holdProxy) addr() string { return p.ln.Addr().String() }

// pipe copies src to dst; up is the client's direction.
func (p *holdProxy) pipe(dst io.WriteCloser, src io.Reader, up bool) {
	defer dst.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if up && p.sawUp(buf[:n]) {
				<-p.freed
			}
			if !up {
				p.sawDown(buf[:n])
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// sawUp records what a client sent and reports whether it must be held.
func (p *holdProxy) sawUp(b []byte) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.up = append(p.up, b...)
	if p.subRe != nil {
		if m := p.subRe.FindSubmatch(p.up); m != nil {
			p.sid <- string(m[1])
			p.subRe = nil
		}
	}
	if p.hold != "" && bytes.Contains(p.up[p.holdFrom:], []byte(p.hold)) {
		p.hold = ""
		close(p.held)
	}
	select {
	case <-p.held:
		select {
		case <-p.freed:
			return false
		default:
			return true
		}
	default:
		return false
	}
}

func (p *holdProxy) sawDown(b []byte) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = append(p.down, b...)
	if p.watch != "" && bytes.Contains(p.down[p.watchAt:], []byte(p.watch)) {
		p.watch = ""
		close(p.seen)
	}
}

// watchSub reports the id of the next queue subscription a client makes to
// a subject starting with prefix.
func (p *holdProxy) watchSub(prefix string) <-chan string {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.subRe = regexp.MustCompile(`SUB ` + regexp.QuoteMeta(prefix) + `\S* \S+ (\S+)\r\n`)
	p.sid = make(chan string, 1)
	return p.sid
}

// holdOn holds a client's bytes from the next time it sends s.
func (p *holdProxy) holdOn(s string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.hold, p.holdFrom = s, len(p.up)
}

func (p *holdProxy) waitHeld(t testing.TB) {
	t.Helper()
	select {
	case <-p.held:
	case <-time.After(waitShort):
		t.Fatal("the client never sent the line to hold on")
	}
}

// watchDown reports when the server next sends a client s.
func (p *holdProxy) watchDown(s string) <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.watch, p.watchAt, p.seen = s, len(p.down), make(chan struct{})
	return p.seen
}

func (p *holdProxy) release() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.freed:
	default:
		close(p.freed)
	}
}

// A relay closes while its follower cannot resume the stream: the NATS
// client re-creates a lost consumer without end and Next does not return
// meanwhile, so Close, which waits for the follower, must stop it.
func TestJetStreamClosesWhileFollowerCannotResume(t *testing.T) {
	t.Parallel()
	ns := runNATS(t, "n1", nil, nil)
	cfg := relay.JetStreamConfig{URL: ns.ClientURL()}
	// The follower notices the lost stream after about two heartbeats:
	// the product's second each is not what this test is about (500 ms
	// is the least nats.go takes).
	relay.SetFollowHeartbeat(&cfg, 500*time.Millisecond)
	b, err := relay.OpenJetStream(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	nc, err := nats.Connect(ns.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	// With JetStream off, this is the only answer to a consumer create:
	// a refusal, every time.
	asked := make(chan struct{}, 1)
	sub, err := nc.Subscribe("$JS.API.CONSUMER.CREATE.AEP.>", func(m *nats.Msg) {
		_ = m.Respond([]byte(`{"type":"io.nats.jetstream.api.v1.consumer_create_response","error":{"code":503,"err_code":10039,"description":"jetstream not enabled"}}`))
		select {
		case asked <- struct{}{}:
		default:
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := ns.DisableJetStream(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-asked:
	case <-time.After(30 * time.Second):
		t.Fatal("the follower never tried to re-create its consumer")
	}
	closed := make(chan error, 1)
	go func() { closed <- b.Close() }()
	select {
	case <-closed:
	case <-time.After(30 * time.Second):
		t.Fatal("Close did not return while the follower kept re-creating its consumer")
	}
}

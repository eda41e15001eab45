package relay_test

import (
	"bufio"
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aep-kimi/aep-kimi/internal/testkit/relaytest"
	"github.com/aep-kimi/aep-kimi/relay"
)

func TestDiscovery(t *testing.T) {
	t.Parallel()
	for _, token := range []string{"", testToken} {
		t.Run(fmt.Sprintf("token=%v", token != ""), func(t *testing.T) {
			srv := relaytest.RunServer(t, relay.Config{Token: token, Buffer: 42})
			for _, path := range []string{"/events", "/.well-known/aep"} {
				r := do(t, srv, http.MethodGet, path, nil, nil)
				if r.status != 200 || r.header.Get("Content-Type") != "application/json" {
					t.Fatalf("%s: %d %s", path, r.status, r.header.Get("Content-Type"))
				}
				d := r.json(t)
				caps, _ := d["capabilities"].(map[string]any)
				replay, _ := caps["replay"].(map[string]any)
				eps, _ := d["endpoints"].(map[string]any)
				if fmt.Sprint(d["aep"]) != "[0.1]" || eps["events"] != "/events" || eps["stream"] != "/stream" || eps["socket"] != "/socket" {
					t.Fatalf("document %s", r.body)
				}
				if replay["buffer"] != float64(42) || replay["all"] != true {
					t.Fatalf("replay %v", replay)
				}
				if fmt.Sprint(caps["filters"]) != "[attr-match]" || caps["roster"] == nil {
					t.Fatalf("capabilities %v", caps)
				}
				if _, routing := caps["control"]; routing != (token != "") {
					t.Fatalf("control advertised %v with token %q: routing is on only with a token", routing, token)
				}
			}
		})
	}
}

func TestHealthz(t *testing.T) {
	t.Parallel()
	srv := relaytest.RunServer(t, relay.Config{Token: testToken})
	mustPost(t, srv, mkEvent("s-h", 0))
	openSSE(t, srv, nil, nil)
	bare := do(t, srv, http.MethodGet, "/healthz", nil, map[string]string{"Authorization": ""})
	if bare.status != 200 || strings.TrimSpace(string(bare.body)) != `{"ok":true}` {
		t.Fatalf("unauthenticated healthz: %d %s", bare.status, bare.body)
	}
	full := do(t, srv, http.MethodGet, "/healthz", nil, nil).json(t)
	if full["ok"] != true || full["sessions"] != float64(1) || full["subscribers"] != float64(1) || full["connections"] != float64(1) {
		t.Fatalf("authenticated healthz %v", full)
	}
	if _, ok := full["uptime_s"]; !ok {
		t.Fatalf("no uptime_s: %v", full)
	}
}

func TestMetrics(t *testing.T) {
	t.Parallel()
	srv := relaytest.RunServer(t, relay.Config{Token: testToken})
	s := openSSE(t, srv, nil, nil)
	e1 := mkEvent("s-m", 1)
	mustPost(t, srv, mkEvent("s-m", 0), e1)
	mustPost(t, srv, e1)
	s.events(t, 3)
	if r := do(t, srv, http.MethodGet, "/metrics", nil, map[string]string{"Authorization": ""}); r.status != 401 {
		t.Fatalf("metrics without a token: %d", r.status)
	}
	// The delivery counter moves once the write batch has flushed, which
	// can be just after the consumer read it.
	var body string
	eventually(t, "three SSE deliveries counted", func() bool {
		body = string(do(t, srv, http.MethodGet, "/metrics", nil, nil).body)
		return strings.Contains(body, `aepkimi_relay_deliveries_total{binding="sse"} 3`)
	})
	for _, want := range []string{
		`aepkimi_relay_ingest_events_total{binding="http",result="buffered"} 2`,
		`aepkimi_relay_ingest_events_total{binding="http",result="duplicate"} 1`,
		`aepkimi_relay_deliveries_total{binding="sse"} 3`,
		`aepkimi_relay_buffered_events 2`,
		`aepkimi_relay_sessions 1`,
		`aepkimi_relay_connections{binding="sse"} 1`,
		`aepkimi_relay_commands_total{outcome="no-route"} 0`,
		`go_goroutines`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("metrics lack %q", want)
		}
	}
}

// A socket that never answers the close handshake holds the drain past its
// timeout: Serve gives up with ErrDrainTimeout (the daemon exits 1).
func TestDrainTimeout(t *testing.T) {
	t.Parallel()
	srv := relaytest.RunServer(t, relay.Config{DrainTimeout: 200 * time.Millisecond})
	conn := rawSocket(t, srv.Addr)
	defer conn.Close()
	writeMasked(t, conn, []byte(`{"type":"hello","versions":["0.1"],"role":"consumer"}`))
	// The relay's answer to the hello (its first byte will do) shows it
	// took it: the socket is a consumer's the drain must close.
	_ = conn.SetReadDeadline(time.Now().Add(waitShort))
	if _, err := conn.Read(make([]byte, 1)); err != nil {
		t.Fatalf("no answer to the hello: %v", err)
	}
	start := time.Now()
	err := srv.Shutdown()
	if !errors.Is(err, relay.ErrDrainTimeout) {
		t.Fatalf("Shutdown = %v, want ErrDrainTimeout", err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("drain took %v despite a 200ms timeout", d)
	}
}

// rawSocket performs a WebSocket upgrade by hand and then never reads.
func rawSocket(t *testing.T, addr string) net.Conn {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	key := make([]byte, 16)
	_, _ = rand.Read(key)
	fmt.Fprintf(conn, "GET /socket HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\n\r\n",
		addr, base64.StdEncoding.EncodeToString(key))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil || resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("upgrade: %v %v", resp, err)
	}
	return conn
}

// writeMasked sends one masked text frame (clients must mask, RFC 6455 §5.3).
func writeMasked(t *testing.T, conn net.Conn, payload []byte) {
	t.Helper()
	hdr := []byte{0x81}
	switch n := len(payload); {
	case n < 126:
		hdr = append(hdr, 0x80|byte(n))
	default:
		hdr = append(hdr, 0x80|126, 0, 0)
		binary.BigEndian.PutUint16(hdr[2:], uint16(n))
	}
	mask := []byte{1, 2, 3, 4}
	hdr = append(hdr, mask...)
	body := make([]byte, len(payload))
	for i, c := range payload {
		body[i] = c ^ mask[i%4]
	}
	if _, err := conn.Write(append(hdr, body...)); err != nil {
		t.Fatal(err)
	}
}

package notify

import (
	"context"
	"crypto/ecdh"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"

	webpush "github.com/SherClockHolmes/webpush-go"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// countingListener is a loopback port that counts the connections it gets.
func countingListener(t *testing.T) (net.Listener, *atomic.Int32) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var n atomic.Int32
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			n.Add(1)
			c.Close()
		}
	}()
	t.Cleanup(func() { ln.Close() })
	return ln, &n
}

// guardedTarget is a device pushing to endpoint through the guarded client
// (allow as Config.PushServiceAllow), recording the drops.
func guardedTarget(t *testing.T, endpoint string, allow []netip.Prefix, drops *atomic.Int32) *pushTarget {
	t.Helper()
	priv, pub, err := webpush.GenerateVAPIDKeys()
	if err != nil {
		t.Fatal(err)
	}
	ua, err := ecdh.P256().GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	auth := make([]byte, 16)
	_, _ = rand.Read(auth)
	enc := base64.RawURLEncoding.EncodeToString
	return &pushTarget{
		sub:  Subscription{ID: "dev", Owner: "watcher", Device: "probe", Endpoint: endpoint, P256dh: enc(ua.PublicKey().Bytes()), Auth: enc(auth)},
		keys: vapidKeys{Private: priv, Public: pub}, contact: pushSubscriber, client: newPushClient(allow),
		sent: func(string) {}, drop: func(string, string) { drops.Add(1) },
	}
}

// A push whose name resolves to loopback goes through the queue once:
// refused at connect, nothing reaches the port, counted failed (not
// retried), and its subscription dropped.
func TestPushQueueRefusesNonPublicAtConnect(t *testing.T) {
	t.Parallel()
	ln, conns := countingListener(t)
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	var drops atomic.Int32
	met := NewMetrics()
	q := NewQueue(guardedTarget(t, "https://localhost:"+port+"/push/x", nil, &drops), "push", met, nil)
	err := q.deliver(t.Context(), Message{Kind: KindTest, Tag: "t"})
	if !errors.Is(err, ErrPermanent) || !errors.Is(err, errNonPublic) {
		t.Fatalf("deliver: %v, want a permanent refusal", err)
	}
	if n := conns.Load(); n != 0 {
		t.Errorf("the push reached the loopback port: %d connections", n)
	}
	if got := testutil.ToFloat64(met.deliveries.WithLabelValues("push", resultFailed)); got != 1 {
		t.Errorf("failed = %v, want 1", got)
	}
	if got := testutil.ToFloat64(met.deliveries.WithLabelValues("push", resultRetried)); got != 0 {
		t.Errorf("retried = %v, want 0", got)
	}
	if drops.Load() != 1 {
		t.Errorf("drops = %d, want 1", drops.Load())
	}
}

// A push service's redirect is not followed: the place it names gets
// nothing, and the push fails for good.
func TestPushFollowsNoRedirect(t *testing.T) {
	t.Parallel()
	ln, conns := countingListener(t)
	svc := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://"+ln.Addr().String()+"/elsewhere", http.StatusTemporaryRedirect)
	}))
	defer svc.Close()
	var drops atomic.Int32
	allow := []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}
	err := guardedTarget(t, svc.URL+"/push/x", allow, &drops).Send(context.Background(), Message{Kind: KindTest, Tag: "t"})
	if !errors.Is(err, ErrPermanent) {
		t.Errorf("send: %v, want a permanent failure", err)
	}
	if n := conns.Load(); n != 0 {
		t.Errorf("the redirect was followed: %d connections", n)
	}
}

// A device's endpoint is its capability (whoever holds it can push to the
// device), so a push that fails does not quote it: the errors the queue
// logs name the failure, never the URL, whether the service is refused
// at connect or does not answer.
func TestPushErrorsHideEndpoint(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	ln.Close()
	const capability = "dGhpcy1pcy10aGUtZGV2aWNlcy1zZWNyZXQ"
	allow := []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}
	var drops atomic.Int32
	for name, tc := range map[string]struct {
		endpoint string
		allow    []netip.Prefix
	}{
		"refused": {"http://" + closed + "/push/" + capability, allow},
		"guarded": {"https://localhost:1/push/" + capability, nil},
	} {
		err := guardedTarget(t, tc.endpoint, tc.allow, &drops).Send(t.Context(), Message{Kind: KindTest, Tag: "t"})
		if err == nil || strings.Contains(err.Error(), capability) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

package bridgeweb

import (
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aep-kimi/aep-kimi/emitter"
	"github.com/aep-kimi/aep-kimi/internal/safefile"
	"github.com/aep-kimi/aep-kimi/internal/testkit/netaddr"
	"github.com/aep-kimi/aep-kimi/internal/testkit/poll"
	"github.com/aep-kimi/aep-kimi/internal/testkit/safefiletest"
	"github.com/aep-kimi/aep-kimi/mapping"
)

func TestInstanceLoopback(t *testing.T) {
	t.Parallel()
	for host, want := range map[string]bool{
		"": true, "127.0.0.1": true, "127.8.9.10": true, "::1": true, "[::1]": true, "localhost": true, "LocalHost.": true,
		"0.0.0.0": true, "::": true,
		"192.0.2.7": false, "10.0.0.1": false, "kap.example": false, "localhost.example": false, "::ffff:8.8.8.8": false,
	} {
		if got := (Instance{Host: host}).Loopback(); got != want {
			t.Errorf("host %q: loopback %v, want %v", host, got, want)
		}
	}
}

// A newest record naming a remote host does not hide an older loopback one.
func TestDiscoverSkipsRemoteHosts(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	now := time.Now()
	writeInstance(t, home, "local", instance(100, 5001, now.Add(-time.Hour), now))
	remote := instance(200, 5002, now, now)
	remote["host"] = "192.0.2.7"
	writeInstance(t, home, "remote", remote)
	alive := func(int) bool { return true }
	in, skipped, err := Discover(home, now, DefaultStaleInstance, alive, false)
	if err != nil || in.Port != 5001 {
		t.Fatalf("port %d err %v", in.Port, err)
	}
	if len(skipped) != 1 || skipped[0].Reason != SkipRemote || skipped[0].Host != "192.0.2.7" {
		t.Fatalf("skipped %+v", skipped)
	}
	if in, _, _ := Discover(home, now, DefaultStaleInstance, alive, true); in.Port != 5002 {
		t.Fatalf("allowed: port %d, want the remote record's", in.Port)
	}
}

// A planted instance record naming a non-loopback host: the bridge never
// sends the kap token there (skipped, counted, one warning), unless the
// operator allows remote hosts.
func TestBridgeRefusesRemoteInstance(t *testing.T) {
	t.Parallel()
	const token = "kap-secret-token"
	ip := netaddr.NonLoopbackIPv4(t)
	var withToken, requests atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		if strings.Contains(r.Header.Get("Authorization")+r.Header.Get("Sec-WebSocket-Protocol"), token) {
			withToken.Add(1)
		}
		w.WriteHeader(http.StatusUnauthorized)
	}))
	ln, err := net.Listen("tcp", "0.0.0.0:0")
	if err != nil {
		t.Fatal(err)
	}
	srv.Listener = ln
	srv.Start()
	t.Cleanup(srv.Close)
	port := ln.Addr().(*net.TCPAddr).Port

	for _, allow := range []bool{false, true} {
		kimiHome := t.TempDir()
		rec := instance(os.Getpid(), port, time.Now(), time.Now())
		rec["host"] = ip
		writeInstance(t, kimiHome, "planted", rec)
		tokenFile := filepath.Join(kimiHome, "server.token")
		os.WriteFile(tokenFile, []byte(token+"\n"), 0o600)
		tb := startBridge(t, &fakeKap{token: token, srv: srv}, mapping.Companion, tokenFile, func(c *Config) {
			c.KapURL, c.KimiHome, c.AllowRemoteKap = "", kimiHome, allow
			c.PIDAlive = func(int) bool { return true }
		})
		if !poll.Until(10*time.Second, func() bool {
			if allow {
				return withToken.Load() > 0
			}
			return strings.Contains(tb.metric(t, "aepkimi_bridgeweb_instances_skipped_total"), `reason="non-loopback-host"} 1`)
		}) {
			t.Fatalf("allow=%v: requests %d, with token %d, metrics %s", allow, requests.Load(), withToken.Load(),
				tb.metric(t, "aepkimi_bridgeweb_instances_skipped_total"))
		}
		if !allow {
			if n := requests.Load(); n != 0 {
				t.Fatalf("the bridge sent %d requests (%d with the token) to %s", n, withToken.Load(), ip)
			}
			if st := tb.HealthNow().Kap.State; st != KapDiscovering {
				t.Errorf("state %s, want %s", st, KapDiscovering)
			}
			logs := tb.logs.String()
			if !strings.Contains(logs, "non-loopback host") || !strings.Contains(logs, "--allow-remote-kap") || strings.Contains(logs, token) {
				t.Errorf("log: %s", logs)
			}
		}
		tb.stop(t)
	}
}

// A link planted where the bridge keeps its epoch stops it with a clear
// error; the target stays as it was.
func TestBridgeRefusesLinkedEpoch(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	link := safefiletest.Plant(t, epochPath(home))
	_, err := NewBridge(Config{Config: emitter.Config{Home: home}, KimiHome: t.TempDir(), Listen: "127.0.0.1:0"})
	if !errors.Is(err, safefile.ErrLink) || !strings.Contains(err.Error(), link.Path) {
		t.Fatalf("err %v, want a refused link naming %s", err, link.Path)
	}
	link.Untouched(t)
}

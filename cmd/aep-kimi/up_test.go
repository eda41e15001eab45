package main

import (
	"bytes"
	"context"
	"flag"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/aep-kimi/aep-kimi/aep"
	"github.com/aep-kimi/aep-kimi/internal/testkit/netaddr"
	"github.com/aep-kimi/aep-kimi/internal/testkit/relaycall"
	"github.com/aep-kimi/aep-kimi/internal/testkit/stacktest"
	"github.com/aep-kimi/aep-kimi/internal/testkit/syncbuf"
	"github.com/aep-kimi/aep-kimi/relay"
	"github.com/aep-kimi/aep-kimi/station"
)

// upFixture is `aep-kimi up` on fresh loopback ports with the bridge forced
// on, its environment and home in temp directories.
func upFixture(t *testing.T) (upOptions, func(string) string) {
	t.Helper()
	env := map[string]string{"AEP_TOKEN": "up-test-token", "KIMI_CODE_HOME": t.TempDir()}
	getenv := func(k string) string { return env[k] }
	o := upOptions{UpOptions: station.UpOptions{Home: t.TempDir(), RelayListen: netaddr.FreeAddr(t), AdapterListen: netaddr.FreeAddr(t)}}
	o.Bridge.BindFlags(flag.NewFlagSet("up", flag.ContinueOnError), getenv)
	o.Relay.BindFlags(flag.NewFlagSet("up", flag.ContinueOnError), getenv)
	o.Bridge.Force = true
	o.Bridge.Opts.Listen = netaddr.FreeAddr(t)
	return o, getenv
}

// mustBind proves nothing holds addr any more.
func mustBind(t *testing.T, what, addr string) {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Errorf("%s's address %s is still held: %v", what, addr, err)
		return
	}
	ln.Close()
}

// A component that cannot start (here the bridge, misconfigured) releases
// the listeners up had already bound for the relay and the adapter.
func TestUpStartErrorReleasesListeners(t *testing.T) {
	o, getenv := upFixture(t)
	o.Bridge.Opts.Mode = "no-such-mode"
	var out bytes.Buffer
	err := upRun(context.Background(), o, getenv, stdio{in: strings.NewReader(""), out: &out, err: &out})
	if !station.IsUsage(err) || !strings.Contains(err.Error(), "--mode") {
		t.Fatalf("upRun = %v, want the bridge's usage error\n%s", err, out.String())
	}
	mustBind(t, "relay", o.RelayListen)
	mustBind(t, "adapter", o.AdapterListen)
}

// One component failing while up runs (the bridge cannot bind its address)
// stops the others and up returns that failure, without waiting for a
// signal.
func TestUpOneFailureStopsAll(t *testing.T) {
	o, getenv := upFixture(t)
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	o.Bridge.Opts.Listen = taken.Addr().String()

	// The deadline only keeps a regression from hanging the suite; up must
	// return long before it.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var out bytes.Buffer
	err = upRun(ctx, o, getenv, stdio{in: strings.NewReader(""), out: &out, err: &out})
	if ctx.Err() != nil {
		t.Fatalf("up ran until its context ended: the failed bridge did not stop it\n%s", out.String())
	}
	if err == nil || !strings.Contains(err.Error(), "bridge-web") || !strings.Contains(err.Error(), o.Bridge.Opts.Listen) {
		t.Fatalf("upRun = %v, want the bridge's listen error\n%s", err, out.String())
	}
	mustBind(t, "relay", o.RelayListen)
	mustBind(t, "adapter", o.AdapterListen)
}

// `up --store jetstream` keeps the relay's history across restarts of up:
// what the first run admitted, the second serves.
func TestUpJetStreamKeepsHistory(t *testing.T) {
	o, getenv := upFixture(t)
	o.Relay.Store.Store = relay.StoreJetStream
	ev := &aep.Event{AEP: aep.Version, ID: aep.NewID(), Type: "progress.status", Time: aep.FormatTime(time.Now()),
		Source: "aep://test/agent/up/session/s-up", Agent: "up", Session: "s-up", Seq: aep.Int64(0), Epoch: aep.Int64(0)}
	base := "http://" + o.RelayListen
	for run := range 2 {
		ctx, cancel := context.WithCancel(context.Background())
		var out syncbuf.Buffer
		done := make(chan error, 1)
		go func() { done <- upRun(ctx, o, getenv, stdio{in: strings.NewReader(""), out: &out, err: &out}) }()
		stacktest.WaitHealthy(t, base+"/healthz", done, &out)
		if run == 0 {
			relaycall.Post(t, base, "up-test-token", ev)
		}
		if got := stacktest.ReplayIDs(t, base, "up-test-token")["s-up"]; len(got) != 1 || got[0] != ev.ID {
			t.Fatalf("run %d replays %v, want the event the first run admitted\n%s", run+1, got, out.String())
		}
		cancel()
		if err := <-done; err != nil {
			t.Fatalf("up run %d: %v\n%s", run+1, err, out.String())
		}
	}
}

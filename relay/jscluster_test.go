package relay_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/aep-kimi/aep-kimi/internal/testkit/netaddr"
	"github.com/aep-kimi/aep-kimi/internal/testkit/poll"
	"github.com/aep-kimi/aep-kimi/internal/testkit/relaytest"
	"github.com/aep-kimi/aep-kimi/relay"
)

// startCluster starts a three-node JetStream cluster in the test process
// without waiting for it to elect anything, as systemd or compose start
// one beside the relay; it returns the nodes and their client URLs.
func startCluster(t testing.TB) ([]*server.Server, string) {
	t.Helper()
	ports := []int{netaddr.FreePort(t), netaddr.FreePort(t), netaddr.FreePort(t)}
	var routes []*url.URL
	for _, p := range ports {
		routes = append(routes, &url.URL{Scheme: "nats", Host: "127.0.0.1:" + strconv.Itoa(p)})
	}
	var nodes []*server.Server
	var urls []string
	for i, p := range ports {
		ns := runNATS(t, fmt.Sprintf("n%d", i+1), &server.ClusterOpts{Name: "aep", Host: "127.0.0.1", Port: p}, routes)
		nodes = append(nodes, ns)
		urls = append(urls, ns.ClientURL())
	}
	return nodes, strings.Join(urls, ",")
}

// A relay started together with its three-node cluster comes up, every
// time: its first JetStream requests go out before the cluster has a meta
// leader, and it asks again, briefly, until one answers, saying what it
// waits for.
func TestJetStreamStartsWithItsCluster(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("forms three-node JetStream clusters; skipped under -short")
	}
	var took []time.Duration
	for i := range 10 {
		t.Run(strconv.Itoa(i), func(t *testing.T) {
			var logs bytes.Buffer
			nodes, urls := startCluster(t)
			start := time.Now()
			elected := make(chan time.Duration, 1)
			go func() {
				if poll.Until(30*time.Second, func() bool {
					return slices.ContainsFunc(nodes, func(ns *server.Server) bool { return ns.JetStreamIsLeader() })
				}) {
					elected <- time.Since(start)
				}
			}()
			b, err := relay.OpenJetStream(context.Background(), relay.JetStreamConfig{URL: urls, Replicas: 3, Logger: newTestLogger(&logs)})
			if err != nil {
				t.Fatalf("relay started with its cluster: %v after %v\n%s", err, time.Since(start), logs.String())
			}
			took = append(took, time.Since(start))
			select {
			case d := <-elected:
				t.Logf("leader elected after %v, relay up after %v", d, took[len(took)-1])
			default:
			}
			if time.Since(start) > 3*time.Second {
				t.Logf("relay log:\n%s", logs.String())
			}
			if err := b.Close(); err != nil {
				t.Error(err)
			}
		})
	}
	slices.Sort(took)
	t.Logf("started in %v", took)
}

// A relay on a three-node cluster whose stream leader, or meta leader, is
// shut down mid-ingest loses nothing it acknowledged: batches the stream
// could not take meanwhile are refused (503) and the emitter sends them
// again; every acknowledged event is in the relay and in the stream a new
// relay rebuilds from, in order, once.
func TestJetStreamClusterLeaderLossMidIngest(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("forms three-node JetStream clusters; skipped under -short")
	}
	t.Run("stream-leader", func(t *testing.T) {
		leaderLossMidIngest(t, func(ns *server.Server) bool {
			return ns.JetStreamIsStreamLeader(server.DEFAULT_GLOBAL_ACCOUNT, relay.DefaultStream)
		})
	})
	t.Run("meta-leader", func(t *testing.T) {
		leaderLossMidIngest(t, (*server.Server).JetStreamIsLeader)
	})
}

func leaderLossMidIngest(t *testing.T, isLeader func(*server.Server) bool) {
	nodes, urls := startCluster(t)
	var logs bytes.Buffer
	b, err := relay.OpenJetStream(context.Background(), relay.JetStreamConfig{URL: urls, Replicas: 3, Logger: newTestLogger(&logs)})
	if err != nil {
		t.Fatalf("relay started with its cluster: %v\n%s", err, logs.String())
	}
	t.Cleanup(func() {
		b.Close()
		if t.Failed() {
			t.Logf("relay log:\n%s", logs.String())
		}
	})
	srv := relaytest.RunServer(t, relay.Config{Token: testToken, Backend: b})

	const batches, size = 60, 10
	var acked []int64
	refusals, killedAt := 0, -1
	var killed time.Time
	var outage time.Duration
	for i := 0; i < batches; {
		if i == batches/3 && killedAt < 0 {
			leader := slices.IndexFunc(nodes, isLeader)
			if leader < 0 {
				t.Fatal("no leader to shut down")
			}
			ns := nodes[leader]
			t.Logf("shutting down %s (meta leader %v, stream leader %v)", ns.Name(), ns.JetStreamIsLeader(),
				ns.JetStreamIsStreamLeader(server.DEFAULT_GLOBAL_ACCOUNT, relay.DefaultStream))
			nodes[leader].Shutdown()
			killedAt, killed = leader, time.Now()
		}
		evs := seqEvents("lead", int64(i*size), int64((i+1)*size))
		// What an emitter does with a refused batch: the same batch again,
		// a little later, until the cluster has a leader again.
		var r httpResult
		if !poll.Until(20*time.Second, func() bool {
			if r = post(t, srv, evs...); r.status == http.StatusServiceUnavailable {
				refusals++
				return false
			}
			return true
		}) {
			t.Fatalf("the relay refused batches for 20 s after the leader went (%d refusals): %s", refusals, r.body)
		}
		if r.status != http.StatusAccepted {
			t.Fatalf("POST: HTTP %d %s", r.status, r.body)
		}
		acked = append(acked, seqsOf(evs)...)
		if killedAt >= 0 && outage == 0 {
			outage = time.Since(killed)
		}
		i++
	}
	t.Logf("%d batches refused; the first batch after the leader went was stored %v later", refusals, outage)
	if got := replayedSeqs(t, srv, "lead"); !slices.Equal(got, acked) {
		t.Fatalf("the relay replays %d events, %d acknowledged:\n got %v\nwant %v", len(got), len(acked), got, acked)
	}
	var rest []string
	for i, ns := range nodes {
		if i != killedAt {
			rest = append(rest, ns.ClientURL())
		}
	}
	again, err := relay.OpenJetStream(context.Background(), relay.JetStreamConfig{URL: strings.Join(rest, ","), Replicas: 3})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { again.Close() })
	srv2 := relaytest.RunServer(t, relay.Config{Token: testToken, Backend: again})
	if got := replayedSeqs(t, srv2, "lead"); !slices.Equal(got, acked) {
		t.Fatalf("a new relay rebuilds %d events, %d acknowledged:\n got %v\nwant %v", len(got), len(acked), got, acked)
	}
}

package relay_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/aep-kimi/aep-kimi/aep"
	"github.com/aep-kimi/aep-kimi/internal/testkit/fulldisk"
	"github.com/aep-kimi/aep-kimi/internal/testkit/netaddr"
	"github.com/aep-kimi/aep-kimi/internal/testkit/poll"
	"github.com/aep-kimi/aep-kimi/internal/testkit/relaytest"
	"github.com/aep-kimi/aep-kimi/relay"
)

// A JetStream relay whose disk fills up says so on /healthz and /metrics,
// refuses batches at once (503 with Retry-After) while it cannot store
// them, and once space is freed recovers by itself, without a restart:
// every event it acknowledged, before and after, is there in order, in
// the relay and in the stream a restart rebuilds from.
func TestJetStreamFullDiskRecovers(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("fills a tmpfs and waits for the store to recover; skipped under -short")
	}
	disk := fulldisk.Mount(t, 16<<20)
	dir := filepath.Join(disk.Dir, "store")
	var logs bytes.Buffer
	cfg := relay.JetStreamConfig{Dir: dir, SyncAlways: true, Logger: newTestLogger(&logs)}
	b, err := relay.OpenJetStream(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	t.Cleanup(func() {
		if !closed {
			b.Close()
		}
		if t.Failed() || testing.Verbose() {
			t.Logf("relay log:\n%s", logs.String())
		}
	})
	srv := relaytest.RunServer(t, relay.Config{Token: testToken, Backend: b})
	disk.FillBut(2 << 20)

	pad := strings.Repeat("x", 2000)
	var acked []int64
	next := int64(0)
	batch := func() []*aep.Event {
		return seqEvents("full", next, next+20, func(e *aep.Event) { e.Data = json.RawMessage(`{"pad":"` + pad + `"}`) })
	}
	var refused []*aep.Event
	for i := 0; refused == nil; i++ {
		if i > 2000 {
			t.Fatal("the disk never filled up")
		}
		evs := batch()
		start := time.Now()
		r := post(t, srv, evs...)
		switch r.status {
		case http.StatusAccepted:
			acked = append(acked, seqsOf(evs)...)
			next += int64(len(evs))
		case http.StatusServiceUnavailable:
			refused = evs
			t.Logf("disk full after %d events; refused in %v: %s", len(acked), time.Since(start), r.body)
		default:
			t.Fatalf("POST: HTTP %d %s", r.status, r.body)
		}
	}
	// Known unavailable: the next batches are refused at once, saying when
	// to come back.
	poll.Until(5*time.Second, func() bool { return do(t, srv, http.MethodGet, "/healthz", nil, nil).status != http.StatusOK })
	before := refusedAtOnce(t, srv)
	for range 5 {
		r := post(t, srv, refused...)
		if r.status != http.StatusServiceUnavailable || r.header.Get("Retry-After") == "" {
			t.Fatalf("a batch while the disk is full: HTTP %d Retry-After %q %s", r.status, r.header.Get("Retry-After"), r.body)
		}
	}
	// At once: without trying the stream (counted so, not timed).
	if n := refusedAtOnce(t, srv) - before; n != 5 {
		t.Fatalf("%v of 5 batches while the store is known unavailable were refused without trying it", n)
	}
	h := do(t, srv, http.MethodGet, "/healthz", nil, nil)
	if store, _ := h.json(t)["store"].(map[string]any); h.status != http.StatusServiceUnavailable || h.json(t)["ok"] != false ||
		!strings.Contains(fmt.Sprint(store["error"]), "no space left") {
		t.Fatalf("/healthz with a full disk: HTTP %d %s", h.status, h.body)
	}
	// A probe without a token learns only that the relay is not well.
	if h := do(t, srv, http.MethodGet, "/healthz", nil, map[string]string{"Authorization": ""}); h.status != http.StatusServiceUnavailable || bytes.Contains(h.body, []byte(disk.Dir)) {
		t.Fatalf("/healthz without a token, with a full disk: HTTP %d %s", h.status, h.body)
	}
	if m := do(t, srv, http.MethodGet, "/metrics", nil, nil); !bytes.Contains(m.body, []byte("aepkimi_relay_store_available 0")) {
		t.Fatalf("/metrics with a full disk:\n%s", grepLines(m.body, "aepkimi_relay_store"))
	}

	disk.Free()
	freed := time.Now()
	if !poll.Until(60*time.Second, func() bool {
		return do(t, srv, http.MethodGet, "/healthz", nil, nil).status == http.StatusOK
	}) {
		t.Fatalf("the store did not recover within 60 s of space being freed; /healthz %s", do(t, srv, http.MethodGet, "/healthz", nil, nil).body)
	}
	t.Logf("healthy %v after space was freed", time.Since(freed))
	// The emitter resends what was refused, then goes on.
	for _, evs := range [][]*aep.Event{refused, nil, nil} {
		if evs == nil {
			evs = batch()
		}
		mustPost(t, srv, evs...)
		acked = append(acked, seqsOf(evs)...)
		next = max(next, *evs[len(evs)-1].Seq+1)
	}
	if m := do(t, srv, http.MethodGet, "/metrics", nil, nil); !bytes.Contains(m.body, []byte("aepkimi_relay_store_available 1")) {
		t.Fatalf("/metrics after recovery:\n%s", grepLines(m.body, "aepkimi_relay_store"))
	}
	if got := replayedSeqs(t, srv, "full"); !slices.Equal(got, acked) {
		t.Fatalf("the relay replays %d events, %d acknowledged:\n got %v\nwant %v", len(got), len(acked), got, acked)
	}
	srv.Shutdown()
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	closed = true
	// The stream itself, not only the index: rebuilt from it alone.
	os.Remove(filepath.Join(dir, "index.snap"))
	again := openJetStreamIn(t, dir, 0, 0, 0)
	srv2 := relaytest.RunServer(t, relay.Config{Token: testToken, Backend: again})
	if got := replayedSeqs(t, srv2, "full"); !slices.Equal(got, acked) {
		t.Fatalf("the reopened store replays %d events, %d acknowledged:\n got %v\nwant %v", len(got), len(acked), got, acked)
	}
	// One line when the store went down, one when it came back.
	for _, line := range []string{"cannot make events durable", "storing events again"} {
		if n := strings.Count(logs.String(), line); n != 1 {
			t.Errorf("the log says %q %d times, want once", line, n)
		}
	}
	// NATS's own error says why, in the relay's log.
	if !strings.Contains(logs.String(), `level=ERROR msg="nats: JetStream failed to store a msg`) {
		t.Error("the relay's log does not carry the embedded NATS's errors")
	}
}

func replayedSeqs(t *testing.T, srv *relaytest.Server, session string) []int64 {
	t.Helper()
	var out []int64
	for _, it := range sessionReplay(t, srv, session) {
		ev, err := aep.ParseEvent([]byte(it.Data))
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, *ev.Seq)
	}
	return out
}

func grepLines(b []byte, prefix string) string {
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, prefix) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// On an external NATS whose disk fills up, the stream's failures show on
// the relay's /healthz, and the relay stores again by itself once the
// server does (space freed, the server restarted), without its own
// restart: nothing it acknowledged is lost.
func TestJetStreamExternalFullDiskRecovers(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("fills a tmpfs under a NATS server; skipped under -short")
	}
	disk := fulldisk.Mount(t, 16<<20)
	port := netaddr.FreePort(t)
	start := func() *server.Server {
		return runNATSWith(t, "ext", func(o *server.Options) {
			// The server sizes its store by the disk unless told: the stream's limit is larger than this one.
			o.Port, o.StoreDir, o.JetStreamMaxStore = port, filepath.Join(disk.Dir, "nats"), 1<<30
		})
	}
	ns := start()
	var logs bytes.Buffer
	b, err := relay.OpenJetStream(context.Background(), relay.JetStreamConfig{URL: ns.ClientURL(), Logger: newTestLogger(&logs)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		b.Close()
		if t.Failed() || testing.Verbose() {
			t.Logf("relay log:\n%s", logs.String())
		}
	})
	srv := relaytest.RunServer(t, relay.Config{Token: testToken, Backend: b})
	disk.FillBut(2 << 20)

	pad := strings.Repeat("x", 2000)
	var acked []int64
	next := int64(0)
	var refused []*aep.Event
	for i := 0; refused == nil; i++ {
		if i > 2000 {
			t.Fatal("the disk never filled up")
		}
		evs := seqEvents("ext", next, next+20, func(e *aep.Event) { e.Data = json.RawMessage(`{"pad":"` + pad + `"}`) })
		switch r := post(t, srv, evs...); r.status {
		case http.StatusAccepted:
			acked = append(acked, seqsOf(evs)...)
			next += int64(len(evs))
		case http.StatusServiceUnavailable:
			refused = evs
		default:
			t.Fatalf("POST: HTTP %d %s", r.status, r.body)
		}
	}
	h := do(t, srv, http.MethodGet, "/healthz", nil, nil)
	if h.status != http.StatusServiceUnavailable || h.json(t)["ok"] != false {
		t.Fatalf("/healthz with the NATS server's disk full: HTTP %d %s", h.status, h.body)
	}
	t.Logf("/healthz with the NATS server's disk full: %s", h.body)

	// The operator frees space and restarts the NATS server.
	disk.Free()
	ns.Shutdown()
	ns.WaitForShutdown()
	start()
	restarted := time.Now()
	// The emitter resends what was refused until it is taken.
	if !poll.Until(60*time.Second, func() bool {
		return post(t, srv, refused...).status == http.StatusAccepted
	}) {
		t.Fatalf("the relay did not store again within 60 s of the NATS server's restart; /healthz %s", do(t, srv, http.MethodGet, "/healthz", nil, nil).body)
	}
	acked = append(acked, seqsOf(refused)...)
	t.Logf("stored again %v after the NATS server restarted", time.Since(restarted))
	if h := do(t, srv, http.MethodGet, "/healthz", nil, nil); h.status != http.StatusOK {
		t.Fatalf("/healthz once storing again: HTTP %d %s", h.status, h.body)
	}
	if got := replayedSeqs(t, srv, "ext"); !slices.Equal(got, acked) {
		t.Fatalf("the relay replays %d events, %d acknowledged:\n got %v\nwant %v", len(got), len(acked), got, acked)
	}
}

// refusedAtOnce is the relay's count of batches refused without trying
// the store (aepkimi_relay_store_refused_unavailable_total).
func refusedAtOnce(t *testing.T, srv *relaytest.Server) float64 {
	t.Helper()
	const name = "aepkimi_relay_store_refused_unavailable_total"
	line := grepLines(do(t, srv, http.MethodGet, "/metrics", nil, nil).body, name+" ")
	v, err := strconv.ParseFloat(strings.TrimPrefix(line, name+" "), 64)
	if err != nil {
		t.Fatalf("/metrics: %s: %q", name, line)
	}
	return v
}

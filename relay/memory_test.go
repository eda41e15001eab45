package relay_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/aep-kimi/aep-kimi/aep"
	"github.com/aep-kimi/aep-kimi/relay"
	"github.com/aep-kimi/aep-kimi/relay/wire"
)

func msg(t testing.TB, e *aep.Event) *relay.Message {
	t.Helper()
	ev, err := aep.ParseEvent(line(t, e))
	if err != nil {
		t.Fatal(err)
	}
	m, err := relay.NewMessage(ev, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// collector is a Subscriber that keeps everything it is given.
type collector struct {
	mu     sync.Mutex
	replay relay.Replay
	live   []*relay.Message
}

func (c *collector) Start(r relay.Replay) { c.replay = r }
func (c *collector) Offer(m *relay.Message) {
	c.mu.Lock()
	c.live = append(c.live, m)
	c.mu.Unlock()
}

type replayed struct {
	session string
	pos     wire.Position
	kind    relay.Kind
	typ     string
	id      string
}

func drain(t testing.TB, r relay.Replay) []replayed {
	t.Helper()
	var out []replayed
	err := r.Each(context.Background(), func(m *relay.Message) error {
		ev, err := m.Envelope()
		if err != nil {
			return err
		}
		if m.Type != ev.Type || m.Source != ev.Source {
			return fmt.Errorf("replayed metadata %s/%s disagrees with the bytes %s/%s", m.Type, m.Source, ev.Type, ev.Source)
		}
		out = append(out, replayed{m.Session, m.Pos, m.Kind, m.Type, ev.ID})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func replayAll(t testing.TB, b relay.Backend, filter string) []replayed {
	t.Helper()
	f, err := aep.ParseFilter([]byte(filter))
	if err != nil {
		t.Fatal(err)
	}
	c := &collector{}
	cancel, err := b.Subscribe(relay.SubscribeRequest{Filter: f, From: wire.From{All: true}}, c)
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	return drain(t, c.replay)
}

func seqs(rs []replayed) []int64 {
	var out []int64
	for _, r := range rs {
		out = append(out, r.pos.Seq)
	}
	return out
}

// Admission keeps (epoch, seq) order whatever the arrival order, trims the
// oldest past the depth, and remembers what it trimmed for the exhausted
// marker.
func TestStoreOrderAndTrim(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, open storeOpener) {
		rng := rand.New(rand.NewPCG(1, 2))
		for _, depth := range []int{1, 3, 8, 300, 1000} {
			t.Run(fmt.Sprint("depth ", depth), func(t *testing.T) {
				b := open(t, depth, 10, 0)
				const n = 700
				order := rng.Perm(n)
				var window []int64
				for _, i := range order {
					b.Ingest([]*relay.Message{msg(t, mkEvent("s", int64(i)))})
					window = append(window, int64(i))
					slices.Sort(window)
					if len(window) > depth {
						window = window[len(window)-depth:]
					}
				}
				got := seqs(replayAll(t, b, ""))
				if !slices.Equal(got, window) {
					t.Fatalf("held %v\nwant %v", got, window)
				}
				if st := b.Stats(); st.Events != len(window) {
					t.Fatalf("stats %d events, want %d", st.Events, len(window))
				}
			})
		}
	})
}

func TestStoreDedupeAndForeign(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, open storeOpener) {
		b := open(t, 5, 10, 0)
		e0, e1 := mkEvent("s", 0), mkEvent("s", 1)
		cmd := command("control.pause", "s", `{}`)
		routed := &aep.Event{AEP: "0.1", ID: aep.NewID(), Type: "attention.routed", Time: aep.FormatTime(time.Now()),
			Source: "aep://test/agent/router", Agent: "router", Session: "s", Subject: "x", Data: []byte(`{"channel":"telegram"}`)}
		res := b.Ingest([]*relay.Message{msg(t, e0), msg(t, e1), msg(t, cmd), msg(t, e1), msg(t, routed), msg(t, agentEvent())})
		if res != (relay.IngestResult{Buffered: 4, Duplicates: 1, LiveOnly: 1}) {
			t.Fatalf("ingest result %+v", res)
		}
		got := replayAll(t, b, "")
		kinds := []relay.Kind{relay.KindSession, relay.KindSession, relay.KindForeign, relay.KindForeign}
		if len(got) != 4 {
			t.Fatalf("held %+v", got)
		}
		for i, r := range got {
			if r.kind != kinds[i] {
				t.Fatalf("entry %d kind %v, want %v: %+v", i, r.kind, kinds[i], got)
			}
		}
		if got[2].id != cmd.ID || got[2].pos != (wire.Position{Seq: 1}) {
			t.Fatalf("the command sits after the latest positioned event: %+v", got[2])
		}
		// Resuming at seq 1 still delivers what was held after it.
		c := &collector{}
		cancel, _ := b.Subscribe(relay.SubscribeRequest{From: wire.From{Positions: []wire.Resume{{Session: "s", Position: wire.Position{Seq: 1}}}}}, c)
		cancel()
		if r := drain(t, c.replay); len(r) != 2 || r[0].id != cmd.ID {
			t.Fatalf("resume after seq 1: %+v", r)
		}
		// Trimming the event a command was placed after trims the command too.
		b.Ingest([]*relay.Message{msg(t, mkEvent("s", 2)), msg(t, mkEvent("s", 3)), msg(t, mkEvent("s", 4))})
		got = replayAll(t, b, "")
		if got[0].kind != relay.KindSession || got[0].pos.Seq != 2 {
			t.Fatalf("after trimming: %+v", got)
		}
	})
}

func TestStoreSessionEvictionLRU(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, open storeOpener) {
		b := open(t, 10, 3, 0)
		for _, s := range []string{"a", "b", "c"} {
			b.Ingest([]*relay.Message{msg(t, mkEvent(s, 0))})
		}
		b.Ingest([]*relay.Message{msg(t, mkEvent("a", 1))}) // a is now the most recently written
		b.Ingest([]*relay.Message{msg(t, mkEvent("d", 0))}) // evicts b
		var names []string
		for _, s := range b.Sessions() {
			names = append(names, s.Session)
		}
		if !slices.Equal(names, []string{"c", "a", "d"}) {
			t.Fatalf("sessions %v, want [c a d] (least recently written first, b evicted)", names)
		}
		if st := b.Stats(); st.Evictions != 1 || st.Events != 4 {
			t.Fatalf("stats %+v", st)
		}
	})
}

func TestStoreFilterAndExhausted(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, open storeOpener) {
		b := open(t, 4, 10, 0)
		var ms []*relay.Message
		for i := range 10 {
			sev := "info"
			if i%2 == 0 {
				sev = "warning"
			}
			ms = append(ms, msg(t, mkEvent("s", int64(i), withEpoch(2), withSeverity(sev))))
		}
		b.Ingest(ms)
		f, _ := aep.ParseFilter([]byte(`{"severity":{"gte":"warning"}}`))
		cases := []struct {
			from      wire.Position
			exhausted bool
			want      []int64
		}{
			{wire.Position{Epoch: 2, Seq: 0}, true, []int64{6, 8}},
			{wire.Position{Epoch: 2, Seq: 5}, false, []int64{6, 8}},
			{wire.Position{Epoch: 2, Seq: 6}, false, []int64{8}},
			{wire.Position{Epoch: 1, Seq: 100}, true, []int64{6, 8}},
			{wire.Position{Epoch: 3, Seq: 0}, false, nil},
		}
		for _, tc := range cases {
			c := &collector{}
			cancel, _ := b.Subscribe(relay.SubscribeRequest{Filter: f, From: wire.From{Positions: []wire.Resume{{Session: "s", Position: tc.from}}}}, c)
			cancel()
			ex := c.replay.Exhausted()
			if (len(ex) == 1) != tc.exhausted {
				t.Fatalf("from %v: exhausted %+v, want %v", tc.from, ex, tc.exhausted)
			}
			if tc.exhausted && ex[0].Earliest != (wire.Position{Epoch: 2, Seq: 6}) {
				t.Fatalf("earliest %v", ex[0].Earliest)
			}
			if got := seqs(drain(t, c.replay)); !slices.Equal(got, tc.want) {
				t.Fatalf("from %v: replay %v, want %v", tc.from, got, tc.want)
			}
		}
	})
}

// A replay snapshot stays stable while ingest goes on (run with -race):
// nothing below its view is rewritten, even by out-of-order inserts.
func TestStoreSnapshotUnderIngest(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, open storeOpener) {
		b := open(t, 200, 10, 0)
		var ms []*relay.Message
		for i := range 300 {
			ms = append(ms, msg(t, mkEvent("s", int64(2*i))))
		}
		b.Ingest(ms)
		c := &collector{}
		cancel, _ := b.Subscribe(relay.SubscribeRequest{From: wire.From{All: true}}, c)
		defer cancel()
		var later [][]*relay.Message
		for i := range 300 {
			odd := int64(2*(300-i) - 1) // lands inside the held window
			later = append(later, []*relay.Message{msg(t, mkEvent("s", odd)), msg(t, mkEvent("s", int64(600+i)))})
		}
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			for _, batch := range later {
				b.Ingest(batch)
			}
		}()
		got := seqs(drain(t, c.replay))
		wg.Wait()
		var want []int64
		for i := 100; i < 300; i++ { // the 200 held when the snapshot was taken
			want = append(want, int64(2*i))
		}
		if !slices.Equal(got, want) {
			t.Fatalf("snapshot changed under ingest: %v", got)
		}
	})
}

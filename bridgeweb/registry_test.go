package bridgeweb

import (
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aep-kimi/aep-kimi/aep"
	"github.com/aep-kimi/aep-kimi/internal/testkit/poll"
	"github.com/aep-kimi/aep-kimi/mapping"
)

// pidSet is a controllable liveness: the pids in it are alive.
type pidSet struct {
	mu   sync.Mutex
	live map[int]bool
}

func newPIDSet(pids ...int) *pidSet {
	s := &pidSet{live: map[int]bool{}}
	for _, p := range pids {
		s.live[p] = true
	}
	return s
}

func (s *pidSet) alive(pid int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.live[pid]
}

func (s *pidSet) set(pid int, alive bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.live[pid] = alive
}

func keysOf(ins []Instance) string {
	var out []string
	for _, in := range ins {
		out = append(out, strings.TrimSuffix(filepath.Base(in.Path), ".json")+":"+strconv.Itoa(in.PID))
	}
	return strings.Join(out, ",")
}

// The registry watcher across polls: a record appearing, a torn rewrite
// (the server stays), a process dying with its record left behind, a
// record removed, a record rewritten for a new run, a link refused, a
// stopped heartbeat.
func TestRegistryPoll(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	now := time.Now()
	pids := newPIDSet(100, 200, 300, 400)
	r := registry{kimiHome: home, staleAfter: DefaultStaleInstance, pidAlive: pids.alive}
	dir := InstancesDir(home)
	step := func(what, appeared, gone string) registryChange {
		t.Helper()
		ch, err := r.poll(now)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if got := keysOf(ch.appeared); got != appeared {
			t.Errorf("%s: appeared %q, want %q", what, got, appeared)
		}
		if got := keysOf(ch.gone); got != gone {
			t.Errorf("%s: gone %q, want %q", what, got, gone)
		}
		return ch
	}

	step("no registry yet", "", "")
	writeInstance(t, home, "a", instance(100, 5001, now, now))
	step("a starts", "a:100", "")
	step("nothing new", "", "")
	writeInstance(t, home, "b", instance(200, 5002, now.Add(time.Second), now))
	step("b starts next to a", "b:200", "")

	// A rewrite caught half-way: b is still there.
	os.WriteFile(filepath.Join(dir, "b.json"), []byte(`{"server_id":"srv","pid":2`), 0o644)
	ch := step("b's record torn", "", "")
	if len(ch.skipped) != 1 || ch.skipped[0].Reason != SkipUnreadable {
		t.Errorf("torn record skipped as %+v", ch.skipped)
	}
	writeInstance(t, home, "b", instance(200, 5002, now.Add(time.Second), now))
	step("b's record whole again", "", "")

	// A torn record whose process died is gone all the same.
	os.WriteFile(filepath.Join(dir, "b.json"), []byte(`{`), 0o644)
	pids.set(200, false)
	step("b died mid-write", "", "b:200")

	// a's process dies and its record stays (kill -9).
	pids.set(100, false)
	step("a killed", "", "a:100")
	os.Remove(filepath.Join(dir, "a.json"))
	os.Remove(filepath.Join(dir, "b.json"))
	step("dead records removed", "", "")

	// A record removed while its process lives (shutdown) is gone.
	writeInstance(t, home, "c", instance(300, 5003, now, now))
	step("c starts", "c:300", "")
	os.Remove(filepath.Join(dir, "c.json"))
	step("c removed its record", "", "c:300")

	// The same file rewritten for another run: the old run is gone and the
	// new one appears, in one poll.
	writeInstance(t, home, "c", instance(300, 5003, now, now))
	step("c again", "c:300", "")
	writeInstance(t, home, "c", instance(400, 5004, now.Add(time.Minute), now))
	step("c's record now names another run", "c:400", "c:300")

	// A link is never followed, wherever it points.
	target := filepath.Join(t.TempDir(), "elsewhere.json")
	writeInstance(t, filepath.Dir(filepath.Dir(filepath.Dir(target))), "x", instance(100, 6000, now, now))
	pids.set(100, true)
	real := filepath.Join(t.TempDir(), "real.json")
	os.WriteFile(real, []byte(`{"server_id":"l","pid":100,"host":"127.0.0.1","port":6001,"started_at":1,"heartbeat_at":`+strconv.FormatInt(now.UnixMilli(), 10)+`}`), 0o644)
	if err := os.Symlink(real, filepath.Join(dir, "link.json")); err != nil {
		t.Fatal(err)
	}
	ch = step("a link planted", "", "")
	var link bool
	for _, s := range ch.skipped {
		link = link || (s.Reason == SkipLink && strings.HasSuffix(s.Path, "link.json"))
	}
	if !link {
		t.Errorf("the link was not refused: %+v", ch.skipped)
	}

	// A live pid whose heartbeat stopped: a hung server or a reused pid.
	r.pidAlive = func(int) bool { return true }
	step("heartbeat still fresh", "", "")
	now = now.Add(2 * DefaultStaleInstance)
	step("c's heartbeat stopped", "", "c:400")
}

// Scan lists every live server, newest first; Discover picks the newest.
func TestScanNewestFirst(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	now := time.Now()
	writeInstance(t, home, "old", instance(1, 5001, now.Add(-time.Hour), now))
	writeInstance(t, home, "new", instance(2, 5002, now, now))
	live, _, err := Scan(home, now, DefaultStaleInstance, func(Instance) bool { return true }, false)
	if err != nil || keysOf(live) != "new:2,old:1" {
		t.Fatalf("%s %v", keysOf(live), err)
	}
}

// recordFor registers a fake kap-server in a Kimi home.
func recordFor(t *testing.T, home, name string, k *fakeKap, pid int, started time.Time) {
	t.Helper()
	u, _ := url.Parse(k.srv.URL)
	port, _ := strconv.Atoi(u.Port())
	writeInstance(t, home, name, instance(pid, port, started, time.Now()))
}

func observed(e *aep.Event) bool {
	v, _ := e.ExtString(mapping.ExtObserved)
	return v == mapping.ObservedProcess
}

func dataMap(e *aep.Event) map[string]any {
	d, _ := e.DataMap()
	return d
}

// A primary bridge started before any kimi web follows each server that
// registers, several at once, and when one stops (its process dies, its
// record goes) the sessions it held end honestly: attention dismissed, the
// open run drained, session.ended killed (a run was open) or normal, each
// marked observed from the process. A session a later server loads again
// starts a new chapter (the hook adapter's convention), which ends again.
func TestBridgeFollowsServersAsTheyComeAndGo(t *testing.T) {
	t.Parallel()
	k1 := newFakeKap(t, "tok-reg", "s1")
	k2 := newFakeKap(t, "tok-reg", "s2")
	home := t.TempDir()
	pids := newPIDSet()
	tb := startBridge(t, k1, mapping.Primary, "", func(c *Config) {
		c.KapURL, c.KimiHome, c.PIDAlive = "", home, pids.alive
	})
	if h := tb.HealthNow(); h.Kap.State != KapDiscovering || len(h.Instances) != 0 {
		t.Fatalf("health before any server: %+v", h)
	}

	// kimi web starts after the bridge.
	pids.set(101, true)
	recordFor(t, home, "one", k1, 101, time.Now())
	kc1 := <-k1.conns
	kc1.ack(t, kc1.next(t, "subscribe"), nil, map[string][2]any{"s1": {0, "A"}})
	kc1.send(t, frame("s1", "A", 1, "turn.started", map[string]any{"turnId": "0"}))
	kc1.send(t, frame("s1", "A", 2, "event.approval.requested", map[string]any{"approval_id": "ap-1", "tool_name": "Bash"}))
	tb.pub.Wait(t, "s1's request", func(evs []*aep.Event) bool { return typeCount(evs, "attention.requested") == 1 })

	// A second server next to it.
	pids.set(202, true)
	recordFor(t, home, "two", k2, 202, time.Now().Add(time.Second))
	kc2 := <-k2.conns
	// It has not loaded s1 (which the bridge asks every server for).
	kc2.ack(t, kc2.next(t, "subscribe"), []string{"s1"}, map[string][2]any{"s2": {0, "B"}})
	kc2.send(t, frame("s2", "B", 1, "session.meta.updated", nil))
	tb.pub.Wait(t, "s2's frame", func(evs []*aep.Event) bool {
		for _, e := range evs {
			if e.Session == "s2" {
				return true
			}
		}
		return false
	})
	if h := tb.HealthNow(); len(h.Instances) != 2 || h.SessionsFollowed != 2 || h.Instances[0].PID != 202 {
		t.Errorf("health with two servers: %+v", h)
	}

	// The first is killed mid-run; its record stays behind.
	pids.set(101, false)
	evs := tb.pub.Wait(t, "s1 ended", func(evs []*aep.Event) bool { return typeCount(evs, "session.ended") == 1 })
	var s1 []*aep.Event
	for _, e := range evs {
		if e.Session == "s1" {
			s1 = append(s1, e)
		}
	}
	tail := typesOf(s1[len(s1)-3:])
	if strings.Join(tail, ",") != "attention.resolved,run.cancelled,session.ended" {
		t.Fatalf("s1 ends with %v", tail)
	}
	for _, e := range s1[len(s1)-3:] {
		if !observed(e) {
			t.Errorf("%s not marked observed", e.Type)
		}
	}
	if d := dataMap(s1[len(s1)-1]); d["reason"] != mapping.EndKilled {
		t.Errorf("s1 ended %v, want killed", d)
	}
	if d := dataMap(s1[len(s1)-3]); d["resolution"] != mapping.ResolutionDismissed {
		t.Errorf("the open request closed %v", d)
	}
	if h := tb.HealthNow(); len(h.Instances) != 1 || h.Instances[0].PID != 202 || h.Kap.State != KapConnected {
		t.Errorf("health after the first stopped: %+v", h)
	}

	// The second shuts down: its record goes, no run was open.
	os.Remove(filepath.Join(InstancesDir(home), "two.json"))
	evs = tb.pub.Wait(t, "s2 ended", func(evs []*aep.Event) bool { return typeCount(evs, "session.ended") == 2 })
	last := evs[len(evs)-1]
	if last.Session != "s2" || last.Type != "session.ended" || dataMap(last)["reason"] != mapping.EndNormal || !observed(last) {
		t.Errorf("s2's end: %s %s %v", last.Session, last.Type, dataMap(last))
	}
	if h := tb.HealthNow(); h.Kap.State != KapDiscovering || len(h.Instances) != 0 {
		t.Errorf("health with no server: %+v", h)
	}

	// A new kimi web loads s1 again: a new chapter, then its frames.
	os.Remove(filepath.Join(InstancesDir(home), "one.json"))
	pids.set(303, true)
	recordFor(t, home, "three", k1, 303, time.Now())
	kc3 := <-k1.conns
	sub := kc3.next(t, "subscribe")
	if cursorOf(sub, "s1") != "2@A" {
		t.Errorf("s1 resubscribed from %s", cursorOf(sub, "s1"))
	}
	kc3.ack(t, sub, nil, map[string][2]any{"s1": {2, "A"}})
	kc3.send(t, frame("s1", "A", 3, "turn.started", map[string]any{"turnId": "1"}))
	evs = tb.pub.Wait(t, "s1's new run", func(evs []*aep.Event) bool { return typeCount(evs, "run.started") == 2 })
	if got := strings.Join(typesOf(evs[len(evs)-2:]), ","); got != "session.started,run.started" {
		t.Errorf("s1 comes back with %s", got)
	}
	if d := dataMap(evs[len(evs)-2]); d["trigger"] != mapping.TriggerResume {
		t.Errorf("new chapter %v", d)
	}
	// The new chapter is its own stream identity (AEP allows one
	// session.ended per source and session), so it ends again in full.
	chapter := evs[len(evs)-2].Source
	if chapter != SourceURI("test", "s1")+"/chapter/2" || evs[len(evs)-1].Source != chapter {
		t.Errorf("new chapter's source %s", chapter)
	}
	pids.set(303, false)
	evs = tb.pub.Wait(t, "s1's second end", func(evs []*aep.Event) bool { return typeCount(evs, "session.ended") == 3 })
	if got := strings.Join(typesOf(evs[len(evs)-2:]), ","); got != "run.cancelled,session.ended" || evs[len(evs)-1].Source != chapter {
		t.Errorf("second end %s in %s", got, evs[len(evs)-1].Source)
	}
	validStream(t, evs)
	if m := tb.metric(t, "aepkimi_bridgeweb_sessions_ended_total"); !strings.Contains(m, `reason="killed"} 2`) || !strings.Contains(m, `reason="normal"} 1`) {
		t.Errorf("sessions ended metric:\n%s", m)
	}

	// A restarted bridge reads from its log that s1 has ended, in its
	// second chapter.
	tb.stop(t)
	b2, err := NewBridge(tb.cfg)
	if err != nil {
		t.Fatal(err)
	}
	s := b2.lock("s1")
	if !s.ended || len(s.m.runs) != 0 || s.Stream().Source() != chapter {
		t.Errorf("recovered s1: ended %v, runs %d, source %s", s.ended, len(s.m.runs), s.Stream().Source())
	}
	s.Unlock()
	b2.core.CloseAll()
}

// In companion mode the hook adapter owns the core lifecycle: a stopped
// server ends the bridge's own {sid}.web stream with the extension
// terminal, its reason from the kap turns left open.
func TestCompanionEndsWithItsOwnTerminal(t *testing.T) {
	t.Parallel()
	k := newFakeKap(t, "tok-c", "s1")
	home := t.TempDir()
	pids := newPIDSet(7)
	recordFor(t, home, "one", k, 7, time.Now())
	tb := startBridge(t, k, mapping.Companion, "", func(c *Config) {
		c.KapURL, c.KimiHome, c.PIDAlive = "", home, pids.alive
	})
	kc := <-k.conns
	kc.ack(t, kc.next(t, "subscribe"), nil, map[string][2]any{"s1": {0, "A"}})
	kc.send(t, frame("s1", "A", 1, "turn.started", nil))
	tb.pub.Wait(t, "the turn", func(evs []*aep.Event) bool { return len(evs) == 1 })
	os.Remove(filepath.Join(InstancesDir(home), "one.json"))
	evs := tb.pub.Wait(t, "the end", func(evs []*aep.Event) bool { return len(evs) == 2 })
	e := evs[1]
	if e.Type != mapping.WebEndedType || e.Session != "s1.web" || dataMap(e)["reason"] != mapping.EndKilled || !observed(e) {
		t.Errorf("companion end %s %s %v", e.Type, e.Session, dataMap(e))
	}
	if ks, _ := e.ExtString(ExtKimiSession); ks != "s1" {
		t.Errorf("kimisession %q", ks)
	}
}

func typeCount(evs []*aep.Event, typ string) int {
	n := 0
	for _, e := range evs {
		if e.Type == typ {
			n++
		}
	}
	return n
}

// validStream checks every event and the rules across them.
func validStream(t *testing.T, evs []*aep.Event) {
	t.Helper()
	var sv aep.StreamValidator
	for _, e := range evs {
		if err := aep.Validate(e); err != nil {
			t.Errorf("%s: %v", e.Type, err)
		}
		for _, v := range sv.Add(e) {
			t.Errorf("stream: %v", v)
		}
	}
}

// Kimi Code Desktop runs kap-server inside its own process and registers it
// in the same Kimi home, in the same layout, as kimi web. Its record first
// names port 0 (it asks for an ephemeral port), or, asking for 58627 as kimi
// web does, kimi web's port, until the server is bound and rewrites it. The
// bridge follows Desktop's server once the record names its own port, and
// never takes the record for a second server at kimi web's address: no
// second connection to kimi web, and kimi web's session goes on.
func TestBridgeFollowsDesktopNextToKimiWeb(t *testing.T) {
	t.Parallel()
	web := newFakeKap(t, "tok-reg", "s1")
	desk := newFakeKap(t, "tok-reg", "s2")
	home := t.TempDir()
	pids := newPIDSet(101, 202)
	tb := startBridge(t, web, mapping.Primary, "", func(c *Config) {
		c.KapURL, c.KimiHome, c.PIDAlive = "", home, pids.alive
	})
	recordFor(t, home, "01WEB", web, 101, time.Now().Add(-time.Minute))
	kc1 := <-web.conns
	kc1.ack(t, kc1.next(t, "subscribe"), nil, map[string][2]any{"s1": {0, "A"}})
	kc1.send(t, frame("s1", "A", 1, "turn.started", map[string]any{"turnId": "0"}))
	tb.pub.Wait(t, "s1's run", func(evs []*aep.Event) bool { return typeCount(evs, "run.started") == 1 })

	skippedAs := func(reason string) bool {
		return strings.Contains(tb.metric(t, "aepkimi_bridgeweb_instances_skipped_total"), `reason="`+reason+`"} 1`)
	}
	started := time.Now()
	// Registered, not bound yet. A scan that meets the record half
	// written counts it unreadable first (a torn record, passed over until
	// it reads whole): only starting is the answer.
	writeInstance(t, home, "01DESK", instance(202, 0, started, time.Now()))
	if !poll.Until(10*time.Second, func() bool { return skippedAs(SkipStarting) }) {
		t.Fatalf("Desktop's unbound record not passed over as starting:\n%s", tb.metric(t, "aepkimi_bridgeweb_instances_skipped_total"))
	}
	// Asked for the port kimi web holds.
	u, _ := url.Parse(web.srv.URL)
	webPort, _ := strconv.Atoi(u.Port())
	writeInstance(t, home, "01DESK", instance(202, webPort, started, time.Now()))
	if !poll.Until(10*time.Second, func() bool { return skippedAs(SkipPortTaken) || len(web.conns) > 0 }) || len(web.conns) > 0 {
		t.Fatalf("Desktop's record naming kimi web's port was followed as a server of its own:\n%s", tb.metric(t, "aepkimi_bridgeweb_instances_skipped_total"))
	}
	// Bound: its own port.
	recordFor(t, home, "01DESK", desk, 202, started)
	kc2 := <-desk.conns
	kc2.ack(t, kc2.next(t, "subscribe"), []string{"s1"}, map[string][2]any{"s2": {0, "B"}})
	kc2.send(t, frame("s2", "B", 1, "turn.started", map[string]any{"turnId": "0"}))
	evs := tb.pub.Wait(t, "s2's run", func(evs []*aep.Event) bool { return typeCount(evs, "run.started") == 2 })
	if n := typeCount(evs, "session.ended"); n != 0 {
		t.Errorf("%d sessions ended while both servers run", n)
	}
	if h := tb.HealthNow(); len(h.Instances) != 2 || h.Instances[0].PID != 202 || h.Instances[1].PID != 101 {
		t.Errorf("health with kimi web and Desktop: %+v", h.Instances)
	}
	if len(web.conns) != 0 {
		t.Error("a second connection reached kimi web")
	}
}

package emitter

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/aep-kimi/aep-kimi/aep"
	"github.com/aep-kimi/aep-kimi/internal/buildinfo"
	"github.com/aep-kimi/aep-kimi/internal/journal"
	"github.com/aep-kimi/aep-kimi/internal/syncmode"
	"github.com/aep-kimi/aep-kimi/internal/testkit/emittertest"
	"github.com/aep-kimi/aep-kimi/internal/testkit/httpcall"
	"github.com/aep-kimi/aep-kimi/internal/testkit/poll"
	"github.com/aep-kimi/aep-kimi/internal/testkit/syncbuf"
	"github.com/aep-kimi/aep-kimi/mapping"
)

const (
	cmdPoke = "control.attention.respond"
	cmdNope = "control.cancel"
)

// session is a test source's session: the events folded back into it.
type session struct {
	Session
	folded []string
}

// source is a test source: every key is a session of its own, and its
// decisions, lookups and evictability are the test's to set.
type source struct {
	mu sync.Mutex
	// refuse lists the sessions Key does not publish.
	refuse map[string]bool
	// lookups counts Key calls; inKey, when set, is told of each and Key
	// then waits for resume.
	lookups atomic.Int32
	inKey   chan struct{}
	resume  chan struct{}
	// decided counts Decide calls; verdict is what they return.
	decided atomic.Int32
	verdict Verdict
	// keep holds sessions in memory (Evictor); evicted lists those that
	// left.
	keep    map[string]bool
	evicted []string
}

func (src *source) New(key string) (*session, Identity) {
	return &session{}, Identity{Session: key, Source: "aep://h/agent/kimi-code/session/" + key}
}

func (src *source) Fold(s *session, ev *aep.Event) { s.folded = append(s.folded, ev.Type) }

func (src *source) Key(name string) (string, bool) {
	src.lookups.Add(1)
	if src.inKey != nil {
		src.inKey <- struct{}{}
		<-src.resume
	}
	src.mu.Lock()
	defer src.mu.Unlock()
	return name, !src.refuse[name]
}

func (src *source) Decide(_ context.Context, s *session, cmd *aep.Event) Verdict {
	src.decided.Add(1)
	return src.verdict
}

func (src *source) Ack(s *session, e journal.Entry) *aep.Event { return s.Stream().Emit(e) }

func (src *source) Evictable(s *session) bool {
	src.mu.Lock()
	defer src.mu.Unlock()
	return !src.keep[s.Key()]
}

func (src *source) Evicted(s *session) {
	src.mu.Lock()
	defer src.mu.Unlock()
	src.evicted = append(src.evicted, s.Key())
}

type fixture struct {
	core *Core[*session]
	src  *source
	pub  *emittertest.Recorder
	home string
	now  *time.Time
}

func newFixture(t *testing.T, home string, edit func(*Spec)) *fixture {
	t.Helper()
	return newFixtureAt(t, home, mapping.DefaultPosture(), edit)
}

// newFixtureAt is newFixture with the core's capture posture.
func newFixtureAt(t *testing.T, home string, posture mapping.Posture, edit func(*Spec)) *fixture {
	t.Helper()
	return newFixtureSync(t, home, posture, edit, nil)
}

// newFixtureSync is newFixtureAt with the logs' syncer (nil: the disk's).
func newFixtureSync(t *testing.T, home string, posture mapping.Posture, edit func(*Spec), syncer syncmode.Syncer) *fixture {
	t.Helper()
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	f := &fixture{src: &source{refuse: map[string]bool{}, keep: map[string]bool{}, verdict: Accept(nil)},
		pub: &emittertest.Recorder{}, home: home, now: &now}
	spec := Spec{Name: "test", LogDir: filepath.Join(home, "logs", "test"), EpochFile: filepath.Join(home, "kimi", "test-epoch"),
		Commands: []string{cmdPoke, cmdNope}, Accepts: []string{cmdPoke}, Authenticated: true}
	if edit != nil {
		edit(&spec)
	}
	var mu sync.Mutex
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return *f.now }
	core, err := New(Config{Home: home, Host: "h", Publisher: f.pub, Posture: posture, Logger: slog.New(slog.DiscardHandler), Now: clock, Syncer: syncer}, spec, f.src)
	if err != nil {
		t.Fatal(err)
	}
	f.core = core
	return f
}

// acks are the acks published for cmd.
func (f *fixture) acks(cmd *aep.Event) []*aep.Event {
	var out []*aep.Event
	for _, e := range f.pub.All() {
		if strings.HasPrefix(e.Type, "control.") && e.Cause == cmd.ID {
			out = append(out, e)
		}
	}
	return out
}

func (f *fixture) commands(typ, outcome string) float64 {
	return counted(f.core.metrics.commands.WithLabelValues(typ, outcome))
}

func gauge(g prometheus.Gauge) float64 {
	var m dto.Metric
	if err := g.Write(&m); err != nil {
		return -1
	}
	return m.GetGauge().GetValue()
}

func counted(c prometheus.Counter) float64 {
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		return -1
	}
	return m.GetCounter().GetValue()
}

// A redelivered command is answered with the recorded ack, byte for byte,
// and decided once.
func TestRedeliveryRepublishesTheAck(t *testing.T) {
	f := newFixture(t, t.TempDir(), nil)
	cmd := emittertest.Command(t, cmdPoke, "s1", "x", map[string]any{"answer": map[string]any{"option": "allow"}})
	f.core.HandleCommand(context.Background(), cmd)
	f.core.HandleCommand(context.Background(), cmd)
	acks := f.acks(cmd)
	if len(acks) != 2 || acks[0] != acks[1] || acks[0].Type != "control.accepted" {
		t.Fatalf("acks %v", acks)
	}
	if n := f.src.decided.Load(); n != 1 {
		t.Fatalf("decided %d times", n)
	}
	if got := f.commands(cmdPoke, "redelivered"); got != 1 {
		t.Fatalf("redelivered counted %v", got)
	}
}

// The claim comes before the lookup: a second delivery of a command being
// looked up is a redelivery, and never looks the session up itself. (The
// bridge once checked the ledger, looked up, then claimed: both deliveries
// looked the session up.)
func TestClaimBeforeLookup(t *testing.T) {
	f := newFixture(t, t.TempDir(), nil)
	f.src.inKey, f.src.resume = make(chan struct{}), make(chan struct{})
	cmd := emittertest.Command(t, cmdPoke, "s1", "x", map[string]any{"answer": map[string]any{"option": "allow"}})
	first := make(chan struct{})
	go func() {
		defer close(first)
		f.core.HandleCommand(context.Background(), cmd)
	}()
	<-f.src.inKey // the first delivery is looking its session up
	second := make(chan struct{})
	go func() {
		defer close(second)
		f.core.HandleCommand(context.Background(), cmd)
	}()
	select {
	case <-second:
	case <-f.src.inKey:
		close(f.src.resume)
		t.Fatal("a second delivery looked the session up while the first owned the command")
	case <-time.After(5 * time.Second):
		t.Fatal("the second delivery neither returned nor looked up")
	}
	close(f.src.resume)
	<-first
	if n := f.src.lookups.Load(); n != 1 {
		t.Fatalf("%d lookups", n)
	}
	if acks := f.acks(cmd); len(acks) != 1 {
		t.Fatalf("%d acks", len(acks))
	}
}

// A command for a session the source does not publish gets no ack and
// leaves no claim behind: once the session is the source's, the next
// delivery is decided and acked. (The adapter once kept the claim: every
// later delivery counted as a redelivery and none was ever answered.)
func TestRefusedLookupReleasesTheClaim(t *testing.T) {
	f := newFixture(t, t.TempDir(), nil)
	f.src.refuse["s1"] = true
	cmd := emittertest.Command(t, cmdPoke, "s1", "x", map[string]any{"answer": map[string]any{"option": "allow"}})
	f.core.HandleCommand(context.Background(), cmd)
	if len(f.pub.All()) != 0 || f.core.Has("s1") {
		t.Fatalf("a refused session was written to: %v", f.pub.All())
	}
	f.src.mu.Lock()
	f.src.refuse["s1"] = false
	f.src.mu.Unlock()
	f.core.HandleCommand(context.Background(), cmd)
	if acks := f.acks(cmd); len(acks) != 1 || acks[0].Type != "control.accepted" || acks[0].Session != "s1" {
		t.Fatalf("acks after the session became known: %v", acks)
	}
	if got := f.commands(cmdPoke, "redelivered"); got != 0 {
		t.Fatalf("the decided delivery counted as a redelivery (%v)", got)
	}
}

// The checks every source makes come first, in order, and only a command
// that passes them reaches the source.
func TestCommonChecks(t *testing.T) {
	valid := map[string]any{"answer": map[string]any{"option": "allow"}}
	for _, tc := range []struct {
		name   string
		auth   bool
		typ    string
		data   map[string]any
		reason string
	}{
		{"unauthenticated", false, cmdPoke, valid, "unauthorized"},
		{"not accepted", true, cmdNope, map[string]any{"scope": "run"}, "unsupported"},
		{"invalid", true, cmdPoke, map[string]any{}, "invalid"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, t.TempDir(), func(s *Spec) { s.Authenticated = tc.auth })
			cmd := emittertest.Command(t, tc.typ, "s1", "x", tc.data)
			f.core.HandleCommand(context.Background(), cmd)
			acks := f.acks(cmd)
			if len(acks) != 1 || acks[0].Type != "control.rejected" {
				t.Fatalf("acks %v", acks)
			}
			d, _ := acks[0].DataMap()
			if d["reason"] != tc.reason {
				t.Fatalf("reason %v, want %s", d["reason"], tc.reason)
			}
			if n := f.src.decided.Load(); n != 0 {
				t.Fatal("the source decided a command the core refuses")
			}
			if got := f.commands(tc.typ, "rejected_"+tc.reason); got != 1 {
				t.Fatalf("counted %v", got)
			}
		})
	}
}

// An accepted command's outcome follows its ack, under the same lock; a
// rejected one carries nothing out.
func TestApplyFollowsTheAck(t *testing.T) {
	f := newFixture(t, t.TempDir(), nil)
	var order []string
	f.src.verdict = Accept(func(at time.Time) {
		order = append(order, "apply")
		if !f.core.Has("s1") {
			t.Error("applied outside the session")
		}
	})
	cmd := emittertest.Command(t, cmdPoke, "s1", "x", map[string]any{"answer": map[string]any{"option": "allow"}})
	f.core.HandleCommand(context.Background(), cmd)
	if len(order) != 1 || len(f.acks(cmd)) != 1 {
		t.Fatalf("apply ran %d times, %d acks", len(order), len(f.acks(cmd)))
	}
	f.src.verdict = Verdict{Reason: "refused", Detail: "no", Apply: func(time.Time) { order = append(order, "rejected apply") }}
	cmd2 := emittertest.Command(t, cmdPoke, "s1", "x", map[string]any{"answer": map[string]any{"option": "allow"}})
	f.core.HandleCommand(context.Background(), cmd2)
	if len(order) != 1 {
		t.Fatalf("a rejected command was carried out: %v", order)
	}
}

// A session first touched folds its log back, and goes on in the log's
// latest chapter after the run's epoch.
func TestLockRecoversFromTheLog(t *testing.T) {
	home := t.TempDir()
	f := newFixture(t, home, nil)
	s := f.core.Lock("s1")
	s.Stream().Emit(journal.Entry{Event: mapping.PromptQueued(f.core.cfg.Posture), At: *f.now})
	s.NextChapter()
	s.Stream().Emit(journal.Entry{Event: mapping.SessionResumed(f.core.cfg.Posture), At: *f.now})
	chapter := s.Stream().Source()
	s.Unlock()
	f.core.CloseAll()

	g := newFixture(t, home, nil)
	s2 := g.core.Lock("s1")
	defer s2.Unlock()
	if len(s2.folded) != 2 || s2.folded[1] != "session.started" {
		t.Fatalf("folded %v", s2.folded)
	}
	if got := s2.Stream().Source(); got != chapter || !strings.HasSuffix(got, "/chapter/2") {
		t.Fatalf("source %s, want %s", got, chapter)
	}
	if g.core.Epoch() <= f.core.Epoch() {
		t.Fatalf("epoch %d after %d", g.core.Epoch(), f.core.Epoch())
	}
}

// Nobody is handed a session before its log is folded back: a second
// locker waits for the first touch to finish.
func TestLockWaitsForRecovery(t *testing.T) {
	home := t.TempDir()
	f := newFixture(t, home, nil)
	s := f.core.Lock("s1")
	for range 50 {
		s.Stream().Emit(journal.Entry{Event: mapping.PromptQueued(f.core.cfg.Posture), At: *f.now})
	}
	s.Unlock()
	f.core.CloseAll()
	g := newFixture(t, home, nil)
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := g.core.Lock("s1")
			defer s.Unlock()
			if len(s.folded) != 50 {
				t.Errorf("handed a session with %d of 50 events folded", len(s.folded))
			}
		}()
	}
	wg.Wait()
}

// Past MaxSessions the longest-idle sessions leave, never one the source
// keeps or one busy right now; idle ones leave at the sweep, and quiet
// ones have their logs closed.
func TestEvictionAndClosing(t *testing.T) {
	f := newFixture(t, t.TempDir(), func(s *Spec) { s.MaxSessions = 8; s.IdleEvict = time.Hour; s.IdleClose = time.Minute })
	f.src.keep["k0"] = true
	for i := range 9 {
		key := "k" + string(rune('0'+i))
		s := f.core.Lock(key)
		s.Stream().Emit(journal.Entry{Event: mapping.PromptQueued(f.core.cfg.Posture), At: *f.now})
		s.Touch(f.now.Add(time.Duration(i) * time.Second))
		s.Unlock()
	}
	// Nine sessions, bound eight: down to seven, k0 kept, k1 and k2 (the
	// longest idle) gone.
	if got := strings.Join(f.core.Keys(), ","); got != "k0,k3,k4,k5,k6,k7,k8" {
		t.Fatalf("in memory: %s", got)
	}
	if got := strings.Join(f.src.evicted, ","); got != "k1,k2" {
		t.Fatalf("evicted %s", got)
	}
	busy := f.core.Lock("k3")
	*f.now = f.now.Add(2 * time.Hour)
	f.core.Sweep()
	busy.Unlock()
	if got := strings.Join(f.core.Keys(), ","); got != "k0,k3" {
		t.Fatalf("after the sweep: %s", got)
	}
	// k0's log closed as idle; k3's stays open, as it was busy.
	if n := f.core.OpenLogs(); n != 1 {
		t.Fatalf("%d logs open after the sweep", n)
	}
	if got := counted(f.core.metrics.evicted); got != 7 {
		t.Fatalf("evictions counted %v", got)
	}
	// An evicted session comes back from its log.
	s := f.core.Lock("k1")
	defer s.Unlock()
	if len(s.folded) != 1 {
		t.Fatalf("k1 came back with %v", s.folded)
	}
}

// Each visits every session in memory, locked, and none that left.
func TestEachLocksEach(t *testing.T) {
	f := newFixture(t, t.TempDir(), nil)
	for _, k := range []string{"a", "b", "c"} {
		f.core.Lock(k).Unlock()
	}
	f.core.Evict("b")
	var seen []string
	f.core.Each(func(s *session) {
		if s.TryLock() {
			t.Errorf("%s handed out unlocked", s.Key())
			s.Unlock()
		}
		seen = append(seen, s.Key())
	})
	if len(seen) != 2 || f.core.Has("b") {
		t.Fatalf("visited %v", seen)
	}
}

// runner is a publisher with a life: it records when it ran and whether
// the logs were closed when it stopped.
type runner struct {
	emittertest.Recorder
	started, stopped chan struct{}
	logsAtStop       int
	open             func() int
}

func (r *runner) Run(ctx context.Context, _ func(context.Context, *aep.Event)) error {
	close(r.started)
	<-ctx.Done()
	r.logsAtStop = r.open()
	close(r.stopped)
	return errors.New("flushed")
}

// The publisher runs for the source's whole run: it starts before the
// intake and stops after the intake returned and every log is closed.
func TestRunOwnsThePublisher(t *testing.T) {
	home := t.TempDir()
	r := &runner{started: make(chan struct{}), stopped: make(chan struct{})}
	var logs bytes.Buffer
	spec := Spec{Name: "test", LogDir: filepath.Join(home, "logs"), EpochFile: filepath.Join(home, "epoch")}
	core, err := New(Config{Home: home, Publisher: r, Logger: slog.New(slog.NewTextHandler(&logs, nil))}, spec, Source[*session](&source{}))
	if err != nil {
		t.Fatal(err)
	}
	r.open = core.OpenLogs
	ctx, cancel := context.WithCancel(context.Background())
	err = core.Run(ctx, func(ctx context.Context) error {
		<-r.started
		s := core.Lock("s1")
		s.Stream().Emit(journal.Entry{Event: mapping.PromptQueued(core.cfg.Posture), At: time.Now()})
		s.Unlock()
		cancel()
		<-ctx.Done()
		select {
		case <-r.stopped:
			t.Error("the publisher stopped with the intake still running")
		default:
		}
		return errors.New("intake done")
	})
	if err == nil || err.Error() != "intake done" {
		t.Fatalf("Run: %v", err)
	}
	<-r.stopped
	if r.logsAtStop != 0 {
		t.Fatalf("%d logs open when the publisher stopped", r.logsAtStop)
	}
	if len(r.All()) != 1 {
		t.Fatalf("published %d", len(r.All()))
	}
	if !strings.Contains(logs.String(), "flushed") {
		t.Fatalf("the publisher's error was not logged: %s", logs.String())
	}
}

// relaying is a publisher that runs and hands one command from the relay
// to the handler Run is given, as client.Publisher does.
type relaying struct {
	emittertest.Recorder
	cmd       *aep.Event
	delivered chan struct{}
}

func (r *relaying) Run(ctx context.Context, onCommand func(context.Context, *aep.Event)) error {
	onCommand(ctx, r.cmd)
	close(r.delivered)
	<-ctx.Done()
	return nil
}

// The relay's commands reach the core through the publisher it runs: Run
// hands the publisher HandleCommand, and the command's ack is published.
func TestRunHandsCommandsToTheCore(t *testing.T) {
	home := t.TempDir()
	cmd := emittertest.Command(t, cmdPoke, "s1", "x", map[string]any{"answer": map[string]any{"option": "allow"}})
	r := &relaying{cmd: cmd, delivered: make(chan struct{})}
	src := &source{refuse: map[string]bool{}, keep: map[string]bool{}, verdict: Accept(nil)}
	spec := Spec{Name: "test", LogDir: filepath.Join(home, "logs"), EpochFile: filepath.Join(home, "epoch"),
		Commands: []string{cmdPoke}, Accepts: []string{cmdPoke}, Authenticated: true}
	core, err := New(Config{Home: home, Publisher: r, Logger: slog.New(slog.DiscardHandler)}, spec, Source[*session](src))
	if err != nil {
		t.Fatal(err)
	}
	err = core.Run(context.Background(), func(context.Context) error {
		<-r.delivered
		return nil
	})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	var acks []string
	for _, e := range r.All() {
		if e.Cause == cmd.ID {
			acks = append(acks, e.Type)
		}
	}
	if len(acks) != 1 || acks[0] != "control.accepted" || src.decided.Load() != 1 {
		t.Fatalf("acks %v, decided %d: the command did not reach the core", acks, src.decided.Load())
	}
}

// A config without a home, or a spec without its files, is refused.
func TestConfigRefused(t *testing.T) {
	home := t.TempDir()
	spec := Spec{Name: "test", LogDir: filepath.Join(home, "logs"), EpochFile: filepath.Join(home, "epoch")}
	if _, err := New(Config{}, spec, Source[*session](&source{})); err == nil || !strings.Contains(err.Error(), "test: Config.Home is required") {
		t.Fatalf("no home: %v", err)
	}
	if _, err := New(Config{Home: home}, Spec{Name: "test"}, Source[*session](&source{})); err == nil {
		t.Fatal("a spec without files accepted")
	}
	if _, err := New(Config{Home: home, MaxOpenLogs: -1}, spec, Source[*session](&source{})); err == nil {
		t.Fatal("a negative bound accepted")
	}
	for _, d := range []string{filepath.Join(home, "logs")} {
		if st, err := os.Stat(d); err == nil && st.Mode().Perm() != 0o700 {
			t.Errorf("%s is %v", d, st.Mode().Perm())
		}
	}
}

// An ack the session log cannot take (here a directory stands where the
// log goes; a full disk does the same) is not published and its command not
// carried out: nothing is acknowledged that is not on the disk. The claim
// is released, so a redelivery once the log can be written is decided,
// acknowledged and applied, once.
func TestAckNotDurableIsNotPublished(t *testing.T) {
	home := t.TempDir()
	f := newFixture(t, home, nil)
	applied := 0
	f.src.verdict = Accept(func(time.Time) { applied++ })
	blocker := filepath.Join(home, "logs", "test", journal.FileName("s1"))
	if err := os.MkdirAll(blocker, 0o700); err != nil {
		t.Fatal(err)
	}
	cmd := emittertest.Command(t, cmdPoke, "s1", "x", map[string]any{"answer": map[string]any{"option": "allow"}})
	f.core.HandleCommand(context.Background(), cmd)
	if acks := f.acks(cmd); len(acks) != 0 || applied != 0 {
		t.Fatalf("an ack that is not on the disk: %d published, applied %d times", len(acks), applied)
	}
	if got := f.commands(cmdPoke, "not_durable"); got != 1 {
		t.Fatalf("not_durable counted %v", got)
	}
	if err := os.Remove(blocker); err != nil {
		t.Fatal(err)
	}
	f.core.HandleCommand(context.Background(), cmd)
	acks := f.acks(cmd)
	if len(acks) != 1 || applied != 1 || *acks[0].Seq != 0 {
		t.Fatalf("the redelivery: %d acks, applied %d times", len(acks), applied)
	}
}

// Every source's /healthz (the adapter's and bridge-web's alike) answers
// 503 not ok with the reason while a session log cannot take its events,
// and ok again once that log takes one; the gauge follows, and one line is
// logged each way however many events fail.
func TestHealthFollowsTheLogs(t *testing.T) {
	home := t.TempDir()
	f := newFixture(t, home, nil)
	var logs syncbuf.Buffer
	f.core.log = slog.New(slog.NewTextHandler(&logs, nil))
	srv := httptest.NewServer(f.core.Handler(nil, func() any { return f.core.Health() }))
	defer srv.Close()
	healthz := func() (int, Health) {
		t.Helper()
		var h Health
		return httpcall.Get(t, srv.URL+"/healthz", "").JSON(t, &h).Status, h
	}
	emit := func() {
		s := f.core.Lock("s1")
		defer s.Unlock()
		s.Stream().Emit(journal.Entry{Event: mapping.RunDrained(mapping.DefaultPosture()), At: *f.now})
	}
	emit()
	if code, h := healthz(); code != 200 || !h.OK || h.Reason != "" {
		t.Fatalf("healthy: %d %+v", code, h)
	}
	// The build, for aep-setup check to compare with kimi-hook's.
	if _, h := healthz(); h.Build != buildinfo.Get() || h.Build.Go == "" {
		t.Errorf("/healthz build %+v, want %+v", h.Build, buildinfo.Get())
	}
	f.core.CloseAll()
	blocker := filepath.Join(home, "logs", "test", journal.FileName("s1"))
	if err := os.Rename(blocker, blocker+".moved"); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(blocker, 0o700); err != nil {
		t.Fatal(err)
	}
	emit()
	emit()
	if code, h := healthz(); code != http.StatusServiceUnavailable || h.OK || !strings.Contains(h.Reason, "session logs are not reaching the disk") {
		t.Fatalf("with a log that cannot be written: %d %+v", code, h)
	}
	if v := gauge(f.core.metrics.durable); v != 0 {
		t.Fatalf("logs_durable %v", v)
	}
	if err := os.Remove(blocker); err != nil {
		t.Fatal(err)
	}
	emit()
	// Under the default mode (always) the write counts once a sync covers
	// it: the one an ack waits for, else the background one within
	// syncmode.Every.
	poll.Must(t, 5*time.Second, "healthz ok after the log took a write", func() bool {
		code, h := healthz()
		return code == 200 && h.OK
	})
	if v := gauge(f.core.metrics.durable); v != 1 {
		t.Fatalf("logs_durable %v", v)
	}
	if a, b := strings.Count(logs.String(), "not reaching the disk"), strings.Count(logs.String(), "reach the disk again"); a != 1 || b != 1 || strings.Count(logs.String(), "\n") != 2 {
		t.Fatalf("%d and %d lines, want one each and no other:\n%s", a, b, logs.String())
	}
}

// A starting source republishes the latest events of the logs the run
// before it wrote to, before its intake starts: a run killed between a log
// append and the relay's socket loses nothing. A log that run never
// touched is left alone, and the bounds hold.
func TestRunRepublishesTheLastRun(t *testing.T) {
	home := t.TempDir()
	emit := func(f *fixture, key string, n int) []string {
		s := f.core.Lock(key)
		defer s.Unlock()
		var ids []string
		for range n {
			ids = append(ids, s.Stream().Emit(journal.Entry{Event: mapping.PromptQueued(f.core.cfg.Posture), At: *f.now}).ID)
		}
		return ids
	}
	first := newFixture(t, home, nil)
	emit(first, "quiet", 2)
	first.core.CloseAll()
	hourAgo := time.Now().Add(-time.Hour)
	quiet := filepath.Join(home, "logs", "test", journal.FileName("quiet"))
	if err := os.Chtimes(quiet, hourAgo, hourAgo); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(filepath.Join(home, "kimi", "test-epoch"), hourAgo, hourAgo); err != nil {
		t.Fatal(err)
	}

	killed := newFixture(t, home, nil) // "quiet" was written before it started
	small := emit(killed, "small", 3)
	big := emit(killed, "big", RepublishPerLog+5)
	killed.core.CloseAll() // and never flushed: the relay got none of it

	next := newFixture(t, home, nil)
	err := next.core.Run(context.Background(), func(context.Context) error {
		var got []string
		for _, e := range next.pub.All() {
			got = append(got, e.ID)
		}
		want := append(append([]string{}, big[len(big)-RepublishPerLog:]...), small...)
		if len(got) != len(want) {
			t.Fatalf("republished %d events before the intake, want %d", len(got), len(want))
		}
		gotSet := map[string]bool{}
		for _, id := range got {
			gotSet[id] = true
		}
		for _, id := range want {
			if !gotSet[id] {
				t.Fatalf("event %s of the killed run was not republished", id)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

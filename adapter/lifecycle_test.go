package adapter

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aep-kimi/aep-kimi/aep"
	"github.com/aep-kimi/aep-kimi/internal/spool"
	"github.com/aep-kimi/aep-kimi/internal/testkit/emittertest"
	"github.com/aep-kimi/aep-kimi/internal/testkit/poll"
	"github.com/aep-kimi/aep-kimi/mapping"
)

func hookPayload(hook, session, extra string) []byte {
	return fmt.Appendf(nil, `{"hook_event_name":%q,"session_id":%q,"cwd":"/w","client_type":"kimi_code_cli"%s}`, hook, session, extra)
}

const (
	promptExtra = `,"prompt":[{"type":"text","text":"run the probe"}],"is_steer":false`
	startExtra  = `,"source":"startup","model":"mock"`
	resumeExtra = `,"source":"resume","model":"mock"`
)

// postHook delivers one payload over loopback as kimi-hook does, naming p.
func postHook(t *testing.T, base, token string, payload []byte, p procRef) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, base+"/hook", bytes.NewReader(payload))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	if p.valid() {
		req.Header.Set(HeaderPid, strconv.Itoa(p.pid))
		req.Header.Set(HeaderPidStart, p.start)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("hook: status %d", resp.StatusCode)
	}
}

// waitFor polls the session log until cond holds, and returns the log.
func waitFor(t *testing.T, home, session string, within time.Duration, cond func([]*aep.Event) bool) []*aep.Event {
	t.Helper()
	var ev []*aep.Event
	if !poll.Until(within, func() bool { ev = readLog(t, home, session); return cond(ev) }) {
		t.Fatalf("not within %s:\n%s", within, dump(ev))
	}
	return ev
}

func ended(ev []*aep.Event) bool { return count(ev, "session.ended") > 0 }

func lifecycleServer(t *testing.T) (*Server, string, string, *emittertest.Recorder) {
	t.Helper()
	home := t.TempDir()
	pub := &emittertest.Recorder{}
	s := newTestServer(t, home, func(c *Config) { c.Publisher = pub; c.ExitGrace = 100 * time.Millisecond })
	return s, runServer(t, s), home, pub
}

func endOf(t *testing.T, ev []*aep.Event) (reason, observed string) {
	t.Helper()
	ends := byType(ev, "session.ended")
	if len(ends) != 1 {
		t.Fatalf("%d session.ended:\n%s", len(ends), dump(ev))
	}
	d, _ := ends[0].DataMap()
	reason, _ = d["reason"].(string)
	observed, _ = ends[0].ExtString(ExtObserved)
	return reason, observed
}

// Kimi killed in the middle of a run: the run closes and the session ends
// killed, observed from the process, within the grace.
func TestProcessExitMidRunEndsKilled(t *testing.T) {
	t.Parallel()
	s, base, home, _ := lifecycleServer(t)
	cmd, p := child(t)
	sid := "s-killed"
	postHook(t, base, s.token, hookPayload("SessionStart", sid, startExtra), p)
	postHook(t, base, s.token, hookPayload("UserPromptSubmit", sid, promptExtra), p)
	exitAt := time.Now()
	cmd.Process.Kill()
	cmd.Wait()
	ev := waitFor(t, home, sid, 3*time.Second, ended)
	t.Logf("session.ended %s after the exit", time.Since(exitAt).Round(time.Millisecond))
	if reason, observed := endOf(t, ev); reason != mapping.EndKilled || observed != ObservedProcess {
		t.Fatalf("ended %q observed %q, want killed from the process", reason, observed)
	}
	got := strings.Join(types(ev), ",")
	if got != "session.started,run.started,run.cancelled,session.ended" {
		t.Fatalf("stream %s", got)
	}
	assertValidStream(t, ev)
}

// `kimi -p` exits after its turn without SessionEnd: the session ends normal.
func TestProcessExitIdleEndsNormal(t *testing.T) {
	t.Parallel()
	s, base, home, _ := lifecycleServer(t)
	cmd, p := child(t)
	sid := "s-normal"
	for _, h := range []struct{ hook, extra string }{{"SessionStart", startExtra}, {"UserPromptSubmit", promptExtra}, {"Stop", `,"stop_hook_active":false`}} {
		postHook(t, base, s.token, hookPayload(h.hook, sid, h.extra), p)
	}
	cmd.Process.Kill()
	cmd.Wait()
	ev := waitFor(t, home, sid, 3*time.Second, ended)
	if reason, observed := endOf(t, ev); reason != mapping.EndNormal || observed != ObservedProcess {
		t.Fatalf("ended %q observed %q, want normal from the process", reason, observed)
	}
	if d, _ := byType(ev, "session.ended")[0].DataMap(); d["runs"] == nil {
		t.Errorf("session.ended without its run count: %v", d)
	}
	assertValidStream(t, ev)
}

// A session that ended and is resumed by a new Kimi process is a new
// chapter: its own source, session.started (resume), and in the end its own
// session.ended; the whole log validates.
func TestResumeIsNewChapter(t *testing.T) {
	t.Parallel()
	s, base, home, _ := lifecycleServer(t)
	sid := "s-resumed"
	first, p1 := child(t)
	postHook(t, base, s.token, hookPayload("SessionStart", sid, startExtra), p1)
	first.Process.Kill()
	first.Wait()
	waitFor(t, home, sid, 3*time.Second, ended)

	second, p2 := child(t)
	postHook(t, base, s.token, hookPayload("SessionStart", sid, resumeExtra), p2)
	postHook(t, base, s.token, hookPayload("UserPromptSubmit", sid, promptExtra), p2)
	second.Process.Kill()
	second.Wait()
	ev := waitFor(t, home, sid, 3*time.Second, func(ev []*aep.Event) bool { return count(ev, "session.ended") == 2 })
	assertValidStream(t, ev)
	base1 := aep.SourceURI("testhost", mapping.Agent, sid)
	var chapters []string
	for _, e := range ev {
		if e.Type == "session.started" || e.Type == "session.ended" {
			chapters = append(chapters, e.Type+"@"+strings.TrimPrefix(e.Source, base1))
		}
	}
	if got := strings.Join(chapters, " "); got != "session.started@ session.ended@ session.started@/chapter/2 session.ended@/chapter/2" {
		t.Fatalf("chapters: %s", got)
	}
	if d, _ := byType(ev, "session.started")[1].DataMap(); d["trigger"] != mapping.TriggerResume {
		t.Errorf("the resumed chapter starts with trigger %v", d["trigger"])
	}
	// A restarted adapter goes on in the latest chapter.
	s2 := newTestServer(t, home, nil)
	sess := s2.core.Lock(sid)
	src, ended := sess.Stream().Source(), sess.ended
	sess.Unlock()
	if src != base1+"/chapter/2" || !ended {
		t.Fatalf("after a restart: source %s, ended %v", src, ended)
	}
}

// A spooled hook from a Kimi already gone (the adapter was down when it
// exited) ends its session all the same; a live hook naming a process this
// adapter cannot see (another pid namespace) falls back to silence instead.
func TestGoneProcessEndsSession(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	cmd, p := child(t)
	cmd.Process.Kill()
	cmd.Wait()
	h := spool.Header{Delivery: "spooled-1", At: time.Now().UTC().Format(time.RFC3339Nano), Reason: "unreachable", Pid: p.pid, PidStart: p.start}
	if _, _, err := spool.Append(spool.Dir(home), h, hookPayload("SessionStart", "s-gone", startExtra)); err != nil {
		t.Fatal(err)
	}
	s := newTestServer(t, home, func(c *Config) { c.ExitGrace = 100 * time.Millisecond })
	base := runServer(t, s) // ingests the spool first
	ev := waitFor(t, home, "s-gone", 3*time.Second, ended)
	if reason, _ := endOf(t, ev); reason != mapping.EndNormal {
		t.Fatalf("reason %q", reason)
	}

	postHook(t, base, s.token, hookPayload("SessionStart", "s-foreign", startExtra), p)
	// The hook's delivery decides, before it is answered, whether its
	// process is watched (and so ended after the grace): it must not be.
	s.life.mu.Lock()
	_, bound := s.life.bound["s-foreign"]
	watched := len(s.life.procs)
	s.life.mu.Unlock()
	if bound || watched != 0 {
		t.Fatalf("a live hook naming an unseen process is watched (bound %v, %d watches): its session would end", bound, watched)
	}
	if ev := readLog(t, home, "s-foreign"); ended(ev) {
		t.Fatalf("a live hook naming an unseen process ended its session:\n%s", dump(ev))
	}
}

// Without a process to watch: offline after the heartbeat window, online
// when hooks return, ended (timeout) after the idle limit, and a new chapter
// when hooks come back after all.
func TestSilenceFallback(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	pub := &emittertest.Recorder{}
	clock := &testClock{t: time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)}
	s := newTestServer(t, home, func(c *Config) {
		c.Publisher, c.Now = pub, clock.now
		c.StaleAfter, c.IdleEnd, c.StatusInterval = time.Minute, 10*time.Minute, time.Second
	})
	sid := "s-quiet"
	hook := func(name, extra string) {
		t.Helper()
		if _, _, err := s.ingest(&delivery{payload: hookPayload(name, sid, extra), at: clock.t}, false); err != nil {
			t.Fatal(err)
		}
	}
	presence := func() []string {
		var out []string
		for _, e := range pub.Find("agent.presence") {
			d, _ := e.DataMap()
			if e.Session != "" || e.Seq != nil || e.Source != aep.SourceURI("testhost", mapping.Agent, sid) {
				t.Fatalf("presence is not agent-scoped on the session's source: %+v", e)
			}
			out = append(out, d["state"].(string))
		}
		return out
	}
	hook("SessionStart", startExtra)
	hook("UserPromptSubmit", promptExtra)
	clock.t = clock.t.Add(30 * time.Second)
	s.life.tick(s.Channel())
	if got := presence(); len(got) != 0 {
		t.Fatalf("presence inside the heartbeat window: %v", got)
	}
	clock.t = clock.t.Add(time.Minute)
	s.life.tick(s.Channel())
	s.life.tick(s.Channel())                       // said once
	hook("SessionHeartbeat", `,"uptime_ms":60001`) // too soon after offline: said on a later tick
	clock.t = clock.t.Add(2 * time.Second)
	s.life.tick(s.Channel())
	if got := strings.Join(presence(), ","); got != "offline,online" {
		t.Fatalf("presence %s, want offline,online", got)
	}
	clock.t = clock.t.Add(11 * time.Minute)
	s.life.tick(s.Channel())
	ev := readLog(t, home, sid)
	if reason, observed := endOf(t, ev); reason != mapping.EndTimeout || observed != ObservedSilence {
		t.Fatalf("ended %q observed %q, want timeout from silence", reason, observed)
	}
	hook("UserPromptSubmit", promptExtra)
	ev = readLog(t, home, sid)
	assertValidStream(t, ev)
	if last := ev[len(ev)-2]; last.Type != "session.started" || !strings.HasSuffix(last.Source, "/chapter/2") {
		t.Fatalf("hooks after a timeout do not open a chapter:\n%s", dump(ev))
	}
}

// Channel state changes become agent.health, rate-limited, the latest state
// reported last.
func TestChannelHealthOnTheStream(t *testing.T) {
	t.Parallel()
	pub := &emittertest.Recorder{}
	clock := &testClock{t: time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)}
	s := newTestServer(t, t.TempDir(), func(c *Config) { c.Publisher, c.Now, c.StatusInterval = pub, clock.now, 10*time.Second })
	step := func(state string, after time.Duration) {
		clock.t = clock.t.Add(after)
		s.life.tick(ChannelReport{State: state})
	}
	step(ChannelUnavailable, time.Second) // no change: nothing
	step(ChannelActive, time.Second)
	step(ChannelStale, time.Second) // too soon
	step(ChannelActive, time.Second)
	step(ChannelStale, time.Second)
	step(ChannelStale, 10*time.Second) // the latest state, once the interval passed
	step(ChannelStale, 10*time.Second)
	var got []string
	for _, e := range pub.Find("agent.health") {
		d, _ := e.DataMap()
		ch, _ := e.ExtString(ExtChannel)
		if e.Session != "" || e.Seq != nil || e.Source != aep.AgentSourceURI("testhost", mapping.Agent) {
			t.Fatalf("health is not the adapter's agent-scoped event: %+v", e)
		}
		if err := aep.Validate(e); err != nil {
			t.Fatal(err)
		}
		got = append(got, fmt.Sprintf("%s(%s)", d["status"], ch))
	}
	if strings.Join(got, ",") != "ok(active),degraded(stale)" {
		t.Fatalf("health events %v", got)
	}
}

func TestProcFromRequest(t *testing.T) {
	t.Parallel()
	cases := []struct {
		remote, pid, start string
		ok                 bool
	}{
		{"127.0.0.1:5000", "4242", "987654", true},
		{"[::1]:5000", "4242", "1700000000.123456", true},
		{"10.0.0.7:5000", "4242", "987654", false}, // another machine's process
		{"127.0.0.1:5000", "0", "987654", false},
		{"127.0.0.1:5000", "-3", "987654", false},
		{"127.0.0.1:5000", "4242", "", false},
		{"127.0.0.1:5000", "4242", "98x", false},
		{"127.0.0.1:5000", "4242", strings.Repeat("9", 41), false},
		{"127.0.0.1:5000", "99999999999", "1", false},
	}
	for _, c := range cases {
		r := httptest.NewRequest(http.MethodPost, "/hook", nil)
		r.RemoteAddr = c.remote
		r.Header.Set(HeaderPid, c.pid)
		r.Header.Set(HeaderPidStart, c.start)
		if got := procFromRequest(r); got.valid() != c.ok {
			t.Errorf("%+v: got %+v", c, got)
		}
	}
}

// Subagents and background tasks still running when Kimi dies close with
// the session, inside the run they belonged to, before the run closes.
func TestProcessExitClosesSubagentsAndTasks(t *testing.T) {
	t.Parallel()
	s, base, home, _ := lifecycleServer(t)
	cmd, p := child(t)
	sid := "s-scopes"
	for _, h := range []struct{ hook, extra string }{
		{"SessionStart", startExtra},
		{"UserPromptSubmit", promptExtra},
		{"TaskStarted", `,"task_id":"bash-1","kind":"process","status":"running","detached":true`},
		{"TaskStarted", `,"task_id":"bash-2","kind":"process","status":"running","detached":true`},
		{"Notification", `,"notification_type":"task.completed","source_kind":"background_task","source_id":"bash-2"`},
		{"SubagentStart", `,"agent_name":"coder","prompt":"p"`},
	} {
		postHook(t, base, s.token, hookPayload(h.hook, sid, h.extra), p)
	}
	cmd.Process.Kill()
	cmd.Wait()
	ev := waitFor(t, home, sid, 3*time.Second, ended)
	assertValidStream(t, ev)
	tail := strings.Join(types(ev[len(ev)-4:]), ",")
	if tail != "delegation.subagent.stopped,"+mapping.TypeTaskEnded+",run.cancelled,session.ended" {
		t.Fatalf("the end drains %s", tail)
	}
	stopped, task := ev[len(ev)-4], ev[len(ev)-3]
	sd, _ := stopped.DataMap()
	if stopped.Subject != "coder" || sd["status"] != mapping.StatusSessionEnded || stopped.Run == "" || stopped.Cause == "" {
		t.Errorf("subagent stop %+v %v", stopped, sd)
	}
	if task.Subject != "bash-1" || task.Run == "" {
		t.Errorf("task end %+v (bash-2 completed; bash-1 did not)", task)
	}
}

// A Kimi that dies while the adapter is down: the restarted adapter finds
// the process its log recorded gone and ends the session (killed: a run was
// open) without any further hook.
func TestRestartEndsSessionWhoseKimiDied(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	cmd, p := child(t)
	first := newTestServer(t, home, nil)
	addr, err := first.Listen()
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- first.Run(ctx) }()
	<-first.Ready()
	base := "http://" + addr.String()
	postHook(t, base, first.token, hookPayload("SessionStart", "s-restart", startExtra), p)
	postHook(t, base, first.token, hookPayload("UserPromptSubmit", "s-restart", promptExtra), p)
	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if ev := readLog(t, home, "s-restart"); ended(ev) {
		t.Fatalf("an adapter stopping ended the session:\n%s", dump(ev))
	}
	cmd.Process.Kill()
	cmd.Wait()

	second := newTestServer(t, home, func(c *Config) { c.ExitGrace = 100 * time.Millisecond })
	runServer(t, second)
	ev := waitFor(t, home, "s-restart", 3*time.Second, ended)
	if reason, observed := endOf(t, ev); reason != mapping.EndKilled || observed != ObservedProcess {
		t.Fatalf("ended %q observed %q", reason, observed)
	}
	assertValidStream(t, ev)
}

package adapter

import (
	"errors"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/aep-kimi/aep-kimi/aep"
	"github.com/aep-kimi/aep-kimi/emitter"
	"github.com/aep-kimi/aep-kimi/internal/journal"
	"github.com/aep-kimi/aep-kimi/mapping"
)

// A session's life as the adapter sees it from outside Kimi.
//
// kimi-hook names the Kimi process each hook serves (pid and start time).
// The adapter watches that process while the session lives; when it exits
// without SessionEnd (`kimi -p` never sends one, a crash or a kill sends
// nothing), the session drains as SessionEnd would and ends with reason
// normal (no run open) or killed (a run open), marked as observed from the
// process. A session whose process cannot be watched (a hook from another
// machine, a platform without a watcher) falls back to silence: offline
// after the heartbeat window, ended with reason timeout after the idle limit.
//
// An ended session that Kimi resumes (`kimi -r`, `--continue`) starts a new
// chapter: AEP allows one session.ended per session, so each chapter is its
// own stream identity, the session's source plus /chapter/N, continuing the
// session's positions. A consumer sees session.started (trigger resume) and,
// in the end, session.ended again, never events after an end without a start.

// Extension attributes of lifecycle events (AEP-0001 §5.4).
const (
	// ExtObserved marks a session.ended the adapter observed instead of Kimi
	// reporting it (mapping.ExtObserved, shared with the bridge).
	ExtObserved = mapping.ExtObserved
	// ExtChannel carries the hook channel's state on agent.health
	// (mapping.ExtChannel).
	ExtChannel = mapping.ExtChannel
	// ExtProc names the Kimi process on session.started ("PID@START"), so
	// a restarted adapter can watch the process of a session it recovers,
	// or find it gone.
	ExtProc = "kimiproc"
)

// How an end was observed (ExtObserved values).
const (
	ObservedProcess = mapping.ObservedProcess
	ObservedSilence = mapping.ObservedSilence
)

// recoveryLine bounds the read that finds which session a log holds: its
// last event.
const recoveryLine = 64 << 10

// Headers kimi-hook sends to name the Kimi process it serves.
const (
	HeaderPid      = "X-Kimi-Hook-Pid"
	HeaderPidStart = "X-Kimi-Hook-Pid-Start"
	maxPidStart    = 40
)

// sessionLife is a session's lifecycle state, guarded by session.mu.
type sessionLife struct {
	// proc is the Kimi process the latest delivery named.
	proc procRef
	// observed says how the current end was observed (empty: Kimi
	// reported it, or the session is live).
	observed string
	presence statusGate
	// tasks are background tasks started and not yet reported done.
	tasks map[string]bool
}

// statusGate rate-limits one reported state: a state different from the
// last one sent goes out when at least interval has passed since then. The
// caller offers the current state again later, so the latest state is
// always reported in the end.
type statusGate struct {
	sent string
	at   time.Time
}

func (g *statusGate) next(state string, now time.Time, interval time.Duration) bool {
	if state == g.sent || (!g.at.IsZero() && now.Sub(g.at) < interval) {
		return false
	}
	g.sent, g.at = state, now
	return true
}

// lifecycle is the adapter's process watches and status reports.
//
// One watch per Kimi process, shared by every session that names it: a
// watch costs a descriptor (a pidfd, a kqueue), and one process may serve
// many sessions (or a hook-token holder may name one pid for thousands), so
// the cost follows processes, not sessions. MaxWatches bounds the processes;
// past it a session falls back to silence. A session evicted from memory
// keeps its binding (it still ends when its process exits), and one nobody
// watches keeps its last hook time (it still ends after the idle limit),
// both in a bounded table of evicted live sessions.
//
// Lock order: l.mu is taken last (under the server's and a session's locks),
// and nothing else is taken while it is held.
type lifecycle struct {
	srv *Server
	// agent emits the adapter's own agent-scoped events (agent.health).
	agent *journal.Stream

	mu sync.Mutex
	// procs are the watched processes; bound maps a session to the process
	// watching it (sessions in memory and evicted ones).
	procs map[procRef]*procWatch
	bound map[string]procRef
	// away holds the evicted sessions that had not ended, by id: their last
	// hook time, for the idle end of those not bound to a process.
	away   map[string]time.Time
	health statusGate
	closed bool
	wg     sync.WaitGroup

	ends      *prometheus.CounterVec
	overCap   prometheus.Counter
	untracked prometheus.Counter
	// capLog and untrackedLog pace the lines for sessions past the bounds.
	capLog, untrackedLog logPacer
}

// procWatch is one watched process and the sessions it serves.
type procWatch struct {
	stop func() // nil for a process found gone
	// exited is set once the process's exit is seen; its sessions end
	// after the grace.
	exited   bool
	sessions map[string]struct{}
}

func newLifecycle(s *Server) *lifecycle {
	l := &lifecycle{
		srv:    s,
		procs:  map[procRef]*procWatch{},
		bound:  map[string]procRef{},
		away:   map[string]time.Time{},
		health: statusGate{sent: ChannelUnavailable},
		agent:  s.core.AgentStream(),
	}
	r := s.core.Metrics()
	l.ends = r.CounterVec("observed_ends_total", "Sessions the adapter ended itself (Kimi exited or fell silent), by reason.", "reason")
	l.overCap = r.Counter("watch_cap_fallbacks_total",
		"Sessions whose Kimi process was not watched because MaxWatches processes already were; they fall back to silence.")
	l.untracked = r.Counter("evicted_untracked_total",
		"Live sessions evicted while the table of evicted live sessions was full: they end only when touched again.")
	gauge := func(name, help string, n func() int) {
		r.GaugeFunc(name, help, func() float64 {
			l.mu.Lock()
			defer l.mu.Unlock()
			return float64(n())
		})
	}
	gauge("watched_processes", "Kimi processes watched for their exit.", func() int { return len(l.procs) })
	gauge("watched_sessions", "Sessions bound to a watched Kimi process (in memory or evicted).", func() int { return len(l.bound) })
	gauge("evicted_live_sessions", "Sessions evicted from memory before they ended, still tracked for their end.", func() int { return len(l.away) })
	return l
}

// procFromRequest reads the Kimi process a hook request names. Only a hook
// from this machine (loopback) names a process the adapter can watch.
func procFromRequest(r *http.Request) procRef {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return procRef{}
	}
	if ip, err := netip.ParseAddr(host); err != nil || !ip.Unmap().IsLoopback() {
		return procRef{}
	}
	pid, err := strconv.Atoi(r.Header.Get(HeaderPid))
	if err != nil {
		return procRef{}
	}
	return parseProc(pid, r.Header.Get(HeaderPidStart))
}

// parseProc validates a process reference from a header or a spool record.
func parseProc(pid int, start string) procRef {
	if pid <= 0 || pid > 1<<30 || start == "" || len(start) > maxPidStart {
		return procRef{}
	}
	for i := 0; i < len(start); i++ {
		if c := start[i]; (c < '0' || c > '9') && c != '.' {
			return procRef{}
		}
	}
	return procRef{pid: pid, start: start}
}

// afterDelivery records the process a delivery named and reports the
// session online; it returns the process to watch (zero for none: an ended
// session's late hooks name a process already gone). Callers hold the
// session's lock.
func (s *hookSession) afterDelivery(d *delivery) procRef {
	if s.ended {
		return procRef{}
	}
	s.presence(mapping.PresenceOnline, s.srv.cfg.Now())
	if !d.proc.valid() || s.Key() == UnknownSession {
		// The unknown session gathers hooks of any Kimi that sent no
		// session id: no one process is its own.
		return procRef{}
	}
	s.life.proc = d.proc
	return d.proc
}

// presence reports the session's presence when it changed, rate-limited.
// Callers hold the session's lock.
func (s *hookSession) presence(state string, now time.Time) {
	if s.life.presence.sent == "" {
		s.life.presence.sent = mapping.PresenceOnline // a live session is online until it goes quiet
	}
	if !s.life.presence.next(state, now, s.srv.cfg.StatusInterval) {
		return
	}
	s.Stream().EmitAgent(journal.Entry{Event: mapping.Presence(state, s.srv.cfg.Posture), At: now})
}

// chapterFor opens a new chapter when hooks come back to an ended session:
// a SessionStart always does (Kimi resumed it); another hook does when the
// end was a timeout (the session was not over after all) or was observed
// from a process and the hook comes from another one. A SessionStart from a
// new process while the old one is found gone ends the old chapter first.
// Callers hold the session's lock.
func (s *hookSession) chapterFor(d *delivery, r *mapping.HookResult) {
	hook := r.Facts.Hook
	if !s.ended && hook == mapping.HookSessionStart && s.life.proc.valid() && d.proc.valid() &&
		d.proc != s.life.proc && errors.Is(checkAlive(s.life.proc), errGone) {
		s.observeEnd(d, ObservedProcess)
	}
	if !s.ended || hook == mapping.HookSessionEnd {
		return
	}
	switch {
	case hook == mapping.HookSessionStart:
		s.newChapter(d)
	case s.life.observed == ObservedSilence,
		s.life.observed == ObservedProcess && d.proc.valid() && d.proc != s.life.proc:
		s.newChapter(d)
		s.emit(d, mapping.SessionResumed(s.srv.cfg.Posture), emitOpts{noRun: true, ext: procExt(d.proc)})
	}
}

// procExt is the ExtProc attribute naming p, none when p is unknown.
func procExt(p procRef) []journal.Ext {
	if !p.valid() {
		return nil
	}
	return []journal.Ext{{Name: ExtProc, Value: strconv.Itoa(p.pid) + "@" + p.start}}
}

// procOfEvent reads the process an event's ExtProc names.
func procOfEvent(ev *aep.Event) procRef {
	v, _ := ev.ExtString(ExtProc)
	pid, start, ok := strings.Cut(v, "@")
	if !ok {
		return procRef{}
	}
	n, err := strconv.Atoi(pid)
	if err != nil {
		return procRef{}
	}
	return parseProc(n, start)
}

// recoverLive takes up, at start, the sessions whose logs were written
// within the idle limit and did not end: one whose Kimi process is recorded
// is watched again (and ends at once if that process is gone: it died while
// the adapter was down); one without falls back to silence from its log's
// last write. A session nobody touches again would otherwise stay live.
func (l *lifecycle) recoverLive() {
	srv := l.srv
	dir := logDir(srv.cfg.Home)
	entries, err := os.ReadDir(dir)
	if err != nil {
		return // no logs yet
	}
	now := srv.cfg.Now()
	for _, e := range entries {
		info, err := e.Info()
		if err != nil || !info.Mode().IsRegular() || !strings.HasSuffix(e.Name(), ".jsonl") || now.Sub(info.ModTime()) > srv.cfg.IdleEnd {
			continue
		}
		id := ""
		journal.Replay(filepath.Join(dir, e.Name()), recoveryLine, func(ev *aep.Event) { //nolint:errcheck // a log that cannot be read names no session
			if ev.Session != "" {
				id = ev.Session
			}
		})
		if id == "" {
			continue
		}
		known := srv.core.Has(id) // touched already (by the spool)
		sess := srv.core.Lock(id)
		live, proc := !sess.ended, sess.life.proc
		if live && !known {
			sess.Touch(info.ModTime()) // silence counts from its last write
		}
		sess.Unlock()
		if live && proc.valid() {
			l.ensure(id, proc, true)
		}
	}
}

// newChapter switches the session's stream to its next chapter's source.
func (s *hookSession) newChapter(d *delivery) {
	s.NextChapter()
	s.ended, s.startedAt, s.runs = false, d.at, 0
	s.closed = nil // a late TurnStarted is never the last chapter's
	s.life.observed = ""
}

// trackTask follows background tasks, which close with their session.
func (s *hookSession) trackTask(f mapping.Facts) {
	if f.TaskID == "" {
		return
	}
	switch f.Hook {
	case mapping.HookTaskStarted:
		if s.life.tasks == nil {
			s.life.tasks = map[string]bool{}
		}
		s.life.tasks[f.TaskID] = true
	case mapping.HookNotification:
		delete(s.life.tasks, f.TaskID)
	}
}

// drainScopes stops the subagents still running. Callers hold the session's lock.
func (s *hookSession) drainScopes(d *delivery) {
	for _, sc := range s.scopes {
		if sc.started {
			s.emit(d, mapping.SubagentDrained(sc.agent, s.srv.cfg.Posture), emitOpts{cause: sc.startID})
		}
	}
}

// drainTasks ends the background tasks whose completion never came.
func (s *hookSession) drainTasks(d *delivery) {
	ids := make([]string, 0, len(s.life.tasks))
	for id := range s.life.tasks {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		s.emit(d, mapping.TaskDrained(id, s.srv.cfg.Posture), emitOpts{})
	}
	s.life.tasks = nil
}

// observeEnd drains and ends a session Kimi did not end: normal when no run
// was open, killed when one was, timeout for silence. Callers hold the session's lock.
func (s *hookSession) observeEnd(d *delivery, how string) {
	reason := mapping.EndNormal
	switch {
	case how == ObservedSilence:
		reason = mapping.EndTimeout
	case s.cur != nil:
		reason = mapping.EndKilled
	}
	s.drain(d)
	s.emitEnd(d, mapping.SessionEnded(reason, s.srv.cfg.Posture), emitOpts{ext: []journal.Ext{{Name: ExtObserved, Value: how}}})
	s.life.observed = how
	s.srv.life.ends.WithLabelValues(reason).Inc()
	s.srv.log.Info("session ended without SessionEnd", "session", emitter.Clip(s.Key()), "reason", reason, "observed", how)
}

// ensure binds session id to p, its Kimi process, watching p unless it
// already is. spooled says the delivery naming p came from the spool,
// written maybe long ago; a live delivery names a Kimi that was running a
// moment ago.
func (l *lifecycle) ensure(id string, p procRef, spooled bool) {
	if !p.valid() {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	old, isBound := l.bound[id]
	if l.closed || (isBound && old == p) {
		return
	}
	w := l.procs[p]
	if w == nil {
		if len(l.procs) >= l.srv.cfg.MaxWatches {
			l.unbindLocked(id)
			l.overCap.Inc()
			if ok, n := l.capLog.allow(l.srv.cfg.Now(), BoundLogEvery); ok {
				l.srv.log.Warn("Kimi processes watched at the cap (MaxWatches); the session falls back to silence",
					"session", emitter.Clip(id), "max_watches", l.srv.cfg.MaxWatches, "since_last_line", n)
			}
			return
		}
		w = &procWatch{sessions: map[string]struct{}{}}
		stop, err := watchProcess(p, l.srv.cfg.ProcPoll, func() { l.exited(p, w) })
		switch {
		case errors.Is(err, errGone):
			if isBound {
				return // a late delivery from a process already gone: keep the live one
			}
			if !spooled {
				// A live hook whose Kimi this adapter cannot see: the hook
				// runs in another pid namespace (a container sharing the
				// network), or Kimi died as it fired. Only silence can tell.
				l.srv.log.Debug("Kimi process not visible; the session falls back to silence", "session", emitter.Clip(id), "pid", p.pid)
				return
			}
			// Kimi exited before its hooks got here (spooled while the
			// adapter was down): the session ends all the same.
			w.exited = true
			l.spawn(func() { l.endAfterGrace(p, w, l.srv.cfg.Now()) })
		case err != nil:
			l.unbindLocked(id)
			l.srv.log.Debug("Kimi process not watchable; the session falls back to silence", "session", emitter.Clip(id), "pid", p.pid, "err", err)
			return
		default:
			w.stop = stop
		}
		l.procs[p] = w
	}
	l.unbindLocked(id)
	l.bound[id] = p
	w.sessions[id] = struct{}{}
}

// release unbinds a session that ended: the last session of a process
// releases its watch.
func (l *lifecycle) release(id string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.unbindLocked(id)
	delete(l.away, id)
}

// unbindLocked drops id's binding, and the watch when no session is left on
// it (one whose exit was seen is released by its end). Callers hold l.mu.
func (l *lifecycle) unbindLocked(id string) {
	p, ok := l.bound[id]
	if !ok {
		return
	}
	delete(l.bound, id)
	w := l.procs[p]
	if w == nil {
		return
	}
	delete(w.sessions, id)
	if len(w.sessions) == 0 && !w.exited {
		l.dropLocked(p, w)
	}
}

// dropLocked stops w's watch and forgets it. Callers hold l.mu.
func (l *lifecycle) dropLocked(p procRef, w *procWatch) {
	if w.stop != nil {
		w.stop()
	}
	if l.procs[p] == w {
		delete(l.procs, p)
	}
}

// evicted records a session the server dropped from memory. One that ended
// is forgotten; one still live keeps its process binding (it ends when the
// process exits) and its last hook time (it ends after the idle limit when
// no process is bound), within MaxEvictedLive. Past that bound the session
// is not tracked: it ends when something touches it again, or when a
// restarted adapter recovers it from its log. Callers hold the server's and
// the session's locks.
func (l *lifecycle) evicted(id string, ended bool, lastHook time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if ended {
		l.unbindLocked(id)
		return
	}
	if _, ok := l.away[id]; !ok && len(l.away) >= MaxEvictedLive {
		l.unbindLocked(id)
		l.untracked.Inc()
		if ok, n := l.untrackedLog.allow(l.srv.cfg.Now(), BoundLogEvery); ok {
			l.srv.log.Warn("too many live sessions evicted from memory; this one ends only when touched again",
				"session", emitter.Clip(id), "max_evicted_live", MaxEvictedLive, "since_last_line", n)
		}
		return
	}
	l.away[id] = lastHook
}

// back notes that an evicted session is in memory again, and returns its
// last hook time when it was evicted live. Callers hold the server's lock.
func (l *lifecycle) back(id string) (time.Time, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	last, ok := l.away[id]
	delete(l.away, id)
	return last, ok
}

// exited is a watcher's report that p exited.
func (l *lifecycle) exited(p procRef, w *procWatch) {
	at := l.srv.cfg.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.procs[p] != w || w.exited {
		return // released meanwhile, or reported already
	}
	w.exited = true
	l.spawn(func() { l.endAfterGrace(p, w, at) })
}

// spawn runs f as an owned goroutine. Callers hold l.mu.
func (l *lifecycle) spawn(f func()) {
	if l.closed {
		return
	}
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		f()
	}()
}

// endAfterGrace waits the exit grace, takes what the spool holds, then
// releases p's watch and ends every session still bound to p that has not
// ended meanwhile.
func (l *lifecycle) endAfterGrace(p procRef, w *procWatch, at time.Time) {
	t := time.NewTimer(l.srv.cfg.ExitGrace)
	defer t.Stop()
	select {
	case <-t.C:
	case <-l.srv.stopping:
		return // an adapter stopping is not the session ending
	}
	// Hooks Kimi fired just before it died may still sit in the spool
	// (write-aheads of deliveries cut off): take them first; a delivery
	// still in flight is deduped by its delivery id.
	l.srv.ingestSpool(0)
	l.mu.Lock()
	if l.procs[p] != w {
		l.mu.Unlock()
		return
	}
	l.dropLocked(p, w)
	ids := make([]string, 0, len(w.sessions))
	for id := range w.sessions {
		ids = append(ids, id)
		delete(l.bound, id)
	}
	l.mu.Unlock()
	sort.Strings(ids)
	for _, id := range ids {
		sess := l.srv.core.Lock(id)
		if !sess.ended {
			sess.observeEnd(&delivery{at: at}, ObservedProcess)
		}
		sess.Unlock()
	}
}

// tick reports the hook channel's health and ends or marks offline the
// sessions nobody watches, evicted ones included.
func (l *lifecycle) tick(rep ChannelReport) {
	cfg := l.srv.cfg
	now := cfg.Now()
	l.mu.Lock()
	if l.health.next(rep.State, now, cfg.StatusInterval) {
		l.agent.EmitAgent(journal.Entry{Event: mapping.ChannelHealth(rep.State, cfg.Posture), At: now,
			Ext: []journal.Ext{{Name: ExtChannel, Value: rep.State}}})
	}
	watched := make(map[string]bool, len(l.bound))
	for id := range l.bound {
		watched[id] = true
	}
	var silent []string // evicted, unwatched, past the idle limit
	for id, last := range l.away {
		if !watched[id] && now.Sub(last) >= cfg.IdleEnd {
			silent = append(silent, id)
		}
	}
	l.mu.Unlock()

	l.srv.core.Each(func(sess *hookSession) {
		if watched[sess.Key()] || sess.ended {
			return
		}
		switch quiet := now.Sub(sess.LastActive()); {
		case quiet >= cfg.IdleEnd:
			sess.observeEnd(&delivery{at: now}, ObservedSilence)
		case quiet >= cfg.StaleAfter:
			sess.presence(mapping.PresenceOffline, now)
		default:
			sess.presence(mapping.PresenceOnline, now)
		}
	})
	// An evicted session comes back from its log to end; one that was
	// touched meanwhile is in memory and left to the pass above.
	sort.Strings(silent)
	for _, id := range silent {
		l.endEvicted(id, now)
	}
}

// endEvicted ends an evicted session that fell silent, unless it came back
// or ended meanwhile.
func (l *lifecycle) endEvicted(id string, now time.Time) {
	l.mu.Lock()
	last, still := l.away[id]
	_, watched := l.bound[id]
	l.mu.Unlock()
	if !still || watched || now.Sub(last) < l.srv.cfg.IdleEnd {
		return
	}
	sess := l.srv.core.Lock(id)
	defer sess.Unlock()
	// A hook that brought it back meanwhile moved its last hook time.
	if !sess.ended && now.Sub(sess.LastActive()) >= l.srv.cfg.IdleEnd {
		sess.observeEnd(&delivery{at: now}, ObservedSilence)
	}
}

// close stops every watch and waits for the ends in progress.
func (l *lifecycle) close() {
	l.mu.Lock()
	l.closed = true
	for p, w := range l.procs {
		l.dropLocked(p, w)
	}
	l.mu.Unlock()
	l.wg.Wait()
}

// The fleet page's state: events in, state out. No I/O, no clock (callers
// pass "now"), no DOM. It implements the AEP consumer obligations: derive
// from (epoch, seq) order per session, never from arrival; dedupe by id; keep
// seq-less foreign events in arrival order among the owner's ordered events;
// keep unknown types, agents and sessionless events; resolve cause edges.

// The attention lifecycle (AEP-0002 §7): its events name the request in
// subject; an answer is not the end (the emitter resolves it); the terminals
// are resolved and timeout, and the first one holds.
const ATTENTION_TERMINALS = { 'attention.resolved': 'resolved', 'attention.timeout': 'timeout' };
const RUN_TERMINALS = { 'run.finished': 'finished', 'run.failed': 'failed', 'run.cancelled': 'cancelled' };
// A command whose agent starts so was sent by a relay's rule (rules.AgentPrefix).
const RULE_AGENT = 'rule:';

// ruleOf is the rule id an agent (or an answer's by) names, or ''.
export function ruleOf(agent) {
  return typeof agent === 'string' && agent.startsWith(RULE_AGENT) ? agent.slice(RULE_AGENT.length) : '';
}

// Fields that carry content only at capture redacted or full: below that the
// page says "gated at capture" rather than invent them.
export const CAPTURE_RANK = { none: 0, metadata: 1, redacted: 2, full: 3 };

// newState returns an empty state. Its fields are read by derive() and the
// page; apply() is the only writer.
export function newState() {
  return {
    version: 0, // bumps once per applied event
    arrivals: 0,
    byId: new Map(), // id -> event record, first seen (sessionless lookups; dedupe)
    seen: new Set(), // dedupe keys of events whose id was first seen elsewhere
    sessions: new Map(), // session id -> lane
    agents: new Map(), // agent -> sessionless (agent-scoped) events
    dirty: new Set(), // sessions changed since the last takeDirty()
    // lane key -> the lane key of the Kimi session it is another view of
    // (KIMI_SESSION_ATTR: the kimi web bridge's {id}.web beside the hooks'
    // {id}). Each stays its own lane, with its own owner and order; a
    // person sees one session (session()).
    companionOf: new Map(),
  };
}

// KIMI_SESSION_ATTR is the extension attribute naming the Kimi session an
// event's session is another view of (mapping.ExtKimiSession).
export const KIMI_SESSION_ATTR = 'kimisession';

// kimiSessionOf is the Kimi session ev's session is another view of, or ''.
function kimiSessionOf(ev) {
  const k = ev[KIMI_SESSION_ATTR];
  return typeof k === 'string' && k !== '' && k !== ev.session ? k : '';
}

// laneKey names a session lane: the session id, prefixed by the relay it
// came from when the page reads several (one id may live on two relays).
export function laneKey(session, origin = '') {
  return origin ? `${origin}\u001f${session}` : session;
}

function lane(state, session, origin) {
  const key = laneKey(session, origin);
  let l = state.sessions.get(key);
  if (!l) {
    l = {
      id: key, session, origin, events: [], byId: new Map(), conflicts: 0,
      lastPos: null, anchor: null, derived: null, fold: null, agents: new Set(),
    };
    state.sessions.set(key, l);
  }
  return l;
}

function hasPos(ev) {
  return Number.isInteger(ev.seq);
}

function posOf(ev) {
  return { epoch: Number.isInteger(ev.epoch) ? ev.epoch : 0, seq: ev.seq };
}

export function comparePos(a, b) {
  return a.epoch - b.epoch || a.seq - b.seq;
}

// A record's sort key: sequenced events by (epoch, seq); a seq-less event
// sits after the owner event that was the lane's latest when it arrived, in
// arrival order among its kind.
function compareRec(a, b) {
  const pa = a.key, pb = b.key;
  if (pa && pb) {
    const c = comparePos(pa, pb);
    if (c !== 0) return c;
  } else if (pa && !pb) {
    return -1;
  } else if (!pa && pb) {
    return 1;
  }
  if (a.seqless !== b.seqless) return a.seqless ? 1 : -1;
  return a.arrival - b.arrival;
}

// sourceOf is an event's source for dedupe: ids are unique per emitter,
// never globally, so an event is its (relay, source, id).
function sourceOf(ev) {
  return typeof ev.source === 'string' ? ev.source : '';
}

// applied says whether an event with ev's relay, source and id was applied,
// and notes that it now is. The first event of each id (nearly every event)
// is answered by byId alone; only an id seen from another relay or source
// costs a key of its own.
function applied(state, ev, origin) {
  const first = state.byId.get(ev.id);
  if (first === undefined) return false;
  if (first.origin === origin && sourceOf(first.ev) === sourceOf(ev)) return true;
  const key = `${origin}\n${sourceOf(ev)}\n${ev.id}`;
  if (state.seen.has(key)) return true;
  state.seen.add(key);
  return false;
}

// apply adds one event, read from the relay named origin ('' for the one
// relay). It returns false for a duplicate (same source and id from the same
// relay) or a value that is not an event object; everything else is kept,
// whatever its type or agent.
export function apply(state, ev, origin = '') {
  if (!ev || typeof ev !== 'object' || typeof ev.id !== 'string' || ev.id === '') return false;
  if (applied(state, ev, origin)) return false;
  const rec = { ev, origin, arrival: state.arrivals++, key: null, seqless: !hasPos(ev) };
  if (!state.byId.has(ev.id)) state.byId.set(ev.id, rec);
  state.version++;
  if (typeof ev.session !== 'string' || ev.session === '') {
    const agent = (origin ? `${origin}: ` : '') + (typeof ev.agent === 'string' ? ev.agent : '(unknown agent)');
    let list = state.agents.get(agent);
    if (!list) state.agents.set(agent, (list = []));
    list.push(rec);
    state.dirty.add('');
    return true;
  }
  const fresh = !state.sessions.has(laneKey(ev.session, origin));
  const l = lane(state, ev.session, origin);
  const kimi = kimiSessionOf(ev);
  if (kimi && !state.companionOf.has(l.id)) state.companionOf.set(l.id, laneKey(kimi, origin));
  // A companion changes its Kimi session's card, and a Kimi session's own
  // lane takes its companions' cards into its own.
  if (state.companionOf.has(l.id)) state.dirty.add(state.companionOf.get(l.id));
  if (fresh) for (const c of companionsOf(state, l.id)) state.dirty.add(c);
  // A command's agent is the surface or person that sent it (the page, the
  // CLI, a rule), not an agent of the session: people are not listed as agents.
  if (typeof ev.agent === 'string' && !ev.type.startsWith('control.')) l.agents.add(ev.agent);
  // Bare-id references (cause, attention subject) resolve within the
  // session's view; the owner's sequenced event wins a collision.
  if (!l.byId.has(ev.id) || !rec.seqless) l.byId.set(ev.id, rec);
  if (rec.seqless) {
    rec.key = l.anchor;
  } else {
    rec.key = posOf(ev);
    if (!l.lastPos || comparePos(rec.key, l.lastPos) > 0) l.lastPos = rec.key;
    l.anchor = l.lastPos;
  }
  // Insert in order: replay and resume put events between ones already held.
  const evs = l.events;
  let i = evs.length;
  while (i > 0 && compareRec(evs[i - 1], rec) > 0) i--;
  // Two events at one position is an emitter fault: kept, and surfaced.
  // The lane is in order, so a position taken before is the one just
  // before where this event goes (seq-less events sort after it).
  if (!rec.seqless && i > 0 && !evs[i - 1].seqless && comparePos(evs[i - 1].key, rec.key) === 0) l.conflicts++;
  if (i === evs.length) evs.push(rec);
  else evs.splice(i, 0, rec);
  // An event that lands before others changes the story from there: the
  // next derivation starts over. One appended is folded onto the last.
  if (i < evs.length - 1) l.fold = null;
  l.derived = null;
  state.dirty.add(l.id);
  return true;
}

// takeDirty returns the sessions changed since the last call ('' stands for
// the sessionless agent events).
export function takeDirty(state) {
  const d = state.dirty;
  state.dirty = new Set();
  return d;
}

// positions is the resume token for every session held from one relay:
// from=[...].
export function positions(state, origin = '') {
  const out = [];
  for (const l of state.sessions.values()) {
    if (l.lastPos && l.origin === origin) out.push({ session: l.session, epoch: l.lastPos.epoch, seq: l.lastPos.seq });
  }
  return out;
}

// cause resolves an event's cause edge to the event it names, or null.
export function cause(state, ev, origin = '') {
  if (typeof ev.cause !== 'string') return null;
  const l = typeof ev.session === 'string' ? state.sessions.get(laneKey(ev.session, origin)) : null;
  const r = (l && l.byId.get(ev.cause)) || state.byId.get(ev.cause);
  return r ? r.ev : null;
}

// ordered returns a session's events in derivation order.
export function ordered(state, session) {
  const l = state.sessions.get(session);
  return l ? l.events.map((r) => r.ev) : [];
}

function data(ev) {
  return ev.data && typeof ev.data === 'object' ? ev.data : {};
}

function ms(t) {
  const v = Date.parse(t);
  return Number.isFinite(v) ? v : null;
}

// gated reports whether a field needing capture level `need` is absent from
// ev because of its capture level.
export function gated(ev, need = 'redacted') {
  return (CAPTURE_RANK[ev.capture] ?? 1) < CAPTURE_RANK[need];
}

// Background tasks (a shell run in the background, a detached agent) are
// vendor extensions: *.progress.task_started opens one (subject: the task
// id), a progress.status naming the task in data.task_id settles it, and
// *.progress.task_ended closes one that never reported (its session ended).
function isTaskStart(type) {
  return typeof type === 'string' && type.startsWith('x.') && type.endsWith('.progress.task_started');
}

function isTaskEnd(type) {
  return typeof type === 'string' && type.startsWith('x.') && type.endsWith('.progress.task_ended');
}

// taskId names the background task an event opens or settles, or ''.
export function taskId(ev) {
  const d = data(ev);
  if (isTaskStart(ev.type) || isTaskEnd(ev.type)) return (typeof d.task_id === 'string' && d.task_id) || ev.subject || '';
  if (ev.type === 'progress.status' && typeof d.task_id === 'string') return d.task_id;
  return '';
}

// taskOutcome reads how a settling event ended its task.
function taskOutcome(ev) {
  const d = data(ev);
  const words = [ev.subject, d.status, d.severity].filter((x) => typeof x === 'string').join(' ');
  if (/fail|error|killed|critical/.test(words)) return 'failed';
  if (isTaskEnd(ev.type) && d.status !== 'completed') return 'stopped';
  return 'finished';
}

function toolKey(ev) {
  const t = data(ev).tool;
  return (t && t.call_id) || ev.subject || ev.id;
}

function toolName(ev) {
  const t = data(ev).tool;
  return (t && t.name) || ev.subject || '?';
}

// session derives one session's story: runs (with tools, attention arcs,
// subagents), pending attention, counts. It folds the ordered lane once and
// caches the result until the lane changes; events appended since are
// folded onto it (a live lane costs its new events, not its length), and
// an event that lands earlier starts the fold over. The derived object is
// the same one, updated, while the fold continues.
export function session(state, id) {
  const kimi = state.companionOf.get(id);
  if (kimi !== undefined) return state.sessions.has(kimi) ? null : laneSession(state, id);
  const own = laneSession(state, id);
  const comps = companionsOf(state, id);
  if (comps.length === 0) return own;
  // Without a lane of its own, a Kimi session is what its companions say.
  const base = own || laneSession(state, comps[0]);
  const m = own
    ? { ...own, usage: own.usage ? { ...own.usage } : null, context: { ...own.context }, minutes: [...own.minutes] }
    : { ...base, id, usage: null, context: { tokens: null, limit: 0 }, minutes: [] };
  for (const c of comps) {
    const cs = laneSession(state, c);
    if (cs.usage) {
      m.usage = m.usage || { input: 0, output: 0 };
      m.usage.input += cs.usage.input;
      m.usage.output += cs.usage.output;
    }
    if (cs.context.tokens !== null) m.context = { ...cs.context };
    for (const [min, n] of cs.minutes) addMinute(m, min, n);
    m.agent = m.agent || cs.agent;
    m.model = m.model || cs.model;
  }
  return m;
}

// sessionCount is how many sessions a person sees: companions shown in
// their Kimi session's card are not counted.
export function sessionCount(state) {
  let n = state.sessions.size;
  for (const [c, k] of state.companionOf) if (state.sessions.has(c) && state.sessions.has(k)) n--;
  return n;
}

// companionsOf lists the lanes that are other views of lane key id.
function companionsOf(state, id) {
  const out = [];
  for (const [c, k] of state.companionOf) if (k === id && state.sessions.has(c)) out.push(c);
  return out.sort();
}

// kimiKey is the key a person knows lane key id as: the Kimi session a
// companion is a view of, else id itself.
export function kimiKey(state, id) {
  return state.companionOf.get(id) ?? id;
}

// laneSession derives one lane's own story (session() without companions).
function laneSession(state, id) {
  const l = state.sessions.get(id);
  if (!l) return null;
  if (l.derived) return l.derived;
  if (!l.fold) l.fold = newFold(id, l);
  const f = l.fold;
  for (; f.n < l.events.length; f.n++) foldEvent(state, l, f, l.events[f.n]);
  const s = f.s;
  s.events = l.events.length;
  s.conflicts = l.conflicts;
  s.agents = [...l.agents];
  s.openRuns = s.runs.filter((r) => r.state === 'open' && r.started);
  s.pending = [...s.attention.values()].filter((a) => a.state === 'pending');
  // A cause that was not held yet may be by the next derivation.
  if (f.unresolved) l.fold = null;
  l.derived = s;
  return s;
}

function newFold(id, l) {
  const s = {
    id, session: l.session, origin: l.origin, agent: '', agents: [...l.agents], title: '', cwd: '', project: '', model: '', started: null, ended: null, endReason: '', endedBy: null,
    runs: [], runById: new Map(), openRuns: [], tools: 0, failures: 0, subagents: 0, compactions: 0, tasks: new Map(), background: new Map(),
    attention: new Map(), pending: [], lastEvent: null, lastTime: null, unknown: 0, events: l.events.length, conflicts: l.conflicts,
    parent: null, errors: [], usage: null, context: { tokens: null, limit: 0 }, minutes: [],
  };
  return { s, n: 0, refused: new Set() /* command ids the emitter rejected */, unresolved: false };
}

function runOf(s, ev) {
  if (!ev.run) return null;
  let r = s.runById.get(ev.run);
  if (!r) {
    r = { id: ev.run, state: 'open', started: null, ended: null, duration: null, reason: '', items: [], tools: new Map(), cancelledBy: null, feedback: [] };
    s.runById.set(ev.run, r);
    s.runs.push(r);
  }
  return r;
}

// foldEvent takes one record of lane l, in derivation order, into fold f.
function foldEvent(state, l, f, rec) {
  const { s, refused } = f;
  const id = l.id;
  const ev = rec.ev;
  const d = data(ev);
  if (!rec.seqless && !s.agent && ev.agent) s.agent = ev.agent;
  s.lastEvent = ev;
  const t = ms(ev.time);
  if (t !== null && (s.lastTime === null || t > s.lastTime)) s.lastTime = t;
  if (typeof d['gen_ai.request.model'] === 'string' && d['gen_ai.request.model']) s.model = d['gen_ai.request.model'];
  countTokens(s, ev, d);
  const r = runOf(s, ev);
  if (r) r.items.push(ev);
  const tid = taskId(ev);
  if (tid) {
    let bt = s.background.get(tid);
    if (!bt) {
      bt = { id: tid, kind: '', state: 'running', run: '', started: null, ended: null, duration: null, startEv: null, endEv: null };
      s.background.set(tid, bt);
    }
    if (isTaskStart(ev.type)) {
      bt.startEv = ev;
      bt.started = ev.time;
      bt.run = ev.run || '';
      bt.kind = typeof d.kind === 'string' ? d.kind : '';
    } else if (!bt.endEv) {
      bt.endEv = ev;
      bt.ended = ev.time;
      bt.state = taskOutcome(ev);
      if (bt.state === 'failed') s.failures++;
    }
    if (bt.endEv) {
      const a = ms(bt.started), b = ms(bt.ended);
      bt.duration = data(bt.endEv).duration_ms ?? (a !== null && b !== null ? Math.max(0, b - a) : null);
    }
  }
  switch (ev.type) {
    case 'session.started':
      // A later session.started (a resumed session's new chapter) makes
      // the session live again.
      s.started = ev.time;
      s.ended = null;
      s.endReason = '';
      s.endedBy = null;
      if (typeof d.label === 'string' && d.label) s.title = d.label;
      if (typeof d.cwd === 'string' && d.cwd) s.cwd = d.cwd;
      if (projectOfData(d)) s.project = projectOfData(d);
      if (d.parent) s.parent = d.parent;
      break;
    case 'session.ended':
      s.ended = ev.time;
      s.endReason = d.reason || '';
      s.endedBy = ev;
      // The emitter closes its requests before the session ends (§7.2);
      // any it left open wait on nobody now.
      for (const a of s.attention.values()) {
        if (!a.outcome) {
          a.outcome = ev;
          a.state = 'session_ended';
        }
      }
      break;
    case 'session.compacted':
      s.compactions++;
      break;
    case 'run.started':
      if (r && !r.started) r.started = ev.time;
      break;
    case 'tool.requested':
    case 'tool.started':
    case 'tool.completed':
    case 'tool.failed':
    case 'tool.denied': {
      if (!r) break;
      const k = toolKey(ev);
      let tc = r.tools.get(k);
      if (!tc) {
        tc = { key: k, name: toolName(ev), state: 'requested', duration: null, args: null, result: null, error: null, started: ev.time };
        r.tools.set(k, tc);
        s.tools++;
      }
      if (d.args_digest) tc.args = d.args_digest;
      if (d.result_digest) tc.result = d.result_digest;
      if (ev.type === 'tool.completed') {
        tc.state = d.status === 'error' ? 'failed' : 'completed';
        tc.duration = d.duration_ms ?? null;
      } else if (ev.type === 'tool.failed') {
        tc.state = 'failed';
        tc.duration = d.duration_ms ?? null;
        tc.error = d.error || null;
        s.failures++;
      } else if (ev.type === 'tool.denied') {
        tc.state = 'denied';
      } else if (ev.type === 'tool.started') {
        tc.state = 'running';
      }
      break;
    }
    case 'delegation.subagent.started':
      s.subagents++;
      break;
    case 'error.raised':
      s.errors.push(ev);
      if (d.fatal) s.failures++;
      break;
    case FEEDBACK_TYPE:
      // A person's rating: on the run the envelope names (AEP-0009 §2).
      if (r) r.feedback.push(feedbackOf(ev, d));
      break;
    case 'attention.requested':
      if (s.attention.has(ev.id)) break;
      s.attention.set(ev.id, {
        id: ev.id, lane: id, session: l.session, origin: l.origin, run: ev.run || '', ev, kind: d.kind || '', prompt: d.prompt ?? null,
        options: Array.isArray(d.options) ? d.options : [], respondVia: Array.isArray(d.respond_via) ? d.respond_via : null,
        expiresAt: d.expires_at || null, onExpiry: ON_EXPIRY.includes(d[ON_EXPIRY_FIELD]) ? d[ON_EXPIRY_FIELD] : null,
        state: 'pending', answered: null, outcome: null, answer: null, time: ev.time, subject: ev.subject || '',
        rule: null, ruled: null, routed: [],
      });
      // Raised after the end (a late delivery): nobody is there to act on
      // an answer.
      if (s.endedBy) Object.assign(s.attention.get(ev.id), { state: 'session_ended', outcome: s.endedBy });
      break;
    case 'attention.answered': {
      const req = s.attention.get(ev.subject);
      if (req && !req.answered && !req.outcome) {
        req.answered = ev;
        req.answer = d.answer && typeof d.answer === 'object' && !Array.isArray(d.answer) ? d.answer : null;
        req.state = 'answered';
        // The emitter names the rule whose answer it applied.
        if (!req.rule && ruleOf(d.by)) req.rule = ruleOf(d.by);
      }
      break;
    }
    case 'control.attention.respond': {
      // A rule's answer (the relay stamped its sender rule:<id>; the
      // agent a command names itself proves nothing): the request is
      // answered from here on, though its emitter has yet to say so; it
      // never waits on a person. A person's command changes nothing until
      // the emitter answers.
      const req = s.attention.get(ev.subject);
      const rule = ruleOf(strOf(ev, BY_ATTR));
      if (rule && req && !refused.has(ev.id) && !req.rule && !req.answered && !req.outcome) {
        req.rule = rule;
        req.ruled = ev;
        req.state = 'answered';
      }
      break;
    }
    case 'control.rejected':
      // The emitter refused a rule's answer: the request waits on a
      // person again. Remembered, so the refusal holds whichever of the
      // two is derived first.
      refused.add(ev.cause);
      for (const req of s.attention.values()) {
        if (req.ruled && req.ruled.id === ev.cause && !req.answered) {
          req.rule = null;
          req.ruled = null;
          if (!req.outcome) req.state = 'pending';
        }
      }
      break;
    case 'attention.routed': {
      // A consumer forwarded the request to a person's surface (§7.3):
      // where, and when; ordered by time, then surface, whatever the
      // arrival order of these seq-less events.
      const req = s.attention.get(ev.subject);
      if (req) {
        const rt = { to: strOf(d, 'to'), via: strOf(d, 'via'), time: typeof ev.time === 'string' ? ev.time : '' };
        const key = (r) => [r.time, r.to, r.via];
        const before = (a, b) => {
          const [ka, kb] = [key(a), key(b)];
          for (let i = 0; i < 3; i++) if (ka[i] !== kb[i]) return ka[i] < kb[i];
          return false;
        };
        let i = req.routed.length;
        while (i > 0 && before(rt, req.routed[i - 1])) i--;
        req.routed.splice(i, 0, rt);
      }
      break;
    }
    case 'attention.resolved':
    case 'attention.timeout': {
      const req = s.attention.get(ev.subject);
      if (req && !req.outcome) {
        req.outcome = ev;
        req.state = ATTENTION_TERMINALS[ev.type];
      }
      break;
    }
    default:
      if (ev.type && ev.type.startsWith('progress.task.') && d.task && d.task.id) {
        s.tasks.set(d.task.id, { id: d.task.id, title: d.task.title || d.task.id, state: ev.type.slice('progress.task.'.length) });
      }
      if (ev.type in RUN_TERMINALS && r) {
        // One terminal per run (AEP-0002 §2 convention 5): the first holds.
        if (r.state !== 'open') break;
        r.state = RUN_TERMINALS[ev.type];
        r.ended = ev.time;
        r.duration = d.duration_ms ?? null;
        r.reason = d.reason || '';
        if (ev.type === 'run.failed') s.failures++;
        if (ev.type === 'run.cancelled') {
          const c = cause(state, ev, l.origin);
          r.cancelledBy = c ? c.type : null;
          if (!c && typeof ev.cause === 'string') f.unresolved = true;
        }
      } else if (!known(ev.type)) {
        s.unknown++;
      }
  }
}

// A person's rating of a run: the command it travels as, and the AEP-0009
// feedback the session's emitter records, naming the person the relay
// stamped (BY_FIELD) and the surface (DATA_SURFACE).
export const RATE_TYPE = 'x.kimi-code.control.rate';
export const FEEDBACK_TYPE = 'assessment.feedback.received';
const BY_FIELD = 'x-kimi-code-by';
// NOTE_MAX bounds a rating's note, in characters (mapping.MaxNoteRunes).
export const NOTE_MAX = 500;

function feedbackOf(ev, d) {
  return {
    event: ev.id, time: typeof ev.time === 'string' ? ev.time : '', by: strOf(d, BY_FIELD), surface: strOf(d, DATA_SURFACE),
    rating: typeof d.rating === 'number' && Number.isFinite(d.rating) ? d.rating : null,
    label: strOf(d, 'label'), comment: strOf(d, 'comment'), source: strOf(d, 'source'),
  };
}

// verdict is a feedback's verdict as the page names it: 'up', 'down', or ''
// for another label.
export function verdict(fb) {
  return fb.label === 'thumbs_up' ? 'up' : fb.label === 'thumbs_down' ? 'down' : '';
}

// ratingWords is a rating's verdict in words: a feedback's label ("thumbs
// down"), else its number, or a rate command's.
function ratingWords(d) {
  const l = strOf(d, 'label');
  if (l) return l.replaceAll('_', ' ');
  if (typeof d.rating !== 'number') return '(no rating)';
  if (d.rating === 1) return 'thumbs up';
  if (d.rating === -1) return 'thumbs down';
  return String(d.rating);
}

const KNOWN_PREFIXES = ['session.', 'run.', 'tool.', 'attention.', 'control.', 'agent.', 'delegation.', 'progress.',
  'state.', 'error.', 'resource.', 'assessment.', 'message.'];

function known(type) {
  return typeof type === 'string' && !type.startsWith('x.') && KNOWN_PREFIXES.some((p) => type.startsWith(p));
}

// answerable says how the page may offer an answer to a pending request:
// 'control' (buttons and a reply), or 'elsewhere' (respond_via excludes
// control: information only, answered in the agent's own UI).
export function answerable(req) {
  if (req.respondVia && !req.respondVia.includes('control')) return 'elsewhere';
  return 'control';
}

// FIELD_TYPES are the field types a form may ask with (AEP-0006
// field_spec.type).
const FIELD_TYPES = ['string', 'number', 'boolean', 'select'];

// formFields is a kind form request's fields (AEP-0006), each one the page
// can show: an id, a known type, a select's choices with ids; [] for any
// other request, or a form whose fields its capture withheld.
export function formFields(req) {
  if (req.kind !== 'form') return [];
  const fields = data(req.ev).fields;
  if (!Array.isArray(fields)) return [];
  const out = [];
  const seen = new Set();
  for (const f of fields) {
    if (!f || typeof f !== 'object' || typeof f.id !== 'string' || f.id === '' || seen.has(f.id) || !FIELD_TYPES.includes(f.type)) continue;
    const choices = [];
    if (f.type === 'select') {
      const ids = new Set();
      for (const c of Array.isArray(f.choices) ? f.choices : []) {
        if (!c || typeof c.id !== 'string' || c.id === '' || ids.has(c.id)) continue;
        ids.add(c.id);
        choices.push({ id: c.id, label: typeof c.label === 'string' && c.label !== '' ? c.label : c.id });
      }
      // A select with nothing to choose and no free text cannot be answered.
      if (!choices.length && f.other !== true) continue;
    }
    seen.add(f.id);
    out.push({
      id: f.id, type: f.type, label: typeof f.label === 'string' && f.label !== '' ? f.label : f.id, choices,
      multi: f.type === 'select' && f.multi === true, other: f.type === 'select' && f.other === true, required: f.required === true,
      min: typeof f.min === 'number' ? f.min : null, max: typeof f.max === 'number' ? f.max : null,
    });
  }
  return out;
}

// formAnswer builds a form's answer from what a person picked, field id ->
// { choices: [ids], other: text } (a select), { value } (a string, number
// or boolean): { values, authored } (authored: a value is free text, so
// the command carries capture redacted, AEP-0006's values rule), or
// { error, field } naming what is missing or wrong. Unanswered fields that
// are not required are left out.
export function formAnswer(fields, picks) {
  const values = {};
  let authored = false;
  for (const f of fields) {
    const p = (picks && picks.get ? picks.get(f.id) : picks && picks[f.id]) || {};
    let v;
    if (f.type === 'select') {
      const ids = f.choices.map((c) => c.id);
      const chosen = (Array.isArray(p.choices) ? p.choices : []).filter((id) => ids.includes(id));
      const other = f.other && typeof p.other === 'string' ? p.other.trim() : '';
      if (!f.multi && chosen.length > 1) return { error: `choose one answer to “${f.label}”`, field: f.id };
      if (f.multi) {
        v = other ? [...chosen, other] : chosen;
        if (!v.length) v = undefined;
      } else {
        v = other || chosen[0];
      }
      if (other) authored = true;
    } else if (f.type === 'string') {
      const s = typeof p.value === 'string' ? p.value.trim() : '';
      if (s) {
        v = s;
        authored = true;
      }
    } else if (f.type === 'number') {
      const raw = typeof p.value === 'string' ? p.value.trim() : p.value;
      if (raw !== '' && raw !== undefined && raw !== null) {
        const n = Number(raw);
        if (!Number.isFinite(n)) return { error: `“${f.label}” takes a number`, field: f.id };
        if ((f.min !== null && n < f.min) || (f.max !== null && n > f.max)) {
          return { error: `“${f.label}” takes a number${f.min !== null ? ` from ${f.min}` : ''}${f.max !== null ? ` up to ${f.max}` : ''}`, field: f.id };
        }
        v = n;
      }
    } else if (typeof p.value === 'boolean') {
      v = p.value;
    }
    if (v === undefined) {
      if (f.required) return { error: `answer “${f.label}” first`, field: f.id };
      continue;
    }
    values[f.id] = v;
  }
  if (!Object.keys(values).length) return { error: 'choose an answer first (or dismiss the question)', field: fields.length ? fields[0].id : '' };
  return { values, authored };
}

// inert is s fit to show as it is: every control character (C0 but tab,
// newlines too unless keepNewline; DEL; C1), every bidi embedding,
// override, isolate and mark, and every lone surrogate shown escaped, as
// relay/consumer's Line and Text show them on a terminal. The page puts
// text in the DOM as text, never markup; this keeps text from an agent
// (a question, a choice) from reordering or hiding what it seems to say.
export function inert(s, keepNewline = false) {
  if (typeof s !== 'string') return '';
  let out = '';
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    const surrogate = c >= 0xd800 && c <= 0xdfff;
    if (surrogate && c <= 0xdbff && i + 1 < s.length) {
      const d = s.charCodeAt(i + 1);
      if (d >= 0xdc00 && d <= 0xdfff) {
        out += s[i] + s[i + 1];
        i++;
        continue;
      }
    }
    const unsafe = surrogate || (c < 0x20 && c !== 0x09 && !(keepNewline && c === 0x0a)) || c === 0x7f || (c >= 0x80 && c <= 0x9f) ||
      (c >= 0x202a && c <= 0x202e) || (c >= 0x2066 && c <= 0x2069) || c === 0x200e || c === 0x200f || c === 0x061c;
    if (!unsafe) out += s[i];
    else if (c < 0x20) out += `\\x${c.toString(16).padStart(2, '0')}`;
    else out += `\\u${c.toString(16).padStart(4, '0')}`;
  }
  return out;
}

// Token figures in event data: usage (AEP-0002 §5.2, OpenTelemetry GenAI's
// names) is each event's own count, summed per session; how full the
// context is comes from the latest event that says it, in the vendor
// fields (AEP has none), or session.compacted's size after compacting.
export const CONTEXT_TOKENS_FIELD = 'x-kimi-code-context-tokens';
export const CONTEXT_LIMIT_FIELD = 'x-kimi-code-context-limit';
const USAGE_FIELDS = [['gen_ai.usage.input_tokens', 'input'], ['gen_ai.usage.output_tokens', 'output']];

// tokenCount reads a token figure: a non-negative integer a number holds
// exactly, else null.
function tokenCount(v) {
  return Number.isSafeInteger(v) && v >= 0 ? v : null;
}

// countTokens takes one event's token figures into the session.
function countTokens(s, ev, d) {
  let used = null;
  for (const [k, f] of USAGE_FIELDS) {
    const n = tokenCount(d[k]);
    if (n === null) continue;
    if (!s.usage) s.usage = { input: 0, output: 0 };
    s.usage[f] += n;
    used = Math.min((used ?? 0) + n, Number.MAX_SAFE_INTEGER);
  }
  const t = used === null ? null : ms(ev.time);
  if (t !== null) addMinute(s, Math.floor(t / 60000), used);
  let n = tokenCount(d[CONTEXT_TOKENS_FIELD]);
  if (n === null && ev.type === 'session.compacted') n = tokenCount(d.estimated_token_count);
  if (n !== null) s.context.tokens = n;
  const l = tokenCount(d[CONTEXT_LIMIT_FIELD]);
  if (l) s.context.limit = l;
}

// The burn is the tokens a session used in the hour up to its latest
// usage: s.minutes holds [minute, tokens] of the events' own clock,
// ascending, the latest minute and the BURN_WINDOW - 1 before it, whatever
// order the events came in (relay/consumer's Meter keeps the same).
const BURN_WINDOW = 60;

function addMinute(s, min, n) {
  const mins = s.minutes;
  if (mins.length && min <= mins[mins.length - 1][0] - BURN_WINDOW) return;
  let i = mins.length;
  while (i > 0 && mins[i - 1][0] > min) i--;
  if (i > 0 && mins[i - 1][0] === min) {
    mins[i - 1] = [min, Math.min(mins[i - 1][1] + n, Number.MAX_SAFE_INTEGER)];
    return;
  }
  mins.splice(i, 0, [min, n]);
  const end = mins[mins.length - 1][0];
  while (mins.length && mins[0][0] <= end - BURN_WINDOW) mins.shift();
}

// burnPerHour is the tokens a session used in the hour up to its latest
// usage, null when no usage had a time.
export function burnPerHour(s) {
  if (!s.minutes.length) return null;
  return s.minutes.reduce((a, [, n]) => Math.min(a + n, Number.MAX_SAFE_INTEGER), 0);
}

// nearLimit reports whether a session's context is at least `fill` full
// (a fraction): the relay's usage threshold marks it on the page.
export function nearLimit(s, fill) {
  const f = contextFill(s);
  return f !== null && fill > 0 && f >= fill;
}

// contextFill is the fraction of a session's context in use, null unless
// both its size and its limit are known.
export function contextFill(s) {
  return s.context.tokens !== null && s.context.limit > 0 ? s.context.tokens / s.context.limit : null;
}

// tokenWords says a session's token figures in a few words: tokens used
// and how full its context is ("12.3k tokens · context 41%"), each only
// when known; '' when neither is. relay/consumer's TokenWords says the
// same, both held to relay/consumer/testdata/tokenwords.json.
export function tokenWords(s) {
  const parts = [];
  if (s.usage) parts.push(`${compactCount(s.usage.input + s.usage.output)} tokens`);
  const fill = contextFill(s);
  if (fill !== null) parts.push(`context ${Math.round(fill * 100)}%`);
  else if (s.context.tokens !== null) parts.push(`context ${compactCount(s.context.tokens)} tokens`);
  return parts.join(' · ');
}

// compactCount writes a count in a few characters (950, 12.3k, 1.2M),
// rounding half up in integers as relay/consumer's CompactCount does.
export function compactCount(n) {
  const tenths = (unit) => {
    const t = Math.floor((n + unit / 20) / (unit / 10));
    return `${Math.floor(t / 10)}.${t % 10}`;
  };
  if (n < 1000) return String(n);
  if (n < 999950) return `${tenths(1000)}k`;
  return `${tenths(1000000)}M`;
}

// ON_EXPIRY_FIELD is the vendor field an emitter sets on a request to say
// what it applies at expires_at when nobody answers: one of ON_EXPIRY
// (allow: the call runs anyway; deny).
export const ON_EXPIRY_FIELD = 'x-kimi-code-on-expiry';
const ON_EXPIRY = ['allow', 'deny'];

// countdown is the time a pending request has left at now with what happens
// then: 'runs anyway in 38s', 'denied in 38s', '38s left' when the request
// does not say, null without a deadline.
export function countdown(req, now) {
  const e = req.expiresAt ? ms(req.expiresAt) : null;
  if (e === null) return null;
  const left = duration(Math.max(0, e - now));
  if (req.onExpiry === 'allow') return `runs anyway in ${left}`;
  if (req.onExpiry === 'deny') return `denied in ${left}`;
  return `${left} left`;
}

// duration is a span in the terminal tools' units: whole seconds under a
// minute, then minutes and seconds, then hours and minutes.
function duration(d) {
  const s = Math.round(d / 1000);
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m${String(s % 60).padStart(2, '0')}s`;
  const m = Math.round(s / 60);
  return `${Math.floor(m / 60)}h${String(m % 60).padStart(2, '0')}m`;
}

// expired reports whether a pending request's own deadline has passed.
export function expired(req, now) {
  const e = req.expiresAt ? ms(req.expiresAt) : null;
  return e !== null && now >= e;
}

// Groups, in the order the fleet view shows them.
export const GROUPS = ['needs-you', 'working', 'idle', 'quiet', 'ended'];

// group places a derived session: ended, needs you (a pending request),
// working (an open run), quiet (nothing heard for longer than quietMs), idle.
export function group(s, now, quietMs) {
  if (s.ended) return 'ended';
  if (s.pending.some((a) => !expired(a, now))) return 'needs-you';
  if (s.lastTime !== null && now - s.lastTime > quietMs) return 'quiet';
  if (s.openRuns.length > 0) return 'working';
  return 'idle';
}

// inbox lists every pending request across the fleet, oldest first.
export function inbox(state, now) {
  const out = [];
  for (const id of state.sessions.keys()) {
    const s = session(state, id);
    if (!s) continue;
    for (const a of s.pending) if (!expired(a, now)) out.push(a);
  }
  out.sort((a, b) => (ms(a.time) ?? 0) - (ms(b.time) ?? 0) || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
  return out;
}

// summary is a digest of everything derived, for tests: equal summaries mean
// an equal story.
export function summary(state) {
  const sessions = {};
  const labs = labels([...state.sessions.keys()].map((id) => session(state, id)).filter(Boolean));
  for (const id of [...state.sessions.keys()].sort()) {
    const s = session(state, id);
    if (!s) continue;
    sessions[id] = {
      agent: s.agent, ended: s.ended, runs: s.runs.map((r) => [r.id, r.state, [...r.tools.values()].map((t) => t.state)]),
      attention: [...s.attention.values()].map((a) => [a.id, a.state, a.answer]), tools: s.tools, failures: s.failures,
      subagents: s.subagents, compactions: s.compactions, unknown: s.unknown, events: s.events,
      background: [...s.background.values()].map((t) => [t.id, t.state, t.duration]),
    };
  }
  const agents = {};
  for (const [a, list] of state.agents) agents[a] = list.length;
  return { version: state.version, sessions, agents };
}

const SESSION_PREFIX = 'session_';
const SHORT_ID = 6;

// projectOf is the last element of a working directory, POSIX or Windows.
export function projectOf(cwd) {
  const c = cwd.replace(/[/\\]+$/, '');
  return c.slice(Math.max(c.lastIndexOf('/'), c.lastIndexOf('\\')) + 1);
}

// PROJECT is the source's field naming a session's project at metadata
// (relay/consumer's ProjectOf, mapping.DataProject).
const PROJECT = 'x-kimi-code-project';

// projectOfData is the project a session.started's data names: the source's
// project field, else the last element of its cwd.
export function projectOfData(d) {
  if (typeof d[PROJECT] === 'string' && d[PROJECT]) return d[PROJECT];
  return typeof d.cwd === 'string' ? projectOf(d.cwd) : '';
}

// typeWords is an event type a person can read, as relay/consumer's
// typeWords says it: the vendor prefix and category gone, underscores and
// dots as blanks ("x.kimi-code.run.turn_started" is "turn started").
export function typeWords(type) {
  let segs = String(type).split('.');
  if (segs.length >= 4 && segs[0] === 'x') segs = segs.slice(3);
  else if (segs.length === 3 && segs[0] === 'x') segs = segs.slice(2);
  else if (segs.length >= 2) segs = segs.slice(1);
  return segs.join(' ').replaceAll('_', ' ');
}

// bareId is a session id without Kimi's session_ prefix.
export function bareId(id) {
  return id.startsWith(SESSION_PREFIX) && id.length > SESSION_PREFIX.length ? id.slice(SESSION_PREFIX.length) : id;
}

const oneLine = (v) => (typeof v === 'string' ? v.split(/\s+/).filter(Boolean).join(' ') : '');

// compareRunes orders two strings split into code points.
function compareRunes(a, b) {
  for (let i = 0; i < a.length && i < b.length; i++) {
    if (a[i] !== b[i]) return a[i].codePointAt(0) - b[i].codePointAt(0);
  }
  return a.length - b.length;
}

// labels names sessions shown together the way relay/consumer's Labels
// does (both held to relay/consumer/testdata/labels.json): project, Kimi's
// title, and the shortest prefix (six characters or more) of the bare id no
// other session's id shares. Each item has session, project, title;
// the result maps the item's id (its lane key; else its session) to
// { project, title, id, text }.
export function labels(list) {
  const ids = [...new Set(list.map((s) => s.session))].sort();
  const bare = ids.map((id) => [...bareId(id)]);
  // The longest prefix an id shares with any other is the one it shares
  // with a neighbour in code-point order: a fleet's labels cost n log n,
  // not n squared.
  const order = bare.map((_, i) => i).sort((i, j) => compareRunes(bare[i], bare[j]));
  const common = (a, b) => {
    let c = 0;
    while (c < a.length && c < b.length && a[c] === b[c]) c++;
    return c;
  };
  const short = new Map();
  order.forEach((i, k) => {
    const b = bare[i];
    let n = Math.min(SHORT_ID, b.length);
    for (const j of [order[k - 1], order[k + 1]]) {
      if (j !== undefined) n = Math.max(n, Math.min(common(b, bare[j]) + 1, b.length));
    }
    short.set(ids[i], b.slice(0, n).join(''));
  });
  const out = new Map();
  for (const s of list) {
    const l = { project: oneLine(s.project), title: oneLine(s.title), id: short.get(s.session) };
    l.text = [l.project, l.title, l.id].filter(Boolean).join(' · ');
    out.set(s.id ?? s.session, l);
  }
  return out;
}

// projection is the fold as JSON, the form relay/consumer's Go fold
// (Projection) produces too: both are held to the same golden files. Absent
// facts are left out rather than empty; times are the events' own strings;
// runs are listed by id; a cause resolves within its session.
export function projection(state) {
  const text = (v) => (typeof v === 'string' && v !== '' ? v : undefined);
  const sessions = {};
  const labs = labels([...state.sessions.keys()].map((id) => session(state, id)).filter(Boolean));
  for (const id of [...state.sessions.keys()].sort()) {
    const s = session(state, id);
    if (!s) continue;
    const l = state.sessions.get(id);
    const mark = (ev, extra) => {
      const c = typeof ev.cause === 'string' ? l.byId.get(ev.cause) : undefined;
      return {
        event: ev.id, type: ev.type, time: text(ev.time), ...extra,
        cause: text(ev.cause), cause_type: c ? text(c.ev.type) : undefined, cause_agent: c ? text(c.ev.agent) : undefined,
      };
    };
    const requests = [...s.attention.values()].map((a) => {
      const d = data(a.ev);
      const options = a.options.filter((o) => o && typeof o.id === 'string' && o.id !== '').map((o) => ({ id: o.id, label: text(o.label) }));
      const ans = a.answered && data(a.answered);
      return {
        id: a.id, run: text(a.run), kind: text(d.kind), prompt: text(d.prompt), options: options.length ? options : undefined,
        respond_via: a.respondVia ? a.respondVia.filter((v) => typeof v === 'string') : undefined, expires_at: text(d.expires_at),
        on_expiry: a.onExpiry || undefined, requested: text(a.time), state: a.state, answer: a.answer && Object.keys(a.answer).length ? a.answer : undefined,
        rule: text(a.rule),
        answered: a.answered ? mark(a.answered, { by: text(ans.by), via: text(ans.via) }) : undefined,
        outcome: a.outcome
          ? mark(a.outcome, { resolution: a.outcome.type in ATTENTION_TERMINALS ? text(data(a.outcome).resolution) : undefined })
          : undefined,
        routed: a.routed.length ? a.routed.map((r) => ({ to: text(r.to), via: text(r.via), time: text(r.time) })) : undefined,
      };
    });
    const open = requests.filter((r) => !r.outcome).map((r) => r.id);
    const runs = [...s.runs].sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0)).map((r) => ({
      id: r.id, state: r.state, started: text(r.started), ended: text(r.ended),
      duration_ms: typeof r.duration === 'number' ? r.duration : undefined, reason: text(r.reason),
      feedback: r.feedback.length
        ? r.feedback.map((f) => ({
          event: f.event, time: text(f.time), by: text(f.by), surface: text(f.surface), rating: f.rating ?? undefined,
          label: text(f.label), comment: text(f.comment), source: text(f.source),
        }))
        : undefined,
    }));
    sessions[kimiKey(state, id)] = {
      agent: text(s.agent), title: text(s.title), cwd: text(s.cwd), project: text(s.project), label: labs.get(id).text, model: text(s.model), started: text(s.started),
      ended: text(s.ended), end_reason: text(s.endReason), runs: runs.length ? runs : undefined,
      requests: requests.length ? requests : undefined, open: open.length ? open : undefined,
      usage: s.usage ? { input_tokens: s.usage.input, output_tokens: s.usage.output, burn_per_hour: burnPerHour(s) || undefined } : undefined,
      context: s.context.tokens !== null
        ? { tokens: s.context.tokens, limit: s.context.limit || undefined, fill: contextFill(s) ?? undefined }
        : undefined,
    };
  }
  return JSON.parse(JSON.stringify({ sessions }));
}

// --- plain words ---------------------------------------------------------------
// phraser says what events mean in plain words, one phrase per event, the
// way relay/consumer's Phraser does for the terminal: both are held to the
// golden phrases under relay/consumer/testdata/phrases, so the page and
// `tail` say the same thing. It remembers who answered each request so a
// refusal names them.

const RULE_PREFIX = 'rule:';
const CLI_AGENT = 'aep-kimi-cli';
export const PAGE_AGENT = 'aep-kimi-page';
const ARGS_LIMIT = 240;
const TIMED_OUT = '\u0000';

// who names the sender of an answer or a command: the page and the
// terminal are "you", a rule is that rule, anyone else their own name.
export function who(agent) {
  if (agent === PAGE_AGENT) return 'you from the page';
  if (agent === CLI_AGENT) return 'you from the terminal';
  if (typeof agent === 'string' && agent.startsWith(RULE_PREFIX)) return `rule ${agent.slice(RULE_PREFIX.length)}`;
  return typeof agent === 'string' ? agent : '';
}

// --- who settled a request ------------------------------------------------------
// settled is what became of a request and who decided it, the way
// relay/consumer's audit (Fold.Audit) says it: both are held to the audit's
// golden files (relay/consumer/testdata/audit/NAME.audit.json).

// BY_ATTR is the extension attribute a relay stamps on every command it
// routes: the name of the person whose credential sent it.
export const BY_ATTR = 'aepkimiby';
// BY_TOKEN_ATTR is the one it stamps beside it: the ID of that person's
// token.
export const BY_TOKEN_ATTR = 'aepkimibytoken';
const SURFACE_OF_AGENT = { [PAGE_AGENT]: 'page', [CLI_AGENT]: 'cli', 'aep-kimi-push': 'push', 'aep-kimi-link': 'link' };
const OPTION_OUTCOMES = {
  allow: 'allowed', approve: 'allowed', approved: 'allowed', allow_session: 'allowed for the session',
  deny: 'denied', reject: 'denied', rejected: 'denied', cancel: 'cancelled', dismiss: 'dismissed',
};
const optionOutcome = (o) => (!o ? 'answered' : OPTION_OUTCOMES[o.toLowerCase()] || `answered ${o}`);

// settler is relay/consumer's Answerer: by (the stamped person, else a
// sender that names itself; a rule's id) and the surface an answer came
// through. Only the relay's stamp names a rule: an agent is whatever its
// sender wrote.
export function settler(agent, stamped) {
  const rule = ruleOf(stamped);
  if (rule) return { by: rule, surface: 'rule' };
  if (Object.hasOwn(SURFACE_OF_AGENT, agent)) return { by: stamped, surface: SURFACE_OF_AGENT[agent] };
  return { by: firstOf(stamped, typeof agent === 'string' ? agent : ''), surface: '' };
}

// settled is req's outcome, or null while it waits on a person: time (of
// the outcome), outcome, option, by (a person, a rule's id, 'nobody', or ''
// when the record does not say), token (the ID of the person's token, as
// the relay stamped it, or ''), surface and latencyMs.
export function settled(state, req) {
  const l = state.sessions.get(req.lane);
  const event = (id) => (l && typeof id === 'string' ? l.byId.get(id)?.ev : undefined);
  let end;
  const out = { outcome: '', option: '', by: '', token: '', surface: '' };
  if (req.answered) {
    end = req.answered;
    const d = data(req.answered);
    out.option = strOf(req.answer, 'option');
    let agent = strOf(d, 'by');
    let stamped = '';
    const cmd = event(req.answered.cause);
    if (cmd && cmd.type === 'control.attention.respond') {
      agent = typeof cmd.agent === 'string' ? cmd.agent : '';
      stamped = strOf(cmd, BY_ATTR);
    } else if (ruleOf(agent)) {
      // The command is not at hand: the emitter's by is the stamp the
      // relay put on it.
      stamped = agent;
    }
    if (strOf(d, 'via') === 'oob' && agent === '') {
      out.surface = 'kimi';
    } else {
      Object.assign(out, settler(agent, stamped));
      if (cmd && cmd.type === 'control.attention.respond' && out.surface !== 'rule') out.token = strOf(cmd, BY_TOKEN_ATTR);
      // The command is not at hand (a session log): the answer names its
      // surface itself.
      if (!out.surface) out.surface = strOf(d, DATA_SURFACE);
    }
    out.outcome = optionOutcome(out.option);
  } else if (req.rule) {
    end = req.ruled;
    const ans = data(req.ruled).answer;
    out.option = strOf(ans && typeof ans === 'object' ? ans : {}, 'option');
    Object.assign(out, { by: req.rule, surface: 'rule', outcome: optionOutcome(out.option) });
  } else if (req.outcome) {
    end = req.outcome;
    out.by = 'nobody';
    if (req.state === 'timeout') {
      out.surface = 'timeout';
      const applied = data(req.outcome)[ON_EXPIRY_FIELD];
      out.outcome = applied === 'allow' ? 'proceeded' : applied === 'deny' ? 'denied' : 'expired';
    } else if (req.state === 'resolved') {
      out.outcome = firstOf(strOf(data(req.outcome), 'resolution'), 'dismissed');
    } else {
      out.outcome = 'session ended';
    }
  } else {
    return null;
  }
  out.time = typeof end.time === 'string' ? end.time : '';
  out.latencyMs = 0;
  const od = req.outcome ? data(req.outcome) : {};
  const measured = ['latency_ms', 'after_ms'].map((k) => millisOf(od, k)).find((v) => v !== null);
  if (measured !== undefined) {
    out.latencyMs = measured;
  } else {
    const at = Date.parse(out.time);
    const asked = Date.parse(req.time);
    if (Number.isFinite(at) && Number.isFinite(asked)) out.latencyMs = Math.max(at - asked, 0);
  }
  return out;
}

// The surfaces in words.
const SURFACE_WORDS = { page: 'from the page', cli: 'from the terminal', push: 'from a phone', link: 'through an answer link' };

// settledWords says a settled outcome in a line: "allowed by alice from
// the page", "denied by rule r3", "proceeded: nobody answered"
// (relay/consumer's AuditRow.Words, which notifications say).
export function settledWords(o) {
  switch (o.surface) {
    case 'rule':
      return `${o.outcome} by rule ${o.by}`;
    case 'timeout':
      return `${o.outcome}: nobody answered`;
    case 'kimi':
      return `${o.outcome} in Kimi`;
    default:
  }
  if (o.by === 'nobody') return o.outcome === 'session ended' ? 'closed: the session ended first' : `${o.outcome}: nobody answered`;
  if (o.by && o.surface) return `${o.outcome} by ${o.by} ${SURFACE_WORDS[o.surface] || `(${o.surface})`}`;
  if (o.by) return `${o.outcome} by ${o.by}`;
  return o.surface ? `${o.outcome} ${SURFACE_WORDS[o.surface]}` : o.outcome;
}

// DATA_SURFACE is the vendor field an answer names its surface in.
const DATA_SURFACE = 'x-kimi-code-surface';

// answerer names who answered from an answer's data: the person and the
// surface they answered through ("alice (page)"), else who its by.
export function answerer(d) {
  const s = strOf(d, DATA_SURFACE);
  if (s && strOf(d, 'by')) return `${d.by} (${s})`;
  return who(d.by);
}

// sender names who sent a command: the person the relay stamped on it
// (aepkimiby) and the surface its agent names, a rule, or, unstamped, who
// its agent.
export function sender(ev) {
  const stamp = strOf(ev, BY_ATTR);
  if (!stamp) return who(ev.agent);
  if (stamp.startsWith(RULE_PREFIX)) return who(stamp);
  const agent = typeof ev.agent === 'string' ? ev.agent : '';
  const s = Object.hasOwn(SURFACE_OF_AGENT, agent) ? SURFACE_OF_AGENT[agent] : agent;
  return s ? `${stamp} (${s})` : who(stamp);
}

// humanDuration renders milliseconds the way relay/consumer's HumanDuration
// does: 350ms, 4.2s, 49s, 3m05s, 2h10m.
export function humanDuration(msv) {
  let d = msv;
  if (d >= 10000) d = Math.round(d / 1000) * 1000;
  if (d < 1000) return `${Math.trunc(d)}ms`;
  if (d < 10000) return `${(d / 1000).toFixed(1)}s`;
  const s = Math.round(d / 1000);
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m${String(s % 60).padStart(2, '0')}s`;
  const m = Math.round(s / 60);
  return `${Math.floor(m / 60)}h${String(m % 60).padStart(2, '0')}m`;
}

function canonical(v) {
  if (Array.isArray(v)) return `[${v.map(canonical).join(',')}]`;
  if (v && typeof v === 'object') return `{${Object.keys(v).sort().map((k) => `${JSON.stringify(k)}:${canonical(v[k])}`).join(',')}}`;
  return JSON.stringify(v);
}

const words = (s) => s.split(/\s+/).filter(Boolean).join(' ');
const strOf = (m, k) => (m && typeof m[k] === 'string' ? m[k] : '');
const firstOf = (a, b) => (a !== '' ? a : b);
const quotedText = (s) => (s ? `“${s}”` : '');
const paren = (s) => (s ? `(${s})` : '');
const plural = (n, unit) => (n === '1' ? `${n} ${unit}` : `${n} ${unit}s`);
const millisOf = (m, k) => (Number.isInteger(m[k]) && m[k] >= 0 && m[k] <= 2 ** 53 ? m[k] : null);

// argsSummary is mapping.ArgsSummary: the argument a person recognises a
// call by, one line, at most 240 characters.
export function argsSummary(v) {
  if (!v || typeof v !== 'object' || Array.isArray(v) || Object.keys(v).length === 0) return '';
  let s = '';
  for (const k of ['command', 'file_path', 'path', 'url', 'pattern', 'query', 'description', 'prompt']) {
    if (typeof v[k] === 'string' && v[k] !== '') {
      s = v[k];
      break;
    }
  }
  if (s === '') s = canonical(v);
  s = s.split(/[\r\n]+/).map(words).filter(Boolean).join(' ⏎ ');
  const r = [...s];
  return r.length > ARGS_LIMIT ? r.slice(0, ARGS_LIMIT).join('') + '…' : s;
}

function toolOf(ev, d) {
  const n = d.tool && typeof d.tool === 'object' ? strOf(d.tool, 'name') : '';
  return n || ev.subject || 'tool';
}

function errorWords(d, fallback) {
  const e = d.error && typeof d.error === 'object' ? d.error : {};
  const typ = strOf(e, 'type');
  const msg = firstOf(strOf(e, 'message'), strOf(d, 'message'));
  if (typ && msg) return `${typ}: ${msg}`;
  if (typ || msg) return typ + msg;
  return fallback;
}

function answerWords(d) {
  const a = d.answer && typeof d.answer === 'object' ? d.answer : {};
  const parts = [];
  if (strOf(a, 'option')) parts.push(a.option);
  if (strOf(a, 'text')) parts.push(quotedText(a.text));
  if (a.values && typeof a.values === 'object' && !Array.isArray(a.values)) parts.push(plural(String(Object.keys(a.values).length), 'value'));
  return parts.join(' ');
}

function resultWords(d) {
  for (const k of ['result', 'result_redacted']) {
    if (typeof d[k] === 'string') return `→ ${d[k]}`;
    if (d[k] && typeof d[k] === 'object' && !Array.isArray(d[k])) return `→ ${canonical(d[k])}`;
  }
  return '';
}

// WEB_TYPE_PREFIX begins the kimi web bridge's own event types.
const WEB_TYPE_PREFIX = 'x.kimi-code.web.';

// TOKEN_FIGURES are said in words (usedWords, tokenWords), never as raw fields.
const TOKEN_FIGURES = new Set([...USAGE_FIELDS.map(([k]) => k), CONTEXT_TOKENS_FIELD, CONTEXT_LIMIT_FIELD]);

// usedWords is the tokens an event's own work used ('110 tokens'), or ''.
function usedWords(d) {
  let n = null;
  for (const [k] of USAGE_FIELDS) {
    const c = tokenCount(d[k]);
    if (c !== null) n = (n ?? 0) + c;
  }
  return n === null ? '' : `${compactCount(n)} tokens`;
}

function scalarWords(d) {
  const parts = [];
  for (const k of Object.keys(d).sort()) {
    if (k.endsWith('_digest') || TOKEN_FIGURES.has(k)) continue;
    const x = d[k];
    let key = k;
    let v;
    if (typeof x === 'string') v = x;
    else if (typeof x === 'boolean') v = String(x);
    else if (typeof x === 'number') {
      v = String(x);
      if (k.endsWith('_ms') && millisOf(d, k) !== null) {
        key = k.slice(0, -3);
        v = humanDuration(x);
      }
    } else continue;
    parts.push(`${key.replaceAll('_', ' ')} ${v}`);
  }
  return parts.join(' · ');
}

function lifecycleWords(ev, add) {
  const src = typeof ev.source === 'string' ? ev.source : '';
  const at = src.indexOf('/session/');
  if (at >= 0 && ev.type === 'session.started') {
    const m = /\/chapter\/(\d+)$/.exec(src.slice(at));
    if (m && Number(m[1]) > 1) add(`chapter ${Number(m[1])}`);
  }
  if (ev.type === 'session.ended' && typeof ev.kimiobserved === 'string') {
    add(ev.kimiobserved === 'process' ? 'Kimi exited without SessionEnd'
      : ev.kimiobserved === 'silence' ? 'silent past the idle limit' : `observed: ${ev.kimiobserved}`);
  }
}

function timeoutWords(d) {
  let s = 'nobody answered';
  const after = millisOf(d, 'after_ms');
  if (after !== null) s += ` in ${humanDuration(after)}`;
  const on = d['x-kimi-code-on-expiry'];
  if (on === 'deny') return `denied: ${s}`;
  if (on === 'allow') return d.reason === 'hook-ended' ? `proceeded: Kimi stopped waiting, ${s}` : `proceeded: ${s}`;
  return `expired: ${s}`;
}

// routeWords names where an attention.routed sent a request: a device by
// its person and name ("alice's Pixel 8" for "push:alice's Pixel 8"),
// anything else as its router named it (relay/consumer's RouteWords).
export function routeWords(to) {
  if (typeof to === 'string' && to.startsWith('push:') && to.length > 5) return to.slice(5);
  return firstOf(to, 'someone');
}

// sentWords is where req was last sent and how long before now ("sent to
// alice's Pixel 8 3s ago"), '' when it was not (Request.SentWords).
export function sentWords(req, now) {
  if (!req.routed || !req.routed.length) return '';
  const last = req.routed[req.routed.length - 1];
  const at = ms(last.time);
  const ago = at === null ? '' : ` ${humanDuration(Math.round(Math.max(now - at, 0) / 1000) * 1000)} ago`;
  return `sent to ${routeWords(last.to)}${ago}`;
}

export function phraser() {
  const answeredBy = new Map(); // session -> (attention.answered id -> who answered, in words)
  const remember = (ev, by) => {
    if (!answeredBy.has(ev.session)) answeredBy.set(ev.session, new Map());
    answeredBy.get(ev.session).set(ev.id, by);
  };
  const deniedBy = (ev, d) => {
    if (strOf(d, 'rule')) return ` by rule ${d.rule}`;
    if (d.by === 'runtime') return ' in Kimi';
    if (d.by === 'policy') {
      const by = answeredBy.get(ev.session)?.get(ev.cause) || '';
      if (by === TIMED_OUT) return ': nobody answered';
      return by ? ` by ${by}` : ' by an answer';
    }
    return '';
  };
  return (ev) => {
    const d = ev.data && typeof ev.data === 'object' && !Array.isArray(ev.data) ? ev.data : {};
    if (ev.type === 'attention.answered' && strOf(d, 'by')) remember(ev, answerer(d));
    if (ev.type === 'attention.timeout') remember(ev, TIMED_OUT);
    const parts = [];
    const add = (s) => {
      const t = String(s).trim();
      if (t) parts.push(t);
    };
    const took = (prefix) => {
      const v = millisOf(d, 'duration_ms');
      if (v !== null) add(prefix + humanDuration(v));
    };
    switch (ev.type) {
      case 'session.started':
        add(d.trigger === 'resume' ? 'session resumed' : 'session started');
        add(quotedText(strOf(d, 'label')));
        add(strOf(d, 'gen_ai.request.model'));
        lifecycleWords(ev, add);
        break;
      case 'session.ended': {
        const r = strOf(d, 'reason');
        add(`session ended${r && r !== 'normal' ? ` (${r})` : ''}`);
        took('after ');
        if (typeof d.runs === 'number') add(plural(String(d.runs), 'turn'));
        lifecycleWords(ev, add);
        break;
      }
      case 'agent.presence':
        add(`agent ${firstOf(strOf(d, 'state'), 'present')}`);
        break;
      case 'agent.health': {
        add(`health ${firstOf(strOf(d, 'status'), 'reported')}`);
        let detail = strOf(d, 'detail');
        if (!detail && typeof ev.kimichannel === 'string') detail = `hook channel ${ev.kimichannel}`;
        add(detail);
        break;
      }
      case 'session.compacted':
        add(`context compacted${strOf(d, 'trigger') ? ` (${d.trigger})` : ''}`);
        if (typeof d.estimated_token_count === 'number') add(`~${plural(String(d.estimated_token_count), 'token')}`);
        break;
      case 'run.started':
        add('turn started');
        add(quotedText(strOf(d, 'prompt')));
        break;
      case 'run.finished':
        add('turn finished');
        took('in ');
        break;
      case 'run.failed':
        add(`turn failed: ${errorWords(d, firstOf(strOf(d, 'reason'), 'unknown error'))}`);
        took('after ');
        break;
      case 'run.cancelled':
        add(`turn cancelled${strOf(d, 'by') ? ` by ${who(d.by)}` : ''}`);
        took('after ');
        break;
      case 'tool.requested': {
        let a = '';
        for (const k of ['args', 'args_redacted']) {
          const s = argsSummary(d[k]);
          if (s) {
            a = `: ${s}`;
            break;
          }
        }
        add(`calls ${toolOf(ev, d)}${a}`);
        break;
      }
      case 'tool.completed': {
        const v = millisOf(d, 'duration_ms');
        add(`ran ${toolOf(ev, d)}${v !== null ? ` in ${humanDuration(v)}` : ''}`);
        add(resultWords(d));
        break;
      }
      case 'tool.failed':
        add(`${toolOf(ev, d)} failed: ${errorWords(d, 'unknown error')}`);
        took('after ');
        break;
      case 'tool.denied':
        add(`${toolOf(ev, d)} denied${deniedBy(ev, d)}`);
        break;
      case 'attention.requested':
        add(firstOf(strOf(d, 'prompt'), `asks for ${firstOf(strOf(d, 'kind'), 'an answer')}`));
        break;
      case 'attention.routed':
        add(`sent to ${routeWords(strOf(d, 'to'))}`);
        break;
      case 'attention.answered': {
        let s = `answered ${firstOf(answerWords(d), '(no answer)')}`;
        if (strOf(d, 'by')) s += ` by ${answerer(d)}`;
        else if (d.via === 'oob') s += ' in Kimi';
        add(s);
        break;
      }
      case 'attention.resolved': {
        const r = strOf(d, 'resolution');
        if (r === 'answered') {
          const v = millisOf(d, 'latency_ms');
          add(`settled${v !== null ? ` after ${humanDuration(v)}` : ''}`);
        } else {
          add(firstOf(r, 'closed'));
          add(paren(strOf(d, 'reason')));
        }
        break;
      }
      case 'attention.timeout':
        add(timeoutWords(d));
        break;
      case 'control.accepted':
        add('command accepted');
        break;
      case 'control.rejected':
        add(`command refused: ${firstOf(strOf(d, 'reason'), 'rejected').replaceAll('_', ' ')}`);
        add(strOf(d, 'detail'));
        break;
      case 'control.attention.respond':
        add(`answer sent: ${firstOf(answerWords(d), '(no answer)')} by ${firstOf(sender(ev), 'someone')}`);
        break;
      case 'control.cancel':
        add(`cancel sent by ${firstOf(sender(ev), 'someone')}`);
        break;
      case RATE_TYPE:
        add(`rating sent: ${ratingWords(d)} by ${firstOf(sender(ev), 'someone')}`);
        break;
      case FEEDBACK_TYPE: {
        const by = strOf(d, BY_FIELD);
        const s = strOf(d, DATA_SURFACE);
        add(`rated ${ratingWords(d)}${by ? ` by ${s ? `${by} (${s})` : by}` : ''}`);
        add(quotedText(strOf(d, 'comment')));
        break;
      }
      default:
        if (String(ev.type).startsWith('error.')) {
          add(`error: ${errorWords(d, typeWords(ev.type))}`);
          add(typeof ev.subject === 'string' ? ev.subject : '');
          break;
        }
        if (String(ev.type).startsWith(WEB_TYPE_PREFIX)) {
          add(`kimi web: ${ev.type.slice(WEB_TYPE_PREFIX.length).replace(/[._]/g, ' ').replace(/^event /, '')}`);
        } else {
          add(typeWords(ev.type));
        }
        add(typeof ev.subject === 'string' ? ev.subject : '');
        add(usedWords(d));
        add(scalarWords(d));
    }
    const out = words(parts.join(' · '));
    if (ev.type === 'session.ended') answeredBy.delete(ev.session);
    return out;
  };
}

// The fleet page: connects to the relay that serves it (or, under aep-kimi
// dash, to each relay the dash proxies), feeds every event to the state
// module and renders what it derives. Outcomes come only from the
// stream: a button sends a command and the request stays pending until the
// stream settles it.
import * as S from './state.js';
import { openSocket, warmSocket } from './socket.js';
import { span } from './vlist.js';

const QUIET_MS = 150 * 1000; // the adapter's default heartbeat window
const TICK_MS = 5000; // the fleet's quiet transitions (a session's group)
const AGE_TICK_MS = 1000; // every age, wait and countdown on the page
const TRACE_MS = 60 * 1000; // how long a settled request's trace stays
const MAX_BACKOFF_MS = 8000;
const PAGE_AGENT = 'aep-kimi-page';

const $ = (id) => document.getElementById(id);
const state = S.newState();
// Read-only handle for tests and the console: the state and its derivations.
window.aepFleet = { state, S };
const ui = {
  selected: null, // lane shown in the session view
  shown: new Set(), // lanes the session view draws (its subagents nest)
  rows: new Map(), // lane -> row element
  items: new Map(), // attention id -> inbox element
  inbox: { stale: true, lanes: new Set(), count: 0 }, // redraw it; the lanes it shows requests of, how many
  agentsSeen: new Set(),
  commands: new Map(), // command id -> {request, rating}
  notes: new Map(), // attention id (or a rating's key) -> latest settlement note
  rateNotes: new Map(), // a rating's key -> the note typed for it, not sent yet
  sessionStale: false, // redraw the session view though its events did not change (a rating's note)
  proposals: new Map(), // attention id -> the rule an answer would make (null: none; 'asking')
  dangers: new Map(), // attention id -> the relay's refusal of a wildcard allow over destructive commands, awaiting a confirm
  traces: new Map(), // attention id -> its trace once settled
  forms: new Map(), // attention id -> field id -> what was picked ({choices, otherOn, other, value}), kept across redraws
  me: null, // who this login speaks for ({name, role}); null: the relay says not
};

// The roles, in order: a watcher reads, an answerer also answers and
// cancels, an admin also manages rules (access.Role).
const ROLES = ['watch', 'answer', 'admin'];

// can reports whether this login's role includes role. A relay that names
// no role (one without people, or watch-only) leaves the buttons to it:
// it refuses what it does not allow.
function can(role) {
  if (!ui.me || !ui.me.role) return true;
  return ROLES.indexOf(ui.me.role) >= ROLES.indexOf(role);
}

// showWho says in the header who this login speaks for.
function showWho(a) {
  ui.me = a && a.logged_in && a.name ? { name: a.name, role: a.role || '' } : null;
  ui.inbox.stale = true; // the answers shown follow the role
  const w = $('whoami');
  w.hidden = !ui.me;
  if (!ui.me) return;
  w.dataset.role = ui.me.role;
  w.textContent = `${ui.me.name} · ${ui.me.role || 'no role'}`;
  w.title = ui.me.role === 'watch' ? 'you watch: answering needs the answer role'
    : ui.me.role === 'answer' ? 'you watch and answer: managing rules needs the admin role' : 'you watch, answer and manage rules';
}
// conns holds one connection per relay, by its name ('' for the relay that
// serves the page).
const conns = new Map();
let renderQueued = false;
let frameSeq = 0;

function newConn(r) {
  return {
    name: r.name || '', base: r.base || '', sock: null, connected: false, ever: false, backoff: 500,
    kind: 'starting', text: 'starting', roster: null, rosterAdvertised: false, rosterTimer: null, rosterDue: 0,
    resuming: false, liveSub: '', backfill: new Set(), backfilled: new Set(), backfillTimer: null,
  };
}

const CONN_RANK = { 'login-needed': 0, offline: 1, reconnecting: 2, connecting: 3, loading: 4, starting: 5, live: 6 };

// setConn records one relay's connection state and shows the fleet's: live
// only when every relay is.
function setConn(c, kind, text) {
  // The inbox's requests say whether their relay is connected.
  if (c.kind !== kind) ui.inbox.stale = true;
  c.kind = kind;
  c.text = text;
  const all = [...conns.values()];
  const worst = all.reduce((a, b) => (CONN_RANK[b.kind] < CONN_RANK[a.kind] ? b : a), all[0]);
  const el = $('conn');
  el.dataset.conn = worst.kind;
  el.textContent = all.length === 1 ? worst.text
    : all.map((x) => `${x.name}: ${x.text}`).join(' · ');
  if (all.every((x) => !FIRST_LOAD.has(x.kind))) firstDrawn();
}

// The first render waits on nothing it does not draw. What the fleet does
// not need (the rules, the usage limits, the service worker) loads once
// every relay is live, refused or retrying, after the frame that shows it,
// and fills in its own place: no request's card is redrawn for it.
const FIRST_LOAD = new Set(['starting', 'connecting', 'loading']);
let drawnOnce;
export const afterFirstRender = new Promise((resolve) => { drawnOnce = resolve; });

// IDLE_WAIT_MS bounds how long that waits for an idle moment.
const IDLE_WAIT_MS = 500;

function firstDrawn() {
  if (!drawnOnce) return;
  const done = drawnOnce;
  drawnOnce = null;
  const after = () => (typeof requestIdleCallback === 'function' ? requestIdleCallback(done, { timeout: IDLE_WAIT_MS }) : setTimeout(done, 0));
  if (document.hidden) after();
  else requestAnimationFrame(after);
}

function setAllConn(kind, text) {
  for (const c of conns.values()) setConn(c, kind, text);
}

// mark notes a step of the page's start on its clock, the first time only
// (bench/fleetpage -waterfall lists them).
const marked = new Set();
function mark(name) {
  if (marked.has(name) || typeof performance.mark !== 'function') return;
  marked.add(name);
  performance.mark(`aep ${name}`);
}

function notice(text) {
  const n = $('notice');
  n.hidden = !text;
  n.textContent = text || '';
}

// --- login ------------------------------------------------------------------

// The login's bound secret lives in this tab's session storage, which is
// this origin's alone (another port's page cannot read it): the cookie
// without it opens nothing. A reload keeps it; a new tab logs in again.
// An installed page keeps it in local storage instead, until the login
// ends: a phone closes that page whenever it likes.
const LOGIN_KEY = 'aep-fleet-login';
const LOGIN_HEADER = 'AEP-Login';
// Closing reasons that mean this browser's login ended.
const LOGIN_ENDED = new Set(['logged-out', 'login-expired', 'login-key-rotated', 'token-changed', 'login-evicted']);

// stored reads key from the storage area() gives, and store writes it
// ('' removes it); a browser that refuses storage reads '' and keeps
// nothing (for the login: it lasts as long as this page).
export function stored(area, key) {
  try {
    return area().getItem(key) || '';
  } catch {
    return '';
  }
}

export function store(area, key, v) {
  try {
    if (v) area().setItem(key, v);
    else area().removeItem(key);
  } catch {
    // storage refused
  }
}

// installed says whether the page runs as an installed app, decided once:
// the login stays in one area for the page's life.
const installed = (() => {
  try {
    return navigator.standalone === true
      || ['standalone', 'fullscreen', 'minimal-ui'].some((m) => matchMedia(`(display-mode: ${m})`).matches);
  } catch {
    return false;
  }
})();

// loginArea is where this page keeps the login. Local storage is as much
// this origin's alone as session storage (another port's page cannot read
// either), so the stolen cookie still opens nothing. A tab never reads it:
// a tab logs in by its own URL, as it always has.
const loginArea = () => (installed ? localStorage : sessionStorage);

function loginSecret() {
  return stored(loginArea, LOGIN_KEY);
}

function setLoginSecret(v) {
  store(loginArea, LOGIN_KEY, v);
}

const loginAreas = [() => sessionStorage, () => localStorage];

// newLogin keeps a new login's secret and clears any other login's from
// both areas; the same login's stays (logging in again keeps the login).
function newLogin(v) {
  for (const area of loginAreas) {
    if (stored(area, LOGIN_KEY) !== v) store(area, LOGIN_KEY, '');
  }
  setLoginSecret(v);
}

// forgetLogin clears an ended login's secret from both areas.
function forgetLogin() {
  for (const area of loginAreas) store(area, LOGIN_KEY, '');
}

// authed is fetch's options for a request to the page's own origin that
// presents the login.
function authed(opts = {}) {
  const s = loginSecret();
  return { ...opts, credentials: 'same-origin', headers: { ...(opts.headers || {}), ...(s ? { [LOGIN_HEADER]: s } : {}) } };
}

async function authState() {
  const r = await fetch('/app/auth', authed());
  if (!r.ok) return null;
  return r.json();
}

// login reads the answer to the login boot.js sent (with the token the
// login URL carried), and checks the login.
async function login(sent) {
  let a = null;
  if (sent) {
    const r = await sent;
    const { body } = r;
    if (!r.ok) {
      const why = r.status === 429 ? 'Too many login attempts: wait a little and open the URL again.'
        : `${body.detail || 'the token in the URL is not this relay\'s'}. Run aep-kimi open for a fresh URL.`;
      return { ok: false, why: `Login refused (${r.status} ${body.error || ''}): ${why}` };
    }
    newLogin(body.login);
    // The login's answer is the login check's, made a round trip sooner.
    a = body;
  }
  a ||= await authState();
  if (!a) return { ok: false, why: 'The relay did not answer the login check.' };
  $('logout').hidden = !a.required || !a.logged_in;
  showWho(a);
  if (a.required && !a.logged_in) {
    // This page's area only: a tab not logged in leaves an installed
    // page's login be.
    setLoginSecret('');
    return { ok: false, why: 'Not connected: this relay needs its token and this tab is not logged in. Open the URL that aep-kimi up or aep-kimi open prints (it carries the token after #, which never reaches a server).' };
  }
  if (!a.required) $('relay-note').textContent = 'watch-only relay (no token): answers are refused';
  return { ok: true };
}

async function logout() {
  await fetch('/app/logout', authed({ method: 'POST' }));
  forgetLogin();
  loggedOut('Logged out. Open the URL that aep-kimi open prints to log in again.');
}

// loggedOut stops every connection: this tab's login is gone.
let stopped = false;
function loggedOut(text) {
  stopped = true;
  for (const c of conns.values()) {
    const ws = c.sock;
    c.sock = null;
    c.connected = false;
    if (ws) ws.close(1000, 'logout');
  }
  setAllConn('login-needed', 'logged out');
  notice(text);
  $('logout').hidden = true;
}

// --- connection ------------------------------------------------------------

function connect(c) {
  if (stopped) return;
  setConn(c, c.ever ? 'reconnecting' : 'connecting', c.ever ? 'reconnecting' : 'connecting');
  const ws = openSocket(self.aepBoot.socketURL(c.base));
  c.sock = ws;
  const resumed = c.ever;
  ws.onopen = () => {
    mark('socket open');
    const hello = {
      type: 'hello', versions: ['0.1'], role: 'consumer',
      identity: { agent: PAGE_AGENT, instance: `${location.host}/${Math.random().toString(36).slice(2, 10)}` }, capabilities: {},
    };
    const secret = loginSecret();
    if (secret) hello.auth = { login: secret };
    ws.send(JSON.stringify(hello));
  };
  ws.onmessage = (m) => {
    let f;
    try {
      f = JSON.parse(m.data);
    } catch {
      return;
    }
    frame(c, ws, f, resumed);
  };
  ws.onclose = (e) => {
    if (c.sock !== ws) return;
    c.sock = null;
    c.connected = false;
    setConn(c, 'reconnecting', `disconnected (${e.code || 'network'}); retrying`);
    setTimeout(() => connect(c), c.backoff);
    c.backoff = Math.min(c.backoff * 2, MAX_BACKOFF_MS);
    if (!c.ever) probe();
  };
}

// probe explains a socket that never opened: a lapsed login reads 401.
async function probe() {
  const a = await authState().catch(() => null);
  if (a && a.required && !a.logged_in) {
    notice('Not connected: the login lapsed or was never made. Open the URL that aep-kimi open prints.');
  }
}

// loginEnded handles a socket closed because a login ended: this tab's,
// or, under a dash, a relay's token (the dash's own login may stand).
async function loginEnded(reason) {
  const a = await authState().catch(() => null);
  if (a && a.required && !a.logged_in) {
    forgetLogin();
    loggedOut(`Logged out (${reason}). Open the URL that aep-kimi open prints to log in again.`);
  }
}

function frame(c, ws, f, resumed) {
  const t = typeof f.type === 'string' ? f.type : '';
  if (t.includes('.')) {
    // On a resumed connection, a session first seen live may have begun
    // while the page was away: fetch what came before.
    if (c.resuming && typeof f.session === 'string' && f.session && t !== 'session.started'
      && !state.sessions.has(S.laneKey(f.session, c.name))) {
      queueBackfill(c, f.session);
    }
    if (S.apply(state, f, c.name)) eventApplied(c, f);
    return;
  }
  switch (t) {
    case 'hello': {
      mark('hello');
      c.connected = true;
      c.ever = true;
      c.backoff = 500;
      c.rosterAdvertised = !!(f.capabilities && f.capabilities.roster);
      c.rosterMissed = null;
      // The live subscription resumes each session this page holds right
      // after its position: what the page missed, not the whole buffer.
      // Sessions that began while it was away are discovered by a replay
      // of session lifecycle events only, then read one replay for all of
      // them. A first load reads everything held in bulk. Each starts
      // after the live subscription, so nothing falls between them, and
      // dedupe drops what two of them carry.
      const pos = S.positions(state, c.name);
      c.resuming = pos.length > 0;
      c.liveSub = `live-${++frameSeq}`;
      const sub = { type: 'subscribe', id: c.liveSub };
      if (c.resuming) sub.from = pos;
      ws.send(JSON.stringify(sub));
      requestRoster(c);
      setConn(c, 'loading', resumed ? 'resuming' : 'loading');
      (c.resuming ? discover(c, new Set(pos.map((p) => p.session))) : replay(c, {})).then(() => {
        if (c.sock !== ws) return;
        mark('replayed');
        setConn(c, 'live', 'live');
        notice('');
        // What loaded last is drawn in the next frame, not at the loading pace.
        if (renderQueued && !document.hidden) requestAnimationFrame(renderQueuedNow);
      });
      break;
    }
    case 'ping':
      ws.send(JSON.stringify({ type: 'pong', t: f.t }));
      break;
    case 'roster': {
      const m = new Map();
      for (const e of f.entries || []) {
        if (!m.has(e.session)) m.set(e.session, []);
        m.get(e.session).push(e);
      }
      c.roster = m;
      scheduleRender();
      break;
    }
    case 'error':
      if (f.id && f.id === c.liveSub && c.resuming) {
        // The relay will not resume this many sessions at once (or at
        // all): subscribe plainly and read what it holds in bulk.
        c.resuming = false;
        c.liveSub = `live-${++frameSeq}`;
        ws.send(JSON.stringify({ type: 'subscribe', id: c.liveSub }));
        replay(c, {}).then(() => scheduleRender());
      } else if (f.cause && ui.commands.has(f.cause)) {
        const c = ui.commands.get(f.cause);
        ui.notes.set(c.request, `refused by the relay: ${f.code}${f.detail ? ` (${f.detail})` : ''}`);
        if (c.rating) ui.sessionStale = true;
        scheduleRender();
      } else if (f.code === 'unauthorized' || f.code === 'forbidden') {
        notice(`The relay refused this page: ${f.detail || f.code}`);
      }
      break;
    case 'replay-exhausted':
      notice(`Part of session ${f.session} is no longer held by the relay${c.name ? ` ${c.name}` : ''}; shown from ${f.earliest.epoch}:${f.earliest.seq}.`);
      break;
    case 'closing':
      setConn(c, 'reconnecting', `relay closing (${f.reason || 'shutdown'})`);
      if (LOGIN_ENDED.has(f.reason)) loginEnded(f.reason);
      break;
    default:
  }
}

// replay reads, in one streamed SSE response (far faster than one socket
// message per event), what the relay holds and the filter admits, applying
// each event and handing it to each when given. Dedupe makes every repeat
// a no-op.
async function replay(c, filter, each) {
  let q = 'live=0&from=all';
  if (Object.keys(filter).length > 0) q += `&filter=${encodeURIComponent(JSON.stringify(filter))}`;
  try {
    const r = await fetch(`${c.base}/stream?${q}`, authed());
    if (!r.ok || !r.body) return;
    const reader = r.body.pipeThrough(new TextDecoderStream()).getReader();
    let buf = '';
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      const text = buf + value;
      let at = 0;
      for (let end = text.indexOf('\n\n'); end >= 0; at = end + 2, end = text.indexOf('\n\n', at)) {
        const data = sseData(text, at, end);
        if (!data) continue;
        let ev;
        try {
          ev = JSON.parse(data);
        } catch {
          continue; // not an event
        }
        if (each) each(ev);
        if (S.apply(state, ev, c.name)) eventApplied(c, ev);
      }
      buf = text.slice(at);
    }
  } catch {
    // the live subscription carries on; the next reconnect tries again
  }
}

// sseData is the data of the server-sent event in text[from, to): its data
// lines joined by newlines. It reads the lines in place: a replay of 50,000
// events is not split into arrays of blocks and lines.
function sseData(text, from, to) {
  let data = '';
  let first = true;
  for (let p = from; p < to;) {
    let e = text.indexOf('\n', p);
    if (e < 0 || e > to) e = to;
    if (text.startsWith('data:', p)) {
      const piece = text.slice(p + (text.startsWith('data: ', p) ? 6 : 5), e);
      data = first ? piece : `${data}\n${piece}`;
      first = false;
    }
    p = e + 1;
  }
  return data;
}

// BACKFILL_BATCH bounds the sessions one replay asks for (the filter rides
// in the URL).
const BACKFILL_BATCH = 64;

// discover finds the sessions that began while the page was away (their
// lifecycle events name them) and reads each one's whole held story.
async function discover(c, known) {
  const found = new Set();
  await replay(c, { type: ['session.*'] }, (ev) => {
    if (typeof ev.session === 'string' && ev.session && !known.has(ev.session)) found.add(ev.session);
  });
  await backfill(c, [...found]);
}

async function backfill(c, sessions) {
  const todo = sessions.filter((id) => !c.backfilled.has(id));
  for (const id of todo) c.backfilled.add(id);
  for (let i = 0; i < todo.length; i += BACKFILL_BATCH) {
    await replay(c, { session: todo.slice(i, i + BACKFILL_BATCH) });
  }
}

function queueBackfill(c, session) {
  if (c.backfilled.has(session)) return;
  c.backfill.add(session);
  clearTimeout(c.backfillTimer);
  c.backfillTimer = setTimeout(() => {
    const ids = [...c.backfill];
    c.backfill.clear();
    backfill(c, ids);
  }, 200);
}

function eventApplied(c, ev) {
  if (ev.type === 'control.accepted' || ev.type === 'control.rejected') {
    const c = ui.commands.get(ev.cause);
    if (c) {
      const d = ev.data || {};
      ui.notes.set(c.request, ev.type === 'control.accepted'
        ? (c.rating ? 'rated: it shows on the turn' : 'accepted by the agent; waiting for the outcome')
        : `rejected: ${d.reason || 'no reason'}${d.detail ? ` (${d.detail})` : ''}`);
      ui.inbox.stale = true;
    }
  }
  // A session may begin with no session.* event (a kimi web session starts
  // with the bridge's vendor events): one the roster has not listed asks
  // again, once per session and connection.
  const unlisted = c.roster && typeof ev.session === 'string' && !c.roster.has(ev.session)
    && !(c.rosterMissed ||= new Set()).has(ev.session);
  if (unlisted) c.rosterMissed.add(ev.session);
  if (unlisted || (ev.type && (ev.type.startsWith('session.') || ev.type.startsWith('agent.presence')))) {
    c.rosterDue = performance.now() + ROSTER_WAIT_MS;
    if (!c.rosterTimer) armRoster(c, ROSTER_WAIT_MS);
  }
  scheduleRender(true);
}

// The roster is asked ROSTER_WAIT_MS after the last event that may change
// it. One timer moves its own deadline: a replay brings such events by the
// hundred, and a timer cleared and set for each cost more than the events'
// own handling.
const ROSTER_WAIT_MS = 300;

function armRoster(c, wait) {
  c.rosterTimer = setTimeout(() => {
    const left = c.rosterDue - performance.now();
    if (left > 0) {
      armRoster(c, left);
      return;
    }
    c.rosterTimer = null;
    requestRoster(c);
  }, wait);
}

function requestRoster(c) {
  if (!c.sock || !c.connected || !c.rosterAdvertised) return;
  c.sock.send(JSON.stringify({ type: 'roster', id: `r-${++frameSeq}` }));
}

// --- commands ----------------------------------------------------------------

const CROCKFORD = '0123456789ABCDEFGHJKMNPQRSTVWXYZ';

function ulid() {
  let t = Date.now();
  let time = '';
  for (let i = 0; i < 10; i++) {
    time = CROCKFORD[t % 32] + time;
    t = Math.floor(t / 32);
  }
  const rnd = crypto.getRandomValues(new Uint8Array(16));
  let r = '';
  for (let i = 0; i < 16; i++) r += CROCKFORD[rnd[i] % 32];
  return time + r;
}

function command(type, session, fields) {
  const id = ulid();
  const host = location.hostname || 'localhost';
  return {
    aep: '0.1', id, type, time: new Date().toISOString(),
    source: `aep://${encodeURIComponent(host)}/agent/${PAGE_AGENT}/session/${encodeURIComponent(session)}`,
    agent: PAGE_AGENT, session, ...fields,
  };
}

function send(req, cmd) {
  // A rating's note is drawn in the session view.
  if (cmd.type === S.RATE_TYPE) ui.sessionStale = true;
  const c = conns.get(req.origin);
  if (!c || !c.sock || !c.connected) {
    ui.notes.set(req.id, 'not sent: not connected to the relay');
    scheduleRender();
    return;
  }
  ui.commands.set(cmd.id, { request: req.id, rating: cmd.type === S.RATE_TYPE });
  ui.notes.set(req.id, `sent ${cmd.type}; waiting for the stream to settle it`);
  c.sock.send(JSON.stringify(cmd));
  scheduleRender();
}

// answer sends answerObj; authored (free text in a form's values) makes
// the command capture redacted, as text does.
function answer(req, answerObj, authored = false) {
  const cmd = command('control.attention.respond', req.session, { subject: req.id, cause: req.id, data: { answer: answerObj } });
  if (answerObj.text || authored) cmd.capture = 'redacted';
  send(req, cmd);
}

// REFUSALS are the options that refuse a call (the gate's deny and
// cancel, a kimi web approval's reject and cancel): what the reply field
// holds rides with them as the reason the agent is told.
const REFUSALS = new Set(['deny', 'reject', 'cancel']);

// withReason is the answer an option's button sends: a refusal carries the
// text typed in the reply field, which the agent passes on to the model
// (a deny that dropped it told Kimi only who denied).
function withReason(option, typed) {
  const text = (typed || '').trim();
  return REFUSALS.has(option) && text ? { option, text } : { option };
}

// NOTE_REFUSED matches what a rating's note may not hold (mapping.CheckNote):
// a control character or a bidirectional override.
const NOTE_REFUSED = /[\u0000-\u001f\u007f-\u009f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]/u;

// rate sends a thumbs up or down on finished turn r of session s, with the
// note typed for it. The relay stamps who sends it; the session's emitter
// records it, and it shows on the turn.
function rate(s, r, verdict, key) {
  const note = (ui.rateNotes.get(key) || '').trim();
  let refusal = '';
  if ([...note].length > S.NOTE_MAX) refusal = `not sent: the note is longer than ${S.NOTE_MAX} characters`;
  else if (NOTE_REFUSED.test(note)) refusal = 'not sent: the note holds a control character';
  if (refusal) {
    ui.notes.set(key, refusal);
    ui.sessionStale = true;
    scheduleRender();
    return;
  }
  const data = { rating: verdict === 'up' ? 1 : -1 };
  if (note) data.comment = note;
  const cmd = command(S.RATE_TYPE, s.session, { run: r.id, data });
  if (note) cmd.capture = 'redacted';
  ui.rateNotes.delete(key);
  send({ id: key, origin: s.origin }, cmd);
}

// rateForm offers a finished turn's rating: thumbs up, thumbs down and a
// note of one line.
function rateForm(s, r) {
  const key = `rate\n${s.id}\n${r.id}`;
  const button = (verdict, label, glyph) => el('button', {
    type: 'button', 'data-verdict': verdict, 'aria-label': label, title: label, onclick: () => rate(s, r, verdict, key),
  }, glyph);
  const note = el('input', {
    type: 'text', 'data-rate-note': r.id, maxLength: S.NOTE_MAX, 'aria-label': 'A note on this turn (optional)',
    placeholder: 'Note (optional)', value: ui.rateNotes.get(key) || '',
    oninput: (e) => ui.rateNotes.set(key, e.target.value),
  });
  return el('div', { class: 'rate', 'data-rate': r.id }, button('up', 'Rate this turn thumbs up', 'Thumbs up'),
    button('down', 'Rate this turn thumbs down', 'Thumbs down'), note,
    el('span', { class: 'settled', 'data-rate-status': r.id }, ui.notes.get(key) || ''));
}

function cancelRun(req) {
  const cmd = command('control.cancel', req.session, { run: req.run, data: { scope: 'run' } });
  send(req, cmd);
}

// reach says what the roster promises for a session: 'ok', 'unreachable',
// 'ambiguous', or 'unknown' (no roster advertised: send and let the stream
// settle it).
function reach(req) {
  const c = conns.get(req.origin);
  if (!c || !c.rosterAdvertised || !c.roster) return { kind: 'unknown', accepts: null };
  const entries = c.roster.get(req.session) || [];
  if (entries.length === 0) return { kind: 'unreachable', accepts: null };
  if (entries.length > 1) return { kind: 'ambiguous', accepts: null };
  const ctl = entries[0].control;
  return { kind: 'ok', accepts: ctl && Array.isArray(ctl.accepts) ? ctl.accepts : [] };
}

// --- rendering ---------------------------------------------------------------

// scheduleRender renders once in the next animation frame, whatever
// arrived before it. A hidden tab gets no animation frames: it renders on a
// timer (one timer per frame as well cost a task each on a busy page).
// While a relay's held events load in bulk the page draws a few times a
// second, not every frame: a frame then re-placed a fleet growing under it.
// Only a render for events alone (events) may leave the inbox as it is.
function scheduleRender(events = false) {
  if (!events) ui.inbox.stale = true;
  if (renderQueued) return;
  renderQueued = true;
  if (document.hidden) setTimeout(renderQueuedNow, HIDDEN_RENDER_MS);
  else if (bulkLoading()) setTimeout(renderQueuedNow, LOADING_RENDER_MS);
  else requestAnimationFrame(renderQueuedNow);
}

const HIDDEN_RENDER_MS = 100;
const LOADING_RENDER_MS = 200;

function bulkLoading() {
  for (const c of conns.values()) if (c.kind === 'loading') return true;
  return false;
}

function renderQueuedNow() {
  if (!renderQueued) return;
  renderQueued = false;
  render();
}

// A frame asked for just before the tab was hidden would wait for it to
// show again.
document.addEventListener('visibilitychange', () => {
  if (renderQueued && document.hidden) setTimeout(renderQueuedNow, HIDDEN_RENDER_MS);
});

function el(tag, attrs, ...kids) {
  const e = document.createElement(tag);
  if (attrs) {
    for (const [k, v] of Object.entries(attrs)) {
      if (v === undefined || v === null || v === false) continue;
      if (k === 'class') e.className = v;
      else if (k.startsWith('data-') || k.startsWith('aria-') || k === 'type' || k === 'tabindex' || k === 'title' || k === 'placeholder') e.setAttribute(k, v === true ? '' : v);
      else e[k] = v;
    }
  }
  for (const k of kids) if (k !== null && k !== undefined && k !== false) e.append(k);
  return e;
}

function age(fromMs, now) {
  if (fromMs === null || fromMs === undefined) return '';
  const s = Math.max(0, Math.round((now - fromMs) / 1000));
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m`;
  if (s < 86400) return `${Math.floor(s / 3600)}h${Math.floor((s % 3600) / 60)}m`;
  return `${Math.floor(s / 86400)}d`;
}

// labelCache holds the sessions' labels (S.labels, the terminal's too)
// until a session comes or changes its project or title: each render
// checks only the sessions that changed (noteLabels), and a title is a
// lookup (one that compared the whole fleet per row made a frame's cost
// grow with the square of the fleet).
const labelCache = { stale: true, map: new Map(), seen: new Map() };

function noteLabels(dirty) {
  for (const id of dirty) {
    const s = S.session(state, id);
    if (!s) continue;
    const key = `${s.project}\u001e${s.title}`;
    if (labelCache.seen.get(id) !== key) labelCache.stale = true;
  }
}

function title(s) {
  if (labelCache.stale || !labelCache.map.has(s.id)) {
    const all = [...state.sessions.keys()].map((id) => S.session(state, id)).filter(Boolean);
    labelCache.map = S.labels(all);
    labelCache.seen = new Map(all.map((x) => [x.id, `${x.project}\u001e${x.title}`]));
    labelCache.stale = false;
  }
  const l = labelCache.map.get(s.id);
  return (s.origin && conns.size > 1 ? `[${s.origin}] ` : '') + (l ? l.text : S.bareId(s.session));
}

function searchText(s) {
  // A live session's derivation is updated in place: its event count says
  // whether the text is current.
  if (s._search && s._searchAt === s.events) return s._search;
  s._searchAt = s.events;
  const parts = [s.session, s.origin, s.project, s.title, s.agent, s.model];
  const types = new Set();
  for (const r of S.ordered(state, s.id)) types.add(r.type);
  for (const run of s.runs) for (const t of run.tools.values()) parts.push(t.name);
  s._search = (parts.join(' ') + ' ' + [...types].join(' ')).toLowerCase();
  return s._search;
}

function render() {
  const now = Date.now();
  const dirty = S.takeDirty(state);
  noteLabels(dirty);
  renderFleet(now, dirty);
  const pending = inboxChanged(dirty) ? renderInbox(now) : ui.inbox.count;
  // The session view redraws when its session changes (not on the age tick:
  // a timeline that moves under the pointer swallows clicks).
  if (ui.selected && (ui.sessionStale || [...ui.shown].some((k) => dirty.has(k)))) {
    ui.sessionStale = false;
    renderSession(now);
  }
  renderAgents(dirty);
  const head = pending > 0 ? `(${pending}) needs you · aep-kimi fleet` : 'aep-kimi fleet';
  if (document.title !== head) document.title = head;
}

// setText writes a node's text only when it differs: writing the same text
// still replaces the node's text and costs a style and layout pass.
function setText(node, text) {
  if (node.textContent !== text) node.textContent = text;
}

// fleet is what the fleet view shows: each group's list box and members,
// and the group each session is listed in (null: filtered out). A frame
// looks at the sessions that changed; the whole fleet is looked at again
// when the filters or the sort change, when the labels do, and every
// TICK_MS (a session turns quiet with time).
const fleet = { boxes: new Map(), members: new Map(S.GROUPS.map((g) => [g, new Set()])), of: new Map(), key: null, full: true };

function renderFleet(now, dirty) {
  const q = $('search').value.trim().toLowerCase();
  const fAgent = $('f-agent').value;
  const fState = $('f-state').value;
  const sort = $('sort').value;
  const key = [q, fAgent, fState, sort, conns.size].join('\u0000');
  const full = fleet.full || key !== fleet.key || labelCache.stale;
  fleet.full = false;
  fleet.key = key;
  const touched = new Set(full ? S.GROUPS : []);
  for (const id of full ? state.sessions.keys() : dirty) {
    const s = S.session(state, id);
    if (!s) {
      // A companion lane, now shown in its Kimi session's card.
      const was = fleet.of.get(id) ?? null;
      if (was) {
        fleet.members.get(was).delete(id);
        fleet.of.set(id, null);
        touched.add(was);
      }
      continue;
    }
    if (s.agent && !ui.agentsSeen.has(s.agent)) {
      ui.agentsSeen.add(s.agent);
      $('f-agent').append(el('option', { value: s.agent }, s.agent));
    }
    const g = S.group(s, now, QUIET_MS);
    // Only the rows in the window exist; the others are drawn when they
    // come into it.
    const row = ui.rows.get(id);
    if (row && (full || dirty.has(id) || row.dataset.state !== g)) renderRow(s, g, now, row);
    const shows = (!fAgent || s.agents.includes(fAgent)) && (!fState || g === fState) && (!q || searchText(s).includes(q));
    const into = shows ? g : null;
    const was = fleet.of.get(id) ?? null;
    if (was !== into) {
      if (was) fleet.members.get(was).delete(id);
      if (into) fleet.members.get(into).add(id);
      fleet.of.set(id, into);
      if (was) touched.add(was);
    }
    // A changed session may change its place in its group.
    if (into) touched.add(into);
  }
  const cmp = {
    recent: (a, b) => lastSecond(b) - lastSecond(a),
    oldest: (a, b) => lastSecond(a) - lastSecond(b),
    title: (a, b) => title(a).localeCompare(title(b)),
    tools: (a, b) => b.tools - a.tools,
  }[sort];
  for (const g of S.GROUPS) {
    if (!touched.has(g)) continue;
    let box = fleet.boxes.get(g);
    if (!box) {
      box = el('section', { class: 'group', 'data-group': g }, el('h3', null, ''), el('ul'));
      box._head = box.firstChild;
      box._list = box.lastChild;
      fleet.boxes.set(g, box);
      $('fleet').append(box);
    }
    const list = [...fleet.members.get(g)].map((id) => S.session(state, id)).sort((a, b) => cmp(a, b) || (a.id < b.id ? -1 : 1));
    if (box.hidden !== (list.length === 0)) box.hidden = list.length === 0;
    setText(box._head, `${g.replace('-', ' ')} (${list.length})`);
    vl.order.set(g, list.map((s) => s.id));
  }
  placeWindow(now);
  let shown = 0;
  for (const m of fleet.members.values()) shown += m.size;
  setText($('fleet-count'), `${shown} of ${S.sessionCount(state)}`);
}

// lastSecond is the second of a session's last event: the latest-first
// order goes by the ages the rows show (to the second), and sessions whose
// last events fall in one second keep their order among themselves (the
// ids'). To the millisecond, a fleet taking events from many sessions
// reordered its rows in every frame, each a move on screen and, for a
// session coming into the window, a row's texts rewritten.
function lastSecond(s) {
  return Math.floor((s.lastTime ?? 0) / ORDER_STEP_MS);
}

const ORDER_STEP_MS = 1000;

// The fleet list is virtual: only the rows near the viewport are in the
// document (OVERSCAN_LINES above and below it), so a frame restyles and
// lays out a few dozen rows whatever the fleet's size, and a session that
// changes off screen costs no DOM write. Every row is one height (its texts
// are clamped), measured from a drawn row; each group's list keeps the
// height of all its rows, and each row is placed in it by a transform, so
// a session moving up its group (the latest first, a live fleet does so
// all the time) is a transform on the rows that shift, not a DOM move
// that rebuilds the row's layout. A session keeps its row while it stays
// in the window; one that comes into it takes the row of one that left
// (its texts rewritten), so a busy list creates and removes no nodes. The
// rows' DOM order, which Tab and screen readers follow, is put back in the
// list's order at once while the keyboard is in the list, else at most once
// every ORDER_MS. The list's place on the page is read after layout (when
// anything above it changes size) and the scroll offset when it scrolls,
// never in a frame: a read there would force a layout of its own.
// Find in page finds the drawn rows only: the search box filters the whole
// fleet. A focused row stays drawn while the window then holds at most
// MAX_PINNED rows, so scrolling away does not drop keyboard focus.
const OVERSCAN_LINES = 3;
const MAX_PINNED = 200;
const ROW_GUESS_REM = 5; // a row's height before one is measured
const ORDER_MS = 1000; // the longest the rows' DOM order lags the list's
const vl = {
  order: new Map(), // group -> its shown sessions, in order
  pitch: 0, cols: 1, colStep: 0, head: 0, // a row's height, columns, one column to the next, a group's heading (px)
  measured: false, width: -1, top: null, scrollY: 0, // the list's width and top (document px), the page's scroll offset
  focus: null, // the session whose row holds the focus
  at: new Map(), // session -> [list, index] of the rows placed
  unordered: false, orderQueued: false, // the DOM order lags the list's
};

// placeWindow puts in each group's list the rows its window holds.
function placeWindow(now = Date.now()) {
  if (vl.focus && !ui.rows.get(vl.focus)?.contains(document.activeElement)) vl.focus = null;
  if (!vl.measured) measureRows();
  if (vl.top === null) readTop();
  const top = vl.top - vl.scrollY;
  const over = OVERSCAN_LINES * vl.pitch;
  const want = new Map();
  let y = top;
  for (const g of S.GROUPS) {
    const box = fleet.boxes.get(g);
    if (!box) continue;
    const ids = box.hidden ? [] : vl.order.get(g) || [];
    const listTop = y + vl.head;
    const pin = vl.focus ? ids.indexOf(vl.focus) : -1;
    const w = span(ids.length, vl.cols, vl.pitch, listTop, -over, innerHeight + over, pin, MAX_PINNED);
    for (let i = w.from; i < w.to; i++) want.set(ids[i], [box._list, i]);
    setStyle(box._list, 'height', `${w.lines * vl.pitch}px`);
    if (!box.hidden) y = listTop + w.lines * vl.pitch;
  }
  const free = [];
  for (const [id, row] of ui.rows) {
    if (want.has(id)) continue;
    ui.rows.delete(id);
    vl.at.delete(id);
    // A row holding the focus is not handed to another session.
    if (row.contains(document.activeElement)) row.remove();
    else free.push(row);
  }
  for (const [id, [list, i]] of want) {
    let row = ui.rows.get(id);
    if (!row) {
      const s = S.session(state, id);
      row = renderRow(s, S.group(s, now, QUIET_MS), now, free.pop());
      ui.rows.set(id, row);
    }
    if (row.parentElement !== list) {
      list.append(row);
      vl.unordered = true;
    }
    const was = vl.at.get(id);
    if (!was || was[1] !== i || was[0] !== list) {
      vl.at.set(id, [list, i]);
      vl.unordered = true;
      setStyle(row, 'transform', `translate(${(i % vl.cols) * vl.colStep}px, ${Math.floor(i / vl.cols) * vl.pitch}px)`);
    }
  }
  for (const row of free) row.remove();
  // The first rows drawn give the real height: place again with it.
  if (!vl.measured && want.size > 0 && measureRows()) {
    placeWindow(now);
    return;
  }
  if (vl.unordered) orderRows();
}

// orderRows puts the rows' DOM order back in the list's: at once while the
// focus is in the list (Tab follows it), else when the page is next idle.
function orderRows(atOnce) {
  if (!atOnce && !$('fleet').contains(document.activeElement)) {
    if (vl.orderQueued) return;
    vl.orderQueued = true;
    setTimeout(() => orderRows(true), ORDER_MS);
    return;
  }
  vl.orderQueued = false;
  if (!vl.unordered) return;
  vl.unordered = false;
  const lists = new Map();
  for (const [id, [list, i]] of vl.at) {
    if (!lists.has(list)) lists.set(list, []);
    lists.get(list).push([i, ui.rows.get(id)]);
  }
  for (const [list, rows] of lists) placeInOrder(list, rows.sort((a, b) => a[0] - b[0]).map((r) => r[1]));
}

// measureRows reads a drawn row's height, its list's columns and a group
// heading's height; false when no row is drawn (the guess stands).
function measureRows() {
  const fleetEl = $('fleet');
  const row = fleetEl.querySelector('li[data-session]');
  vl.width = fleetEl.getBoundingClientRect().width;
  const list = row ? row.parentElement : fleetEl.querySelector('.group:not([hidden]) ul');
  let colW = vl.width;
  vl.cols = 1;
  vl.colStep = 0;
  if (list) {
    const cs = getComputedStyle(list);
    const tracks = cs.display === 'grid' ? cs.gridTemplateColumns.split(' ').map(parseFloat).filter((x) => x > 0) : [];
    colW = list.getBoundingClientRect().width;
    if (tracks.length > 1) {
      vl.cols = tracks.length;
      colW = tracks[0];
      vl.colStep = tracks[0] + (parseFloat(cs.columnGap) || 0);
    }
  }
  setStyle(fleetEl, '--row-w', `${colW}px`);
  if (!row) {
    vl.pitch = vl.pitch || ROW_GUESS_REM * parseFloat(getComputedStyle(document.documentElement).fontSize);
    return false;
  }
  vl.pitch = row.getBoundingClientRect().height;
  vl.head = list.parentElement.getBoundingClientRect().height - list.getBoundingClientRect().height;
  vl.measured = vl.pitch > 0;
  readTop();
  if (vl.measured) {
    // Every placed row moves to the new geometry.
    vl.at.clear();
  }
  return vl.measured;
}

// readTop reads where the list starts on the page and the scroll offset.
function readTop() {
  vl.scrollY = scrollY;
  vl.top = $('fleet').getBoundingClientRect().top + vl.scrollY;
}

// setStyle writes a style property (or a custom one, --name) only when it
// differs from the one written last.
function setStyle(node, prop, v) {
  const st = node._st || (node._st = {});
  if (st[prop] === v) return;
  st[prop] = v;
  if (prop.startsWith('--')) node.style.setProperty(prop, v);
  else node.style[prop] = v;
}

// revealRow scrolls a session's row into view when it is not drawn, and
// focuses it.
function revealRow(id) {
  if (!ui.rows.has(id)) {
    let y = $('fleet').getBoundingClientRect().top;
    for (const g of S.GROUPS) {
      const box = fleet.boxes.get(g);
      if (!box || box.hidden) continue;
      const ids = vl.order.get(g) || [];
      const i = ids.indexOf(id);
      if (i >= 0) {
        scrollBy(0, y + vl.head + Math.floor(i / vl.cols) * vl.pitch - innerHeight / 3);
        readTop();
        placeWindow();
        break;
      }
      y += vl.head + Math.ceil(ids.length / vl.cols) * vl.pitch;
    }
  }
  const row = ui.rows.get(id);
  if (row) row._button.focus();
}

function watchWindow() {
  const fleetEl = $('fleet');
  addEventListener('scroll', () => {
    vl.scrollY = scrollY;
    placeWindow();
  }, { passive: true });
  addEventListener('resize', () => {
    vl.measured = false;
    placeWindow();
  });
  // After layout, before paint: the list's width (its columns, a row's
  // height) or its place on the page changed.
  const moved = () => {
    const r = fleetEl.getBoundingClientRect();
    if (r.width !== vl.width) {
      vl.measured = false;
      placeWindow();
    } else if (vl.top !== null && Math.abs(r.top + scrollY - vl.top) > 0.5) {
      readTop();
      placeWindow();
    }
  };
  const ro = new ResizeObserver(moved);
  for (const id of ['fleet', 'inbox-pane', 'notice', 'notify-pane', 'login-form']) ro.observe($(id));
  ro.observe(document.querySelector('header'));
  fleetEl.addEventListener('focusin', (e) => {
    const li = e.target.closest('li[data-session]');
    vl.focus = li ? li._lane : null;
    // The keyboard follows the DOM order: put it right at once. A click's
    // focus leaves it to the timer: moving the row being clicked between
    // the press and the release loses the click.
    if (e.target.matches(':focus-visible')) orderRows(true);
  });
}

// nearFill is the context fill (a fraction) at which a session is marked
// near its limit: the relay's lowest --notify-usage context threshold, as
// its notify API says it, else the same default the relay has.
let nearFill = 0.8;

function loadUsage() {
  relayAPI('/notify/usage').then((u) => {
    if (u && u.near_context_percent > 0) {
      nearFill = u.near_context_percent / 100;
      fleet.full = true;
      scheduleRender();
    }
  }).catch(() => {
    // a relay without a notifier: the default holds
  });
}

// tokenFacts is a session's token words, marked (a sign and words, not a
// colour alone) when its context is near its limit.
function tokenFacts(s) {
  const w = S.tokenWords(s);
  return S.nearLimit(s, nearFill) ? `\u26a0 near context limit · ${w}` : w;
}

// metaParts is a row's facts: texts, and ages ({ label, since, suffix })
// the tick keeps current.
function metaParts(s) {
  const run = s.openRuns[s.openRuns.length - 1];
  const last = s.lastEvent;
  return [
    shownAgents(s).join(', ') || 'unknown agent',
    s.model,
    tokenFacts(s),
    run ? { label: 'run open ', since: Date.parse(run.started), suffix: '' } : '',
    last ? { label: 'active ', since: s.lastTime, suffix: ' ago' } : '',
    `${s.tools} tool${s.tools === 1 ? '' : 's'}`,
    s.failures ? `${s.failures} failure${s.failures === 1 ? '' : 's'}` : '',
    s.subagents ? `${s.subagents} subagent${s.subagents === 1 ? '' : 's'}` : '',
    s.conflicts ? `${s.conflicts} position conflict${s.conflicts === 1 ? '' : 's'} (emitter fault)` : '',
  ].filter(Boolean);
}

// placeInOrder makes parent's children exactly nodes, moving only the nodes
// out of place: a session that moves to the top is one DOM move, not a
// rebuilt list.
function placeInOrder(parent, nodes) {
  let at = parent.firstChild;
  for (const n of nodes) {
    if (at === n) {
      at = at.nextSibling;
      continue;
    }
    parent.insertBefore(n, at);
  }
  while (at) {
    const next = at.nextSibling;
    at.remove();
    at = next;
  }
}

// renderRow draws a session's row, building it once and then only
// rewriting what changed: a live fleet updates rows many times a second.
// The facts keep their nodes while the same kinds of facts show: a new
// event rewrites the texts that changed in place.
function renderRow(s, g, now, row) {
  const badge = [g === 'needs-you' ? `${s.pending.length} waiting` : g, ...outcomeWords(s)].join(' · ');
  if (!row) {
    row = el('li');
    row._title = el('span', { class: 'title' });
    row._badge = el('span', { class: 'badge' });
    row._meta = el('span', { class: 'meta' });
    row._button = el('button', { type: 'button', class: 'row', onclick: () => openSession(row._lane) }, row._title, row._badge, row._meta);
    row.append(row._button);
  }
  if (row._lane !== s.id) {
    // A new row, or one the window hands from a session that left it.
    row._lane = s.id;
    row.dataset.session = s.session;
    if (s.origin) row.dataset.relay = s.origin;
    else delete row.dataset.relay;
    const on = s.id === ui.selected;
    if (on) row.dataset.selected = '';
    else delete row.dataset.selected;
    if (on) row._button.setAttribute('aria-current', 'true');
    else row._button.removeAttribute('aria-current');
  }
  const t = title(s);
  const near = S.nearLimit(s, nearFill);
  if (row._title.textContent !== t) row._title.textContent = t;
  // The button's name is what a screen reader says of the row: the mark too.
  const name = `Open session ${t}${near ? ', near its context limit' : ''}`;
  if (row._button.getAttribute('aria-label') !== name) row._button.setAttribute('aria-label', name);
  setText(row._badge, badge);
  const parts = metaParts(s);
  const shape = parts.map((p) => (typeof p === 'string' ? '' : p.label)).join('\u0000');
  if (row._shape !== shape) {
    row._shape = shape;
    row._parts = parts.map((p) => (typeof p === 'string' ? document.createTextNode(p) : el('span', null, p.label, since(p.since, now, p.suffix))));
    row._meta.replaceChildren(...row._parts.flatMap((n, i) => (i ? [' · ', n] : [n])));
  } else {
    parts.forEach((p, i) => {
      const n = row._parts[i];
      if (typeof p === 'string') {
        if (n.data !== p) n.data = p;
        return;
      }
      const a = n.lastChild;
      const at = String(p.since);
      if (a.dataset.since !== at) {
        a.dataset.since = at;
        a.title = exactTime(p.since);
        setText(a, age(p.since, now) + p.suffix);
      }
    });
  }
  if (row.dataset.state !== g) row.dataset.state = g;
  if (near !== ('near' in row._button.dataset)) {
    if (near) row._button.dataset.near = '';
    else delete row._button.dataset.near;
  }
  return row;
}

// inboxChanged says whether the inbox may show something else: anything
// but events asked for the render, or a session that changed holds requests
// or held them when the inbox was drawn. Events of sessions with no
// requests (most of a busy fleet's) leave it as it was; listing the
// fleet's requests again in every frame was a quarter of a frame's script.
function inboxChanged(dirty) {
  if (ui.inbox.stale) return true;
  for (const id of dirty) {
    if (ui.inbox.lanes.has(id)) return true;
    const s = S.session(state, id);
    if (s && s.pending.length > 0) return true;
  }
  return false;
}

function renderInbox(now) {
  const reqs = S.inbox(state, now);
  ui.inbox.stale = false;
  ui.inbox.lanes = new Set(reqs.map((r) => r.lane));
  ui.inbox.count = reqs.length;
  const ol = $('inbox');
  const want = new Set(reqs.map((r) => r.id));
  for (const [id, node] of ui.items) {
    if (!want.has(id)) {
      node.remove();
      ui.items.delete(id);
      ui.forms.delete(id);
      leaveTrace(id, node.dataset.lane, now);
    }
  }
  const nodes = [];
  for (const req of reqs) {
    const sig = signature(req);
    let node = ui.items.get(req.id);
    if (!node || node._sig !== sig) {
      const fresh = renderRequest(req, now);
      fresh._sig = sig;
      if (node) {
        const hadFocus = node.contains(document.activeElement);
        const focused = hadFocus && focusKey(document.activeElement);
        const kept = [...node.querySelectorAll('[data-reply], [data-always-pattern], [data-always-scope]')].filter((e) => e.dataset.edited);
        node.replaceWith(fresh);
        for (const old of kept) {
          const key = ['data-reply', 'data-always-pattern', 'data-always-scope'].find((k) => old.hasAttribute(k));
          const input = fresh.querySelector(`[${key}]`);
          if (input) Object.assign(input, { value: old.value }).dataset.edited = '1';
        }
        if (hadFocus) refocus(fresh, focused);
      }
      node = fresh;
      ui.items.set(req.id, node);
    }
    nodes.push(node);
  }
  placeInOrder(ol, nodes);
  setText($('inbox-count'), String(reqs.length));
  if ($('inbox-count').dataset.count !== String(reqs.length)) $('inbox-count').dataset.count = String(reqs.length);
  if ($('inbox-empty').hidden !== reqs.length > 0) $('inbox-empty').hidden = reqs.length > 0;
  return reqs.length;
}

// FOCUS_KEYS name a control of a request's card: the one focused keeps
// the focus (and a text field its caret) when the card is redrawn, so a
// redraw while someone types or picks does not take it away.
const FOCUS_KEYS = ['data-reply', 'data-other-text', 'data-field-value', 'data-choice', 'data-other', 'data-option', 'data-form-send'];

function focusKey(e) {
  const k = FOCUS_KEYS.find((a) => e.hasAttribute(a));
  if (!k) return null;
  const field = e.closest('fieldset[data-field]');
  const sel = `${field ? `fieldset[data-field="${CSS.escape(field.dataset.field)}"] ` : ''}[${k}="${CSS.escape(e.getAttribute(k))}"]`;
  return { sel, start: e.selectionStart ?? null, end: e.selectionEnd ?? null };
}

function refocus(fresh, key) {
  const e = key && fresh.querySelector(key.sel);
  if (!e) {
    fresh.focus();
    return;
  }
  e.focus();
  if (key.start !== null && typeof e.setSelectionRange === 'function') e.setSelectionRange(key.start, key.end);
}

// leaveTrace puts a short trace where a request the inbox showed was
// settled ("Denied by alice (page), 3s ago"), for TRACE_MS: an answer that simply
// vanished left people wondering whether it took.
function leaveTrace(id, lane, now) {
  const s = S.session(state, lane);
  const req = s && s.attention.get(id);
  if (!req || ui.traces.has(id)) return;
  const t = traceOf(req, now);
  if (!t) return;
  const node = el('li', { 'data-answered': id, 'data-lane': lane, 'data-outcome': t.outcome },
    `${t.text}, `, since(t.at, now, ' ago'), ` · ${title(s)}`);
  ui.traces.set(id, { node, at: now });
  $('answered').prepend(node);
  $('answered').hidden = false;
}

// traceOf says who settled a request and how, and when: what the stream
// says (S.settled), "Allowed by alice (page)", "Denied by rule r3",
// "Proceeded: nobody answered".
function traceOf(req, now) {
  const when = (t) => (Number.isFinite(Date.parse(t)) ? Date.parse(t) : now);
  if (req.state === 'pending') {
    if (!S.expired(req, now)) return null; // the session was filtered away, not settled
    const at = Date.parse(req.expiresAt);
    if (req.onExpiry === 'allow') return { text: 'Nobody answered: it ran anyway', at, outcome: 'allowed' };
    if (req.onExpiry === 'deny') return { text: 'Nobody answered: denied', at, outcome: 'denied' };
    return { text: 'Nobody answered in time', at, outcome: 'expired' };
  }
  const o = S.settled(state, req);
  if (!o) return null;
  const w = S.settledWords(o);
  const outcome = o.outcome === 'session ended' ? 'ended' : /^(allowed|proceeded)/.test(o.outcome) ? 'allowed'
    : o.outcome === 'denied' ? 'denied' : o.surface === 'timeout' ? 'expired' : 'answered';
  return { text: w.charAt(0).toUpperCase() + w.slice(1), at: when(o.time), outcome };
}

function signature(req) {
  const r = reach(req);
  const c = conns.get(req.origin);
  const p = ui.proposals.get(req.id);
  return [r.kind, (r.accepts || []).join(','), ui.notes.get(req.id) || '', ui.dangers.get(req.id) || '', c && c.connected, p ? (p.pattern || p) : '', (req.routed || []).length].join('|');
}

// sent says where the request was last sent and how long ago, ticking
// (state.js sentWords, the words tail and pending use).
function sent(req, now) {
  if (!req.routed || !req.routed.length) return '';
  const last = req.routed[req.routed.length - 1];
  return el('span', { 'data-sent': req.id }, ` · sent to ${S.routeWords(last.to)} `, since(Date.parse(last.time), now, ' ago'));
}

function renderRequest(req, now) {
  const s = S.session(state, req.lane);
  const how = S.answerable(req);
  const r = reach(req);
  const prompt = req.prompt !== null && req.prompt !== undefined
    ? String(req.prompt)
    : S.gated(req.ev) ? `${req.kind || 'request'}${req.subject ? ` for ${req.subject}` : ''} (prompt gated at capture ${req.ev.capture || 'metadata'})` : `${req.kind || 'request'}${req.subject ? ` for ${req.subject}` : ''}`;
  const left = S.countdown(req, now);
  const fields = S.formFields(req);
  const li = el('li', { 'data-attention': req.id, 'data-session': req.session, 'data-relay': req.origin || undefined, 'data-lane': req.lane, 'data-answer': how, 'data-reach': r.kind, tabindex: '0' },
    el('div', { class: 'muted' }, `${title(s)} · ${s.agent || 'unknown agent'} · ${req.kind || 'request'} · waiting `, since(Date.parse(req.time), now),
      left ? el('span', { 'data-countdown': req.id, 'data-expires': req.expiresAt, 'data-on-expiry': req.onExpiry || undefined }, ` · ${left}`) : '',
      sent(req, now)),
    // A form's questions are its fields' legends: its prompt only joins them.
    fields.length && prompt === fields.map((f) => f.label).join(' / ') ? '' : el('p', { class: 'prompt' }, S.inert(prompt, true)));
  const optionText = S.inert(req.options.map((o) => o.label || o.id).join(' / '));
  // Where the page offers no answer, a form's questions are still read.
  const info = (words) => {
    li.append(el('p', { class: 'status', 'data-watch-only': words.watch }, words.text, !fields.length && optionText ? ` ${words.choices}: ${optionText}.` : ''));
    if (fields.length) li.append(questionList(fields));
    return li;
  };
  if (!can('answer') && how !== 'elsewhere') {
    return info({ watch: true, choices: 'Its choices', text: `You watch this fleet (role ${ui.me.role}): answering needs the answer role.` });
  }
  if (how === 'elsewhere') {
    return info({ choices: 'Its choices', text: `Answer in ${s.agent === 'kimi-code' || !s.agent ? 'Kimi' : s.agent} itself (this request is answered ${req.respondVia.join(', ')}, not through the relay).` });
  }
  if (r.kind === 'unreachable') {
    return info({ choices: 'Choices', text: 'Not reachable: no live claimant holds this session at the relay, so an answer cannot be delivered.' });
  }
  if (r.kind === 'ambiguous') {
    li.append(el('p', { class: 'status' }, 'Two live claimants hold this session: the relay refuses commands to it as ambiguous.'));
    return li;
  }
  if (fields.length) {
    li.append(formBox(req, fields));
    const note = ui.notes.get(req.id);
    if (note) li.append(el('p', { class: 'status', 'data-note': true }, note));
    return li;
  }
  const opts = el('div', { class: 'options', role: 'group', 'aria-label': 'Options' });
  const input = el('input', { type: 'text', 'data-reply': true, 'aria-label': 'Free-text reply, or the reason for a refusal', placeholder: 'Reply in words, or why you deny', oninput: (e) => { e.target.dataset.edited = '1'; } });
  req.options.forEach((o, i) => {
    opts.append(el('button', { type: 'button', 'data-option': o.id, 'aria-keyshortcuts': i < 9 ? String(i + 1) : undefined, onclick: () => answer(req, withReason(o.id, input.value)) },
      o.label || o.id));
  });
  const form = el('div', { class: 'reply' }, input,
    el('button', { type: 'button', class: 'send', onclick: () => { if (input.value.trim()) answer(req, { text: input.value.trim() }); } }, 'Send reply'));
  input.addEventListener('keydown', (e) => {
    if (e.key === 'Enter' && input.value.trim()) answer(req, { text: input.value.trim() });
    e.stopPropagation();
  });
  // The answers sit together on one row, the cancel with them.
  const canCancel = req.run && r.kind === 'ok' && r.accepts.includes('control.cancel');
  if (canCancel) {
    opts.append(el('button', { type: 'button', 'data-cancel': req.run, onclick: () => cancelRun(req) }, 'Cancel the run'));
  }
  li.append(opts, form);
  const always = alwaysForm(req, s);
  if (always) li.append(always);
  const note = ui.notes.get(req.id);
  if (note) li.append(el('p', { class: 'status', 'data-note': true }, note));
  return li;
}

// --- forms -------------------------------------------------------------------

// questionList is a form's questions and their choices as words, where the
// page offers no answer to them.
function questionList(fields) {
  return el('ul', { class: 'questions' }, ...fields.map((f) => el('li', { 'data-field': f.id },
    el('strong', null, S.inert(f.label)),
    f.choices.length ? `: ${S.inert(f.choices.map((c) => c.label).join(' / '))}${f.other ? ' / your own words' : ''}` : '',
    f.multi ? ' (several may be chosen)' : '')));
}

// formPick is what was picked for one field of a request, kept across
// redraws.
function formPick(req, f) {
  let m = ui.forms.get(req.id);
  if (!m) ui.forms.set(req.id, (m = new Map()));
  let p = m.get(f.id);
  if (!p) m.set(f.id, (p = { choices: [], otherOn: false, other: '', value: f.type === 'boolean' ? false : '' }));
  return p;
}

// picked notes a change to a form's picks: the page's word that it was
// not sent (something missing) is out of date.
function picked(req) {
  if ((ui.notes.get(req.id) || '').startsWith(NOT_SENT)) {
    ui.notes.delete(req.id);
    scheduleRender();
  }
}

const NOT_SENT = 'not sent: ';

// sendForm answers a form with what was picked (S.formAnswer), or says
// what is missing.
function sendForm(req, fields) {
  const picks = new Map(fields.map((f) => {
    const p = formPick(req, f);
    return [f.id, { choices: p.choices, other: p.otherOn ? p.other : '', value: p.value }];
  }));
  const a = S.formAnswer(fields, picks);
  if (a.error) {
    ui.notes.set(req.id, `${NOT_SENT}${a.error}`);
    scheduleRender();
    return;
  }
  answer(req, { values: a.values }, a.authored);
}

// formBox is a form a person answers (AEP-0006): each field a fieldset,
// a select's choices radios (checkboxes where several may be chosen) with
// an "Other" field of one's own words where the field allows it, then Send
// and the request's own options (a Kimi question's Dismiss). A form of one
// single-choice question answers with one tap: each choice is a button.
function formBox(req, fields) {
  const quick = fields.length === 1 && fields[0].type === 'select' && !fields[0].multi;
  const box = el('div', { class: 'form', 'data-form': req.id });
  for (const f of fields) box.append(fieldBox(req, f, quick, fields));
  const acts = el('div', { class: 'options', role: 'group', 'aria-label': 'Send, or answer otherwise' });
  if (!quick) acts.append(el('button', { type: 'button', class: 'send', 'data-form-send': req.id, onclick: () => sendForm(req, fields) }, fields.length > 1 ? 'Send answers' : 'Send answer'));
  for (const o of req.options) {
    // No number key presses these: a stray 1 must not dismiss a form.
    if (o && typeof o.id === 'string' && o.id !== '') acts.append(el('button', { type: 'button', 'data-option': o.id, 'data-form-option': true, onclick: () => answer(req, { option: o.id }) }, S.inert(o.label || o.id)));
  }
  box.append(acts);
  return box;
}

function fieldBox(req, f, quick, fields) {
  const p = formPick(req, f);
  const fs = el('fieldset', { 'data-field': f.id, 'data-field-type': f.type, 'data-multi': f.multi || undefined },
    el('legend', null, S.inert(f.label), f.required ? el('span', { class: 'muted' }, ' (required)') : ''));
  const name = `${req.id}/${f.id}`;
  if (f.type === 'select') {
    const choices = el('div', { class: 'choices', role: quick ? 'group' : undefined });
    let otherBox = null;
    for (const c of f.choices) {
      if (quick) {
        choices.append(el('button', { type: 'button', 'data-choice': c.id, onclick: () => answer(req, { values: { [f.id]: c.id } }) }, S.inert(c.label)));
        continue;
      }
      const input = el('input', {
        type: f.multi ? 'checkbox' : 'radio', name, value: c.id, 'data-choice': c.id, checked: p.choices.includes(c.id),
        onchange: (e) => {
          if (f.multi) p.choices = e.target.checked ? [...p.choices, c.id] : p.choices.filter((id) => id !== c.id);
          else if (e.target.checked) Object.assign(p, { choices: [c.id], otherOn: false });
          picked(req);
        },
      });
      choices.append(el('label', { class: 'choice' }, input, S.inert(c.label)));
    }
    fs.append(choices);
    if (f.other) {
      const text = el('input', {
        type: 'text', value: p.other, 'data-other-text': f.id, 'aria-label': `Your own answer to ${S.inert(f.label)}`, placeholder: 'Or in your own words',
        oninput: (e) => {
          p.other = e.target.value;
          if (quick) return;
          p.otherOn = p.other.trim() !== '';
          if (toggle) toggle.checked = p.otherOn;
          if (!f.multi && p.otherOn) {
            p.choices = [];
            for (const r of fs.querySelectorAll('input[data-choice]')) r.checked = false;
          }
          picked(req);
        },
      });
      const toggle = quick ? null : el('input', {
        type: f.multi ? 'checkbox' : 'radio', name, value: '', 'data-other': f.id, checked: p.otherOn, 'aria-label': 'Other',
        onchange: (e) => {
          p.otherOn = e.target.checked;
          if (!f.multi && p.otherOn) p.choices = [];
          if (p.otherOn) text.focus();
          picked(req);
        },
      });
      text.addEventListener('keydown', (e) => {
        if (e.key === 'Enter' && text.value.trim()) {
          if (quick) answer(req, { values: { [f.id]: text.value.trim() } }, true);
          else sendForm(req, fields);
        }
        e.stopPropagation();
      });
      otherBox = el('div', { class: 'other' }, toggle ? el('label', { class: 'choice' }, toggle, 'Other') : '', text);
      if (quick) {
        otherBox.append(el('button', { type: 'button', class: 'send', 'data-other-send': f.id, onclick: () => { if (text.value.trim()) answer(req, { values: { [f.id]: text.value.trim() } }, true); } }, 'Send'));
      }
      fs.append(otherBox);
    }
    return fs;
  }
  const set = (v) => {
    p.value = v;
    picked(req);
  };
  if (f.type === 'boolean') {
    fs.append(el('label', { class: 'choice' }, el('input', { type: 'checkbox', 'data-field-value': f.id, checked: p.value === true, onchange: (e) => set(e.target.checked) }), 'Yes'));
    return fs;
  }
  fs.append(el('input', {
    type: f.type === 'number' ? 'number' : 'text', 'data-field-value': f.id, value: p.value, 'aria-label': S.inert(f.label),
    min: f.min ?? undefined, max: f.max ?? undefined, oninput: (e) => set(e.target.value),
    onkeydown: (e) => e.stopPropagation(),
  }));
  return fs;
}

// --- rules -------------------------------------------------------------------

const RULES_MS = 10000; // how often the rules view refreshes its counts

// rulesAPI calls the relay's rules API (its own relay only: the page's
// login opens it, same origin).
function rulesAPI(path, method = 'GET', body) {
  return relayAPI(`/rules${path}`, method, body);
}

// relayAPI calls one of the relay's JSON APIs with the page's login; a
// refusal throws with the relay's detail and the status.
export async function relayAPI(path, method = 'GET', body) {
  const res = await fetch(path, authed({
    method,
    headers: body ? { 'Content-Type': 'application/json' } : {},
    body: body ? JSON.stringify(body) : undefined,
  }));
  let out = null;
  try {
    out = await res.json();
  } catch {
    // a body that is not JSON: the status says it
  }
  if (!res.ok) {
    const err = new Error((out && out.detail) || `HTTP ${res.status}`);
    err.status = res.status;
    err.code = out && out.error;
    throw err;
  }
  return out;
}

// ownRelay reports whether req's relay serves this page (the rules are its).
function ownRelay(req) {
  const c = conns.get(req.origin);
  return c && !c.base;
}

// alwaysForm is "Allow, and always allow PATTERN in PROJECT": an answer
// that becomes a rule, the pattern the relay proposes, editable. The rule
// is saved first (the relay refuses a pattern that does not match this
// request's own arguments); the allow is sent once it is. A pattern whose
// wildcard would also allow destructive commands (rm, git push --force,
// sudo, ...) the relay refuses until told otherwise: the page then shows
// which, in a warning, and saves it only on a second, deliberate click.
function alwaysForm(req, s) {
  if (!ownRelay(req) || !can('admin')) return null;
  const p = ui.proposals.get(req.id);
  if (p === undefined) {
    ui.proposals.set(req.id, 'asking');
    rulesAPI('/propose', 'POST', { session: req.session, request: req.id })
      .then((got) => ui.proposals.set(req.id, got.allow ? got : null))
      .catch(() => ui.proposals.set(req.id, null))
      .finally(scheduleRender);
    return null;
  }
  if (!p || p === 'asking') return null;
  const mark = (e) => { e.target.dataset.edited = '1'; ui.dangers.delete(req.id); };
  const pattern = el('input', {
    type: 'text', value: p.pattern, 'data-always-pattern': true, 'aria-label': 'Pattern over the arguments (* for any)',
    placeholder: p.pattern ? '' : 'nothing safe to suggest: write the pattern', oninput: mark,
  });
  const dir = p.project ? p.project.replace(/\/+$/, '').split('/').pop() || p.project : '';
  const scope = el('select', { 'data-always-scope': true, 'aria-label': 'Where the rule applies', oninput: mark },
    el('option', { value: 'project', disabled: !p.project, title: p.project || "the session's directory is not on the stream (capture below redacted)" }, dir ? `in ${dir}/` : 'in this project (unknown)'),
    el('option', { value: 'all' }, 'in every project'));
  scope.value = p.project ? 'project' : 'all';
  const save = async (destructive) => {
    const body = { session: req.session, request: req.id, option: p.allow, pattern: pattern.value.trim(), scope: scope.value };
    if (!body.pattern) {
      ui.notes.set(req.id, 'rule not saved: write a pattern (* for any arguments)');
      scheduleRender();
      return;
    }
    try {
      const out = await rulesAPI(destructive ? '/always?allow_destructive=1' : '/always', 'POST', body);
      ui.dangers.delete(req.id);
      answer(req, { option: p.allow });
      ui.notes.set(req.id, `saved rule ${out.rule.id}; ${ui.notes.get(req.id) || ''}`);
      loadRules();
    } catch (err) {
      if (err.code === 'destructive-allow' && !destructive) {
        ui.dangers.set(req.id, err.message);
      } else {
        ui.notes.set(req.id, `rule not saved: ${err.message}`);
      }
    }
    scheduleRender();
  };
  const form = el('div', { class: 'always', role: 'group', 'aria-label': 'Answer and keep answering alike' },
    el('button', { type: 'button', 'data-always': req.id, onclick: () => save(false) }, `Allow, and always allow ${p.tool}`), pattern, scope);
  const danger = ui.dangers.get(req.id);
  if (danger) {
    form.append(el('div', { class: 'danger', role: 'alert', 'data-always-danger': req.id },
      el('strong', null, 'Warning: this rule would also allow destructive commands, with no one asked. '),
      el('span', null, danger),
      el('button', { type: 'button', class: 'danger-confirm', 'data-always-confirm': req.id, onclick: () => save(true) },
        'Save it anyway, destructive commands included'),
      el('button', { type: 'button', 'data-always-cancel': req.id, onclick: () => { ui.dangers.delete(req.id); scheduleRender(); } }, 'Keep it narrow')));
  }
  return form;
}

// loadRules refreshes the rules view; it stays hidden where the page's
// relay serves no rules (an older relay, or the dash).
async function loadRules() {
  let l;
  try {
    l = await rulesAPI('');
  } catch (err) {
    if (err.status === 404 || err.status === 401) {
      $('rules-pane').hidden = true;
      return;
    }
    $('rules-note').textContent = `Rules cannot be read: ${err.message}`;
    return;
  }
  $('rules-pane').hidden = false;
  renderRules(l, Date.now());
}

function renderRules(l, now) {
  $('rules-note').textContent = l.status.ok ? '' : `The rules file is refused, so the last good rules stay in force: ${l.status.error}`;
  $('rules').replaceChildren(...l.rules.map((r) => ruleItem(r, now)));
  $('rules-count').textContent = String(l.rules.length);
  $('rules-empty').hidden = l.rules.length > 0;
}

// ruleItem is one rule in words, a card rather than a table row: what it
// does ("deny Bash curl *"), where, how often it was used and when last,
// and its Remove button. A table's eight columns in the inbox's column (or
// a phone's width) broke every heading and cell inside its words.
function ruleItem(r, now) {
  const used = r.uses ? `used ${r.uses} time${r.uses === 1 ? '' : 's'}` : 'never used';
  const last = r.last_use ? [' · last ', since(Date.parse(r.last_use), now, ' ago')] : [];
  // hidden: the relay kept its pattern and project from a reader below
  // the redacted capture ceiling; a blank would read as "anything".
  const where = r.hidden ? ['pattern and project hidden at your capture level']
    : r.project ? ['in ', el('code', null, r.project)] : ['in every project'];
  const remove = can('admin') && el('button', {
    type: 'button', 'data-rule-remove': r.id, 'aria-label': `Remove rule ${r.id}`,
    onclick: async () => {
      try {
        await rulesAPI(`/${encodeURIComponent(r.id)}`, 'DELETE');
      } catch (err) {
        $('rules-note').textContent = `Rule ${r.id} not removed: ${err.message}`;
        return;
      }
      loadRules();
    },
  }, 'Remove');
  return el('li', { 'data-rule': r.id },
    el('div', { class: 'rule-what' },
      el('span', { class: 'rule-effect', 'data-effect': r.effect }, r.effect), ' ',
      el('span', null, r.tool === '*' ? 'any tool' : r.tool), ' ', el('code', null, r.hidden ? '…' : r.args || '*')),
    remove || '',
    el('div', { class: 'muted' }, ...where, r.agent ? ` · for ${r.agent}` : '', r.note ? ` · ${r.note}` : ''),
    el('div', { class: 'muted', 'data-uses': String(r.uses) }, used,
      r.unknowable ? ` (${r.unknowable} unknowable)` : '', ...last, ' · ', el('span', { class: 'rule-id' }, `rule ${r.id}`)));
}

function renderAgents(dirty) {
  if (!dirty.has('')) return;
  const box = $('agents');
  const now = Date.now();
  const items = [];
  for (const [agent, list] of state.agents) {
    const last = list[list.length - 1].ev;
    items.push(el('li', { 'data-agent': agent }, `${agent}: ${agentWords(last)} · last report `, since(Date.parse(last.time), now, ' ago')));
  }
  box.replaceChildren(items.length ? el('h3', null, 'Agents') : '', el('ul', null, ...items));
}

// agentWords says an agent-level report in words: "healthy, no session
// running" for the adapter's hook channel stopped.
function agentWords(ev) {
  const d = ev.data && typeof ev.data === 'object' ? ev.data : {};
  if (ev.type === 'agent.health') {
    const st = { ok: 'healthy', degraded: 'degraded', failing: 'failing' }[d.status] || 'health reported';
    const ch = typeof d.detail === 'string' ? d.detail.replace(/^hook channel /, '') : '';
    const hooks = { active: 'hooks arriving', stopped: 'no session running', stale: 'no hook heard lately', error: 'hook channel failing' }[ch] || (ch ? `hook channel ${ch}` : '');
    return hooks ? `${st}, ${hooks}` : st;
  }
  if (ev.type === 'agent.presence') return typeof d.state === 'string' ? d.state : 'present';
  return S.typeWords(ev.type);
}

// markSelected highlights the open session's row and tells the layout a
// session is open (beside the list when wide, over it when narrow).
function markSelected() {
  for (const [id, row] of ui.rows) {
    const on = id === ui.selected;
    if ((row.dataset.selected !== undefined) !== on) {
      if (on) row.dataset.selected = '';
      else delete row.dataset.selected;
      if (on) row._button.setAttribute('aria-current', 'true');
      else row._button.removeAttribute('aria-current');
    }
  }
  if (ui.selected) document.querySelector('main').dataset.open = '';
  else delete document.querySelector('main').dataset.open;
}

// openSession shows one session (push.js opens a linked request's).
export function openSession(id) {
  ui.selected = id;
  $('session-pane').hidden = false;
  markSelected();
  renderSession(Date.now());
  $('session-close').focus();
}

function closeSession() {
  const id = ui.selected;
  ui.selected = null;
  $('session-pane').hidden = true;
  markSelected();
  if (id) revealRow(id);
}

function dur(msv) {
  if (msv === null || msv === undefined) return '';
  return msv < 1000 ? `${msv} ms` : `${(msv / 1000).toFixed(1)} s`;
}

// since renders an age that ticks: tickAges rewrites it every second
// without redrawing the view around it. The exact local time shows on
// hover.
function since(fromMs, now, suffix = '') {
  if (fromMs === null || fromMs === undefined || !Number.isFinite(fromMs)) return '';
  return el('time', { class: 'age', 'data-since': String(fromMs), 'data-suffix': suffix || undefined, title: exactTime(fromMs) }, age(fromMs, now) + suffix);
}

// exactTime is a moment in the reader's own zone and words, to the second.
// One formatter serves every call: toLocaleString with options builds a new
// one each time, which cost a fifth of a live frame's script.
const exactFormat = new Intl.DateTimeFormat(undefined, { dateStyle: 'medium', timeStyle: 'medium' });

function exactTime(ms) {
  return exactFormat.format(ms);
}

// tickAges rewrites the ages under root that changed.
function tickAges(root, now, sel = '[data-since]') {
  for (const n of root.querySelectorAll(sel)) setText(n, age(Number(n.dataset.since), now) + (n.dataset.suffix || ''));
}

// tick is the page's one clock: every second it rewrites the time texts
// (ages, waits, countdowns with what happens at zero) in place, never the
// views around them, and lets go of traces that have had their time.
function tick() {
  const now = Date.now();
  tickAges(document, now);
  for (const n of document.querySelectorAll('[data-countdown]')) {
    const req = { expiresAt: n.dataset.expires, onExpiry: n.dataset.onExpiry || null };
    const left = S.countdown(req, now);
    const t = left ? ` · ${left}` : '';
    if (n.textContent !== t) n.textContent = t;
    // At zero the request leaves the inbox for its trace now, not at the
    // next group tick.
    if (S.expired(req, now)) {
      fleet.full = true;
      scheduleRender();
    }
  }
  for (const [id, tr] of ui.traces) {
    if (now - tr.at > TRACE_MS) {
      tr.node.remove();
      ui.traces.delete(id);
    }
  }
  $('answered').hidden = ui.traces.size === 0;
}

// MAX_NEST bounds how deep subagents nest inline (a subagent's subagent's
// work); deeper ones keep their "open" link.
const MAX_NEST = 3;

function renderSession(now) {
  const s = S.session(state, ui.selected);
  if (!s) return;
  $('session-pane').dataset.session = s.session;
  $('session-title').textContent = title(s);
  const at = (t) => (t ? since(Date.parse(t), now, ' ago') : '');
  const facts = [
    ['relay', s.origin], ['agent', shownAgents(s).join(', ')], ['model', s.model || 'not reported'],
    ['tokens', tokenFacts(s)],
    ['burn', S.burnPerHour(s) ? `${S.compactCount(S.burnPerHour(s))} tokens in the hour up to its latest step` : ''],
    ['state', [stateWords(s, now), ...outcomeWords(s)].join(' · ')], ['started', at(s.started)],
    ['ended', s.ended ? el('span', null, at(s.ended), s.endReason && s.endReason !== 'normal' ? ` (${s.endReason})` : '') : ''],
    ['last event', s.lastEvent ? el('span', null, `${phraseOf(s, s.lastEvent)} `, since(s.lastTime, now, ' ago')) : ''],
    ['compactions', s.compactions ? String(s.compactions) : ''],
    ['parent', s.parent ? parentLink(s) : ''],
    ['plan', [...s.tasks.values()].map((t) => `${t.title}: ${t.state}`).join('; ')],
    ['background tasks', s.background.size ? [...s.background.values()].map((t) => `${t.kind || 'task'}: ${t.state}`).join('; ') : ''],
  ].filter(([, v]) => v);
  $('session-facts').replaceChildren(...facts.flatMap(([k, v]) => [el('dt', null, k), el('dd', null, v)]),
    el('dt', null, ''), el('dd', null, idDetails('ids', [`session ${s.session}`, s.parent ? `parent ${s.parent.session || ''} ${s.parent.run || ''}` : '',
      `${s.events} events`, ...[...s.background.values()].map((t) => `task ${t.id}`)])));
  const shown = new Set([s.id]);
  const runs = runItems(s, now, 0, shown);
  // The lanes drawn here, nested subagents included: a change to any of
  // them redraws the view.
  ui.shown = shown;
  // What happened outside any turn reads the same way: a pseudo-turn of
  // its own.
  const outside = S.ordered(state, s.id).filter((e) => !e.run && !e.type.startsWith('control.'));
  if (outside.length) {
    const r = { id: '', items: outside, tools: toolStates(outside) };
    runs.push(el('li', { 'data-run': '' }, el('div', null, 'Outside any turn'), itemList(s, r, now, 0, shown), eventDetails(outside)));
  }
  // A note being typed keeps its focus and caret through the redraw.
  const typing = document.activeElement && document.activeElement.dataset && document.activeElement.dataset.rateNote;
  const caret = typing !== undefined ? [document.activeElement.selectionStart, document.activeElement.selectionEnd] : null;
  $('timeline').replaceChildren(...runs);
  if (typing !== undefined) {
    const again = [...$('timeline').querySelectorAll('[data-rate-note]')].find((n) => n.dataset.rateNote === typing);
    if (again) {
      again.focus();
      again.setSelectionRange(...caret);
    }
  }
}

// toolKey is the call a tool event is about.
function toolKey(ev) {
  const d = ev.data || {};
  return (d.tool && d.tool.call_id) || ev.subject || ev.id;
}

// toolStates is each tool call among evs and the state it reached (a
// run's tools, for events outside any run).
function toolStates(evs) {
  const out = new Map();
  for (const ev of evs) {
    if (!ev.type.startsWith('tool.')) continue;
    const key = toolKey(ev);
    const t = out.get(key) || { key, state: 'requested' };
    if (t.state !== 'denied') t.state = { 'tool.denied': 'denied', 'tool.failed': 'failed', 'tool.completed': 'completed', 'tool.started': 'running' }[ev.type] || t.state;
    out.set(key, t);
  }
  return out;
}

// QUIET_TYPES are events a turn's heading already says (its start, its
// end in good order) or that say nothing to a person (a heartbeat).
// A rating's command is said by the feedback it becomes.
const QUIET_TYPES = new Set(['run.started', 'run.finished', 'x.kimi-code.run.turn_started', 'x.kimi-code.session.heartbeat',
  'x.kimi-code.run.prompt_queued', 'x.kimi-code.run.prompt_submitted', S.RATE_TYPE]);

// shownAgents are the agents whose work a session is: the relay's own
// consumers (the notifier's attention.routed, the page's and the
// terminal's commands) write into it, but are not its agents.
function shownAgents(s) {
  return s.agents.filter((a) => !CONSUMER_AGENTS.has(a));
}

const CONSUMER_AGENTS = new Set(['aep-kimi-notify', PAGE_AGENT, 'aep-kimi-cli', 'aep-kimi-push', 'aep-kimi-link']);

// stateWords is a session's state as its row groups it, in words.
function stateWords(s, now) {
  const g = S.group(s, now, QUIET_MS);
  return g === 'needs-you' ? `waiting on you (${s.pending.length})` : g;
}

// outcomeWords tells what became of a session's requests apart, each kind
// counted: "1 denied", "2 answered by a rule", "1 timed out" (a call
// allowed by a person is the ordinary course, and says nothing).
function outcomeWords(s) {
  const n = { denied: 0, rule: 0, timeout: 0 };
  for (const req of s.attention.values()) {
    const o = req.state === 'pending' ? null : S.settled(state, req);
    if (!o) continue;
    if (o.surface === 'rule') n.rule++;
    else if (o.surface === 'timeout') n.timeout++;
    else if (o.outcome === 'denied' || o.outcome === 'cancelled') n.denied++;
  }
  return [n.denied ? `${n.denied} denied` : '', n.rule ? `${n.rule} by rule` : '', n.timeout ? `${n.timeout} timed out` : ''].filter(Boolean);
}

// parentLink opens the session a subagent's session was started from.
function parentLink(s) {
  const key = S.laneKey(s.parent.session || '', s.origin);
  const p = S.session(state, key);
  if (!p) return 'a session this page does not hold';
  return el('button', { type: 'button', class: 'link', onclick: () => openSession(key) }, title(p));
}

// idDetails is what only a debugging eye needs (ids, event types), one
// collapsed toggle for a whole block rather than one a line.
function idDetails(summary, lines) {
  return el('details', { class: 'event-details' }, el('summary', null, summary),
    el('ul', null, ...lines.filter(Boolean).map((l) => el('li', null, l))));
}

// eventDetails lists events' types, ids, causes and digests.
function eventDetails(evs, extra = []) {
  return idDetails('ids and event types', [...extra, ...evs.map((ev) => {
    const d = ev.data && typeof ev.data === 'object' ? ev.data : {};
    return [ev.type, `id ${ev.id}`, ev.cause ? `cause ${ev.cause}` : '',
      ...Object.keys(d).filter((k) => k.endsWith('_digest') && typeof d[k] === 'string').sort().map((k) => `${k.slice(0, -7)} ${d[k]}`)].filter(Boolean).join(' · ');
  })]);
}

// runItems renders a session's runs; a subagent's session renders the same
// way, nested under its delegation (seen guards a cycle of delegations).
function runItems(s, now, depth, seen) {
  return s.runs.map((r, i) => {
    const items = itemList(s, r, now, depth, seen);
    const head = el('div', null, `Turn ${i + 1} · ${RUN_WORDS[r.state] || r.state}`);
    if (r.duration !== null) head.append(` · took ${dur(r.duration)}`);
    else if (r.started && r.state === 'open') head.append(' · for ', since(Date.parse(r.started), now));
    if (r.started) head.append(' · started ', since(Date.parse(r.started), now, ' ago'));
    const votes = ['up', 'down'].map((v) => [v, r.feedback.filter((f) => S.verdict(f) === v).length]).filter(([, n]) => n);
    if (votes.length) head.append(` · rated ${votes.map(([v, n]) => `${n} ${v}`).join(', ')}`);
    // A finished turn of the session itself (not a nested subagent's) is
    // rated here, by whoever may answer.
    const form = depth === 0 && r.state !== 'open' && can('answer') ? rateForm(s, r) : null;
    return el('li', { 'data-run': r.id, 'data-run-state': r.state }, head, items, form, eventDetails(r.items, [`turn ${r.id}`]));
  });
}

// RUN_WORDS say a turn's state.
const RUN_WORDS = { open: 'running', finished: 'finished', failed: 'failed', cancelled: 'cancelled' };

// itemList is a turn's lines, in order.
function itemList(s, r, now, depth, seen) {
  const items = el('ul', { class: 'items' });
  // A subagent that runs inside its parent's session (Kimi's do: its
  // hooks carry the parent's session and no agent id) owns what happens
  // between its start and its stop; that nests under the start.
  const scopes = [];
  const into = () => (scopes.length ? scopes[scopes.length - 1].list : items);
  // A tool call is drawn once, where it was asked for (so an Agent call
  // stays outside the subagent it starts), in the state it reached; a
  // call held for an answer right under its request, the request first
  // and then what became of the call.
  const placed = new Set();
  const held = new Map(); // call key -> its attention.requested
  const keyOf = new Map(); // tool event id -> its call key
  for (const ev of r.items) {
    if (ev.type.startsWith('tool.')) keyOf.set(ev.id, toolKey(ev));
    if (ev.type !== 'attention.requested') continue;
    // The request names its call (data.tool.call_id), or its cause is the
    // call's request.
    const c = (ev.data && ev.data.tool && ev.data.tool.call_id) || keyOf.get(ev.cause);
    if (c && !held.has(c)) held.set(c, ev);
  }
  const callOf = new Map([...held].map(([c, ev]) => [ev.id, c]));
  for (const ev of r.items) {
    const d = ev.data || {};
    if (ev.type.startsWith('tool.')) {
      const key = toolKey(ev);
      if (placed.has(key) || held.has(key)) continue;
      placed.add(key);
    }
    const call = callOf.get(ev.id);
    if (ev.type === 'delegation.subagent.stopped' || ev.type === 'delegation.subagent.failed') {
      const at = scopes.findLastIndex((sc) => sc.id === ev.cause || (!ev.cause && sc.subject === ev.subject));
      if (at >= 0) scopes.length = at;
    }
    const item = eventItem(s, ev, now, depth, seen, r);
    if (item) into().append(item);
    if (call && !placed.has(call)) {
      placed.add(call);
      const first = r.items.find((e) => e.type.startsWith('tool.') && toolKey(e) === call);
      // A call still only asked for says nothing its request does not.
      const tool = first && r.tools.get(call)?.state !== 'requested' && eventItem(s, first, now, depth, seen, r, true);
      if (tool) into().append(tool);
    }
    const child = d.child && d.child.session;
    if (ev.type === 'delegation.subagent.started' && item && (!child || child === s.session)) {
      const list = el('ul', { class: 'items nested', 'data-scope': ev.id });
      item.append(list);
      scopes.push({ id: ev.id, subject: ev.subject, list });
    }
  }
  return items;
}

// taskItem renders a background task once, where it started (or where it
// settled, when its start is no longer held): its state and duration, or
// its ticking age while it runs.
function taskItem(t, now) {
  const li = el('li', { 'data-kind': 'task', 'data-task': t.id, 'data-task-state': t.state },
    `background ${t.kind || 'task'} · ${t.state}`);
  if (t.duration !== null) li.append(` · ${dur(t.duration)}`);
  else if (t.state === 'running' && t.started) li.append(' · ', since(Date.parse(t.started), now));
  return li;
}

// phraseOf is what an event of session s means in plain words: the
// terminal's words (S.phraser, held to the same golden phrases as `tail`),
// derived once per lane until it changes.
const phraseCache = new Map();
function phraseOf(s, ev) {
  const list = state.sessions.get(s.id)?.events ?? []; // records in order; .ev is the event
  let c = phraseCache.get(s.id);
  // Events usually arrive at the end of the order: only those are phrased,
  // by the same phraser (it remembers who answered what). An event that
  // lands earlier rephrases the lane from its start.
  const appended = c && list.length >= c.n && (c.n === 0 || list[c.n - 1].ev.id === c.last);
  if (!appended) {
    c = { n: 0, last: '', phrase: S.phraser(), words: new Map() };
    phraseCache.set(s.id, c);
  }
  for (; c.n < list.length; c.n++) c.words.set(list[c.n].ev.id, c.phrase(list[c.n].ev));
  c.last = list.length ? list[list.length - 1].ev.id : '';
  return c.words.get(ev.id) ?? S.typeWords(ev.type);
}

function eventItem(s, ev, now, depth, seen, r, underRequest = false) {
  const d = ev.data || {};
  const tid = S.taskId(ev);
  if (tid) {
    const t = s.background.get(tid);
    const here = t.startEv ? t.startEv === ev : t.endEv === ev;
    return here ? taskItem(t, now) : null;
  }
  if (!r) return null;
  if (ev.type.startsWith('tool.')) {
    const key = toolKey(ev);
    const t = r.tools.get(key);
    if (!t) return null;
    // Drawn once, in the words of the event of the state it reached; its
    // event types, ids and digests sit behind the details toggle.
    const mine = r.items.filter((e) => e.type.startsWith('tool.') && toolKey(e) === key);
    // A refusal is what matters about a call, even when Kimi then reports
    // it failed.
    const last = mine.find((e) => e.type === 'tool.denied') || mine.findLast((e) => e.type === `tool.${t.state}`) || mine.at(-1) || ev;
    // Under its request, whose line says who denied it, a denied call
    // says only that it did not run.
    const ld = last.data || {};
    const words = underRequest && last.type === 'tool.denied' ? `${(ld.tool && ld.tool.name) || last.subject || 'The call'} did not run` : phraseOf(s, last);
    return el('li', { 'data-kind': t.state, 'data-tool': t.key, 'data-event': last.id }, words);
  }
  if (ev.type.startsWith('attention.')) {
    // What became of a request is said on its line (the request, then its
    // outcome); its answer, resolution, timeout and deliveries are not
    // lines of their own.
    if (ev.type !== 'attention.requested' && s.attention.has(ev.subject)) return null;
    const li = el('li', { 'data-kind': 'attention', 'data-event': ev.id, 'data-rule': S.ruleOf(d.by) || undefined }, phraseOf(s, ev));
    const req = ev.type === 'attention.requested' && s.attention.get(ev.id);
    const o = req && S.settled(state, req);
    if (req) li.append(sent(req, now));
    if (o) li.append(el('span', { class: 'settled', 'data-settled': ev.id, 'data-by': o.by || undefined, 'data-surface': o.surface || undefined }, ` · ${S.settledWords(o)}`));
    else if (req && req.state === 'pending') li.append(el('span', { class: 'settled' }, S.expired(req, now) ? ' · nobody answered in time' : ' · waiting'));
    return li;
  }
  if (ev.type.startsWith('delegation.subagent.')) {
    // The child session's work nests inline under its delegation; its own
    // view stays a click away.
    const childKey = d.child && d.child.session ? S.laneKey(d.child.session, s.origin) : null;
    const child = childKey ? S.session(state, childKey) : null;
    const item = el('li', { 'data-kind': 'sub', 'data-child': d.child && d.child.session },
      `subagent ${d.agent_type || ev.subject || ''} ${ev.type.slice(20)}${d.duration_ms ? ` after ${dur(d.duration_ms)}` : ''}`);
    if (child && ev.type.endsWith('.started')) {
      item.append(` · ${child.tools} tool${child.tools === 1 ? '' : 's'}, ${S.group(child, now, QUIET_MS)} `,
        el('button', { type: 'button', onclick: () => openSession(childKey) }, 'open'));
      if (depth < MAX_NEST && !seen.has(childKey)) {
        seen.add(childKey);
        item.append(el('ul', { class: 'runs nested', 'data-nested': child.session }, ...runItems(child, now, depth + 1, seen)));
      }
    }
    return item;
  }
  if (ev.type === S.FEEDBACK_TYPE) {
    // Who rated the turn, the verdict and the note: words only, never
    // markup (the note is a person's text).
    const f = r.feedback.find((x) => x.event === ev.id);
    return el('li', { 'data-kind': 'feedback', 'data-event': ev.id, 'data-verdict': f ? S.verdict(f) || undefined : undefined, 'data-by': f && f.by ? f.by : undefined }, phraseOf(s, ev));
  }
  if (QUIET_TYPES.has(ev.type)) return null;
  return el('li', { 'data-kind': ev.type.endsWith('failed') ? 'failed' : 'event', 'data-event': ev.id }, phraseOf(s, ev));
}

// --- keyboard ----------------------------------------------------------------

function inboxItems() {
  return [...$('inbox').children];
}

document.addEventListener('keydown', (e) => {
  if (e.target && (e.target.tagName === 'INPUT' || e.target.tagName === 'SELECT' || e.target.tagName === 'TEXTAREA')) return;
  if (e.altKey || e.ctrlKey || e.metaKey) return;
  const items = inboxItems();
  const cur = items.findIndex((n) => n.contains(document.activeElement));
  const item = cur >= 0 ? items[cur] : null;
  if (e.key === 'Escape' && ui.selected) {
    closeSession();
  } else if (e.key === 'j' || e.key === 'ArrowDown') {
    if (!items.length) return;
    items[Math.min(cur + 1, items.length - 1)].focus();
  } else if (e.key === 'k' || e.key === 'ArrowUp') {
    if (!items.length) return;
    items[Math.max(cur - 1, 0)].focus();
  } else if (item && /^[1-9]$/.test(e.key)) {
    const b = item.querySelectorAll('[data-option]:not([data-form-option]), button[data-choice]')[Number(e.key) - 1];
    if (b) b.click();
  } else if (item && e.key === 'r') {
    const input = item.querySelector('[data-reply]');
    if (input) input.focus();
  } else if (item && e.key === 'c') {
    const b = item.querySelector('[data-cancel]');
    if (b) b.click();
  } else if (item && e.key === 'Enter' && e.target === item) {
    openSession(item.dataset.lane);
  } else {
    return;
  }
  e.preventDefault();
});

// --- start -------------------------------------------------------------------

async function start() {
  mark('modules run');
  $('logout').addEventListener('click', logout);
  $('session-close').addEventListener('click', closeSession);
  watchWindow();
  for (const id of ['search', 'f-agent', 'f-state', 'sort']) {
    $(id).addEventListener('input', scheduleRender);
  }
  setInterval(() => {
    fleet.full = true;
    scheduleRender();
  }, TICK_MS);
  setInterval(tick, AGE_TICK_MS);
  afterFirstRender.then(() => setInterval(loadRules, RULES_MS));
  // The relays and the login were asked, and the socket's worker started,
  // by boot.js, while the page was still parsed.
  const boot = self.aepBoot;
  warmSocket(boot.worker, () => boot.workerFailed);
  const loggedIn = login(boot.login).catch((err) => ({ ok: false, why: `Cannot reach the relay: ${err.message}` }));
  const [relays, auth] = await Promise.all([boot.relays, loggedIn]);
  mark('logged in');
  for (const r of relays || [{ name: '', base: '' }]) conns.set(r.name || '', newConn(r));
  if (!auth.ok) {
    setAllConn('login-needed', 'not connected');
    notice(auth.why);
    render();
    return;
  }
  mark('connecting');
  for (const c of conns.values()) connect(c);
  afterFirstRender.then(() => {
    loadRules();
    loadUsage();
  });
  render();
}

start();

// The fold's golden cases, derived by the page's state module: every
// relay/consumer/testdata/fold/NAME.json is the projection of
// relay/consumer/testdata/streams/NAME.jsonl, or (NAME upstream) of the
// upstream golden corpus. The Go fold (relay/consumer) is held to the same
// files, so the two cannot drift.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import * as S from '../assets/state.js';

const root = fileURLToPath(new URL('../../relay/consumer/testdata/', import.meta.url));
const fixtures = process.env.AEP_FIXTURES;

function jsonl(path) {
  return readFileSync(path, 'utf8').split('\n').filter((l) => l.trim() !== '').map((l) => JSON.parse(l));
}

// input finds a case's events by the rule the Go test follows.
function input(name) {
  const stream = join(root, 'streams', `${name}.jsonl`);
  if (existsSync(stream)) return jsonl(stream);
  if (name === 'upstream') return fixtures ? jsonl(join(fixtures, 'fixtures', 'golden', 'golden.jsonl')) : null;
  throw new Error(`golden fold/${name}.json names no case`);
}

function project(events) {
  const st = S.newState();
  for (const ev of events) S.apply(st, structuredClone(ev));
  return { st, p: S.projection(st) };
}

const names = readdirSync(join(root, 'fold')).filter((f) => f.endsWith('.json')).map((f) => f.slice(0, -5)).sort();

test('there are golden fold cases', () => {
  assert.ok(names.length >= 20, `only ${names.length} cases`);
});

for (const name of names) {
  const events = input(name);
  test(`fold ${name}`, { skip: events ? false : 'AEP_FIXTURES not set' }, () => {
    const want = JSON.parse(readFileSync(join(root, 'fold', `${name}.json`), 'utf8'));
    const { st, p } = project(events);
    assert.deepStrictEqual(p, want);
    // A duplicate replay changes nothing.
    for (const ev of events) assert.equal(S.apply(st, structuredClone(ev)), false, `duplicate ${ev.id} refused`);
    assert.deepStrictEqual(S.projection(st), want);
    // Nor does the arrival order, but in a session where an emitter put two
    // events at one position (surfaced as a conflict).
    const reversed = project([...events].reverse()).p;
    for (const [id, s] of Object.entries(want.sessions)) {
      if (S.session(st, id).conflicts === 0) assert.deepStrictEqual(reversed.sessions[id], s, `reversed arrival changes ${id}`);
    }
  });
}

// The page derives a live lane as its events arrive, folding each onto
// what it derived before: deriving after every event (in order, then in an
// order that lands events before others) ends at the same projection and
// summary as deriving once at the end.
for (const name of names) {
  const events = input(name);
  test(`fold ${name} derived as it arrives`, { skip: events ? false : 'AEP_FIXTURES not set' }, () => {
    const once = project(events).st;
    for (const order of [events, [...events.slice(1), events[0]], [...events].sort((a, b) => (a.id < b.id ? -1 : 1))]) {
      const st = S.newState();
      for (const ev of order) {
        S.apply(st, structuredClone(ev));
        for (const id of st.sessions.keys()) S.session(st, id);
      }
      const full = project(order).st;
      assert.deepStrictEqual(S.projection(st), S.projection(full));
      assert.deepStrictEqual(S.summary(st), S.summary(full));
      if (order === events) assert.deepStrictEqual(S.projection(st), S.projection(once));
    }
  });
}

// labels finds each id's shortest unique prefix from its neighbours in
// order; every other id gives the same answer (many ids that share long
// prefixes, some with and some without Kimi's prefix, one astral).
test('labels: shortest unique prefixes over a crowd of similar ids', () => {
  const ids = new Set(['x', 'session_x', '\u{1F600}abcdefg', '\uFFFFabcdefg']);
  let seed = 7;
  const rnd = (n) => {
    seed = (seed * 1103515245 + 12345) % 2147483648;
    return seed % n;
  };
  while (ids.size < 300) {
    const body = Array.from({ length: 4 + rnd(10) }, () => 'ab01\u00e9'[rnd(5)]).join('');
    ids.add((rnd(2) ? 'session_' : '') + body);
  }
  const list = [...ids].map((session) => ({ session }));
  const got = S.labels(list);
  const bare = [...ids].map((id) => [...S.bareId(id)]);
  [...ids].forEach((id, i) => {
    let n = Math.min(6, bare[i].length);
    bare.forEach((o, j) => {
      if (j === i) return;
      let c = 0;
      while (c < bare[i].length && c < o.length && bare[i][c] === o[c]) c++;
      n = Math.max(n, Math.min(c + 1, bare[i].length));
    });
    assert.equal(got.get(id).id, bare[i].slice(0, n).join(''), id);
  });
});

// A waiting request shows the time it has left and what happens then, as
// the terminal tools do; one that does not say keeps the plain time left.
test('countdown says what happens at zero', () => {
  const { st } = project(input('attention-gate-expiry'));
  const now = Date.parse('2026-07-03T10:14:00.000Z');
  const open = S.inbox(st, now);
  assert.equal(open.length, 1);
  assert.equal(S.countdown(open[0], now), 'denied in 38s');
  assert.equal(S.countdown({ ...open[0], onExpiry: 'allow' }, now), 'runs anyway in 38s');
  assert.equal(S.countdown({ ...open[0], onExpiry: null }, now), '38s left');
  assert.equal(S.countdown({ ...open[0], onExpiry: 'allow' }, now + 120000), 'runs anyway in 0s');
  assert.equal(S.countdown({ expiresAt: '2026-07-03T11:30:30.000Z', onExpiry: 'deny' }, now), 'denied in 1h17m');
  assert.equal(S.countdown({ expiresAt: null, onExpiry: 'deny' }, now), null);
});

// Session labels: the cases relay/consumer's Labels is held to.
test('labels match relay/consumer/testdata/labels.json', () => {
  const cases = JSON.parse(readFileSync(join(root, 'labels.json'), 'utf8'));
  assert.ok(cases.length >= 3);
  for (const c of cases) {
    const got = S.labels(c.sessions);
    assert.deepStrictEqual(Object.fromEntries([...got].map(([id, l]) => [id, l.text])), c.want, c.name);
  }
});

// Plain words: the page phrases every stream as relay/consumer's Phraser
// does (relay/consumer/testdata/phrases/NAME.txt, one phrase per event).
for (const f of readdirSync(join(root, 'streams')).filter((n) => n.endsWith('.jsonl')).sort()) {
  const name = f.slice(0, -6);
  test(`phrases ${name}`, () => {
    const phrase = S.phraser();
    const got = jsonl(join(root, 'streams', f)).map((ev) => phrase(ev)).join('\n') + '\n';
    assert.equal(got, readFileSync(join(root, 'phrases', `${name}.txt`), 'utf8'));
  });
}

// Token figures in words: the page says them as relay/consumer's
// TokenWords does (relay/consumer/testdata/tokenwords.json), nothing when
// unknown.
test('token words', () => {
  for (const c of JSON.parse(readFileSync(join(root, 'tokenwords.json'), 'utf8'))) {
    const s = {
      usage: c.usage ? { input: c.usage.input_tokens, output: c.usage.output_tokens } : null,
      context: { tokens: c.context ? c.context.tokens : null, limit: c.context ? c.context.limit || 0 : 0 },
    };
    assert.equal(S.tokenWords(s), c.words, JSON.stringify(c));
  }
});

// Where a request was sent, and how long ago: the page says it as
// relay/consumer's SentWords does (relay/consumer/testdata/sentwords.json).
test('sent words', () => {
  for (const c of JSON.parse(readFileSync(join(root, 'sentwords.json'), 'utf8'))) {
    const req = { routed: (c.routed || []).map((r) => ({ to: r.to || '', via: r.via || '', time: r.time || '' })) };
    assert.equal(S.sentWords(req, Date.parse(c.now)), c.words, JSON.stringify(c));
  }
});

// The figures the fold keeps read the same: the tokens stream's session.
test('token words of a folded stream', () => {
  const { st } = project(jsonl(join(root, 'streams', 'tokens.jsonl')));
  const [id] = st.sessions.keys();
  assert.equal(S.tokenWords(S.session(st, id)), '2.9k tokens · context 16%');
  const { st: none } = project(jsonl(join(root, 'streams', 'run.jsonl')));
  assert.ok(none.sessions.size > 0);
  for (const k of none.sessions.keys()) assert.equal(S.tokenWords(S.session(none, k)), '');
});

// Who settled each request, and how: relay/consumer's audit
// (testdata/audit/NAME.audit.json, one row per outcome) is derived by the
// page's settled from the same stream (testdata/streams/NAME.jsonl, or the
// audit's own testdata/audit/NAME.jsonl).
const audits = readdirSync(join(root, 'audit')).filter((f) => f.endsWith('.audit.json')).map((f) => f.slice(0, -'.audit.json'.length)).sort();

test('there are golden audit cases, the people stream among them', () => {
  assert.ok(audits.length >= 5 && audits.includes('people'), `cases: ${audits}`);
});

// line escapes as relay/consumer's Line does, which the audit's JSON
// went through: C0 but tab as \xHH, DEL, C1 and bidi controls as \uHHHH.
const line = (v) => v.replace(/[\u0000-\u0008\u000a-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069\u200e\u200f\u061c]/g, (c) => {
  const n = c.charCodeAt(0);
  return n < 0x20 ? `\\x${n.toString(16).padStart(2, '0')}` : `\\u${n.toString(16).padStart(4, '0')}`;
});

for (const name of audits) {
  test(`audit ${name}`, () => {
    const own = join(root, 'audit', `${name}.jsonl`);
    const { st } = project(existsSync(own) ? jsonl(own) : input(name));
    const want = readFileSync(join(root, 'audit', `${name}.audit.json`), 'utf8').split('\n').filter((l) => l).map((l) => JSON.parse(l));
    const got = new Map();
    for (const id of st.sessions.keys()) {
      for (const req of S.session(st, id).attention.values()) {
        const o = S.settled(st, req);
        if (o) got.set(req.id, o);
      }
    }
    assert.equal(got.size, want.length, 'one row per settled request');
    for (const w of want) {
      const o = got.get(w.request);
      assert.ok(o, `request ${w.request} settled`);
      assert.deepStrictEqual(
        { time: o.time, outcome: o.outcome, option: line(o.option), by: line(o.by), token: line(o.token), surface: o.surface, latency_ms: o.latencyMs },
        { time: w.time, outcome: w.outcome, option: w.option ?? '', by: w.by, token: w.token ?? '', surface: w.surface, latency_ms: w.latency_ms },
        `request ${w.request}`,
      );
    }
  });
}

// The page says who settled a request in one line.
test('settled words', () => {
  const { st } = project(jsonl(join(root, 'audit', 'people.jsonl')));
  const lines = [];
  for (const req of S.session(st, [...st.sessions.keys()][0]).attention.values()) lines.push(S.settledWords(S.settled(st, req)));
  assert.deepStrictEqual(lines, [
    'allowed by alice from the page',
    'denied by rule r3',
    'denied by bob from the terminal',
    'allowed for the session by carol from a phone',
    'cancelled by dave through an answer link',
    'denied: nobody answered',
    'proceeded: nobody answered',
    'denied by @mallory\u001b[2K from the page',
    'allowed from the page',
    'allowed by ops-bot',
    'closed: the session ended first',
  ]);
});

// The consumer conformance obligations (AEP-0001 §7/§10, AEP-0003 §6-§7)
// over the golden corpus, through the page's real state module.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import * as S from '../assets/state.js';

const dir = process.env.AEP_FIXTURES;
const lines = dir
  ? readFileSync(join(dir, 'fixtures', 'golden', 'golden.jsonl'), 'utf8').split('\n').filter((l) => l.trim() !== '')
  : [];
const corpus = lines.map((l) => JSON.parse(l));
const skip = dir ? false : 'AEP_FIXTURES not set';

function load(events) {
  const st = S.newState();
  for (const ev of events) S.apply(st, ev);
  return st;
}

test('every event applies: unknown types, extension attributes, sessionless events kept', { skip }, () => {
  const st = S.newState();
  for (const ev of corpus) assert.equal(S.apply(st, ev), true, `event ${ev.id} (${ev.type}) applies`);
  assert.equal(st.version, corpus.length);
  let held = 0;
  for (const id of st.sessions.keys()) held += S.ordered(st, id).length;
  for (const list of st.agents.values()) held += list.length;
  assert.equal(held, corpus.length, 'nothing dropped');
  const ext = S.ordered(st, 's_8f2c').find((e) => e.type.startsWith('x.'));
  assert.ok(ext, 'the vendor extension type is kept');
  assert.ok(S.session(st, 's_8f2c').unknown >= 1, 'and counted as unknown, not dropped');
  const first = S.ordered(st, 's_8f2c')[0];
  assert.equal(first.acmeregion, 'eu-1', 'extension attributes survive');
  assert.ok(st.agents.get('claude-code').length >= 3, 'agent-scoped events without a session are kept');
  assert.equal(S.ordered(st, 's_dup_a').length + S.ordered(st, 's_dup_b').length, 2, 'one id from two emitters is two events');
  assert.deepEqual(S.session(st, 's_shared').agents, ['alpha-agent', 'beta-agent']);
  assert.equal(S.session(st, 's_shared').conflicts, 1, 'two events at one position are surfaced');
});

test('events at a taken position are counted whatever the arrival order', () => {
  const ev = (id, seq, extra = {}) => ({ aep: '0.1', id, type: 'tool.started', session: 's', source: 'aep://t', time: '2026-01-01T00:00:00Z', ...(seq === null ? {} : { epoch: 1, seq }), ...extra });
  // Three at seq 2 (two conflicts), two at seq 4 (one), seq-less events
  // anchored at each, and a seq 3 between them.
  const events = [ev('a', 1), ev('b', 2), ev('c', 2), ev('n1', null), ev('d', 3), ev('e', 2), ev('n2', null), ev('f', 4), ev('g', 4), ev('h', 4, { epoch: 2, seq: 4 })];
  // Every arrival order of a few rotations and reversals.
  const orders = [events, [...events].reverse()];
  for (let k = 1; k < events.length; k++) orders.push([...events.slice(k), ...events.slice(0, k)]);
  for (const order of orders) {
    const st = load(order);
    assert.equal(S.session(st, 's').conflicts, 3, `arrival ${order.map((e) => e.id).join(',')}`);
  }
});

test('an event is its relay, source and id: each applies once', () => {
  const ev = (source, session = 's') => ({ aep: '0.1', id: 'same', type: 'run.started', session, source, time: '2026-01-01T00:00:00Z', run: 'r' });
  const st = S.newState();
  // One id from two emitters and from two relays, and a source that is not
  // a string (read as '').
  const firsts = [[ev('aep://a'), ''], [ev('aep://b'), ''], [ev('aep://a'), 'east'], [ev('aep://b', 't'), 'east'], [ev(7), ''], [{ ...ev('aep://a'), source: undefined }, 'east']];
  for (const [e, origin] of firsts) assert.equal(S.apply(st, e, origin), true, `${String(e.source)} from '${origin}' applies`);
  // Again, in another order and as copies: nothing more.
  for (const [e, origin] of [...firsts].reverse()) assert.equal(S.apply(st, structuredClone(e), origin), false, `${String(e.source)} from '${origin}' again`);
  assert.equal(st.version, firsts.length);
  assert.equal(S.apply(st, ev(''), ''), false, "a source that is not a string is the empty one");
  assert.equal(S.ordered(st, 's').length, 3);
});

test('a full duplicate replay changes nothing', { skip }, () => {
  const st = load(corpus);
  const before = JSON.stringify(S.summary(st));
  for (const ev of corpus) assert.equal(S.apply(st, ev), false, `duplicate ${ev.id} refused`);
  // A replay in a different arrival order is still a no-op.
  for (const ev of [...corpus].reverse()) S.apply(st, structuredClone(ev));
  assert.equal(JSON.stringify(S.summary(st)), before);
});

test('the mandatory types derive the full story', { skip }, () => {
  const st = load(corpus);
  const s = S.session(st, 's_8f2c');
  const runs = Object.fromEntries(s.runs.map((r) => [r.id, r.state]));
  assert.deepEqual(runs, { r_0042: 'finished', r_0043: 'failed', r_0044: 'cancelled' });
  assert.ok(s.ended, 'session ended');
  const arcs = Object.fromEntries([...s.attention.values()].map((a) => [a.id, a.state]));
  // Answered, then resolved by its emitter (AEP-0002 §7): the terminal is
  // the resolution, and the answer is kept.
  assert.equal(arcs['01JX9YB4RQ000000000000GOLD'], 'resolved');
  assert.ok(Object.values(arcs).includes('timeout'), 'the timed-out arc');
  assert.deepEqual(s.attention.get('01JX9YB4RQ000000000000GOLD').answer, { option: 'allow' });
  assert.equal(s.failures, 2, 'tool.failed and run.failed');
  const tools = s.runById.get('r_0043').tools;
  assert.equal(tools.get('t_92').state, 'denied');
  assert.equal(tools.get('t_93').state, 'failed');
  const form = S.session(st, 's_form');
  const req = [...form.attention.values()][0];
  assert.equal(req.kind, 'form');
  assert.equal(req.state, 'resolved');
  assert.equal(req.answer.values.name, 'billing-api', 'the form answer is kept');
  assert.equal(S.inbox(st, Date.parse('2026-07-03T10:20:00Z')).length, 0, 'nothing pending at the end');
  assert.equal(S.group(s, Date.now(), 60000), 'ended');
  const opt = S.session(st, 's_opt');
  assert.equal(opt.subagents, 1);
  assert.equal(opt.compactions, 1);
  assert.equal(opt.tasks.get('t1').state, 'completed');
});

test('derivation follows (epoch, seq), not arrival', { skip }, () => {
  const lane = corpus.filter((e) => e.session === 's_8f2c');
  const shuffled = [...lane].reverse();
  const a = load(lane), b = load(shuffled);
  const seqd = (st) => S.ordered(st, 's_8f2c').filter((e) => Number.isInteger(e.seq)).map((e) => e.id);
  assert.deepEqual(seqd(b), seqd(a));
  assert.deepEqual(S.summary(b).sessions, S.summary(a).sessions);
  const ep = load(corpus.filter((e) => e.session === 's_epoch').reverse());
  assert.deepEqual(S.ordered(ep, 's_epoch').map((e) => [e.epoch, e.seq]), [[0, 0], [0, 1], [1, 0]]);
  assert.deepEqual(S.positions(ep), [{ session: 's_epoch', epoch: 1, seq: 0 }]);
});

test('seq-less foreign events keep arrival order among the ordered events', { skip }, () => {
  const st = load(corpus);
  const order = S.ordered(st, 's_8f2c').map((e) => e.type);
  const req = order.indexOf('attention.requested');
  const routed = order.indexOf('attention.routed');
  const respond = order.indexOf('control.attention.respond');
  const accepted = order.indexOf('control.accepted');
  assert.ok(req < routed && routed < respond && respond < accepted, order.join(' '));
  const cancel = order.indexOf('control.cancel');
  assert.ok(order.indexOf('attention.timeout') < cancel && cancel < order.lastIndexOf('control.accepted'));
});

test('cause edges resolve across the control boundary', { skip }, () => {
  const st = load(corpus);
  const evs = S.ordered(st, 's_8f2c');
  const cancelled = evs.find((e) => e.type === 'run.cancelled');
  const chain = [];
  for (let e = cancelled; e && chain.length < 10; e = S.cause(st, e)) chain.push(e.type);
  assert.ok(chain.includes('control.cancel'), `run.cancelled -> control.cancel: ${chain.join(' <- ')}`);
  for (const e of evs) if (e.cause) assert.ok(S.cause(st, e), `cause of ${e.id} (${e.type}) resolves`);
  const run = S.session(st, 's_8f2c').runById.get('r_0044');
  assert.ok(run.cancelledBy, 'the cancelled run knows what cancelled it');
});

// A live lane is folded onto what was derived before; a cancel whose
// command arrives after it (the command is appended) is still named once
// the command is held.
test('a cancel learns its command when the command arrives later', () => {
  const st = S.newState();
  const ev = (seq, type, extra) => ({ aep: '0.1', id: `e${seq}`, type, session: 's1', source: 'aep://h/agent/a/session/s1', agent: 'a', seq, epoch: 1, ...extra });
  for (const e of [ev(0, 'session.started'), ev(1, 'run.started', { run: 'r1' }), ev(2, 'run.cancelled', { run: 'r1', cause: 'cmd1' })]) {
    S.apply(st, e);
    S.session(st, 's1');
  }
  assert.equal(S.session(st, 's1').runById.get('r1').cancelledBy, null);
  S.apply(st, { aep: '0.1', id: 'cmd1', type: 'control.cancel', session: 's1', source: 'aep://h/agent/aep-kimi-page/session/s1', agent: 'aep-kimi-page', run: 'r1' });
  assert.equal(S.session(st, 's1').runById.get('r1').cancelledBy, 'control.cancel');
});

test('respond_via without control is information only', () => {
  const st = S.newState();
  const base = { aep: '0.1', agent: 'kimi-code', session: 's1', time: '2026-01-01T00:00:00.000Z', epoch: 0 };
  S.apply(st, { ...base, id: 'a', seq: 0, type: 'attention.requested', data: { kind: 'permission', respond_via: ['oob'] } });
  S.apply(st, { ...base, id: 'b', seq: 1, type: 'attention.requested', data: { kind: 'permission', respond_via: ['control'], options: [{ id: 'allow' }, { id: 'deny' }] } });
  S.apply(st, { ...base, id: 'c', seq: 2, type: 'attention.requested', data: { kind: 'question' } });
  const [a, b, c] = S.inbox(st, 0);
  assert.equal(S.answerable(a), 'elsewhere');
  assert.equal(S.answerable(b), 'control');
  assert.equal(S.answerable(c), 'control');
  assert.equal(S.group(S.session(st, 's1'), 0, 60000), 'needs-you');
  S.apply(st, { ...base, id: 'd', seq: 3, type: 'attention.resolved', subject: 'b', data: { resolution: 'answered' } });
  assert.deepEqual(S.inbox(st, 0).map((r) => r.id), ['a', 'c']);
});

test('people who answer are not listed among the session\'s agents', () => {
  const st = S.newState();
  const base = { aep: '0.1', session: 's1', time: '2026-01-01T00:00:00.000Z', epoch: 0 };
  S.apply(st, { ...base, agent: 'kimi-code', id: 'a', seq: 0, type: 'attention.requested', data: { kind: 'permission', respond_via: ['control'], options: [{ id: 'deny' }] } });
  S.apply(st, { ...base, agent: 'aep-kimi-page', id: 'c', type: 'control.attention.respond', subject: 'a', data: { answer: { option: 'deny' } } });
  S.apply(st, { ...base, agent: 'rule:r3', id: 'r', type: 'control.attention.respond', subject: 'a', data: { answer: { option: 'deny' } } });
  S.apply(st, { ...base, agent: 'kimi-code', id: 'b', seq: 1, type: 'attention.answered', subject: 'a', cause: 'c', data: { answer: { option: 'deny' }, by: 'aep-kimi-page' } });
  assert.deepEqual(S.session(st, 's1').agents, ['kimi-code']);
});

test('one session id on two relays is two sessions', () => {
  const st = S.newState();
  const ev = { aep: '0.1', id: 'x', source: 'aep://h/agent/a/session/s', agent: 'a', session: 's', seq: 0, epoch: 0, type: 'session.started', time: '2026-01-01T00:00:00.000Z' };
  assert.equal(S.apply(st, ev, 'laptop'), true);
  assert.equal(S.apply(st, ev, 'team'), true, 'the same event read from another relay is kept there');
  assert.equal(S.apply(st, ev, 'team'), false);
  assert.equal(st.sessions.size, 2);
  assert.deepEqual(S.positions(st, 'team'), [{ session: 's', epoch: 0, seq: 0 }]);
  assert.deepEqual(S.positions(st, ''), []);
  const s = S.session(st, S.laneKey('s', 'team'));
  assert.equal(s.session, 's');
  assert.equal(s.origin, 'team');
});

test('background tasks: started, finished, failed and stopped, with durations, wherever they settle', () => {
  const st = S.newState();
  const at = (s) => `2026-01-01T00:00:${String(s).padStart(2, '0')}.000Z`;
  let seq = 0;
  const ev = (type, t, f) => ({ aep: '0.1', id: `e${seq}`, agent: 'kimi-code', session: 's1', epoch: 0, seq: seq++, type, time: at(t), ...f });
  const started = (id, t) => ev('x.kimi-code.progress.task_started', t, { run: 'r1', subject: id, data: { task_id: id, kind: 'process' } });
  const evs = [
    ev('run.started', 0, { run: 'r1' }),
    started('bash-ok', 1), started('bash-bad', 2), started('bash-left', 3),
    ev('run.finished', 4, { run: 'r1' }),
    // Completions arrive in a later run, or outside any run.
    ev('progress.status', 9, { run: 'r2', subject: 'task.completed', data: { task_id: 'bash-ok', severity: 'info' } }),
    ev('progress.status', 12, { subject: 'task.failed', data: { task_id: 'bash-bad', severity: 'error' } }),
    ev('x.kimi-code.progress.task_ended', 20, { subject: 'bash-left', data: { task_id: 'bash-left', status: 'session_ended' } }),
    ev('progress.status', 21, { subject: 'task.completed', data: { task_id: 'bash-orphan' } }),
  ];
  // Arrival order does not matter: derive from (epoch, seq).
  for (const e of [...evs].reverse()) S.apply(st, e);
  const s = S.session(st, 's1');
  const got = Object.fromEntries([...s.background.values()].map((t) => [t.id, [t.state, t.duration, t.run]]));
  assert.deepEqual(got, {
    'bash-ok': ['finished', 8000, 'r1'],
    'bash-bad': ['failed', 10000, 'r1'],
    'bash-left': ['stopped', 17000, 'r1'],
    'bash-orphan': ['finished', null, ''],
  });
  assert.equal(s.failures, 1, 'a failed task counts as a failure');
  assert.equal(S.taskId(evs[5]), 'bash-ok');
  assert.equal(S.taskId(evs[0]), '');
  const running = S.newState();
  S.apply(running, evs[1]);
  assert.equal(S.session(running, 's1').background.get('bash-ok').state, 'running');
});

// A kimi web session seen by the bridge before its hooks: its companion
// lane is a card of its own until the Kimi session's own lane comes, then
// one card, the companion's tokens in it, and the companion's card marked
// changed so the page drops it.
test('a companion joins its Kimi session once that session shows', () => {
  const st = S.newState();
  const ev = (session, type, seq, extra = {}) => ({
    aep: '0.1', id: `${session}-${seq}`, type, time: '2026-07-03T10:00:00.000Z', agent: 'kimi-code',
    source: `aep://h/agent/kimi-code/session/${session}`, session, seq, epoch: 1, ...extra,
  });
  S.apply(st, ev('k1.web', 'x.kimi-code.web.turn.step.completed', 0, { kimisession: 'k1', data: { 'gen_ai.usage.input_tokens': 100, 'gen_ai.usage.output_tokens': 10 } }));
  assert.ok(S.session(st, 'k1.web'), 'alone, the companion is a card');
  assert.equal(S.sessionCount(st), 1);
  S.takeDirty(st);
  S.apply(st, ev('k1', 'session.started', 0, { data: { 'x-kimi-code-project': 'docs-site' } }));
  assert.ok(S.takeDirty(st).has('k1.web'), "the companion's card is marked changed");
  assert.equal(S.session(st, 'k1.web'), null, 'the companion is no card of its own');
  assert.equal(S.sessionCount(st), 1);
  const s = S.session(st, 'k1');
  assert.equal(s.project, 'docs-site');
  assert.deepEqual(s.usage, { input: 100, output: 10 });
  assert.equal(S.tokenWords(s), '110 tokens');
});

// A kind form request (AEP-0006) as the page reads it: its fields, each
// one it can show, and the answer built from what a person picked, with
// the spec's rules: a choice id or free text where the field allows it,
// an array for a multi-select, required fields first, nothing empty.
test('a form: its fields and the answer from the picks', () => {
  const st = S.newState();
  S.apply(st, {
    aep: '0.1', id: 'F1', type: 'attention.requested', time: '2026-07-03T10:00:00.000Z', agent: 'kimi-code',
    source: 'aep://h/agent/kimi-code/session/f1', session: 'f1', seq: 0, epoch: 1, capture: 'redacted',
    data: {
      kind: 'form', prompt: 'Deploy where? / Notify whom?', respond_via: ['control'],
      fields: [
        { id: 'q_0', type: 'select', label: 'Deploy where?', other: true, choices: [{ id: 'o1', label: 'staging' }, { id: 'o2', label: 'prod' }, { id: 'o1', label: 'again' }] },
        { id: 'q_1', type: 'select', label: 'Notify whom?', multi: true, choices: [{ id: 'o3', label: 'ops' }, { id: 'o4' }] },
        { id: 'n', type: 'number', label: 'Replicas', min: 1, max: 5, required: true },
        { id: 'b', type: 'boolean', label: 'Dry run?' },
        { id: 'm', type: 'select', label: 'Teams', multi: true, other: true, choices: [{ id: 't1', label: 'ops' }] },
        { id: 'q_0', type: 'string', label: 'a second q_0' },
        { id: 'x', type: 'date', label: 'unknown type' },
        { id: 'e', type: 'select', label: 'nothing to choose', choices: [] },
        'junk',
      ],
    },
  });
  const req = S.session(st, 'f1').attention.get('F1');
  const fields = S.formFields(req);
  assert.deepEqual(fields.map((f) => f.id), ['q_0', 'q_1', 'n', 'b', 'm'], 'fields it can show, each id once');
  assert.deepEqual(fields[0].choices, [{ id: 'o1', label: 'staging' }, { id: 'o2', label: 'prod' }], 'each choice id once');
  assert.deepEqual(fields[1].choices[1], { id: 'o4', label: 'o4' }, 'a choice without a label shows its id');
  assert.equal(fields[1].multi, true);
  assert.equal(fields[0].other, true);

  const picks = (o) => new Map(Object.entries(o));
  assert.deepEqual(S.formAnswer(fields, picks({ q_0: { choices: ['o2'] }, n: { value: '3' } })), { values: { q_0: 'o2', n: 3 }, authored: false });
  assert.deepEqual(S.formAnswer(fields, picks({ q_0: { choices: [], other: ' blue-green ' }, q_1: { choices: ['o3', 'o4'] }, n: { value: 5 }, b: { value: false }, m: { choices: ['t1'], other: 'both teams' } })),
    { values: { q_0: 'blue-green', q_1: ['o3', 'o4'], n: 5, b: false, m: ['t1', 'both teams'] }, authored: true });
  assert.match(S.formAnswer(fields, picks({ q_0: { choices: ['o1'] } })).error, /Replicas/, 'a required field missing');
  assert.match(S.formAnswer(fields, picks({ n: { value: '9' } })).error, /from 1 up to 5/, 'a number out of range');
  assert.match(S.formAnswer(fields, picks({ n: { value: 'many' } })).error, /takes a number/);
  assert.match(S.formAnswer(fields, picks({ q_0: { choices: ['o1', 'o2'] }, n: { value: 1 } })).error, /one answer/, 'two choices on a single-select');
  assert.deepEqual(S.formAnswer(fields, picks({ q_0: { choices: ['nope'] }, n: { value: 1 } })), { values: { n: 1 }, authored: false }, 'a choice not offered is no pick');
  assert.match(S.formAnswer(fields.slice(0, 2), picks({})).error, /choose an answer/, 'nothing picked');
  assert.deepEqual(S.formAnswer(fields.slice(1, 2), picks({ q_1: { choices: ['o3'], other: 'free' } })), { values: { q_1: ['o3'] }, authored: false }, 'free text only where the field allows it');

  assert.deepEqual(S.formFields({ ...req, kind: 'permission' }), [], 'not a form');
  assert.deepEqual(S.formFields({ ...req, ev: { ...req.ev, data: { kind: 'form' } } }), [], 'a form whose fields are withheld');
});

// inert shows what an agent wrote as text that cannot hide or reorder
// itself: relay/consumer's Line and Text on a terminal.
test('inert text: controls and bidi escaped, the rest as written', () => {
  assert.equal(S.inert('plain <b>text</b> & ünïcode 😀\ttab'), 'plain <b>text</b> & ünïcode 😀\ttab');
  assert.equal(S.inert('a\x1b[2Kb\nc\r\x7f\x9b'), 'a\\x1b[2Kb\\x0ac\\x0d\\u007f\\u009b');
  assert.equal(S.inert('a\nb', true), 'a\nb', 'newlines kept in text that spans lines');
  assert.equal(S.inert('\u202eevil\u2066\u200f\u061c'), '\\u202eevil\\u2066\\u200f\\u061c');
  assert.equal(S.inert('lone \ud800 and \udc00'), 'lone \\ud800 and \\udc00');
  assert.equal(S.inert(S.inert('\x1b\u202e')), S.inert('\x1b\u202e'), 'idempotent');
  assert.equal(S.inert(undefined), '');
});

// The page's service worker, run as a worker runs it: its script in a
// global of its own, with the platform it calls (showNotification, clients,
// fetch) recorded. Push payloads map to notifications; actions answer
// through the payload's links and replace the notification with the
// outcome.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import vm from 'node:vm';

const script = readFileSync(fileURLToPath(new URL('../assets/sw.js', import.meta.url)), 'utf8');

// worker loads sw.js into a fresh global. fetchStatus answers the answer
// links (a status, [status, code] for a JSON body with that code, or 'down'
// for a network error); windows are the page's open windows.
function worker({ maxActions = 2, fetchStatus = () => 200, windows = [] } = {}) {
  const rec = { shown: [], fetched: [], opened: [], messages: [], focused: 0, handlers: {} };
  const g = {
    URL,
    Notification: maxActions === null ? undefined : { maxActions },
    addEventListener: (type, fn) => { rec.handlers[type] = fn; },
    skipWaiting: () => Promise.resolve(),
    registration: {
      scope: 'https://relay.example/',
      showNotification: async (title, options) => { rec.shown.push({ title, options: structuredClone(options) }); },
    },
    clients: {
      claim: () => Promise.resolve(),
      matchAll: async () => windows.map((url) => ({
        url,
        postMessage: (m) => rec.messages.push(plain(m)),
        focus: async () => { rec.focused++; },
      })),
      openWindow: async (url) => { rec.opened.push(url); },
    },
    fetch: async (url, init) => {
      rec.fetched.push({ url, method: init.method });
      const s = fetchStatus(url);
      if (s === 'down') throw new TypeError('Failed to fetch');
      const [status, code] = Array.isArray(s) ? s : [s, ''];
      return { status, json: async () => (code ? { code, error: code, detail: 'words' } : {}) };
    },
  };
  g.self = g;
  vm.createContext(g);
  vm.runInContext(script, g, { filename: 'sw.js' });
  return { g, rec };
}

// dispatch runs an event handler as the platform would and waits for what
// it handed to waitUntil.
async function dispatch(w, type, fields) {
  let done = Promise.resolve();
  w.rec.handlers[type]({ ...fields, waitUntil: (p) => { done = p; } });
  return done;
}

// plain copies a value out of the worker's realm, for deepEqual.
const plain = (v) => JSON.parse(JSON.stringify(v));

const pushData = (payload) => ({ json: () => (typeof payload === 'string' ? JSON.parse(payload) : payload) });

const request = {
  v: 1, tag: 'aep:s1:r1', title: 'Bash: go test ./...', body: 'aep-kimi · runs anyway in 45s', open: 'https://relay.example/#/request/s1/r1', close: false,
  answers: [
    { option: 'allow', label: 'Allow', url: 'https://relay.example/answer/tA' },
    { option: 'deny', label: 'Deny', url: 'https://relay.example/answer/tD' },
    { option: 'allow_session', label: 'Allow for this session', url: 'https://relay.example/answer/tS' },
  ],
};

// notification is the one shown, as a tap hands it back.
function asNotification(shown) {
  return { title: shown.title, tag: shown.options.tag, data: shown.options.data, close() { this.closed = true; } };
}

test('a request shows its title, body, tag and answers as actions, as many as the platform takes', async () => {
  const w = worker({ maxActions: 2 });
  await dispatch(w, 'push', { data: pushData(request) });
  assert.equal(w.rec.shown.length, 1);
  const { title, options } = w.rec.shown[0];
  assert.equal(title, request.title);
  assert.equal(options.body, request.body);
  assert.equal(options.tag, request.tag);
  assert.equal(options.renotify, true);
  assert.equal(options.requireInteraction, true);
  assert.equal(options.silent, false);
  assert.deepEqual(options.actions, [{ action: 'answer:0', title: 'Allow' }, { action: 'answer:1', title: 'Deny' }]);
  assert.equal(options.data.open, request.open);
  assert.equal(options.data.answers.length, 3, 'every answer kept, the actions show what fits');

  // The gate's four answers on a platform showing two: Allow and Deny, each
  // action naming its answer.
  const gate = { ...request, answers: ['allow', 'allow_session', 'deny', 'cancel'].map((o, i) => ({ option: o, label: ['Allow', 'Allow for this session', 'Deny', 'Cancel'][i], url: `https://relay.example/answer/g${i}` })) };
  for (const [max, want] of [[2, [['answer:0', 'Allow'], ['answer:2', 'Deny']]], [3, [['answer:0', 'Allow'], ['answer:1', 'Allow for this session'], ['answer:2', 'Deny']]], [4, [['answer:0', 'Allow'], ['answer:1', 'Allow for this session'], ['answer:2', 'Deny'], ['answer:3', 'Cancel']]]]) {
    const g = worker({ maxActions: max });
    await dispatch(g, 'push', { data: pushData(gate) });
    assert.deepEqual(g.rec.shown[0].options.actions.map((a) => [a.action, a.title]), want, `${max} actions`);
  }
  const gw = worker({ maxActions: 2, fetchStatus: () => 200 });
  await dispatch(gw, 'push', { data: pushData(gate) });
  await dispatch(gw, 'notificationclick', { notification: asNotification(gw.rec.shown[0]), action: 'answer:2' });
  assert.deepEqual(gw.rec.fetched, [{ url: 'https://relay.example/answer/g2', method: 'POST' }], 'the Deny action posts Deny\'s link');
  assert.equal(gw.rec.shown[1].title, 'Denied');

  const one = worker({ maxActions: 1 });
  await dispatch(one, 'push', { data: pushData(request) });
  assert.deepEqual(one.rec.shown[0].options.actions.map((a) => a.title), ['Allow']);
  const none = worker({ maxActions: 0 });
  await dispatch(none, 'push', { data: pushData(request) });
  assert.deepEqual(none.rec.shown[0].options.actions, [], 'a platform without actions gets none (iOS)');
  const unsaid = worker({ maxActions: null });
  await dispatch(unsaid, 'push', { data: pushData(request) });
  assert.equal(unsaid.rec.shown[0].options.actions.length, 2, 'no Notification.maxActions: two');
});

test('close replaces the same tag with the words sent, quietly, without actions', async () => {
  const w = worker();
  await dispatch(w, 'push', { data: pushData(request) });
  await dispatch(w, 'push', { data: pushData({ v: 1, tag: request.tag, title: 'Answered elsewhere', body: 'Bash: go test ./...', close: true, open: request.open, answers: request.answers }) });
  const [, upd] = w.rec.shown;
  assert.equal(upd.title, 'Answered elsewhere');
  assert.equal(upd.options.tag, request.tag, 'same tag: the request\'s notification is replaced');
  assert.deepEqual(upd.options.actions, []);
  assert.deepEqual(upd.options.data.answers, [], 'an update carries no answer to tap');
  assert.equal(upd.options.renotify, false);
  assert.equal(upd.options.silent, true);
  assert.equal(upd.options.requireInteraction, false);
});

test('only what the payload carries is shown; a payload that cannot be read shows a fixed line', async () => {
  const w = worker();
  const odd = { ...request, answers: [{ option: 'allow', label: 'Allow', url: 'javascript:alert(1)' }, { option: 'x', url: 'https://relay.example/answer/x' }, 'junk', null],
    open: 'javascript:alert(1)', extra: 'never shown' };
  await dispatch(w, 'push', { data: pushData(odd) });
  const { options } = w.rec.shown[0];
  assert.deepEqual(options.actions, [{ action: 'answer:0', title: 'x' }], 'a link that is not http(s) is no answer; a missing label shows the option');
  assert.equal(options.data.open, '');
  assert.ok(!JSON.stringify(w.rec.shown).includes('never shown'));

  for (const bad of ['{not json', { v: 2, title: 'from the future' }, null]) {
    const x = worker();
    await dispatch(x, 'push', { data: bad === null ? null : pushData(bad) });
    assert.equal(x.rec.shown[0].title, 'aep-kimi');
    assert.equal(x.rec.shown[0].options.body, 'Something needs you: open the fleet page.');
    assert.equal(x.rec.shown[0].options.tag, undefined);
  }
  const untagged = worker();
  await dispatch(untagged, 'push', { data: pushData({ ...request, tag: '' }) });
  assert.equal(untagged.rec.shown[0].options.renotify, undefined, 'renotify needs a tag');
});

test('an action POSTs its answer link and the notification becomes the outcome', async () => {
  const cases = [
    [1, 200, 'Denied'], [0, 200, 'Allowed'], [2, 200, 'Allowed'], [1, 409, 'Already answered'], [1, 410, 'Too late'],
    [1, 404, 'Answer link unknown'], [1, 500, 'Not answered (the relay said 500)'],
    // Only a 200 is an answer the agent took: delivered and not confirmed,
    // refused by the agent, and refused for the person are each said.
    [0, [202, 'answer-unconfirmed'], 'Sent, not yet confirmed'], [1, [409, 'answer-refused'], 'Refused by the agent'],
    [1, [409, 'answer-used'], 'Already answered'], [0, [403, 'answer-forbidden'], 'Not answered: no longer allowed'],
  ];
  for (const [index, status, want] of cases) {
    const w = worker({ fetchStatus: () => status });
    await dispatch(w, 'push', { data: pushData(request) });
    const n = asNotification(w.rec.shown[0]);
    await dispatch(w, 'notificationclick', { notification: n, action: `answer:${index}` });
    assert.deepEqual(w.rec.fetched, [{ url: request.answers[index].url, method: 'POST' }], `${status}: one POST to the chosen link`);
    assert.ok(n.closed);
    const out = w.rec.shown[1];
    assert.equal(out.title, want, `${status} -> ${want}`);
    assert.equal(out.options.tag, request.tag, 'the outcome replaces the request\'s notification');
    assert.equal(out.options.body, request.title);
    assert.equal(out.options.actions, undefined, 'no actions on an outcome');
    assert.deepEqual(w.rec.opened, []);
  }
  const other = worker();
  await dispatch(other, 'push', { data: pushData({ ...request, answers: [{ option: 'later', label: 'Ask me later', url: 'https://relay.example/answer/tL' }] }) });
  const res = await other.g.aepPush.handleClick(asNotification(other.rec.shown[0]), 'answer:0');
  assert.deepEqual(plain(res), { status: 200, title: 'Answered: Ask me later' });
});

test('an answer the relay could not deliver keeps the request and its actions', async () => {
  const w = worker({ fetchStatus: () => [503, 'answer-undelivered'] });
  await dispatch(w, 'push', { data: pushData(request) });
  const n = asNotification(w.rec.shown[0]);
  await dispatch(w, 'notificationclick', { notification: n, action: 'answer:0' });
  const again = w.rec.shown[1];
  assert.equal(again.title, request.title);
  assert.match(again.options.body, /^Not sent: the relay could not deliver it/);
  assert.equal(again.options.actions.length, 2, 'the link was not spent: its actions stay');
  assert.equal(again.options.tag, request.tag);
});

test('an answer that does not reach the relay keeps the request and its actions', async () => {
  const w = worker({ fetchStatus: () => 'down' });
  await dispatch(w, 'push', { data: pushData(request) });
  await dispatch(w, 'notificationclick', { notification: asNotification(w.rec.shown[0]), action: 'answer:1' });
  const again = w.rec.shown[1];
  assert.equal(again.title, request.title);
  assert.match(again.options.body, /^Not sent/);
  assert.equal(again.options.actions.length, 2);
  assert.equal(again.options.renotify, false);
});

test('a tap opens the page at the request: an open window is shown it and focused, else one opens', async () => {
  const open = worker({ windows: ['https://relay.example/'] });
  await dispatch(open, 'push', { data: pushData(request) });
  await dispatch(open, 'notificationclick', { notification: asNotification(open.rec.shown[0]), action: '' });
  assert.deepEqual(open.rec.messages, [{ type: 'aep-open', url: request.open }]);
  assert.equal(open.rec.focused, 1);
  assert.deepEqual(open.rec.fetched, [], 'a tap answers nothing');

  const closed = worker({ windows: ['https://elsewhere.example/'] });
  await dispatch(closed, 'push', { data: pushData(request) });
  await dispatch(closed, 'notificationclick', { notification: asNotification(closed.rec.shown[0]), action: '' });
  assert.deepEqual(closed.rec.opened, [request.open]);

  const unknownAction = worker();
  await dispatch(unknownAction, 'push', { data: pushData(request) });
  await dispatch(unknownAction, 'notificationclick', { notification: asNotification(unknownAction.rec.shown[0]), action: 'answer:7' });
  assert.deepEqual(unknownAction.rec.fetched, [], 'an action the notification does not hold answers nothing');
  assert.deepEqual(unknownAction.rec.opened, [request.open], 'and opens the page instead');
});

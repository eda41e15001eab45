// The fleet page's service worker: it shows the relay's Web Push
// notifications and answers from their actions. A notification says only
// what the push payload carries (the relay already held it to the
// subscriber's capture ceiling); an action answers only through the one-use
// answer link the payload holds, so no login is needed here.
//
// A classic script without imports, so every browser with Web Push runs it
// (module service workers are not everywhere yet); the page registers it
// with scope "/" (served with Service-Worker-Allowed).
'use strict';

// The payload version this worker reads.
const PAYLOAD_VERSION = 1;
// Shown when a push cannot be read: a browser must show something for
// every push, and nothing from a broken payload is trusted.
const FALLBACK_TITLE = 'aep-kimi';
const FALLBACK_BODY = 'Something needs you: open the fleet page.';
// Actions shown when the platform does not say how many it takes.
const DEFAULT_MAX_ACTIONS = 2;
const ACTION_PREFIX = 'answer:';

function str(v) {
  return typeof v === 'string' ? v : '';
}

// httpURL is v when it is an absolute http(s) URL, else ''.
function httpURL(v) {
  try {
    const u = new URL(str(v));
    return u.protocol === 'https:' || u.protocol === 'http:' ? u.href : '';
  } catch {
    return '';
  }
}

// DENYING names an answer that refuses: when the platform shows fewer
// actions than there are answers, a refusal is kept among them.
const DENYING = /\b(deny|reject|no)\b/i;

// shownAnswers picks the answers a platform showing max actions shows, by
// index: all when they fit; else the first and the first refusal (a gate's
// Allow, Allow for this session, Deny, Cancel shows Allow and Deny on two),
// then the rest in order.
function shownAnswers(answers, max) {
  const all = answers.map((_, i) => i);
  if (answers.length <= max) return all;
  const deny = answers.findIndex((a) => DENYING.test(`${a.option} ${a.label}`));
  const first = deny > 0 ? [0, deny] : [0];
  return [...first, ...all.filter((i) => !first.includes(i))].slice(0, Math.max(0, max)).sort((x, y) => x - y);
}

// notice maps a push payload to showNotification's title and options: the
// title and body as sent, the tag that a later push with the same tag
// replaces, the request's answers as actions (as many as the platform
// shows) while it waits, and none once it is over (close).
function notice(payload, maxActions) {
  const p = payload && typeof payload === 'object' && payload.v === PAYLOAD_VERSION ? payload : null;
  if (!p) return { title: FALLBACK_TITLE, options: { body: FALLBACK_BODY, data: {} } };
  const tag = str(p.tag);
  const close = p.close === true;
  const answers = close || !Array.isArray(p.answers) ? [] : p.answers
    .filter((a) => a && typeof a === 'object' && httpURL(a.url) && (str(a.label) || str(a.option)))
    .map((a) => ({ option: str(a.option), label: str(a.label) || str(a.option), url: httpURL(a.url) }));
  const title = str(p.title) || FALLBACK_TITLE;
  const body = str(p.body);
  const options = {
    body,
    data: { open: httpURL(p.open), answers, title, body },
    actions: shownAnswers(answers, maxActions).map((i) => ({ action: ACTION_PREFIX + i, title: answers[i].label })),
    // An update replaces the request's notification quietly; a request
    // stays until it is dealt with.
    silent: close,
    requireInteraction: !close,
  };
  if (tag) {
    options.tag = tag;
    options.renotify = !close; // renotify is refused without a tag
  }
  return { title, options };
}

// The codes of an answer link's refusals that change what its outcome says
// (the relay's notifier, notify.CodeAnswer*).
const ANSWER_REFUSED = 'answer-refused'; // the agent's side refused it
const ANSWER_UNCONFIRMED = 'answer-unconfirmed'; // delivered, not yet taken (202)
const ANSWER_UNDELIVERED = 'answer-undelivered'; // not delivered: the link still works
const ANSWER_FORBIDDEN = 'answer-forbidden';

// outcome words an answer link's reply, its status and its body's code:
// what the notification becomes. Only a 200 is an answer the agent took.
function outcome(status, code, answer) {
  if (status === 202 || code === ANSWER_UNCONFIRMED) return 'Sent, not yet confirmed';
  if (status >= 200 && status < 300) {
    const w = `${answer.label} ${answer.option}`;
    if (DENYING.test(w) || /\bdenied\b/i.test(w)) return 'Denied';
    if (/\b(allow|allowed|approve|yes)\b/i.test(w)) return 'Allowed';
    return `Answered: ${answer.label}`;
  }
  if (code === ANSWER_REFUSED) return 'Refused by the agent';
  if (status === 409) return 'Already answered';
  if (status === 410) return 'Too late';
  if (status === 404) return 'Answer link unknown';
  if (code === ANSWER_FORBIDDEN) return 'Not answered: no longer allowed';
  return `Not answered (the relay said ${status})`;
}

// retryable says whether an answer link's reply leaves the request
// waiting and the link unused: the relay not reached (0), or reached and
// unable to deliver.
function retryable(status, code) {
  return status === 0 || code === ANSWER_UNDELIVERED;
}

// codeOf reads the code of an answer link's JSON reply ('' for none).
async function codeOf(res) {
  try {
    const body = await res.json();
    return body && typeof body.code === 'string' ? body.code : '';
  } catch {
    return '';
  }
}

function maxActions() {
  const n = self.Notification && self.Notification.maxActions;
  return Number.isInteger(n) ? n : DEFAULT_MAX_ACTIONS;
}

// showPush shows the notification one push carries.
function showPush(data) {
  let payload = null;
  try {
    payload = data ? data.json() : null;
  } catch {
    payload = null;
  }
  const n = notice(payload, maxActions());
  return self.registration.showNotification(n.title, n.options);
}

// answerWith POSTs the answer link of the action chosen on notification n
// and replaces n with the outcome, without actions. It returns the outcome
// and the link's HTTP status (0 when the relay was not reached).
async function answerWith(n, index) {
  const data = n.data || {};
  const a = data.answers[index];
  let status = 0;
  let code = '';
  try {
    const res = await fetch(a.url, { method: 'POST', headers: { Accept: 'application/json' } });
    status = res.status;
    code = await codeOf(res);
  } catch {
    status = 0;
  }
  const keep = { open: data.open, answers: [], title: data.title, body: data.body };
  if (retryable(status, code)) {
    // The request still waits and the link was not spent: its actions stay.
    const why = status === 0 ? 'the relay was not reached' : 'the relay could not deliver it';
    const again = notice({ v: PAYLOAD_VERSION, tag: n.tag, title: data.title, body: `Not sent: ${why}. Try again, or open the page.`, open: data.open, answers: data.answers }, maxActions());
    again.options.renotify = false;
    await self.registration.showNotification(again.title, again.options);
    return { status, title: again.title };
  }
  const title = outcome(status, code, a);
  const opts = { body: data.title || '', data: keep, silent: true };
  if (n.tag) opts.tag = n.tag;
  await self.registration.showNotification(title, opts);
  return { status, title };
}

// openPage focuses a window of the page and shows it the request, or opens
// one at the request's link.
async function openPage(url) {
  const target = url || self.registration.scope;
  const origin = new URL(target).origin;
  const wins = await self.clients.matchAll({ type: 'window', includeUncontrolled: true });
  const win = wins.find((c) => new URL(c.url).origin === origin);
  if (win) {
    win.postMessage({ type: 'aep-open', url: target });
    // Focus needs the tap's activation; without it (a platform that
    // refuses) the window still shows the request when next looked at.
    return win.focus().catch(() => win);
  }
  return self.clients.openWindow(target);
}

// handleClick is what a tap does: an action answers with its option, a
// tap on the notification itself opens the page at the request.
async function handleClick(n, action) {
  const data = n.data || {};
  const m = new RegExp(`^${ACTION_PREFIX}(\\d+)$`).exec(action || '');
  n.close();
  if (m && (data.answers || [])[Number(m[1])]) return answerWith(n, Number(m[1]));
  await openPage(data.open);
  return { status: 0, title: '' };
}

self.addEventListener('install', () => self.skipWaiting());
self.addEventListener('activate', (e) => e.waitUntil(self.clients.claim()));
self.addEventListener('push', (e) => e.waitUntil(showPush(e.data)));
self.addEventListener('notificationclick', (e) => e.waitUntil(handleClick(e.notification, e.action)));

// For the console and DevTools (the tests evaluate in this worker): what a
// push or a tap does, as functions. Only code already running in this
// worker can reach them.
self.aepPush = { notice, outcome, showPush, handleClick };

// The page on a phone: its service worker, "Notify me on this device" (a Web
// Push subscription the relay keeps for this login), the devices notified
// for this login, and the page's link to one request
// (#/request/<session>/<id>, or the relay's /?session=&request=), which a
// notification opens.
import { afterFirstRender, openSession, relayAPI, store, stored } from './app.js';
import * as S from './state.js';

const SW_URL = '/app/sw.js';
const SW_SCOPE = '/';
// This browser's subscription id at the relay, to mark it in the list.
const DEVICE_KEY = 'aep-push-device';
// How long a link waits for its request to reach the page.
const LINK_WAIT_MS = 60 * 1000;
const LINK_POLL_MS = 250;
const LINK_PREFIX = '#/request/';

const $ = (id) => document.getElementById(id);

// requestLink is the page's link to one request.
export function requestLink(session, id) {
  return `${LINK_PREFIX}${encodeURIComponent(session)}/${encodeURIComponent(id)}`;
}

// parseLink reads a link to one request: the page's own fragment form, or
// the query the relay's notifications open (/?session=S&request=ID, or
// /?session=S alone for a session: id ''); null when the URL names none.
export function parseLink(hash, search = '') {
  if (hash.startsWith(LINK_PREFIX)) {
    const parts = hash.slice(LINK_PREFIX.length).split('/');
    if (parts.length !== 2 || !parts[0] || !parts[1]) return null;
    try {
      return { session: decodeURIComponent(parts[0]), id: decodeURIComponent(parts[1]) };
    } catch {
      return null;
    }
  }
  const q = new URLSearchParams(search);
  const session = q.get('session');
  const id = q.get('request') || '';
  return session ? { session, id } : null;
}

// --- what this browser can do --------------------------------------------------

function platform() {
  const ua = navigator.userAgent || '';
  const ios = /iPhone|iPad|iPod/.test(ua) || (/Macintosh/.test(ua) && navigator.maxTouchPoints > 1);
  const standalone = navigator.standalone === true || matchMedia('(display-mode: standalone)').matches;
  return { ios, standalone, android: /Android/.test(ua) };
}

// unsupported says why this browser cannot be notified, or '' when it can.
function unsupported() {
  const p = platform();
  const api = 'serviceWorker' in navigator && 'PushManager' in window && 'Notification' in window;
  if (api && window.isSecureContext) return '';
  if (p.ios && !p.standalone) {
    return 'On iPhone and iPad, notifications work only in the installed page (iOS 16.4 or later): tap Share, then Add to Home Screen, and open aep-kimi from the home screen.';
  }
  if (!window.isSecureContext) {
    return 'Notifications need the page over HTTPS: reach the relay at an https:// address (see "On your phone" in the README).';
  }
  return 'This browser does not offer Web Push notifications.';
}

// deviceName guesses a name for this device; the person can change it.
function deviceName() {
  const ua = navigator.userAgent || '';
  const p = platform();
  const os = p.ios ? (/iPad/.test(ua) || /Macintosh/.test(ua) ? 'iPad' : 'iPhone')
    : p.android ? 'Android' : /Windows/.test(ua) ? 'Windows' : /Mac OS X/.test(ua) ? 'Mac' : /Linux|X11/.test(ua) ? 'Linux' : 'this device';
  const browser = /Edg\//.test(ua) ? 'Edge' : /Firefox\//.test(ua) ? 'Firefox'
    : /Chrome\/|Chromium\/|CriOS\//.test(ua) ? 'Chrome' : /Safari\//.test(ua) ? 'Safari' : 'browser';
  return `${browser} on ${os}`;
}

// --- the relay's notify API ------------------------------------------------------

// notifyAPI calls the relay's notify API, saying in words why it refused.
async function notifyAPI(path, method = 'GET', body) {
  try {
    return await relayAPI(`/notify${path}`, method, body);
  } catch (err) {
    if (err.status === 401 || err.status === 403) throw new Error('log in to this relay first');
    // Without a notifier the relay serves no notify API at all.
    if (err.status === 404 && (path === '/vapid' || path === '/subscriptions')) {
      throw new Error('this relay does not send notifications');
    }
    throw err;
  }
}

function b64urlBytes(s) {
  const b = atob(s.replace(/-/g, '+').replace(/_/g, '/').padEnd(Math.ceil(s.length / 4) * 4, '='));
  return Uint8Array.from(b, (c) => c.charCodeAt(0));
}

function sameKey(a, b) {
  if (!a || !b) return false;
  const x = new Uint8Array(a);
  return x.length === b.length && x.every((v, i) => v === b[i]);
}

function setNote(text) {
  $('notify-note').textContent = text;
}

function thisDevice() {
  return stored(() => localStorage, DEVICE_KEY);
}

async function registration() {
  return navigator.serviceWorker.register(SW_URL, { scope: SW_SCOPE });
}

// subscribe asks for permission (on the click that called it), subscribes
// this browser with the relay's key and gives the subscription to the relay.
async function subscribe() {
  const why = unsupported();
  if (why) {
    setNote(why);
    return;
  }
  const button = $('notify-on');
  button.disabled = true;
  try {
    const perm = await Notification.requestPermission();
    if (perm !== 'granted') {
      setNote(perm === 'denied'
        ? 'Notifications are blocked for this page: allow them in the browser\'s site settings, then try again.'
        : 'Notifications were not allowed.');
      return;
    }
    setNote('Subscribing…');
    const { public_key: publicKey } = await notifyAPI('/vapid');
    const key = b64urlBytes(publicKey);
    await registration();
    const reg = await navigator.serviceWorker.ready;
    let sub = await reg.pushManager.getSubscription();
    if (sub && !sameKey(sub.options.applicationServerKey, key)) {
      // Made for another key (the relay's keys were replaced): it cannot
      // receive this relay's pushes.
      await sub.unsubscribe();
      sub = null;
    }
    if (!sub) sub = await reg.pushManager.subscribe({ userVisibleOnly: true, applicationServerKey: key });
    const device = $('notify-device').value.trim() || deviceName();
    const made = await notifyAPI('/subscriptions', 'POST', { subscription: sub.toJSON(), device });
    store(() => localStorage, DEVICE_KEY, made.id);
    setNote(`This device (${made.device}) is notified when a request waits on you.`);
    await listDevices();
  } catch (err) {
    setNote(`Not subscribed: ${err.message}`);
  } finally {
    button.disabled = false;
  }
}

async function remove(sub) {
  try {
    await notifyAPI(`/subscriptions/${encodeURIComponent(sub.id)}`, 'DELETE');
    if (sub.id === thisDevice()) {
      store(() => localStorage, DEVICE_KEY, '');
      const reg = await navigator.serviceWorker.getRegistration(SW_SCOPE);
      const own = reg && await reg.pushManager.getSubscription();
      if (own) await own.unsubscribe();
    }
    setNote(`${sub.device} is no longer notified.`);
  } catch (err) {
    setNote(`Not removed: ${err.message}`);
  }
  await listDevices();
}

function when(v) {
  const t = Date.parse(v || '');
  return Number.isFinite(t) ? new Date(t).toLocaleString() : '';
}

async function listDevices() {
  const ul = $('notify-devices');
  let list;
  try {
    list = (await notifyAPI('/subscriptions')).subscriptions || [];
  } catch (err) {
    ul.replaceChildren();
    // Said after, never instead of, why this browser cannot be notified
    // (the pane showed it before the list was asked for).
    const why = unsupported();
    setNote(`${why ? `${why} ` : ''}Devices not listed: ${err.message}.`);
    return;
  }
  const mine = thisDevice();
  ul.replaceChildren(...list.map((s) => {
    const li = document.createElement('li');
    li.dataset.device = s.id;
    const name = document.createElement('span');
    name.className = 'device';
    name.textContent = s.device + (s.id === mine ? ' (this device)' : '');
    const meta = document.createElement('span');
    meta.className = 'muted';
    meta.textContent = [s.owner ? `for ${s.owner}` : '', s.created ? `since ${when(s.created)}` : '',
      s.last_ok ? `last delivered ${when(s.last_ok)}` : 'nothing delivered yet'].filter(Boolean).join(' · ');
    const rm = document.createElement('button');
    rm.type = 'button';
    rm.dataset.deviceRemove = s.id;
    rm.textContent = 'Remove';
    rm.setAttribute('aria-label', `Stop notifying ${s.device}`);
    rm.addEventListener('click', () => remove(s));
    li.append(name, meta, rm);
    return li;
  }));
  $('notify-empty').hidden = list.length > 0;
}

function togglePane() {
  const pane = $('notify-pane');
  pane.hidden = !pane.hidden;
  $('notify-toggle').setAttribute('aria-expanded', String(!pane.hidden));
  if (!pane.hidden) {
    const why = unsupported();
    $('notify-on').disabled = Boolean(why);
    setNote(why);
    listDevices();
  }
}

// --- the link to one request ---------------------------------------------------

let linkTimer = null;

// showLinked brings the linked request into view: its inbox entry, marked,
// while it waits; its session once it no longer does. It waits for the
// stream to bring the request, within LINK_WAIT_MS.
function showLinked() {
  clearInterval(linkTimer);
  for (const old of document.querySelectorAll('[data-linked]')) delete old.dataset.linked;
  const link = parseLink(location.hash, location.search);
  if (!link) return;
  const started = Date.now();
  const look = () => {
    const fleet = window.aepFleet;
    if (!link.id) {
      // A link to a session (a usage alert's): its pane, once it is held.
      for (const lane of fleet ? fleet.state.sessions.keys() : []) {
        if (S.session(fleet.state, lane)?.session === link.session) {
          clearInterval(linkTimer);
          openSession(lane);
          return;
        }
      }
      if (Date.now() - started > LINK_WAIT_MS) clearInterval(linkTimer);
      return;
    }
    const item = [...document.querySelectorAll('#inbox > li[data-attention]')]
      .find((li) => li.dataset.attention === link.id && li.dataset.session === link.session);
    if (item) {
      clearInterval(linkTimer);
      item.dataset.linked = '';
      item.scrollIntoView({ block: 'center' });
      item.focus({ preventScroll: true });
      return;
    }
    for (const lane of fleet ? fleet.state.sessions.keys() : []) {
      const s = S.session(fleet.state, lane);
      const req = s.session === link.session && s.attention.get(link.id);
      if (req && req.state !== 'pending') {
        clearInterval(linkTimer);
        openSession(lane);
        return;
      }
    }
    if (Date.now() - started > LINK_WAIT_MS) clearInterval(linkTimer);
  };
  linkTimer = setInterval(look, LINK_POLL_MS);
  look();
}

// --- logging in where there is no address bar -----------------------------------

// tokenOf reads the token from a pasted login URL (…#token=T) or takes the
// paste as the token itself.
export function tokenOf(pasted) {
  const v = pasted.trim();
  const m = /#(?:.*&)?token=([^&]*)/.exec(v);
  if (m) {
    try {
      return decodeURIComponent(m[1].replace(/\+/g, ' '));
    } catch {
      return '';
    }
  }
  return /^[\x21-\x7e]+$/.test(v) && !v.includes('://') ? v : '';
}

// loginForm shows while the page needs a login: the page installed on a
// phone opens at its start URL, without the token the login URL carries,
// and has no address bar to open that URL in. The pasted token takes the
// login URL's own way in (the fragment, never sent to a server).
function loginForm() {
  const form = $('login-form');
  const show = () => { form.hidden = $('conn').dataset.conn !== 'login-needed'; };
  new MutationObserver(show).observe($('conn'), { attributes: true, attributeFilter: ['data-conn'] });
  show();
  form.addEventListener('submit', (e) => {
    e.preventDefault();
    const token = tokenOf($('login-url').value);
    $('login-url').value = '';
    if (!token) {
      $('notice').hidden = false;
      $('notice').textContent = 'That is not a login URL: paste the whole URL that aep-kimi open prints.';
      return;
    }
    location.hash = `token=${encodeURIComponent(token)}`;
    location.reload();
  });
}

// --- start ------------------------------------------------------------------------

function start() {
  loginForm();
  $('notify-toggle').addEventListener('click', togglePane);
  $('notify-on').addEventListener('click', subscribe);
  $('notify-device').placeholder = deviceName();
  window.addEventListener('hashchange', showLinked);
  if (!unsupported()) {
    // The worker starts once the fleet is drawn: the first render needs
    // nothing of it (a subscription registers it itself).
    afterFirstRender
      .then(registration)
      .catch((err) => setNote(`The page's service worker did not start: ${err.message}`));
    // A tap on a notification while the page is open shows its request here.
    navigator.serviceWorker.addEventListener('message', (e) => {
      const m = e.data || {};
      if (m.type !== 'aep-open') return;
      const u = new URL(m.url, location.href);
      const link = u.origin === location.origin ? parseLink(u.hash, u.search) : null;
      const hash = link ? requestLink(link.session, link.id) : '';
      if (hash && hash !== location.hash) location.hash = hash;
      else showLinked();
    });
  }
  showLinked();
}

start();

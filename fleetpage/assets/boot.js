// The page's first requests, begun while the page is still being parsed:
// the relays it shows, the login (with the token the login URL carries
// after #), the socket's worker and, once the login has answered, the
// first relay's socket, which the first render waits on. The page's
// modules run only once it is parsed and first laid out; this classic
// script runs before, from the head, and leaves what it began in
// self.aepBoot for app.js.
'use strict';

self.aepBoot = (() => {
  const boot = { login: null, relays: null, worker: null, workerFailed: false };
  const m = /(?:^#|&)token=([^&]*)/.exec(location.hash);
  if (m) {
    // The token leaves the address bar and history before anything else.
    history.replaceState(null, '', location.pathname + location.search);
    // Read as soon as they arrive: the page's modules find them ready.
    boot.login = (async () => {
      const token = decodeURIComponent(m[1].replace(/\+/g, ' '));
      const r = await fetch('/app/login', {
        method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ token }), credentials: 'same-origin',
      });
      return { ok: r.ok, status: r.status, body: await r.json().catch(() => ({})) };
    })();
  }
  // null: no answer (the relay serving the page is the one relay).
  boot.relays = fetch('/app/relays', { credentials: 'same-origin' })
    .then((r) => (r.ok ? r.json() : null))
    .catch(() => null);
  // The address of a relay's socket, base its path ('' for this one).
  boot.socketURL = (base) => `${location.protocol === 'https:' ? 'wss:' : 'ws:'}//${location.host}${base}/socket`;
  try {
    boot.worker = new Worker('/app/socketworker.js');
    // Until the page's socket takes it over, a failure to load is noted.
    boot.worker.onerror = () => { boot.workerFailed = true; };
  } catch {
    boot.worker = null; // the page's socket starts its own, or none
  }
  if (boot.worker) {
    // The first relay's socket opens once the login has set its cookie,
    // while the modules still load; the page takes it over when it
    // connects (socketworker.js). A login refused opens nothing.
    Promise.all([boot.login || { ok: true }, boot.relays]).then(([login, relays]) => {
      if (!login.ok || boot.workerFailed) return;
      const first = relays && relays.length > 0 ? relays[0] : { base: '' };
      boot.worker.postMessage({ kind: 'warm', url: boot.socketURL(first.base || '') });
    }, () => {});
  }
  return boot;
})();

// openSocket opens the page's socket to url: a WebSocket read by a worker
// (socketworker.js) that hands the page its messages in batches, with the
// WebSocket's own shape (onopen, onmessage per message, onclose with code
// and reason, send, close), so the page handles both alike. Where a worker
// cannot start, it is a plain WebSocket.
let noWorker = typeof Worker !== 'function';
// A worker started before its socket was wanted (warmSocket), and whether
// it failed to load.
let warm = null;
let warmFailed = () => false;

function newWorker() {
  return new Worker(new URL('./socketworker.js', import.meta.url));
}

// warmSocket hands the next openSocket a worker already started (boot.js
// starts it while the page loads); failed says whether it could not load.
export function warmSocket(w, failed) {
  if (!w) return;
  warm = w;
  warmFailed = failed;
}

export function openSocket(url) {
  if (warm && warmFailed()) {
    warm.terminate();
    warm = null;
    noWorker = true;
  }
  if (noWorker) return new WebSocket(url);
  let w = warm;
  warm = null;
  if (!w) {
    try {
      w = newWorker();
    } catch {
      noWorker = true;
      return new WebSocket(url);
    }
  }
  let open = false;
  let closed = false;
  const s = {
    onopen: null,
    onmessage: null,
    onclose: null,
    send(data) {
      if (!closed) w.postMessage({ kind: 'send', data });
    },
    close(code, reason) {
      if (!closed) w.postMessage({ kind: 'close', code, reason });
    },
  };
  const ended = (code, reason) => {
    if (closed) return;
    closed = true;
    w.terminate();
    if (s.onclose) s.onclose({ code, reason });
  };
  w.onmessage = (e) => {
    const m = e.data;
    if (closed) return;
    if (m.kind === 'open') {
      open = true;
      if (s.onopen) s.onopen();
    } else if (m.kind === 'messages') {
      for (const data of m.data) {
        if (closed || !s.onmessage) break;
        s.onmessage({ data });
      }
    } else if (m.kind === 'close') {
      ended(m.code, m.reason);
    }
  };
  // A worker that cannot load (refused, missing): the next socket is a
  // plain one.
  w.onerror = () => {
    if (!open) noWorker = true;
    ended(1006, '');
  };
  w.postMessage({ kind: 'open', url });
  return s;
}

// The page's socket to its relay, read off the page's main thread: a busy
// relay sends an event per message, and a message handled on the main
// thread is a task of its own there. Here they are gathered and handed over
// together, once per turn of this worker, in arrival order; what the page
// sends goes out unchanged. The page falls back to a socket of its own where
// a worker cannot run.
//
// boot.js may open the socket early ('warm'), while the page's modules are
// still loading: until the page asks for that same URL ('open'), what the
// socket says is held here, then handed over in order, so the page's
// first render does not wait for the handshake.
let ws = null;
let url = '';
let attached = false;
let opened = false; // the socket opened before the page attached
let ended = null; // the socket's close before the page attached
let batch = [];
let queued = false;

function flush() {
  queued = false;
  if (!attached || batch.length === 0) return;
  const data = batch;
  batch = [];
  postMessage({ kind: 'messages', data });
}

function dial(to) {
  url = to;
  const s = new WebSocket(to);
  ws = s;
  s.onopen = () => {
    if (attached) postMessage({ kind: 'open' });
    else opened = true;
  };
  s.onmessage = (ev) => {
    if (typeof ev.data !== 'string') return;
    batch.push(ev.data);
    if (attached && !queued) {
      queued = true;
      setTimeout(flush, 0);
    }
  };
  s.onclose = (ev) => {
    if (ws !== s) return;
    if (!attached) {
      ended = { kind: 'close', code: ev.code, reason: ev.reason };
      return;
    }
    flush();
    postMessage({ kind: 'close', code: ev.code, reason: ev.reason });
  };
}

// attach hands the page what the early socket said so far, in order.
function attach() {
  attached = true;
  if (opened) postMessage({ kind: 'open' });
  flush();
  if (ended) postMessage(ended);
}

onmessage = (e) => {
  const m = e.data;
  if (m.kind === 'warm' && !ws) {
    dial(m.url);
  } else if (m.kind === 'open' && !attached) {
    if (ws && url === m.url) {
      attach();
      return;
    }
    if (ws) {
      // Warmed for another relay: that socket is nobody's.
      const early = ws;
      ws = null;
      early.close();
    }
    attached = true;
    dial(m.url);
  } else if (m.kind === 'send' && ws && ws.readyState === WebSocket.OPEN) {
    ws.send(m.data);
  } else if (m.kind === 'close' && ws) {
    ws.close(m.code, m.reason);
  }
};

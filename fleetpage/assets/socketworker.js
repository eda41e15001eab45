// The page's socket to its relay, read off the page's main thread: a busy
// relay sends an event per message, and a message handled on the main
// thread is a task of its own there. Here they are gathered and handed over
// together, once per turn of this worker, in arrival order; what the page
// sends goes out unchanged. The page falls back to a socket of its own where
// a worker cannot run.
let ws = null;
let batch = [];
let queued = false;

function flush() {
  queued = false;
  if (batch.length === 0) return;
  const data = batch;
  batch = [];
  postMessage({ kind: 'messages', data });
}

onmessage = (e) => {
  const m = e.data;
  if (m.kind === 'open' && !ws) {
    ws = new WebSocket(m.url);
    ws.onopen = () => postMessage({ kind: 'open' });
    ws.onmessage = (ev) => {
      if (typeof ev.data !== 'string') return;
      batch.push(ev.data);
      if (!queued) {
        queued = true;
        setTimeout(flush, 0);
      }
    };
    ws.onclose = (ev) => {
      flush();
      postMessage({ kind: 'close', code: ev.code, reason: ev.reason });
    };
  } else if (m.kind === 'send' && ws && ws.readyState === WebSocket.OPEN) {
    ws.send(m.data);
  } else if (m.kind === 'close' && ws) {
    ws.close(m.code, m.reason);
  }
};

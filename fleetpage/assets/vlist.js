// The fleet list's window: which rows of a group's list lie near the
// viewport, worked out from the geometry alone (no DOM), so the page keeps
// only those in the document.

// span is the window over a list of n rows laid out in cols columns, each
// line pitch px tall, whose top is at listTop: the rows [from, to) on the
// lines that meet [viewTop, viewBottom) (viewport px, the overscan
// included), and the px above and below them (before, after) that keep the
// list its whole height. keep, when not -1, is a row kept in the window
// (the focused one) as long as the window then holds at most maxRows rows.
export function span(n, cols, pitch, listTop, viewTop, viewBottom, keep = -1, maxRows = Infinity) {
  const lines = Math.ceil(n / Math.max(1, cols));
  if (n === 0 || !(pitch > 0)) return { from: 0, to: 0, before: 0, after: lines * Math.max(0, pitch || 0), lines };
  const c = Math.max(1, cols);
  let first = clamp(Math.floor((viewTop - listTop) / pitch), 0, lines);
  let last = clamp(Math.ceil((viewBottom - listTop) / pitch), first, lines);
  if (keep >= 0 && keep < n) {
    const line = Math.floor(keep / c);
    const f = Math.min(first, line);
    const l = Math.max(last, line + 1);
    if ((l - f) * c <= maxRows) {
      first = f;
      last = l;
    }
  }
  return { from: first * c, to: Math.min(n, last * c), before: first * pitch, after: (lines - last) * pitch, lines };
}

function clamp(x, lo, hi) {
  return Math.min(hi, Math.max(lo, x));
}

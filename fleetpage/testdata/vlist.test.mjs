// The fleet list's window (assets/vlist.js): which rows are drawn for a
// list at a given place under the viewport, and the padding that keeps the
// list its whole height.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { span } from '../assets/vlist.js';

// rowsMeeting is every row a browser would show of the whole list laid
// out in the view [viewTop, viewBottom).
function rowsMeeting(n, cols, pitch, listTop, viewTop, viewBottom) {
  const out = new Set();
  for (let i = 0; i < n; i++) {
    const top = listTop + Math.floor(i / cols) * pitch;
    if (top < viewBottom && top + pitch > viewTop) out.add(i);
  }
  return out;
}

test('the window holds every row that meets the view, on whole lines, and the list keeps its height', () => {
  for (const cols of [1, 2, 3]) {
    for (const n of [0, 1, 7, 100, 500]) {
      for (const listTop of [-40000, -5000, -333.5, 0, 120, 899, 5000]) {
        const pitch = 83.2;
        const w = span(n, cols, pitch, listTop, -450, 1350);
        const lines = Math.ceil(n / cols);
        assert.equal(w.lines, lines);
        assert.ok(Math.abs(w.before + w.after + Math.ceil((w.to - w.from) / cols) * pitch - lines * pitch) < 1e-6, `height kept (n ${n}, cols ${cols}, top ${listTop})`);
        assert.equal(w.from % cols, 0, 'starts on a line');
        assert.ok(Math.abs(w.before - (w.from / cols) * pitch) < 1e-6, 'padding above is the lines not drawn');
        for (const i of rowsMeeting(n, cols, pitch, listTop, -450, 1350)) assert.ok(i >= w.from && i < w.to, `row ${i} meets the view but is not drawn (n ${n}, cols ${cols}, top ${listTop}: ${w.from}-${w.to})`);
        // Only rows on lines meeting the view: at most one line more than fits.
        assert.ok(w.to - w.from <= (Math.ceil(1800 / pitch) + 1) * cols, `${w.to - w.from} rows drawn`);
      }
    }
  }
});

test('a list entirely above or below the view draws nothing', () => {
  assert.deepEqual(span(500, 2, 80, 2000, -450, 1350), { from: 0, to: 0, before: 0, after: 250 * 80, lines: 250 });
  const above = span(500, 2, 80, -30000, -450, 1350);
  assert.equal(above.to - above.from, 0);
  assert.equal(above.before + above.after, 250 * 80);
});

test('the focused row stays in the window within the bound, and is let go beyond it', () => {
  const w = span(500, 1, 80, -8000, -450, 1350, 3, 200);
  assert.equal(w.from, 3);
  assert.ok(w.to > 100 && w.to <= 120);
  const far = span(500, 1, 80, -30000, -450, 1350, 3, 200);
  assert.ok(far.from > 300, `a focused row 370 rows away is let go (${far.from})`);
  const inside = span(500, 2, 80, -8000, -450, 1350, 215, 200);
  assert.deepEqual(inside, span(500, 2, 80, -8000, -450, 1350), 'a focused row already drawn changes nothing');
});

test('no measure yet: nothing drawn, no padding', () => {
  assert.deepEqual(span(10, 1, 0, 0, 0, 900), { from: 0, to: 0, before: 0, after: 0, lines: 10 });
});

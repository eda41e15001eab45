// apply.mjs times the page's fold on a fleet's replay: apply() of every
// event into a new state, then the derivation of every session, for two
// builds of state.js in one process, alternating, fresh event objects each
// round (the page keeps the objects it applies). With --expose-gc the
// collector runs, untimed, before each part, so neither part pays for the
// other's garbage; the total is timed without that.
//
//	go run ./bench/fleetpage -corpus /tmp/fleet.ndjson
//	git show f976721:fleetpage/assets/state.js > /tmp/old-state.js
//	node --expose-gc bench/fleetpage/apply.mjs /tmp/fleet.ndjson fleetpage/assets/state.js /tmp/old-state.js
import { copyFileSync, mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';

const [corpus, newer, older, roundsArg] = process.argv.slice(2);
if (!corpus || !newer || !older) {
  console.error('usage: node apply.mjs CORPUS.ndjson STATE.js BASELINE-STATE.js [ROUNDS]');
  process.exit(2);
}
const rounds = Number(roundsArg || 12);
const lines = readFileSync(corpus, 'utf8').split('\n').filter((l) => l !== '');

// The page serves its modules as .js; Node reads ES modules from .mjs.
async function load(file, name) {
  const to = join(mkdtempSync(join(tmpdir(), 'apply-')), `${name}.mjs`);
  copyFileSync(resolve(file), to);
  return import(pathToFileURL(to).href);
}

const gc = globalThis.gc || (() => {});
const builds = [['this', await load(newer, 'this')], ['baseline', await load(older, 'baseline')]];
const parts = ['apply', 'derive', 'total'];
const times = Object.fromEntries(builds.map(([name]) => [name, Object.fromEntries(parts.map((p) => [p, []]))]));
for (let i = 0; i < rounds; i++) {
  for (const [name, S] of i % 2 ? [...builds].reverse() : builds) {
    const fold = (between) => {
      const events = lines.map((l) => JSON.parse(l));
      between();
      const t0 = performance.now();
      const st = S.newState();
      for (const ev of events) S.apply(st, ev);
      const t1 = performance.now();
      between();
      const t2 = performance.now();
      for (const id of st.sessions.keys()) S.session(st, id);
      const t3 = performance.now();
      if (st.version !== lines.length) throw new Error(`${name}: applied ${st.version} of ${lines.length}`);
      return [t1 - t0, t3 - t2, t3 - t0];
    };
    const [apply, derive] = fold(gc);
    gc();
    const [, , total] = fold(() => {});
    times[name].apply.push(apply);
    times[name].derive.push(derive);
    times[name].total.push(total);
  }
}
const median = (xs) => [...xs].sort((a, b) => a - b)[xs.length >> 1];
console.log(`${lines.length} events, median of ${rounds} rounds each, alternating`);
for (const part of parts) {
  const a = median(times.this[part]);
  const b = median(times.baseline[part]);
  console.log(`${part.padEnd(7)} this ${a.toFixed(1)} ms, baseline ${b.toFixed(1)} ms: ${(a / b).toFixed(2)}x`);
}

package stacktest

import (
	"testing"

	"github.com/aep-kimi/aep-kimi/internal/testkit/fixtures"
)

// EnvShots names a directory the page's screenshots go to (1280 and 360 px,
// light and dark); unset, none are written.
const EnvShots = "AEP_SHOTS"

// ShotGolden is the structure the README's picture shows (under the test's
// package), which the test holds the page to without -update.
const ShotGolden = "testdata/fleet-shot.golden"

// ReadmeShot is the README's picture of the page.
func ReadmeShot(t testing.TB) string { return fixtures.InModule(t, "docs", "fleet.png") }

// ShotStructureJS describes what the page shows, in words that stay the
// same from one real session to the next (no ids, no times).
const ShotStructureJS = `(() => {
  const box = (s) => document.querySelector(s).getBoundingClientRect();
  const vis = (s) => [...document.querySelectorAll(s)].filter((e) => e.offsetParent !== null);
  const fleet = box('#fleet'), detail = document.getElementById('session-pane');
  const d = detail.hidden ? null : detail.getBoundingClientRect();
  const groups = vis('#fleet .group').map((g) => g.dataset.group + '=' + g.querySelectorAll('li[data-session]').length);
  const sel = document.querySelector('#fleet li[data-selected]');
  return [
    'inbox: ' + vis('#inbox > li').length + ' waiting, answers ' + vis('#inbox [data-option], #inbox [data-cancel]').map((b) => b.textContent).join(' | '),
    'countdown: ' + vis('#inbox [data-countdown]').map((c) => c.textContent.replace(/[0-9]+s/, 'Ns')).join(),
    'latest trace: ' + vis('#answered > li').slice(0, 1).map((l) => l.textContent.replace(/, [0-9]+s ago.*/, '')).join(),
    'fleet: ' + groups.join(' '),
    'selected: ' + (sel ? sel.dataset.state : 'none'),
    'detail: ' + (!d ? 'closed' : d.left >= fleet.right ? 'beside the list' : 'below or over the list'),
    'timeline: ' + vis('#timeline [data-tool]').map((t) => t.dataset.kind).join(' '),
  ].join('\n') + '\n';
})()`

// The README picture and screenshots, made from real sessions in
// Chromium so they show what a person sees.

package e2e

import (
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"

	"github.com/aep-kimi/aep-kimi/fleetpage"
	"github.com/aep-kimi/aep-kimi/internal/testkit/browsertest"
	"github.com/aep-kimi/aep-kimi/internal/testkit/kimiharness"
	"github.com/aep-kimi/aep-kimi/internal/testkit/stacktest"
)

var update = flag.Bool("update", false, "rewrite the page's picture and its structure golden")

// The README's picture and the screenshots come from real Kimi sessions
// through the real adapter and relay: one call the page allowed, one it
// denied, and a third still held, with the denied session open and its
// finished turn rated thumbs up from the page. With
// -update the picture and its structure are rewritten; without, the page
// must show the same structure.
func TestE2EPageShots(t *testing.T) {
	t.Parallel()
	kimi := kimiharness.Require(t)
	st := stacktest.StartStack(t, "AEP_KIMI_CONTROL=1", "AEP_ATTENTION_TIMEOUT_MS=8000")
	b := browsertest.New(t, 1280, 900)
	b.MustRun("open the login URL", chromedp.Navigate(fleetpage.LoginURL(st.RelayURL, st.Token)))
	b.WaitJS("the page is live", `document.getElementById('conn').dataset.conn === 'live'`)

	// answered runs one real session whose one held call the page answers
	// with option; it returns the session's id.
	answered := func(option string) string {
		out := make(chan kimiharness.PrintRun, 1)
		go func() {
			out <- stacktest.Scenario(t, kimi, stacktest.MarkerScript(t, filepath.Join(t.TempDir(), "marker")), st.HookCmd(t))
		}()
		b.WaitJS("the held call", `document.querySelector('#inbox [data-attention] [data-option="`+option+`"]') !== null`)
		var session string
		b.Eval("its session", `document.querySelector('#inbox [data-attention]').dataset.session`, &session)
		b.Click("answer "+option, `#inbox [data-attention] [data-option="`+option+`"]`)
		<-out
		b.WaitJS("the session ended", `document.querySelector('#fleet [data-session=`+browsertest.Quote(session)+`][data-state="ended"]') !== null`)
		return session
	}
	answered("allow")
	denied := answered("deny")
	st.WaitQuiet(t)

	held := make(chan kimiharness.PrintRun, 1)
	go func() {
		held <- stacktest.Scenario(t, kimi, stacktest.MarkerScript(t, filepath.Join(t.TempDir(), "marker")), st.HookCmd(t))
	}()
	// Its answers come with the roster's word that the session is claimed,
	// which can trail the request itself.
	b.WaitJS("the third call held, with its countdown and answers", `document.querySelector('#inbox [data-attention] [data-countdown]') !== null && document.querySelector('#inbox [data-attention] [data-option]') !== null`)
	b.Click("open the denied session", `#fleet [data-session=`+browsertest.Quote(denied)+`] button`)
	b.WaitJS("its timeline, the denied call", `document.querySelector('#timeline [data-tool]') !== null`)
	// Its finished turn rated from the page, so the shots show a rating.
	b.WaitJS("the finished turn's thumbs", `document.querySelector('#timeline [data-rate] [data-verdict="up"]') !== null`)
	b.MustRun("type a note", chromedp.SendKeys(`#timeline [data-rate] [data-rate-note]`, "stopped before it wrote", chromedp.ByQuery))
	b.Click("thumbs up", `#timeline [data-rate] [data-verdict="up"]`)
	b.WaitJS("the rating on the turn", `document.querySelector('#timeline [data-kind="feedback"][data-verdict="up"][data-by="owner"]') !== null`)

	var structure string
	b.Eval("the page's structure", stacktest.ShotStructureJS, &structure)
	dir := os.Getenv(stacktest.EnvShots)
	shoot := func(name string, width, height int64, scheme string) []byte {
		var png []byte
		b.MustRun("screenshot "+name, chromedp.EmulateViewport(width, height),
			emulation.SetEmulatedMedia().WithFeatures([]*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: scheme}}),
			chromedp.CaptureScreenshot(&png))
		if dir != "" {
			if err := os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return png
	}
	if dir != "" {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	readme := shoot("fleet-1280-light", 1280, 900, "light")
	shoot("fleet-1280-dark", 1280, 900, "dark")
	shoot("session-360-light", 360, 740, "light")
	shoot("session-360-dark", 360, 740, "dark")
	b.MustRun("back to the list, at its top", chromedp.Evaluate(`document.getElementById('session-close').click(); scrollTo(0, 0)`, nil))
	shoot("fleet-360-light", 360, 740, "light")
	shoot("fleet-360-dark", 360, 740, "dark")
	b.Click("let the held call run", `#inbox [data-attention] [data-option="allow"]`)
	<-held

	if *update {
		if err := os.WriteFile(stacktest.ReadmeShot(t), readme, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(stacktest.ShotGolden, []byte(structure), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(stacktest.ShotGolden)
	if err != nil {
		t.Fatalf("%v (run with -update to write it)", err)
	}
	if structure != string(want) {
		t.Errorf("the page's structure differs from the README picture's (go test -run TestE2EPageShots -update rewrites both):\ngot:\n%s\nwant:\n%s", structure, want)
	}
}

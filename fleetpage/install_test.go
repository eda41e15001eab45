package fleetpage_test

import (
	"encoding/json"
	"image/png"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/aep-kimi/aep-kimi/fleetpage"
)

// The page installs: its manifest is served as one, names the page's root
// as start and scope, standalone, in the page's light colours, with PNG
// icons of the sizes it claims, maskable among them; the service worker
// is served as JavaScript, allowed the root as its scope, under the page's
// CSP; the page links both and an iPhone's touch icon.
func TestInstallable(t *testing.T) {
	t.Parallel()
	base, _ := startRelay(t, testToken, fleetpage.Config{})
	res := do(t, base, req{path: "/app/manifest.webmanifest"})
	if ct := res.Header.Get("Content-Type"); res.StatusCode != http.StatusOK || ct != "application/manifest+json" {
		t.Fatalf("manifest: %d, Content-Type %q", res.StatusCode, ct)
	}
	var m struct {
		Name            string `json:"name"`
		ShortName       string `json:"short_name"`
		StartURL        string `json:"start_url"`
		Scope           string `json:"scope"`
		Display         string `json:"display"`
		BackgroundColor string `json:"background_color"`
		ThemeColor      string `json:"theme_color"`
		Icons           []struct{ Src, Sizes, Type, Purpose string }
	}
	if err := json.NewDecoder(res.Body).Decode(&m); err != nil {
		t.Fatalf("manifest is not JSON: %v", err)
	}
	if m.Name == "" || m.ShortName == "" || len(m.ShortName) > 12 || m.StartURL != "/" || m.Scope != "/" || m.Display != "standalone" {
		t.Errorf("manifest %+v", m)
	}
	// The light scheme's background (style.css --bg): the splash and bar
	// match the page a phone opens in light mode; index.html gives dark its own.
	if m.BackgroundColor != "#fbfbfa" || m.ThemeColor != "#fbfbfa" {
		t.Errorf("colours %s/%s, want the page's light --bg", m.BackgroundColor, m.ThemeColor)
	}
	purposes := map[string]bool{}
	for _, ic := range m.Icons {
		purposes[ic.Purpose+" "+ic.Sizes] = true
		r := do(t, base, req{path: ic.Src})
		img, err := png.Decode(r.Body)
		if r.StatusCode != http.StatusOK || r.Header.Get("Content-Type") != "image/png" || err != nil {
			t.Fatalf("icon %s: %d %q %v", ic.Src, r.StatusCode, r.Header.Get("Content-Type"), err)
		}
		w, h, _ := strings.Cut(ic.Sizes, "x")
		if strconv.Itoa(img.Bounds().Dx()) != w || strconv.Itoa(img.Bounds().Dy()) != h {
			t.Errorf("icon %s is %v, the manifest says %s", ic.Src, img.Bounds().Size(), ic.Sizes)
		}
	}
	for _, want := range []string{"maskable 192x192", "maskable 512x512", "any 192x192", "any 512x512"} {
		if !purposes[want] {
			t.Errorf("no %s icon", want)
		}
	}

	res = do(t, base, req{path: "/app/sw.js"})
	body, _ := io.ReadAll(res.Body)
	if res.StatusCode != http.StatusOK || !strings.Contains(res.Header.Get("Content-Type"), "javascript") || len(body) == 0 {
		t.Fatalf("service worker: %d %q", res.StatusCode, res.Header.Get("Content-Type"))
	}
	if got := res.Header.Get("Service-Worker-Allowed"); got != "/" {
		t.Errorf("Service-Worker-Allowed %q, want / (the worker under /app/ serves the whole page)", got)
	}
	if csp := res.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "connect-src 'self'") {
		t.Errorf("the worker's CSP %q", csp)
	}
	if got := do(t, base, req{path: "/app/app.js"}).Header.Get("Service-Worker-Allowed"); got != "" {
		t.Errorf("app.js carries Service-Worker-Allowed %q: only the worker may widen its scope", got)
	}

	res = do(t, base, req{path: "/"})
	html, _ := io.ReadAll(res.Body)
	for _, want := range []string{`rel="manifest" href="/app/manifest.webmanifest"`, `rel="apple-touch-icon"`,
		`name="theme-color" content="#141416" media="(prefers-color-scheme: dark)"`, `src="/app/push.js"`} {
		if !strings.Contains(string(html), want) {
			t.Errorf("the page lacks %s", want)
		}
	}
}

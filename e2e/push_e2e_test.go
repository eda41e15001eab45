// Web Push to a phone-sized page in real Chromium: the service worker,
// the push and the answer it sends back to the held call.

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/aep-kimi/aep-kimi/aep"
	"github.com/aep-kimi/aep-kimi/fleetpage"
	"github.com/aep-kimi/aep-kimi/internal/testkit/browsertest"
	"github.com/aep-kimi/aep-kimi/internal/testkit/kimiharness"
	"github.com/aep-kimi/aep-kimi/internal/testkit/pushtest"
	"github.com/aep-kimi/aep-kimi/internal/testkit/stacktest"
	"github.com/aep-kimi/aep-kimi/internal/testkit/stacktest/notifytest"
	"github.com/aep-kimi/aep-kimi/mapping"
	"github.com/aep-kimi/aep-kimi/notify"
	"github.com/aep-kimi/aep-kimi/rules"
)

// The phone, in real Chromium at phone width with the built
// binaries and the real Kimi: the page subscribes ("Notify me on this
// device", the relay's VAPID key) and lists the device; a call Kimi holds is
// pushed to it, encrypted, and the test push service decrypts it; the
// page's service worker shows it with Allow and Deny; Deny answers through
// its link: the held hook denies the call, and the stream says the owner
// answered from a push; the update that follows replaces the notification
// without actions; the device is removed from the page.
func TestE2EPushPhone(t *testing.T) {
	t.Parallel()
	kimi := kimiharness.Require(t)
	b := browsertest.New(t, 360, 800)
	st := stacktest.NewUpStack(t)

	marker := filepath.Join(t.TempDir(), "denied")
	mock := kimiharness.StartMock(t, stacktest.BashSteps(t, "touch "+marker))
	home, work := t.TempDir(), t.TempDir()
	kimiharness.WriteWebConfig(t, home, mock.Port)
	write := []string{"write", "kimi-code", "--home", home, "--daemon", st.HookTo, "--aep-home", st.Home, "--kimi-version", "2.1.0", "--control"}
	if code, out := stacktest.SetupCLI(t, write...); code != 0 {
		t.Fatalf("aep-setup write: exit %d\n%s", code, out)
	}
	// The phone's push service, on this machine: the relay is told it may
	// push there.
	ps := pushtest.New(t)
	st.Up(t, []string{ps.Env()}, "--control", "--web=false", "--kimi-home", home)

	// The subscription the page will make with the relay's key.
	key := notifytest.VapidKey(t, st)
	sub, err := ps.Subscribe(key)
	if err != nil {
		t.Fatal(err)
	}
	b.MustRun("the push service stand-in", chromedp.ActionFunc(func(ctx context.Context) error {
		_, err := page.AddScriptToEvaluateOnNewDocument(fmt.Sprintf(notifytest.PushManagerJS, sub.JSON(), browsertest.Quote(key))).Do(ctx)
		return err
	}))
	push := b.EnablePush(st.RelayURL)
	b.MustRun("log in", chromedp.Navigate(fleetpage.LoginURL(st.RelayURL, st.Token)))
	push.Ready()

	// Notify me on this device.
	b.Click("the notifications pane", "#notify-toggle")
	b.MustRun("name the device", chromedp.SetValue("#notify-device", "Pixel 8", chromedp.ByID))
	b.Click("notify me", "#notify-on")
	b.WaitJS("the device listed as this one", `[...document.querySelectorAll('#notify-devices li')].some((li) => li.textContent.includes('Pixel 8 (this device)') && li.textContent.includes('for owner'))`)

	done := stacktest.Async(t, func() string { return stacktest.PrintKimi(t, kimi, home, work, "Tidy the build.") })
	held := st.WaitEvent(t, func(e *aep.Event) bool {
		return e.Type == "attention.requested" && strings.Contains(fmt.Sprint(stacktest.DataOf(e)["prompt"]), "touch")
	})
	ctx, cancel := context.WithTimeout(t.Context(), browsertest.Wait)
	defer cancel()
	m, err := ps.Next(ctx, sub, 0)
	if err != nil {
		t.Fatal(err)
	}
	var p notify.PushPayload
	if err := json.Unmarshal(m.Plaintext, &p); err != nil {
		t.Fatalf("the push is not the payload: %v: %s", err, m.Plaintext)
	}
	open, _ := url.Parse(p.Open)
	if p.V != 1 || p.Close || p.Tag == "" || len(p.Answers) != 4 || open == nil || open.Query().Get("request") != held.ID || open.Query().Get("session") != held.Session {
		t.Fatalf("push payload %s", m.Plaintext)
	}
	if strings.Contains(string(m.Plaintext), marker) {
		t.Errorf("the push carries the command's argument, above the metadata ceiling: %s", m.Plaintext)
	}

	// The push service hands it to the phone's browser.
	push.Deliver(m.Plaintext)
	n := push.Notification("for the held call", func(n browsertest.Notification) bool { return n.Tag == p.Tag })
	if n.Title != p.Title || n.Body != p.Body || len(n.Actions) != 2 || n.Actions[0].Title != "Allow" || n.Actions[1].Title != "Deny" {
		t.Fatalf("the notification: %+v (payload %s)", n, m.Plaintext)
	}
	if tapped := push.Tap(p.Tag, n.Actions[1].Action); tapped != (browsertest.Tapped{Status: http.StatusOK, Title: "Denied"}) {
		t.Fatalf("Deny: %+v", tapped)
	}
	push.Notification("the outcome", func(n browsertest.Notification) bool {
		return n.Tag == p.Tag && n.Title == "Denied" && len(n.Actions) == 0
	})

	<-done
	st.WaitQuiet(t)
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("the denied call ran")
	}
	_, _, evs := st.OneSession(t)
	if c := stacktest.TypeCounts(evs); c["tool.denied"] != 1 {
		t.Fatalf("stream %v: want the held call denied", c)
	}
	var cmd *aep.Event
	for _, b := range st.RelayEvents(t, held.Session) {
		e, err := aep.ParseEvent(b)
		if err != nil {
			t.Fatal(err)
		}
		if e.Type == rules.CommandType && e.Subject == held.ID {
			cmd = e
		}
	}
	if cmd == nil || cmd.Agent != mapping.AgentPush {
		t.Fatalf("no command from the push on the stream (%v)", cmd)
	}
	if by, _ := cmd.ExtString(mapping.ExtBy); by != "owner" {
		t.Errorf("the push's command is stamped %q, want the subscription's owner", by)
	}
	answered := false
	for _, e := range evs {
		if e.Type == "attention.answered" && e.Subject == held.ID {
			d := stacktest.DataOf(e)
			answered = d["by"] == "owner" && fmt.Sprint(d["answer"]) == "map[option:deny]"
			if !answered {
				t.Errorf("the answer is recorded as %v, want the owner's deny", d)
			}
		}
	}
	if !answered {
		t.Fatal("no attention.answered for the held call")
	}

	// The request is over: the update replaces the notification, quietly,
	// without actions.
	upd, err := ps.Next(ctx, sub, 1)
	if err != nil {
		t.Fatal(err)
	}
	var u notify.PushPayload
	if err := json.Unmarshal(upd.Plaintext, &u); err != nil || !u.Close || u.Tag != p.Tag || len(u.Answers) != 0 {
		t.Fatalf("the update: %s (%v)", upd.Plaintext, err)
	}
	push.Deliver(upd.Plaintext)
	push.Notification("replaced by the update", func(n browsertest.Notification) bool {
		return n.Tag == p.Tag && n.Title == u.Title && len(n.Actions) == 0 && n.Silent
	})
	if shown := push.Shown(p.Tag); len(shown) != 1 {
		t.Errorf("%d notifications for the request, want the one replaced", len(shown))
	}

	// The device is removed from the page.
	b.Click("remove the device", "#notify-devices button[data-device-remove]")
	b.WaitJS("no device listed", `document.querySelectorAll('#notify-devices li').length === 0 && !document.getElementById('notify-empty').hidden`)
}

// Notifications end to end: webhook answer links that answer the real
// held hook once, and `aep-kimi notify` against the built relay.

package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aep-kimi/aep-kimi/aep"
	"github.com/aep-kimi/aep-kimi/internal/testkit/kimiharness"
	"github.com/aep-kimi/aep-kimi/internal/testkit/netaddr"
	"github.com/aep-kimi/aep-kimi/internal/testkit/poll"
	"github.com/aep-kimi/aep-kimi/internal/testkit/pushtest"
	"github.com/aep-kimi/aep-kimi/internal/testkit/stacktest"
	"github.com/aep-kimi/aep-kimi/internal/testkit/stacktest/notifytest"
	"github.com/aep-kimi/aep-kimi/mapping"
	"github.com/aep-kimi/aep-kimi/notify"
	"github.com/aep-kimi/aep-kimi/notify/webhook"
	"github.com/aep-kimi/aep-kimi/relay"
	"github.com/aep-kimi/aep-kimi/rules"
)

// The issue's Done-when, with the built binaries and the real Kimi: `up
// --control --notify webhook:URL` tells a local receiver of a held call
// within 2 s, with its answer links; a GET on Deny answers nothing; a POST
// denies the held hook, attributed on the stream; a second POST is
// refused; a rule-answered call sends nothing; a link past its request's
// deadline is gone; and a second target that never answers holds none of
// it up.
func TestE2ENotifyWebhook(t *testing.T) {
	t.Parallel()
	kimi := kimiharness.Require(t)
	st := stacktest.NewUpStack(t)
	recv := notifytest.NewWebhookReceiver(t)
	stall := make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		select {
		case <-stall:
		case <-r.Context().Done():
		}
	}))
	defer slow.Close()
	defer close(stall)

	marker := filepath.Join(t.TempDir(), "denied")
	script := stacktest.BashSteps(t, "echo ok", "touch "+marker, "ls")
	mock := kimiharness.StartMock(t, script)
	home, work := t.TempDir(), t.TempDir()
	kimiharness.WriteWebConfig(t, home, mock.Port)
	write := []string{"write", "kimi-code", "--home", home, "--daemon", st.HookTo, "--aep-home", st.Home, "--kimi-version", "2.1.0", "--control"}
	if code, out := stacktest.SetupCLI(t, write...); code != 0 {
		t.Fatalf("aep-setup write: exit %d\n%s", code, out)
	}
	st.Up(t, []string{"AEP_ATTENTION_TIMEOUT_MS=6000"}, "--control", "--web=false", "--kimi-home", home, "--notify", "webhook:"+slow.URL+"/hook", "--notify", "webhook:"+recv.URL+"/hook")
	echo := st.AddRule(t, "allow", "--tool", "Bash", "--args", "echo *")

	done := stacktest.Async(t, func() string { return stacktest.PrintKimi(t, kimi, home, work, "Tidy the build.") })

	// The second call waits on a person and reaches the receiver.
	held := st.WaitEvent(t, func(e *aep.Event) bool {
		return e.Type == "attention.requested" && strings.Contains(fmt.Sprint(stacktest.DataOf(e)["prompt"]), "touch")
	})
	var body webhook.Body
	var arrived time.Time
	poll.Must(t, 5*time.Second, "the held call at the receiver", func() bool {
		var ok bool
		body, arrived, ok = recv.Request(held.ID)
		return ok
	})
	latency := arrived.Sub(stacktest.EventTime(t, held))
	t.Logf("attention.requested to the receiver: %v", latency)
	if latency > 2*time.Second {
		t.Errorf("the receiver got the request %v after it was raised, want within 2 s", latency)
	}
	if body.Session != held.Session || body.Tool != "Bash" || len(body.Answers) != 4 || body.Deadline == nil {
		t.Fatalf("webhook body: %+v", body)
	}
	deny := notifytest.LinkFor(t, body, "deny")
	if !strings.HasPrefix(deny, st.RelayURL+relay.AnswerPath) {
		t.Fatalf("deny link %q is not under the relay's address", deny)
	}

	// A GET (a chat app's preview) answers nothing.
	resp, err := http.Get(deny)
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(page), `<form method="post">`) {
		t.Fatalf("GET deny: %d %s", resp.StatusCode, page)
	}
	// The POST denies the held hook: a GET that had answered would have
	// used the link, and the POST would find it used.
	if code, m := stacktest.PostLink(t, deny); code != 200 || m["answered"] != true || m["option"] != "deny" || m["request"] != held.ID {
		t.Fatalf("POST deny (after a GET): %d %v", code, m)
	}
	commands := func() (n int) {
		for _, b := range st.RelayEvents(t, held.Session) {
			if e, _ := aep.ParseEvent(b); e != nil && e.Type == rules.CommandType && e.Subject == held.ID {
				n++
			}
		}
		return n
	}
	poll.Must(t, 5*time.Second, "the POST's command on the relay", func() bool { return commands() > 0 })
	if n := commands(); n != 1 {
		t.Fatalf("%d commands answer the request, want the POST's alone", n)
	}
	if code, m := stacktest.PostLink(t, deny); code != http.StatusConflict || m["code"] != notify.CodeAnswerUsed {
		t.Fatalf("second POST: %d %v, want 409 %s", code, m, notify.CodeAnswerUsed)
	}

	// The third call is not answered: past its deadline its links are gone.
	third := st.WaitEvent(t, func(e *aep.Event) bool {
		return e.Type == "attention.requested" && strings.HasSuffix(fmt.Sprint(stacktest.DataOf(e)["prompt"]), ": ls")
	})
	var thirdBody webhook.Body
	poll.Must(t, 5*time.Second, "the third call at the receiver", func() bool {
		var ok bool
		thirdBody, _, ok = recv.Request(third.ID)
		return ok
	})
	st.WaitEvent(t, func(e *aep.Event) bool { return e.Type == "attention.timeout" && e.Subject == third.ID })
	if code, m := stacktest.PostLink(t, notifytest.LinkFor(t, thirdBody, "allow")); code != http.StatusGone || m["code"] != notify.CodeAnswerExpired {
		t.Fatalf("POST after the deadline: %d %v, want 410 %s", code, m, notify.CodeAnswerExpired)
	}

	<-done
	st.WaitQuiet(t)
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("the denied call ran")
	}
	_, _, evs := st.OneSession(t)
	counts := stacktest.TypeCounts(evs)
	if counts["tool.denied"] != 1 || counts["attention.requested"] != 3 {
		t.Fatalf("stream %v: want one denied call of three held", counts)
	}
	// The answer is on the record as the link's, the owner's.
	var stream []*aep.Event
	for _, b := range st.RelayEvents(t, held.Session) {
		e, err := aep.ParseEvent(b)
		if err != nil {
			t.Fatal(err)
		}
		stream = append(stream, e)
	}
	var cmd *aep.Event
	routed := map[string][]string{}
	for _, e := range stream {
		switch {
		case e.Type == rules.CommandType && e.Subject == held.ID:
			cmd = e
		case e.Type == "attention.routed":
			routed[e.Subject] = append(routed[e.Subject], fmt.Sprint(stacktest.DataOf(e)["to"]))
			if e.Seq != nil || aep.Validate(e) != nil {
				t.Errorf("attention.routed %s: seq %v, %v", e.ID, e.Seq, aep.Validate(e))
			}
		}
	}
	if cmd == nil || cmd.Agent != mapping.AgentLink {
		t.Fatalf("no command from the link on the stream (%v)", cmd)
	}
	if by, _ := cmd.ExtString(mapping.ExtBy); by != "owner" {
		t.Errorf("the link's command is stamped %q, want the owner", by)
	}
	for _, e := range evs {
		if e.Type == "attention.answered" && e.Subject == held.ID {
			if d := stacktest.DataOf(e); d["via"] != "control" || d["by"] != "owner" || d["x-kimi-code-surface"] != "link" {
				t.Errorf("the answer is recorded as %v, want by the owner from a link", d)
			}
		}
	}
	// The rule's call went nowhere; the two held ones reached the receiver
	// (the stalled target never took them).
	var first *aep.Event
	for _, e := range evs {
		if e.Type == "attention.requested" && first == nil {
			first = e
		}
	}
	if got := routed[first.ID]; len(got) != 0 {
		t.Errorf("the call rule %s answered was routed to %v", echo, got)
	}
	for _, b := range recv.All() {
		if b.Request == first.ID {
			t.Errorf("the receiver was told of the call a rule answered: %+v", b)
		}
	}
	for _, id := range []string{held.ID, third.ID} {
		if got := routed[id]; len(got) != 1 || !strings.HasPrefix(got[0], "webhook:") || strings.Contains(got[0], strings.TrimPrefix(slow.URL, "http://")) {
			t.Errorf("request %s routed to %v, want the receiver only", id, got)
		}
	}
}

// `aep-kimi notify list|rm|test` against the built relay: a device
// subscribed through the API is listed, the test says what each target
// and the device answered (exit 1: one target is down), and rm removes
// the device.
func TestE2ENotifyCLI(t *testing.T) {
	t.Parallel()
	recv := notifytest.NewWebhookReceiver(t)
	down := fmt.Sprintf("http://127.0.0.1:%d/hook", netaddr.FreePort(t))
	st := &stacktest.Stack{Home: t.TempDir(), Token: "e2e-" + aep.NewID()}
	rport := netaddr.FreePort(t)
	st.RelayURL = fmt.Sprintf("http://127.0.0.1:%d", rport)
	ps := pushtest.New(t)
	st.Relay = stacktest.StartDaemon(t, st.RelayURL, []string{"AEP_TOKEN=" + st.Token, "AEP_HOME=" + st.Home, ps.Env()}, "relay",
		"--listen", fmt.Sprintf("127.0.0.1:%d", rport), "--notify", "webhook:"+recv.URL+"/hook", "--notify", "webhook:"+down)

	sub, err := ps.Subscribe(notifytest.VapidKey(t, st))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := json.Marshal(map[string]any{"subscription": json.RawMessage(sub.JSON()), "device": "Pixel 8"})
	req, _ := http.NewRequest(http.MethodPost, st.RelayURL+notify.PathSubscriptions, strings.NewReader(string(body)))
	req.Header.Set("Authorization", "Bearer "+st.Token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var listed notify.Listed
	_ = json.NewDecoder(resp.Body).Decode(&listed)
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("subscribe: %d", resp.StatusCode)
	}

	code, out := st.Cli(t, "notify", "list")
	if code != 0 || !strings.Contains(out, listed.ID+"  owner's Pixel 8  since ") || !strings.Contains(out, "no push yet") {
		t.Fatalf("notify list: exit %d\n%s", code, out)
	}
	code, out = st.Cli(t, "notify", "test")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if code != 1 || len(lines) != 3 {
		t.Fatalf("notify test: exit %d, want 1 (one target down), three lines:\n%s", code, out)
	}
	want := map[string]string{"webhook:" + recv.URL: "ok", "webhook:" + strings.TrimSuffix(down, "/hook"): "failed: ", "push:owner's Pixel 8": "ok"}
	for _, l := range lines {
		found := false
		for name, status := range want {
			if strings.HasPrefix(l, name) && strings.Contains(l, "  "+status) {
				found = true
			}
		}
		if !found {
			t.Errorf("notify test line %q is none of %v", l, want)
		}
	}
	if got := recv.All(); len(got) != 1 || got[0].Kind != notify.KindTest {
		t.Errorf("the receiver got %+v", got)
	}
	if len(ps.Messages(sub)) != 1 {
		t.Errorf("the device got %d pushes", len(ps.Messages(sub)))
	}
	if code, out := st.Cli(t, "notify", "rm", listed.ID); code != 0 || !strings.Contains(out, "removed "+listed.ID) {
		t.Fatalf("notify rm: exit %d %s", code, out)
	}
	if code, out := st.Cli(t, "notify", "rm", listed.ID); code != 1 || !strings.Contains(out, "the relay refused") {
		t.Fatalf("notify rm again: exit %d %s", code, out)
	}
	if code, out := st.Cli(t, "notify", "list"); code != 0 || !strings.Contains(out, "no devices subscribed") {
		t.Fatalf("notify list after rm: exit %d %s", code, out)
	}
}

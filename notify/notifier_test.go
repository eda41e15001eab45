package notify_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aep-kimi/aep-kimi/access"
	"github.com/aep-kimi/aep-kimi/aep"
	"github.com/aep-kimi/aep-kimi/internal/testkit/httpcall"
	"github.com/aep-kimi/aep-kimi/internal/testkit/poll"
	"github.com/aep-kimi/aep-kimi/internal/testkit/relaycall"
	"github.com/aep-kimi/aep-kimi/mapping"
	"github.com/aep-kimi/aep-kimi/notify"
	"github.com/aep-kimi/aep-kimi/relay"
	"github.com/aep-kimi/aep-kimi/relay/client"
	"github.com/aep-kimi/aep-kimi/relay/wire"
	"github.com/aep-kimi/aep-kimi/rules"
)

const testToken = "notify-test-token-0123456789"

// recorder is a Target keeping what it was sent.
type recorder struct {
	name string
	mu   sync.Mutex
	msgs []notify.Message
	hold chan struct{} // when set, Send waits on it (a slow receiver)
}

func (r *recorder) Name() string { return r.name }

func (r *recorder) Send(ctx context.Context, m notify.Message) error {
	if r.hold != nil {
		select {
		case <-r.hold:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	r.mu.Lock()
	r.msgs = append(r.msgs, m)
	r.mu.Unlock()
	return nil
}

func (r *recorder) got() []notify.Message {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]notify.Message(nil), r.msgs...)
}

// stage is a real relay with a notifier, and an emitter claiming sessions
// that hears the commands routed to it.
type stage struct {
	url  string
	srv  *relay.Server
	n    *notify.Notifier
	em   *client.Publisher
	cmds chan *aep.Event
	// refuse, when set, is the reason the emitter rejects every command
	// with; unset, it accepts them, acking each as a real one does.
	refuse atomic.Pointer[string]
	mu     sync.Mutex
	seq    map[string]int64 // guarded by mu
	stop   func()           // stops the relay, the notifier and the emitter
}

func newStage(t *testing.T, cfg notify.Config, book *rules.Book) *stage {
	t.Helper()
	return newStageWith(t, cfg, relay.Config{Rules: book})
}

// The stage's feed pace, unless a test set its own: the product's
// settle exists for a rule's answer in the request's batch
// (TestNotifyRuleAnsweredSendsNothing keeps it); the other tests need
// only the order of what comes due, so they do not wait it out.
const (
	testSettle = 10 * time.Millisecond
	testTick   = 5 * time.Millisecond
)

// newStageWith is newStage on a relay configured as rcfg (its token and
// notifier set here).
func newStageWith(t *testing.T, cfg notify.Config, rcfg relay.Config) *stage {
	t.Helper()
	notify.SetFeedPace(&cfg, testSettle, testTick)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	base := "http://" + ln.Addr().String()
	cfg.PublicURL = base
	if cfg.Home == "" {
		cfg.Home = t.TempDir()
	}
	n, err := notify.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	rcfg.Token, rcfg.Notify = testToken, n
	srv, err := relay.NewServer(rcfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Attach(srv); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { _ = srv.Serve(ctx, ln) })
	wg.Go(func() {
		if err := n.Run(ctx, srv); err != nil {
			t.Errorf("notifier: %v", err)
		}
	})
	st := &stage{url: base, srv: srv, n: n, cmds: make(chan *aep.Event, 16), seq: map[string]int64{}}
	st.em, err = client.NewPublisher(client.PublisherConfig{URL: base, Token: testToken, Agent: "kimi-code", Instance: "kimi-code/test",
		Control: &wire.Control{Accepts: []string{"control.attention.respond"}, AckWindowMS: 10000}})
	if err != nil {
		t.Fatal(err)
	}
	wg.Go(func() { _ = st.em.Run(ctx, func(_ context.Context, ev *aep.Event) { st.cmds <- ev; st.ack(t, ev) }) })
	st.stop = sync.OnceFunc(func() { cancel(); wg.Wait() })
	t.Cleanup(st.stop)
	return st
}

func (st *stage) publish(t *testing.T, session, typ, subject string, data map[string]any, capture aep.Capture) *aep.Event {
	t.Helper()
	return st.publishCaused(t, session, typ, subject, "", data, capture)
}

// publishCaused is publish with the event's cause. Safe from any
// goroutine.
func (st *stage) publishCaused(t *testing.T, session, typ, subject, cause string, data map[string]any, capture aep.Capture) *aep.Event {
	st.mu.Lock()
	seq := st.seq[session]
	st.seq[session] = seq + 1
	st.mu.Unlock()
	ev := &aep.Event{AEP: aep.Version, ID: aep.NewID(), Type: typ, Subject: subject, Cause: cause, Time: aep.FormatTime(time.Now()),
		Source: "aep://test/agent/kimi-code/session/" + session, Agent: "kimi-code", Session: session,
		Seq: aep.Int64(seq), Epoch: aep.Int64(1), Capture: capture.String()}
	if data != nil {
		if err := ev.SetData(data); err != nil {
			t.Error(err)
		}
	}
	st.em.Publish(ev)
	return ev
}

// ack answers a routed command as an emitter does: accepted, or
// rejected with st.refuse's reason.
func (st *stage) ack(t *testing.T, cmd *aep.Event) {
	typ, data := "control.accepted", map[string]any(nil)
	if reason := st.refuse.Load(); reason != nil {
		typ, data = "control.rejected", map[string]any{"reason": *reason, "detail": "already answered (in Kimi's own UI)"}
	}
	st.publishCaused(t, cmd.Session, typ, "", cmd.ID, data, aep.CaptureRedacted)
}

func (st *stage) start(t *testing.T, session string) {
	st.publish(t, session, "session.started", "", map[string]any{"cwd": "~/acme-shop", mapping.DataProject: "acme-shop"}, aep.CaptureRedacted)
}

// ask raises a permission request for Bash with args, answered allow or
// deny, expiring after ttl.
func (st *stage) ask(t *testing.T, session, args string, ttl time.Duration) *aep.Event {
	return st.publish(t, session, "attention.requested", "Bash", map[string]any{
		"kind": "permission", "prompt": "Kimi wants to use Bash: " + args,
		"options":    []any{map[string]any{"id": "allow", "label": "Allow"}, map[string]any{"id": "deny", "label": "Deny"}},
		"expires_at": aep.FormatTime(time.Now().Add(ttl)), mapping.DataOnExpiry: mapping.OnExpiryAllow,
		"tool": map[string]any{"name": "Bash"},
	}, aep.CaptureRedacted)
}

func (st *stage) resolve(t *testing.T, session string, req *aep.Event, resolution string) {
	ev := st.publish(t, session, "attention.resolved", req.ID, map[string]any{"resolution": resolution}, aep.CaptureMetadata)
	_ = ev
}

func waitMsgs(t *testing.T, r *recorder, n int, within time.Duration) []notify.Message {
	t.Helper()
	poll.Must(t, within, fmt.Sprintf("%d messages at %s", n, r.name), func() bool { return len(r.got()) >= n })
	return r.got()
}

func post(t *testing.T, link string, hdr map[string]string) (int, map[string]any, string) {
	t.Helper()
	r := httpcall.Do(t, httpcall.Request{Method: http.MethodPost, URL: link, Header: hdr})
	var m map[string]any
	_ = json.Unmarshal(r.Body, &m) // an HTML page when asked for one
	return r.Status, m, string(r.Body)
}

func get(t *testing.T, link string) (*http.Response, string) {
	t.Helper()
	resp, err := http.Get(link)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

func answerURL(t *testing.T, m notify.Message, option string) string {
	t.Helper()
	for _, a := range m.Answers {
		if a.Option == option {
			return a.URL
		}
	}
	t.Fatalf("message %+v has no answer %q", m, option)
	return ""
}

func noCommand(t *testing.T, st *stage, d time.Duration) {
	t.Helper()
	select {
	case c := <-st.cmds:
		t.Fatalf("unexpected command %s %s", c.Type, c.Data)
	case <-time.After(d):
	}
}

// The request reaches the target with its answer links; a GET answers
// nothing; a POST answers once, attributed; the stream records the
// delivery; the resolution replaces the notification.
func TestNotifyAnswerLink(t *testing.T) {
	t.Parallel()
	rec := &recorder{name: "webhook:receiver.test"}
	st := newStage(t, notify.Config{Targets: []notify.Target{rec}}, nil)
	st.start(t, "s1")
	sent := time.Now()
	req := st.ask(t, "s1", "rm -rf build", time.Minute)
	m := waitMsgs(t, rec, 1, 2*time.Second)[0]
	t.Logf("delivered in %v", time.Since(sent))
	if m.Kind != notify.KindRequest || m.Session != "s1" || m.Request != req.ID || m.Tool != "Bash" || len(m.Answers) != 2 {
		t.Fatalf("message: %+v", m)
	}
	if !strings.Contains(m.Body, "runs anyway in") || m.Fate != "runs anyway" || strings.Contains(m.Body+m.Title, "rm -rf") {
		t.Errorf("body %q: want the countdown, and no argument text at the metadata ceiling", m.Body)
	}
	if !strings.HasPrefix(m.Open, st.url+"/?") || !strings.Contains(m.Open, url.QueryEscape(req.ID)) {
		t.Errorf("open %q", m.Open)
	}
	deny := answerURL(t, m, "deny")
	if !strings.HasPrefix(deny, st.url+relay.AnswerPath) {
		t.Fatalf("deny link %q is not absolute under %s", deny, st.url)
	}

	resp, body := get(t, deny)
	if resp.StatusCode != 200 || !strings.Contains(body, "<form method=\"post\">") || !strings.Contains(body, "Deny") {
		t.Fatalf("GET: %d %s", resp.StatusCode, body)
	}
	// The page names the session by its project and shows the command it
	// answers, within the owner's ceiling (capped at redacted).
	for _, want := range []string{"<code>Kimi wants to use Bash: rm -rf build</code>", "This answers Bash in acme-shop · s1"} {
		if !strings.Contains(body, want) {
			t.Errorf("GET page lacks %q:\n%s", want, body)
		}
	}
	for k, want := range map[string]string{"Cache-Control": "no-store", "Referrer-Policy": "no-referrer"} {
		if resp.Header.Get(k) != want {
			t.Errorf("GET %s = %q, want %q", k, resp.Header.Get(k), want)
		}
	}
	if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'none'") {
		t.Errorf("GET CSP = %q", csp)
	}
	noCommand(t, st, 300*time.Millisecond)

	status, js, raw := post(t, deny, nil)
	if status != 200 || js["answered"] != true || js["option"] != "deny" || js["session"] != "s1" || js["request"] != req.ID {
		t.Fatalf("POST: %d %s", status, raw)
	}
	select {
	case c := <-st.cmds:
		data, _ := c.DataMap()
		ans, _ := data["answer"].(map[string]any)
		var by string
		_ = json.Unmarshal(c.Ext[mapping.ExtBy], &by)
		if c.Type != rules.CommandType || c.Subject != req.ID || ans["option"] != "deny" || c.Agent != mapping.AgentLink || by != access.OwnerName {
			t.Fatalf("command: %s %s agent %s by %q", c.Type, c.Data, c.Agent, by)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("the claimant got no command")
	}
	status, js, raw = post(t, deny, nil)
	if status != http.StatusConflict || js["code"] != notify.CodeAnswerUsed {
		t.Fatalf("second POST: %d %s", status, raw)
	}
	status, _, raw = post(t, answerURL(t, m, "allow"), map[string]string{"Accept": "text/html"})
	if status != http.StatusOK && status != http.StatusGone {
		t.Fatalf("the other option's link: %d %s", status, raw)
	}
	<-st.cmds // the allow went through: the emitter has not resolved yet
	if status, js, _ := post(t, st.url+relay.AnswerPath+"bogus.token", nil); status != 404 || js["code"] != notify.CodeAnswerUnknown {
		t.Errorf("unknown token: %d %v", status, js)
	}
	if resp, body := get(t, deny); resp.StatusCode != http.StatusConflict || !strings.Contains(body, "used already") {
		t.Errorf("GET on a used link: %d %s", resp.StatusCode, body)
	}

	// The delivery is on the record.
	routed := readSession(t, st, "s1", "attention.routed")
	if len(routed) != 1 {
		t.Fatalf("attention.routed: %d events, want 1", len(routed))
	}
	r := routed[0]
	rd, _ := r.DataMap()
	if r.Subject != req.ID || r.Seq != nil || rd["to"] != rec.name || rd["via"] != "webhook" || aep.Validate(r) != nil {
		t.Errorf("attention.routed: %+v %s (%v)", r, r.Data, aep.Validate(r))
	}

	// Resolved: the notification is replaced, same tag, no answers.
	st.resolve(t, "s1", req, "answered")
	u := waitMsgs(t, rec, 2, 2*time.Second)[1]
	if u.Kind != notify.KindUpdate || u.Tag != m.Tag || len(u.Answers) != 0 {
		t.Fatalf("update: %+v", u)
	}
	if status, js, _ := post(t, answerURL(t, m, "allow"), nil); status != http.StatusConflict && status != http.StatusGone {
		t.Errorf("link after resolution: %d %v", status, js)
	}
}

// aheadClock is the real clock, put forward by the test: the answer links
// see a deadline pass without the test waiting for it.
type aheadClock struct{ ahead atomic.Int64 }

func (c *aheadClock) Now() time.Time { return time.Now().Add(time.Duration(c.ahead.Load())) }

// past puts the clock just past t.
func (c *aheadClock) past(t time.Time) {
	c.ahead.Add(int64(time.Until(t) + 100*time.Millisecond))
}

// readSession reads the session's history of one type from the relay.
func readSession(t *testing.T, st *stage, session, typ string) []*aep.Event {
	t.Helper()
	return relaycall.History(t, st.url, testToken, session, typ, 2*time.Second)
}

// A link to a request answered elsewhere says so, even once the request's
// deadline has passed too: the deadline is not why it no longer waits.
func TestNotifyAnsweredElsewhereThenExpired(t *testing.T) {
	t.Parallel()
	rec := &recorder{name: "webhook:receiver.test"}
	var clock aheadClock
	st := newStage(t, notify.Config{Targets: []notify.Target{rec}, Now: clock.Now}, nil)
	st.start(t, "s3")
	req := st.ask(t, "s3", "ls", 1200*time.Millisecond)
	m := waitMsgs(t, rec, 1, 2*time.Second)[0]
	st.resolve(t, "s3", req, "answered")
	waitMsgs(t, rec, 2, 2*time.Second)
	clock.past(m.Deadline)
	status, js, raw := post(t, answerURL(t, m, "allow"), nil)
	if detail, _ := js["detail"].(string); status != http.StatusGone || js["code"] != notify.CodeAnswerExpired || !strings.Contains(detail, "(answered)") {
		t.Fatalf("answered, then past its deadline: %d %s", status, raw)
	}
}

// A request past its deadline is refused with 410, and a link to a
// request the notifier never saw, past its expiry, too.
func TestNotifyExpired(t *testing.T) {
	t.Parallel()
	rec := &recorder{name: "webhook:receiver.test"}
	var clock aheadClock
	st := newStage(t, notify.Config{Targets: []notify.Target{rec}, Now: clock.Now}, nil)
	st.start(t, "s2")
	st.ask(t, "s2", "ls", 1200*time.Millisecond)
	m := waitMsgs(t, rec, 1, 2*time.Second)[0]
	clock.past(m.Deadline)
	status, js, raw := post(t, answerURL(t, m, "allow"), nil)
	if status != http.StatusGone || js["code"] != notify.CodeAnswerExpired {
		t.Fatalf("expired: %d %s", status, raw)
	}
	if resp, body := get(t, answerURL(t, m, "deny")); resp.StatusCode != http.StatusGone || !strings.Contains(body, "expired") {
		t.Errorf("GET expired: %d %s", resp.StatusCode, body)
	}
	noCommand(t, st, 100*time.Millisecond)
}

// A request a rule answers sends nothing.
func TestNotifyRuleAnsweredSendsNothing(t *testing.T) {
	t.Parallel()
	book := rules.Open(rules.Config{Path: filepath.Join(t.TempDir(), rules.FileName)})
	if _, err := book.Add(rules.Rule{ID: "ls-ok", Effect: rules.Allow, Tool: "Bash", Args: "ls *"}); err != nil {
		t.Fatal(err)
	}
	rec := &recorder{name: "webhook:receiver.test"}
	cfg := notify.Config{Targets: []notify.Target{rec}}
	notify.SetFeedPace(&cfg, notify.Settle, notify.Tick) // what lets the rule's answer in first
	st := newStage(t, cfg, book)
	st.start(t, "s3")
	st.ask(t, "s3", "ls -la", time.Minute)
	select {
	case c := <-st.cmds:
		if c.Agent != rules.AgentPrefix+"ls-ok" {
			t.Fatalf("command from %s, want the rule", c.Agent)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("the rule did not answer")
	}
	// A request no rule answers is notified: the feed is live. Requests
	// go out in the order they came due, each target's in turn, so one for
	// the rule's request would come first.
	deploy := st.ask(t, "s3", "make deploy", time.Minute)
	if msgs := waitMsgs(t, rec, 1, 2*time.Second); msgs[0].Request != deploy.ID || !strings.Contains(msgs[0].Title, "Bash") {
		t.Fatalf("messages: %+v; want only the request no rule answered", msgs)
	}
}

// --notify-after: a request answered before it passes sends nothing; one
// still waiting then is sent.
func TestNotifyAfter(t *testing.T) {
	t.Parallel()
	rec := &recorder{name: "webhook:receiver.test"}
	st := newStage(t, notify.Config{Targets: []notify.Target{rec}, After: 300 * time.Millisecond}, nil)
	st.start(t, "s4")
	first := st.ask(t, "s4", "ls", time.Minute)
	st.resolve(t, "s4", first, "answered")
	start := time.Now()
	second := st.ask(t, "s4", "make", time.Minute)
	// Requests go out in the order they came due, each target's in turn:
	// one for the first would come before the second's.
	msgs := waitMsgs(t, rec, 1, 2*time.Second)
	if d := time.Since(start); d < 300*time.Millisecond {
		t.Errorf("sent after %v, before --notify-after", d)
	}
	if msgs[0].Request != second.ID {
		t.Fatalf("sent %+v for a request answered in time", msgs[0])
	}
}

// Requests coming due within the coalescing window of a notification go
// out as one digest.
func TestNotifyDigest(t *testing.T) {
	t.Parallel()
	rec := &recorder{name: "webhook:receiver.test"}
	st := newStage(t, notify.Config{Targets: []notify.Target{rec}, Window: 500 * time.Millisecond}, nil)
	for _, s := range []string{"d1", "d2", "d3", "d4"} {
		st.start(t, s)
	}
	st.ask(t, "d1", "ls", time.Minute)
	waitMsgs(t, rec, 1, 2*time.Second)
	for _, s := range []string{"d2", "d3", "d4"} {
		st.ask(t, s, "ls", time.Minute)
	}
	msgs := waitMsgs(t, rec, 2, 3*time.Second)
	if msgs[1].Kind != notify.KindDigest || msgs[1].Title != "3 sessions need you" {
		t.Fatalf("messages: %+v", msgs)
	}
	// The sessions end with their requests open (withdrawn): once all
	// three are over, one update replaces the digest. A request asked
	// after two of them ended goes out after whatever their ends caused
	// (in the order things came due, each target's in turn): no update yet.
	for _, s := range []string{"d2", "d3"} {
		st.publish(t, s, "session.ended", "", map[string]any{"reason": "normal"}, aep.CaptureMetadata)
	}
	st.start(t, "d5")
	later := st.ask(t, "d5", "ls", time.Minute)
	if got := waitMsgs(t, rec, 3, 3*time.Second); len(got) != 3 || got[2].Request != later.ID {
		t.Fatalf("after two of the digest's sessions ended, want only the later request; got %+v", got[2:])
	}
	st.publish(t, "d4", "session.ended", "", map[string]any{"reason": "normal"}, aep.CaptureMetadata)
	u := waitMsgs(t, rec, 4, 2*time.Second)[3]
	if u.Kind != notify.KindUpdate || u.Tag != msgs[1].Tag || len(u.Answers) != 0 {
		t.Fatalf("digest update: %+v", u)
	}
}

// A receiver that never answers holds nothing up: the relay takes events
// and other targets get theirs.
func TestNotifySlowTargetNeverBlocks(t *testing.T) {
	t.Parallel()
	slow := &recorder{name: "webhook:slow.test", hold: make(chan struct{})}
	defer close(slow.hold)
	fast := &recorder{name: "webhook:fast.test"}
	st := newStage(t, notify.Config{Targets: []notify.Target{slow, fast}}, nil)
	for i := range notify.QueueSize + 10 {
		s := fmt.Sprintf("slow-%d", i)
		st.start(t, s)
		st.ask(t, s, "ls", time.Minute)
	}
	start := time.Now()
	st.start(t, "after")
	waitMsgs(t, fast, 1, 2*time.Second)
	readSession(t, st, "after", "session.started")
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("ingest took %v behind a stalled target", d)
	}
}

// A link says "answered" only once the agent's side took the answer: an
// answer it refuses (a question answered in Kimi's own UI meanwhile) is
// reported with the reason, and the link stays unused, so it can answer
// once what refused it is gone.
func TestNotifyAnswerLinkRefused(t *testing.T) {
	t.Parallel()
	rec := &recorder{name: "webhook:receiver.test"}
	st := newStage(t, notify.Config{Targets: []notify.Target{rec}}, nil)
	st.start(t, "s1")
	st.ask(t, "s1", "rm -rf build", time.Minute)
	deny := answerURL(t, waitMsgs(t, rec, 1, 2*time.Second)[0], "deny")
	reason := "invalid"
	st.refuse.Store(&reason)
	status, js, raw := post(t, deny, nil)
	if status != 409 || js["answered"] == true || js["code"] != notify.CodeAnswerRefused ||
		!strings.Contains(fmt.Sprint(js["detail"]), "invalid: already answered (in Kimi's own UI)") {
		t.Fatalf("a refused answer: %d %s", status, raw)
	}
	st.refuse.Store(nil)
	if status, js, raw = post(t, deny, nil); status != 200 || js["answered"] != true {
		t.Fatalf("the link once nothing refuses it: %d %s", status, raw)
	}
}

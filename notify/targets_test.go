package notify

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aep-kimi/aep-kimi/notify/webhook"
	"github.com/aep-kimi/aep-kimi/relay/consumer"
)

// The real services (ntfy.sh, Slack, Discord, Mattermost) cannot run
// here: each format is sent over a real socket to a local receiver that
// checks the fields the service documents (ntfy's JSON publish format and
// its action buttons; Slack's Block Kit header, section, context and
// actions blocks with link buttons) and, for webhook:, the format this
// package documents and its HMAC.

// hostileTitle is what a tool argument can put in a title: a control
// sequence, a Slack channel mention, a Slack link with disguised text,
// mrkdwn and Markdown emphasis, a Markdown link, and a Mattermost/Discord
// mention.
const hostileTitle = "rm \x1b[2J <!channel> *bold* <https://evil.example|click> [x](https://evil.example) @channel & done"

// received is one request a receiver got.
type received struct {
	method, path string
	header       http.Header
	body         []byte
}

// receiver is a local HTTP server that answers every request with status
// and hands each request it got to the test.
func receiver(t *testing.T, status int) (*httptest.Server, <-chan received) {
	t.Helper()
	got := make(chan received, 16)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got <- received{method: r.Method, path: r.URL.RequestURI(), header: r.Header.Clone(), body: b}
		w.WriteHeader(status)
		io.WriteString(w, `{"ok":true}`)
	}))
	t.Cleanup(srv.Close)
	return srv, got
}

func next(t *testing.T, got <-chan received) received {
	t.Helper()
	select {
	case r := <-got:
		return r
	case <-time.After(5 * time.Second):
		t.Fatal("the receiver got nothing")
		return received{}
	}
}

// secretFile writes content to a file of mode perm in a fresh directory.
func secretFile(t *testing.T, content string, perm os.FileMode) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(p, []byte(content), perm); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, perm); err != nil {
		t.Fatal(err)
	}
	return p
}

func request(answers ...Answer) Message {
	if answers == nil {
		answers = []Answer{
			{Option: "allow", Label: "Allow", URL: "https://relay.example/a/tok-allow"},
			{Option: "deny", Label: "Deny", URL: "https://relay.example/a/tok-deny"},
		}
	}
	return Message{
		Kind:     KindRequest,
		Tag:      "req-01J",
		Title:    hostileTitle,
		Body:     "Shell wants to run a command\nin project demo",
		Session:  "sess-1",
		Request:  "req-01J",
		Label:    "demo (kimi)",
		Tool:     "Shell",
		Deadline: time.Date(2026, 12, 1, 18, 0, 45, 0, time.UTC),
		Fate:     "runs anyway",
		Answers:  answers,
		Open:     "https://relay.example/#s=sess-1&r=req-01J",
	}
}

func send(t *testing.T, tg Target, m Message) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := tg.Send(ctx, m); err != nil {
		t.Fatalf("Send: %v", err)
	}
}

func decode(t *testing.T, b []byte) map[string]any {
	t.Helper()
	var v map[string]any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("body is not a JSON object: %v\n%s", err, b)
	}
	return v
}

func keys(m map[string]any) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

func TestNtfyFormat(t *testing.T) {
	t.Parallel()
	srv, got := receiver(t, http.StatusOK)
	tok := secretFile(t, "tk_AgQdq7mVBoFD37zQVN29RhuMzNIz2\n", 0o600)
	tg, err := ParseTarget("ntfy:" + srv.URL + "/prefix/aepalerts#token-file=" + tok)
	if err != nil {
		t.Fatal(err)
	}
	if n := tg.Name(); n != "ntfy:"+srv.URL+"/prefix/aep…" {
		t.Errorf("Name() = %q: want the topic shortened and no token", n)
	}
	send(t, tg, request())
	r := next(t, got)
	// ntfy's JSON publish: POST to the root (here the topic URL's
	// parent), the topic in the body.
	if r.method != http.MethodPost || r.path != "/prefix/" {
		t.Errorf("request %s %s, want POST /prefix/", r.method, r.path)
	}
	if a := r.header.Get("Authorization"); a != "Bearer tk_AgQdq7mVBoFD37zQVN29RhuMzNIz2" {
		t.Errorf("Authorization = %q", a)
	}
	v := decode(t, r.body)
	if want := []string{"actions", "click", "message", "priority", "tags", "title", "topic"}; !slices.Equal(keys(v), want) {
		t.Errorf("keys %v, want %v", keys(v), want)
	}
	if v["topic"] != "aepalerts" || v["priority"] != float64(4) || v["click"] != "https://relay.example/#s=sess-1&r=req-01J" {
		t.Errorf("topic %v priority %v click %v", v["topic"], v["priority"], v["click"])
	}
	title, _ := v["title"].(string)
	if strings.ContainsAny(title, "\x1b\n\r") || !strings.Contains(title, `\x1b[2J`) {
		t.Errorf("title %q: the control character must arrive escaped", title)
	}
	if v["message"] != "Shell wants to run a command\nin project demo" {
		t.Errorf("message %q", v["message"])
	}
	acts, _ := v["actions"].([]any)
	if len(acts) != 2 {
		t.Fatalf("actions %v, want 2", acts)
	}
	for i, want := range []struct{ label, url string }{{"Allow", "https://relay.example/a/tok-allow"}, {"Deny", "https://relay.example/a/tok-deny"}} {
		a, _ := acts[i].(map[string]any)
		if a["action"] != "http" || a["method"] != "POST" || a["label"] != want.label || a["url"] != want.url || a["clear"] != true {
			t.Errorf("action %d = %v, want http POST %s %s clear", i, a, want.label, want.url)
		}
	}
}

func TestNtfyMoreThanThreeOptions(t *testing.T) {
	t.Parallel()
	srv, got := receiver(t, http.StatusOK)
	tg, err := ParseTarget("ntfy:" + srv.URL + "/aepalerts")
	if err != nil {
		t.Fatal(err)
	}
	four := []Answer{
		{Option: "a", Label: "A", URL: "https://r.example/a"}, {Option: "b", Label: "B", URL: "https://r.example/b"},
		{Option: "c", Label: "C", URL: "https://r.example/c"}, {Option: "d", Label: "D", URL: "https://r.example/d"},
	}
	send(t, tg, request(four...))
	r := next(t, got)
	if r.path != "/" || r.header.Get("Authorization") != "" {
		t.Errorf("path %q auth %q: want / and no token", r.path, r.header.Get("Authorization"))
	}
	acts := decode(t, r.body)["actions"].([]any)
	// ntfy allows three: two answers and one that opens the page.
	if len(acts) != 3 {
		t.Fatalf("%d actions, want 3", len(acts))
	}
	last := acts[2].(map[string]any)
	if acts[1].(map[string]any)["url"] != "https://r.example/b" || last["action"] != "view" || last["url"] != "https://relay.example/#s=sess-1&r=req-01J" {
		t.Errorf("actions %v: want A, B, then a view of the page", acts)
	}

	// Without a page to open, the first three answers.
	m := request(four...)
	m.Open = ""
	send(t, tg, m)
	acts = decode(t, next(t, got).body)["actions"].([]any)
	if len(acts) != 3 || acts[2].(map[string]any)["url"] != "https://r.example/c" {
		t.Errorf("actions %v: want A, B, C", acts)
	}

	// An update replaces nothing on ntfy: it comes quietly, without buttons.
	m = request()
	m.Kind, m.Title = KindUpdate, "Answered on the page"
	send(t, tg, m)
	v := decode(t, next(t, got).body)
	if v["priority"] != float64(1) || v["actions"] != nil {
		t.Errorf("update: priority %v actions %v, want 1 and none", v["priority"], v["actions"])
	}
}

// slackTexts is every text object in a Slack message's blocks.
func slackTexts(t *testing.T, blocks []any) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, b := range blocks {
		blk := b.(map[string]any)
		if tx, ok := blk["text"].(map[string]any); ok {
			out = append(out, tx)
		}
		for _, e := range asSlice(blk["elements"]) {
			el := e.(map[string]any)
			if el["type"] == "button" {
				out = append(out, el["text"].(map[string]any))
			} else {
				out = append(out, el)
			}
		}
	}
	return out
}

func asSlice(v any) []any { s, _ := v.([]any); return s }

func TestSlackFormat(t *testing.T) {
	t.Parallel()
	srv, got := receiver(t, http.StatusOK)
	hook := srv.URL + "/services/T0000/B0000/XXXXSECRETXXXX"
	file := secretFile(t, hook+"\n", 0o600)
	tg, err := ParseTarget("slack:@" + file)
	if err != nil {
		t.Fatal(err)
	}
	if tg.Name() != "slack:@"+file {
		t.Errorf("Name() = %q", tg.Name())
	}
	send(t, tg, request())
	r := next(t, got)
	if r.method != http.MethodPost || r.path != "/services/T0000/B0000/XXXXSECRETXXXX" || !strings.HasPrefix(r.header.Get("Content-Type"), "application/json") {
		t.Errorf("request %s %s %s", r.method, r.path, r.header.Get("Content-Type"))
	}
	v := decode(t, r.body)
	blocks := asSlice(v["blocks"])
	var types []string
	for _, b := range blocks {
		types = append(types, b.(map[string]any)["type"].(string))
	}
	if want := []string{"header", "section", "context", "actions"}; !slices.Equal(types, want) {
		t.Fatalf("block types %v, want %v", types, want)
	}
	// Block Kit link buttons: type button, plain_text text, url = the
	// answer link, a unique action_id; then one that opens the page.
	buttons := asSlice(blocks[3].(map[string]any)["elements"])
	want := []struct{ text, url string }{
		{"Allow", "https://relay.example/a/tok-allow"}, {"Deny", "https://relay.example/a/tok-deny"},
		{"Open", "https://relay.example/#s=sess-1&r=req-01J"},
	}
	if len(buttons) != len(want) {
		t.Fatalf("%d buttons, want %d", len(buttons), len(want))
	}
	ids := map[any]bool{}
	for i, w := range want {
		b := buttons[i].(map[string]any)
		tx := b["text"].(map[string]any)
		if b["type"] != "button" || b["url"] != w.url || tx["type"] != "plain_text" || tx["text"] != w.text || b["action_id"] == "" || ids[b["action_id"]] {
			t.Errorf("button %d = %v, want %s -> %s", i, b, w.text, w.url)
		}
		ids[b["action_id"]] = true
	}
	if ctx := asSlice(blocks[2].(map[string]any)["elements"])[0].(map[string]any)["text"]; ctx != "demo (kimi) · Shell · runs anyway at 18:00:45 UTC" {
		t.Errorf("context %q", ctx)
	}
	// What happens at the deadline is the request's own: a gate that
	// denies says so, one that does not say only when it ends.
	for fate, want := range map[string]string{"denied": "denied at", "": "expires at"} {
		m := request()
		m.Fate = fate
		send(t, tg, m)
		blocks := asSlice(decode(t, next(t, got).body)["blocks"])
		if ctx := asSlice(blocks[2].(map[string]any)["elements"])[0].(map[string]any)["text"]; ctx != "demo (kimi) · Shell · "+want+" 18:00:45 UTC" {
			t.Errorf("fate %q: context %q", fate, ctx)
		}
	}
	// Nothing from the request is markup: plain_text everywhere, Slack's
	// & < > escaped, so no mention, link or date can start.
	for _, tx := range slackTexts(t, blocks) {
		s := tx["text"].(string)
		if tx["type"] != "plain_text" || strings.ContainsAny(s, "<>\x1b") || strings.Contains(s, "& ") {
			t.Errorf("text object %v: want plain_text with & < > escaped", tx)
		}
	}
	header := blocks[0].(map[string]any)["text"].(map[string]any)["text"]
	if header != `rm \x1b[2J &lt;!channel&gt; *bold* &lt;https://evil.example|click&gt; [x](https://evil.example) @channel &amp; done` {
		t.Errorf("header %q", header)
	}
	// The fallback is markup in Slack (mrkdwn) and in Mattermost and
	// Discord (Markdown): inert there too, with the answer links as links.
	text := v["text"].(string)
	for _, bad := range []string{"<!channel>", "<https://evil", "*bold*", "[x](", "@channel", "\x1b"} {
		if strings.Contains(text, bad) {
			t.Errorf("fallback text carries %q:\n%s", bad, text)
		}
	}
	for _, good := range []string{`&lt;!channel&gt;`, `\*bold\*`, `\[x\](https://evil.example)`, "@\u200bchannel", "<https://relay.example/a/tok-allow|Allow>", "<https://relay.example/a/tok-deny|Deny>"} {
		if !strings.Contains(text, good) {
			t.Errorf("fallback text lacks %q:\n%s", good, text)
		}
	}
}

func TestSlackURLElided(t *testing.T) {
	t.Parallel()
	srv, got := receiver(t, http.StatusOK)
	tg, err := ParseTarget("slack:" + srv.URL + "/services/T0000/B0000/XXXXSECRETXXXX")
	if err != nil {
		t.Fatal(err)
	}
	if n := tg.Name(); n != "slack:"+srv.URL+"/…" {
		t.Errorf("Name() = %q shows the webhook's path", n)
	}
	// An update is a new post without buttons (an incoming webhook cannot
	// edit what it posted); a digest has only the page's button.
	m := request()
	m.Kind, m.Title = KindUpdate, "Allowed on the page by alice"
	send(t, tg, m)
	v := decode(t, next(t, got).body)
	for _, b := range asSlice(v["blocks"]) {
		if b.(map[string]any)["type"] == "actions" {
			for _, e := range asSlice(b.(map[string]any)["elements"]) {
				if e.(map[string]any)["action_id"] != "aep-open" {
					t.Errorf("update carries an answer button: %v", e)
				}
			}
		}
	}
	if strings.Contains(v["text"].(string), "tok-allow") {
		t.Errorf("update's text carries an answer link: %q", v["text"])
	}
}

func TestWebhookFormatAndSignature(t *testing.T) {
	t.Parallel()
	srv, got := receiver(t, http.StatusNoContent)
	const secret = "whsec-0123456789abcdefghijklmnop"
	tg, err := ParseTarget("webhook:" + srv.URL + "/hooks/aep?key=QUERYSECRET#secret-file=" + secretFile(t, secret+"\n", 0o600))
	if err != nil {
		t.Fatal(err)
	}
	if n := tg.Name(); n != "webhook:"+srv.URL+"/hooks/aep" {
		t.Errorf("Name() = %q: want the path and no query", n)
	}
	m := request()
	before := time.Now().Add(-time.Second)
	send(t, tg, m)
	r := next(t, got)
	if r.path != "/hooks/aep?key=QUERYSECRET" {
		t.Errorf("path %q", r.path)
	}
	v := decode(t, r.body)
	want := []string{"answers", "body", "deadline", "id", "kind", "label", "open", "request", "session", "tag", "timestamp", "title", "tool", "usage", "v"}
	if !slices.Equal(keys(v), want) || v["usage"] != nil {
		t.Errorf("keys %v, want %v", keys(v), want)
	}
	if v["v"] != float64(1) || v["kind"] != "request" || v["tag"] != "req-01J" || v["session"] != "sess-1" || v["request"] != "req-01J" ||
		v["label"] != "demo (kimi)" || v["tool"] != "Shell" || v["deadline"] != "2026-12-01T18:00:45Z" || v["open"] != m.Open {
		t.Errorf("body %v", v)
	}
	// The text arrives exactly as it was, control characters JSON-escaped.
	if v["title"] != hostileTitle || strings.Contains(string(r.body), "\x1b") {
		t.Errorf("title %q (raw ESC in body: %v)", v["title"], strings.Contains(string(r.body), "\x1b"))
	}
	answers := asSlice(v["answers"])
	if len(answers) != 2 || answers[1].(map[string]any)["option"] != "deny" || answers[1].(map[string]any)["label"] != "Deny" || answers[1].(map[string]any)["url"] != "https://relay.example/a/tok-deny" {
		t.Errorf("answers %v", answers)
	}
	ts, err := time.Parse(time.RFC3339, v["timestamp"].(string))
	if err != nil || ts.Before(before.Truncate(time.Second)) {
		t.Errorf("timestamp %v (%v)", v["timestamp"], err)
	}
	if id := v["id"].(string); id == "" || r.header.Get(webhook.DeliveryHeader) != id {
		t.Errorf("id %q, %s %q", id, webhook.DeliveryHeader, r.header.Get(webhook.DeliveryHeader))
	}

	// The signature, checked by hand the way docs/notify.md tells a receiver:
	// HMAC-SHA256 over "<t>.<body>" with the secret file's content.
	sig := r.header.Get(webhook.SignatureHeader)
	tPart, v1Part, ok := strings.Cut(sig, ",")
	if !ok || !strings.HasPrefix(tPart, "t=") || !strings.HasPrefix(v1Part, "v1=") {
		t.Fatalf("%s = %q", webhook.SignatureHeader, sig)
	}
	h := hmac.New(sha256.New, []byte(secret))
	h.Write([]byte(strings.TrimPrefix(tPart, "t=") + "." + string(r.body)))
	if hex.EncodeToString(h.Sum(nil)) != strings.TrimPrefix(v1Part, "v1=") {
		t.Errorf("v1 does not verify with the secret")
	}
	if err := webhook.VerifySignature([]byte(secret), sig, r.body, time.Now(), 0); err != nil {
		t.Errorf("VerifySignature: %v", err)
	}
	tampered := []byte(strings.Replace(string(r.body), "tok-deny", "tok-allow", 1))
	if err := webhook.VerifySignature([]byte(secret), sig, tampered, time.Now(), 0); err == nil {
		t.Error("a tampered body verifies")
	}
	if err := webhook.VerifySignature([]byte("another-secret-of-some-length"), sig, r.body, time.Now(), 0); err == nil {
		t.Error("another secret verifies")
	}
	if err := webhook.VerifySignature([]byte(secret), sig, r.body, time.Now().Add(time.Hour), 0); err == nil {
		t.Error("an hour-old signature verifies (replay)")
	}

	// The id is the message's: the same on a retry, another for another
	// message.
	send(t, tg, m)
	if again := decode(t, next(t, got).body)["id"]; again != v["id"] {
		t.Errorf("retry id %v, first %v", again, v["id"])
	}
	m2 := m
	m2.Kind = KindUpdate
	send(t, tg, m2)
	v2 := decode(t, next(t, got).body)
	if v2["id"] == v["id"] {
		t.Error("an update has the request's id")
	}
	if v2["kind"] != "update" {
		t.Errorf("kind %v", v2["kind"])
	}
	// A digest: no session, no deadline, no answers.
	send(t, tg, Message{Kind: KindDigest, Tag: "digest", Title: "3 sessions need you", Open: "https://relay.example/"})
	v3 := decode(t, next(t, got).body)
	if v3["deadline"] != nil || v3["session"] != "" || answersLen(v3) != 0 || v3["answers"] == nil {
		t.Errorf("digest %v", v3)
	}
}

func answersLen(v map[string]any) int { return len(asSlice(v["answers"])) }

func TestWebhookSecretKeptUnderHome(t *testing.T) {
	t.Parallel()
	home := filepath.Join(t.TempDir(), "aep")
	tg, err := ParseTargetIn("webhook:http://127.0.0.1:9/h", home)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(home, WebhookSecretName)
	st, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Errorf("secret file mode %v, want 0600", st.Mode().Perm())
	}
	b, _ := os.ReadFile(p)
	secret := strings.TrimSpace(string(b))
	if len(secret) < 32 || strings.Contains(tg.Name(), secret) {
		t.Errorf("secret %q, name %q", secret, tg.Name())
	}
	// The second start signs with the same secret.
	tg2, err := ParseTargetIn("webhook:http://127.0.0.1:9/h", home)
	if err != nil {
		t.Fatal(err)
	}
	if string(tg2.(*Webhook).secret) != secret || string(tg.(*Webhook).secret) != secret {
		t.Error("the secret changed between starts")
	}
	// A link planted in its place is refused, never followed.
	os.Remove(p)
	other := secretFile(t, strings.Repeat("s", 40), 0o600)
	if err := os.Symlink(other, p); err != nil {
		t.Fatal(err)
	}
	if _, err := ParseTargetIn("webhook:http://127.0.0.1:9/h", home); err == nil || !strings.Contains(err.Error(), "symbolic link") {
		t.Errorf("a link at %s: err %v", p, err)
	}
}

func TestParseTargetRefuses(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	loose := secretFile(t, "https://hooks.slack.com/services/T/B/LOOSESECRET", 0o644)
	short := secretFile(t, "short", 0o600)
	empty := secretFile(t, "", 0o600)
	twoLines := secretFile(t, "https://a.example/x\nhttps://b.example/y", 0o600)
	withHash := secretFile(t, "https://a.example/x#token-file=/etc/passwd", 0o600)
	ok := secretFile(t, "https://hooks.slack.com/services/T/B/FILESECRET", 0o600)
	linkToLoose := filepath.Join(dir, "link-loose")
	linkToOK := filepath.Join(dir, "link-ok")
	if err := os.Symlink(loose, linkToLoose); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(ok, linkToOK); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ spec, want string }{
		{"", "want KIND:URL"},
		{"https://hooks.slack.com/services/T/B/SPECSECRET", "unknown target kind"},
		{"ntfy", "want KIND:URL"},
		{"ntfy:", "want KIND:URL"},
		{"email:me@example.com", `unknown target kind "email"`},
		{"ntfy:ftp://ntfy.sh/topic", "http:// or https://"},
		{"slack:hooks.slack.com/services/T/B/SPECSECRET", "http:// or https://"},
		{"slack:https:///services/T/B/SPECSECRET", "no host"},
		{"ntfy:https://ntfy.sh/", "topic"},
		{"ntfy:https://ntfy.sh/a.b", "topic"},
		{"ntfy:https://ntfy.sh/t#token-file=", "needs a value"},
		{"ntfy:https://ntfy.sh/t#token=abc", `unknown option "token"`},
		{"ntfy:https://ntfy.sh/t#token-file=" + filepath.Join(dir, "missing"), "no such file"},
		{"ntfy:https://ntfy.sh/t#token-file=" + empty, "empty"},
		{"ntfy:https://ntfy.sh/t#token-file=" + loose, "readable by others"},
		{"ntfy:https://ntfy.sh/t#token-file=" + ok + "&token-file=" + ok, "given twice"},
		{"slack:https://hooks.slack.com/services/T/B/SPECSECRET#secret-file=/x", `unknown option "secret-file"`},
		{"slack:http://hooks.example/services/T/B/SPECSECRET", "in clear"},
		{"ntfy:http://192.168.1.20/aepalerts", "#insecure-http"},
		{"ntfy:http://192.168.1.20/aepalerts#insecure-http=1", "takes no value"},
		{"webhook:http://[::ffff:10.0.0.1]/h#secret-file=" + ok, "in clear"},
		{"slack:@", "no file named"},
		{"slack:@" + filepath.Join(dir, "missing"), "no such file"},
		{"slack:@" + loose, "readable by others"},
		{"slack:@" + linkToLoose, "readable by others"},
		{"slack:@" + dir, "not a regular file"},
		{"slack:@" + empty, "is empty"},
		{"slack:@" + twoLines, "more than one line"},
		{"slack:@" + withHash, "has a '#'"},
		{"webhook:https://example.com/h", "secret-file=PATH"},
		{"webhook:https://example.com/h#secret-file=" + short, "fewer than 16"},
		{"webhook:https://example.com/h#secret-file=" + loose, "readable by others"},
	} {
		_, err := ParseTarget(c.spec)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("ParseTarget(%q) = %v, want an error with %q", c.spec, err, c.want)
			continue
		}
		if msg := err.Error(); strings.Contains(msg, "\n") || strings.Contains(msg, "SECRET") {
			t.Errorf("ParseTarget(%q): error %q is not one line free of the URL's secret", c.spec, msg)
		}
	}
	// A link the operator names is followed to a private file (secret
	// mounts are links).
	tg, err := ParseTarget("slack:@" + linkToOK)
	if err != nil || tg.Name() != "slack:@"+linkToOK {
		t.Errorf("slack:@link: %v, %v", tg, err)
	}
	// Plain http:// goes to loopback, or elsewhere when the operator says so.
	for _, spec := range []string{"ntfy:http://localhost:8080/aepalerts", "ntfy:http://[::1]/t", "ntfy:http://192.168.1.20/aepalerts#insecure-http", "slack:http://mm.lan/hooks/k#insecure-http"} {
		if _, err := ParseTarget(spec); err != nil {
			t.Errorf("ParseTarget(%q): %v", spec, err)
		}
	}
	// Credentials in a URL are used, never shown.
	tg, err = ParseTarget("ntfy:https://phil:hunter2@ntfy.example/aepalerts")
	if err != nil || strings.Contains(tg.Name(), "hunter2") || strings.Contains(tg.Name(), "phil") {
		t.Errorf("ntfy with userinfo: %v, %v", tg, err)
	}
	tg, err = ParseTarget("webhook:https://u:p4ss@hooks.example/in#secret-file=" + secretFile(t, strings.Repeat("k", 32), 0o600))
	if err != nil || strings.Contains(tg.Name(), "p4ss") {
		t.Errorf("webhook with userinfo: %v, %v", tg, err)
	}
}

// docs/notify.md documents the webhook body field by field: its table and
// the body sent must name the same fields.
func TestWebhookBodyDocumented(t *testing.T) {
	t.Parallel()
	page, err := os.ReadFile("../docs/notify.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(page), "### Your own: `webhook:`")
	if !ok {
		t.Fatal("docs/notify.md has no webhook section")
	}
	section, _, _ = strings.Cut(section, "\n## ")
	var documented []string
	for line := range strings.SplitSeq(section, "\n") {
		cell, _, ok := strings.Cut(strings.TrimPrefix(line, "| "), " |")
		if !ok || !strings.HasPrefix(line, "| `") {
			continue
		}
		for f := range strings.SplitSeq(cell, ", ") {
			documented = append(documented, strings.Trim(f, "`"))
		}
	}
	slices.Sort(documented)
	b, _ := json.Marshal(webhookBody(request(), time.Now()))
	if sent := keys(decode(t, b)); !slices.Equal(documented, sent) {
		t.Errorf("docs/notify.md documents %v, the body has %v", documented, sent)
	}
}

// Slack refuses blocks over its limits or with empty text: a long title of
// characters Slack escapes stays within the header's 150 once escaped, and
// a message without a title has no header.
func TestSlackLimits(t *testing.T) {
	t.Parallel()
	m := request()
	m.Title = strings.Repeat("<&>", 100)
	v := slackPayload(m)
	h := v.Blocks[0].Text.Text
	if v.Blocks[0].Type != "header" || len(h) > slackMaxHeader || len(h) < slackMaxHeader-5 || !strings.HasSuffix(h, ";") {
		t.Errorf("header %q (%d bytes)", h, len(h))
	}
	// A long body is cut, never the links after it.
	m.Body = strings.Repeat("b", 3*slackMaxText)
	if text := slackPayload(m).Text; len(text) > slackMaxText || !strings.HasSuffix(text, "|Open>") || !strings.Contains(text, "tok-deny|Deny>") {
		t.Errorf("fallback text of %d bytes ends %q", len(text), text[max(0, len(text)-80):])
	}
	m.Title, m.Body, m.Answers, m.Open, m.Label, m.Tool, m.Deadline = "", "", nil, "", "", "", time.Time{}
	if v := slackPayload(m); v.Text == "" || len(v.Blocks) != 0 {
		t.Errorf("an empty message: text %q, blocks %v", v.Text, v.Blocks)
	}
	m.Answers = []Answer{{Option: " ", URL: "https://r.example/a"}}
	if got := ntfyActions(m)[0].Label; got != "Answer" {
		t.Errorf("a button without label or option reads %q", got)
	}
	for _, b := range slackPayload(m).Blocks {
		if b.Type == "header" || b.Type == "section" {
			t.Errorf("a %s block with empty text", b.Type)
		}
	}
}

// A usage alert's webhook body carries its figures in usage; a context
// never said is null, not 0.
func TestWebhookUsage(t *testing.T) {
	t.Parallel()
	m := Message{Kind: KindUsage, Tag: "aep-usage-context=80%-s1", Title: "Context 82% full (alert at 80%)", Session: "s1",
		Usage: &UsageFacts{Threshold: "context=80%", Tokens: 23100, Context: consumer.Context{Tokens: 105000, Limit: 131072, Known: true}, BurnPerHour: 23100}}
	b, _ := json.Marshal(webhookBody(m, time.Now()))
	v := decode(t, b)
	want := map[string]any{"threshold": "context=80%", "tokens": float64(23100), "context_tokens": float64(105000), "context_limit": float64(131072), "burn_per_hour": float64(23100)}
	if u, _ := v["usage"].(map[string]any); !reflect.DeepEqual(u, want) || v["kind"] != "usage" || v["request"] != "" {
		t.Errorf("body %v", v)
	}
	m.Usage = &UsageFacts{Threshold: "tokens=200k", Tokens: 200000}
	b, _ = json.Marshal(webhookBody(m, time.Now()))
	if u, _ := decode(t, b)["usage"].(map[string]any); u["context_tokens"] != nil || u["context_limit"] != nil || len(u) != 5 {
		t.Errorf("usage without a context: %v", u)
	}
}

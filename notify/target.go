package notify

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/aep-kimi/aep-kimi/internal/backoff"
	"github.com/aep-kimi/aep-kimi/internal/httpguard"
	"github.com/aep-kimi/aep-kimi/internal/tokenfile"
	"github.com/aep-kimi/aep-kimi/relay/consumer"
)

// The kinds of --notify target ParseTarget knows.
const (
	KindNtfy    = "ntfy"
	KindSlack   = "slack"
	KindWebhook = "webhook"
)

// Delivery bounds every webhook target keeps.
const (
	// MaxResponseRead is how much of a receiver's answer is read; the rest
	// is dropped with the connection.
	MaxResponseRead = 64 << 10
	// minSecretLen is the shortest webhook secret accepted from a file.
	minSecretLen = httpguard.MinPublicToken
	// errorSnippet is how much of a refusing receiver's answer an error
	// quotes.
	errorSnippet = 200
)

// WebhookSecretName is the webhook signing secret kept under $AEP_HOME
// (0600), created on first use when a webhook: spec names no secret-file.
const WebhookSecretName = "webhook-secret"

// ParseTarget parses one --notify spec:
//
//	ntfy:URL[#token-file=PATH]     URL is the topic's URL (https://ntfy.sh/mytopic)
//	slack:URL                      a Slack-compatible incoming-webhook URL
//	webhook:URL[#secret-file=PATH] a signed JSON POST
//
// A URL is https://, or http:// to this machine's loopback; #insecure-http
// allows http:// to another host. Options join with '&'.
//
// In each, URL may be given as @FILE: the URL is read from FILE, which
// must not be readable by group or others (a URL with a secret in it,
// like Slack's, stays off the command line). Options after '#' are
// never sent anywhere. A webhook spec without secret-file needs an AEP
// home to keep its secret in: use ParseTargetIn.
func ParseTarget(spec string) (Target, error) { return ParseTargetIn(spec, "") }

// ParseTargetIn is ParseTarget with the AEP home given: a webhook spec
// without secret-file signs with $home/webhook-secret, created (0600) when
// missing.
func ParseTargetIn(spec, home string) (Target, error) {
	t, err := parseTarget(spec, home)
	if err != nil {
		// Paths and file errors are quoted as they are: one line, always.
		return nil, &lineError{msg: consumer.Line(err.Error()), err: err}
	}
	return t, nil
}

// lineError is an error shown on one line, what it wraps kept for errors.Is.
type lineError struct {
	msg string
	err error
}

func (e *lineError) Error() string { return e.msg }
func (e *lineError) Unwrap() error { return e.err }

func parseTarget(spec, home string) (Target, error) {
	kind, rest, ok := strings.Cut(spec, ":")
	switch {
	case !ok || rest == "":
		return nil, fmt.Errorf("--notify %q: want KIND:URL with KIND ntfy, slack or webhook", elideSpec(spec))
	case kind != KindNtfy && kind != KindSlack && kind != KindWebhook:
		return nil, fmt.Errorf("--notify: unknown target kind %q (known: ntfy, slack, webhook)", kind)
	}
	where, opts, err := splitOptions(kind, rest)
	if err != nil {
		return nil, err
	}
	raw, display := where, ""
	if file, isFile := strings.CutPrefix(where, "@"); isFile {
		if raw, err = readURLFile(kind, file); err != nil {
			return nil, err
		}
		display = kind + ":@" + consumer.Line(file)
	}
	u, err := parseHTTPURL(kind, raw)
	if err != nil {
		return nil, err
	}
	// Every message carries answer links, which are credentials: in clear
	// only to this machine, unless the operator says the network is theirs.
	if u.Scheme == "http" && !httpguard.LoopbackURL(u.String()) && opts[insecureHTTP] == "" {
		return nil, fmt.Errorf("--notify %s: http:// to %s would send answer links (and any token) in clear: use https://, or add #%s on a network you trust", kind, u.Hostname(), insecureHTTP)
	}
	c := newClient()
	switch kind {
	case KindNtfy:
		return newNtfy(u, display, opts["token-file"], c)
	case KindSlack:
		if display == "" {
			display = kind + ":" + elideURL(u, len("/"))
		}
		return &Slack{url: u.String(), name: display, client: c}, nil
	default:
		secret, err := webhookSecret(opts["secret-file"], home)
		if err != nil {
			return nil, err
		}
		if display == "" {
			display = kind + ":" + elideURL(u, -1)
		}
		return &Webhook{url: u.String(), name: display, secret: secret, client: c}, nil
	}
}

// insecureHTTP is the option that lets a target take plain http:// to a
// host off loopback.
const insecureHTTP = "insecure-http"

// knownOptions are the options kind takes after '#'.
func knownOptions(kind string) []string {
	switch kind {
	case KindNtfy:
		return []string{"token-file", insecureHTTP}
	case KindWebhook:
		return []string{"secret-file", insecureHTTP}
	}
	return []string{insecureHTTP}
}

// splitOptions cuts "URL#k=v&k=v" at its first '#' and checks the options
// against what kind takes.
func splitOptions(kind, rest string) (string, map[string]string, error) {
	where, frag, hasFrag := strings.Cut(rest, "#")
	opts := map[string]string{}
	known := knownOptions(kind)
	if !hasFrag {
		return where, opts, nil
	}
	for part := range strings.SplitSeq(frag, "&") {
		k, v, _ := strings.Cut(part, "=")
		switch {
		case !slices.Contains(known, k):
			return "", nil, fmt.Errorf("--notify %s: unknown option %q (known: %s)", kind, k, strings.Join(known, ", "))
		case k == insecureHTTP:
			if strings.Contains(part, "=") {
				return "", nil, fmt.Errorf("--notify %s: option %s takes no value", kind, k)
			}
			v = "yes"
		case v == "":
			return "", nil, fmt.Errorf("--notify %s: option %s needs a value (%s=PATH)", kind, k, k)
		case opts[k] != "":
			return "", nil, fmt.Errorf("--notify %s: option %s given twice", kind, k)
		}
		opts[k] = v
	}
	return where, opts, nil
}

// readURLFile reads the URL an @FILE spec names. The file is the
// operator's: a link is followed (secret mounts are links), but the file
// it reaches must not be readable by group or others.
func readURLFile(kind, file string) (string, error) {
	if file == "" {
		return "", fmt.Errorf("--notify %s:@FILE: no file named", kind)
	}
	b, err := tokenfile.ReadSecret(file, true, kind+" URL file")
	if err != nil {
		return "", fmt.Errorf("--notify %s: %w", kind, err)
	}
	raw := strings.TrimSpace(string(b))
	if raw == "" {
		return "", fmt.Errorf("--notify %s: URL file %s is empty", kind, file)
	}
	if strings.ContainsAny(raw, "\r\n") {
		return "", fmt.Errorf("--notify %s: URL file %s holds more than one line", kind, file)
	}
	if strings.Contains(raw, "#") {
		return "", fmt.Errorf("--notify %s: the URL in %s has a '#': give options in the spec (%s:@FILE#...)", kind, file, kind)
	}
	return raw, nil
}

// parseHTTPURL parses an absolute http(s) URL. Its errors never quote the
// URL: it may carry a secret.
func parseHTTPURL(kind, raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("--notify %s: not a URL", kind)
	}
	u.Scheme = strings.ToLower(u.Scheme)
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Errorf("--notify %s: URL must be http:// or https:// (got %q)", kind, u.Scheme)
	}
	if u.Host == "" || u.Hostname() == "" {
		return nil, fmt.Errorf("--notify %s: URL has no host", kind)
	}
	if u.Fragment != "" || u.RawFragment != "" {
		return nil, fmt.Errorf("--notify %s: URL has a fragment", kind)
	}
	return u, nil
}

// elideURL is u fit for logs: no userinfo and no query; with keep >= 0
// its path is cut after keep bytes and ends in "…" (Slack's webhook
// paths and ntfy's topics are their secret).
func elideURL(u *url.URL, keep int) string {
	c := url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path, RawPath: u.RawPath}
	if keep < 0 {
		return c.String()
	}
	c.Path, c.RawPath = "", ""
	return c.String() + truncate(u.EscapedPath(), keep) + "…"
}

// elideSpec is a spec fit for an error line when it could not be parsed:
// everything after the kind's colon is dropped.
func elideSpec(spec string) string {
	if i := strings.IndexAny(spec, ":/@"); i >= 0 {
		return spec[:i] + "…"
	}
	if len(spec) > 16 {
		return spec[:16] + "…"
	}
	return spec
}

// webhookSecret reads the signing secret: the operator's file when named,
// else the one kept under home, created on first use.
func webhookSecret(file, home string) ([]byte, error) {
	var (
		s   string
		err error
	)
	switch {
	case file != "":
		var b []byte
		b, err = tokenfile.ReadSecret(file, true, "webhook secret file")
		s = strings.TrimSpace(string(b))
	case home == "":
		return nil, fmt.Errorf("--notify webhook: name the signing secret (webhook:URL#secret-file=PATH) or run with an AEP home to keep one in")
	default:
		file = filepath.Join(home, WebhookSecretName)
		s, err = tokenfile.ReadHome(file)
		if err == nil && s == "" {
			if err = tokenfile.Create(file); err == nil {
				s, err = tokenfile.ReadHome(file)
			} else if errors.Is(err, os.ErrExist) {
				// Another component of `up` created it first.
				s, err = tokenfile.ReadHome(file)
			}
		}
	}
	if err != nil {
		return nil, fmt.Errorf("--notify webhook: %w", err)
	}
	if len(s) < minSecretLen {
		return nil, fmt.Errorf("--notify webhook: secret file %s holds fewer than %d characters", file, minSecretLen)
	}
	return []byte(s), nil
}

// SendError is a delivery that failed: the receiver refused it or could
// not be reached. One that no retry can mend is ErrPermanent
// (errors.Is), which is how the queue tells.
type SendError struct {
	Target string // the target's Name
	Status int    // the HTTP status, 0 when there was no answer
	// Retry says whether another attempt may succeed: no answer, a timeout,
	// 429 or 5xx. Other 4xx (and 3xx: redirects are not followed) will not
	// change on their own.
	Retry bool
	// RetryAfter is the receiver's Retry-After on a 429 or 503, 0 when it
	// gave none.
	RetryAfter time.Duration
	Detail     string // a bounded, sanitized snippet of the receiver's answer
	Err        error  // the transport error, when there was no answer
}

func (e *SendError) Error() string {
	switch {
	case e.Err != nil:
		return fmt.Sprintf("%s: %v", e.Target, e.Err)
	case e.Detail != "":
		return fmt.Sprintf("%s: HTTP %d %s: %s", e.Target, e.Status, http.StatusText(e.Status), e.Detail)
	default:
		return fmt.Sprintf("%s: HTTP %d %s", e.Target, e.Status, http.StatusText(e.Status))
	}
}

func (e *SendError) Unwrap() error { return e.Err }

// Is makes a SendError that is not worth retrying ErrPermanent.
func (e *SendError) Is(target error) bool { return target == ErrPermanent && !e.Retry }

// newClient is the HTTP client of one target: redirects are not followed
// (a signed body or a bearer token must not be re-sent somewhere else).
func newClient() *http.Client {
	return &http.Client{
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// post is one attempt of every target: POST body as JSON to target, within
// the context's deadline (SendTimeout when it has none: `notify test` may
// call Send without the queue), reading a bounded answer. A 2xx is success.
func post(ctx context.Context, client *http.Client, name, target string, header http.Header, body []byte) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, SendTimeout)
		defer cancel()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, bytes.NewReader(body))
	if err != nil {
		return &SendError{Target: name, Err: errors.New("cannot build the request")}
	}
	for k, v := range header {
		req.Header[k] = v
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "aep-kimi-notify")
	resp, err := client.Do(req)
	if err != nil {
		// A context cancelled by the caller (shutdown) is not retried; a
		// deadline that passed is a slow receiver, which may recover.
		cancelled := errors.Is(err, context.Canceled)
		return &SendError{Target: name, Retry: !cancelled, Err: transportError(err)}
	}
	defer resp.Body.Close()
	answer, _ := io.ReadAll(io.LimitReader(resp.Body, MaxResponseRead))
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return nil
	}
	se := &SendError{Target: name, Status: resp.StatusCode, Detail: snippet(answer)}
	switch {
	case resp.StatusCode == http.StatusTooManyRequests, resp.StatusCode >= 500:
		se.Retry = true
		se.RetryAfter = backoff.RetryAfter(resp.Header.Get("Retry-After"), time.Now())
	case resp.StatusCode >= 300 && resp.StatusCode < 400:
		se.Detail = "redirects are not followed: give the final URL"
	}
	return se
}

// transportError strips the URL net/http puts in its errors: it may carry
// a secret (Slack's path, ntfy's topic, a query token).
func transportError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return fmt.Errorf("%s: %w", strings.ToLower(ue.Op), ue.Err)
	}
	return err
}

// snippet is the start of a receiver's answer, one line, safe to log.
func snippet(b []byte) string {
	s := strings.TrimSpace(string(b))
	if len(s) > errorSnippet {
		s = truncate(s, errorSnippet) + "…"
	}
	return consumer.Line(s)
}

// truncate cuts s to at most n bytes without splitting a rune.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

func utf8RuneStart(b byte) bool { return b&0xC0 != 0x80 }
